"""`lme-harness provider-check TARGET` attacked as a careless user and a cheating service would (issue 37 item 8):
no credential is ever printed (a URL's userinfo, query or fragment; the bearer token's value, even when a service
echoes it), a check that made no call says SKIP, scores must come best first, a Python provider class is a target as
a URL is, and an isolation failure names which unit's content came back for which."""

from __future__ import annotations

import json
import random
import string
from collections.abc import Sequence
from urllib.parse import quote

import pytest

from commands.cli import main
from harness.llm.loopback import LoopbackServer, Reply
from harness.memory.builtin import FullContextProvider, IndexProvider
from harness.memory.check import check_provider
from harness.memory.http import MemoryServer, capabilities_json
from harness.memory.provider import (
    REQUIRED_CALLS,
    Capabilities,
    MemoryItem,
    MemorySession,
    Provenance,
    Retrieval,
)


def _secret(rng: random.Random) -> str:
    return "S3cr" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(rng.randint(8, 24)))


def _credentialed_urls(rng: random.Random, base: str, secret: str) -> list[str]:
    """`base` (http://127.0.0.1:PORT/v1) with `secret` in every place a URL can carry a credential, in several
    spellings."""
    scheme, rest = base.split("://", 1)
    host, _, path = rest.partition("/")
    name = rng.choice(["key", "token", "api_key", "x", "sig", "a"])
    enc = quote(secret, safe="")
    return [
        f"{scheme}://{secret}@{host}/{path}",
        f"{scheme}://user:{secret}@{host}/{path}",
        f"{scheme}://:{secret}@{host}/{path}",
        f"{scheme}://{secret}:{enc}@{host}/{path}",
        f"{base}?{name}={secret}",
        f"{base}?{secret}",
        f"{base}/?a=1&{name}={enc}",
        f"{base}#{secret}",
        f"{base}#access_token={secret}",
        f"{base}?#{secret}",
        f"{scheme.upper()}://u:{secret}@{host}/{path}",
        f"  {base}?{name}={secret}  ",
    ]


@pytest.mark.parametrize("seed", range(3))
def test_urls_with_userinfo_query_or_fragment_are_refused_before_any_call_and_never_printed(seed, capsys) -> None:
    rng = random.Random(seed)
    gets: list[str] = []
    srv = LoopbackServer(lambda r: Reply(body={}), on_get=lambda p: (gets.append(p), Reply(body={}))[1])
    with srv:
        for url in [*_credentialed_urls(rng, srv.base_url, secret := _secret(rng)), f"{srv.base_url}?"]:
            assert main(["provider-check", url]) == 2, url
            out, err = capsys.readouterr()
            assert secret not in out + err and quote(secret, safe="") not in out + err, (url, out, err)
            assert url.strip() not in out + err and "refused" in err and out == ""
    assert gets == [] and srv.requests == []  # refused before any call


def _echoing_service() -> LoopbackServer:
    """A service that puts the Authorization header it received into every error it answers."""
    caps = capabilities_json(Capabilities("echo", "1", REQUIRED_CALLS))

    def post(req):
        return Reply(status=401, body={"error": f"token {req.get('_auth')} rejected for {req['_path']}"})

    return LoopbackServer(post, on_get=lambda p: Reply(body=caps))


@pytest.mark.parametrize("seed", range(3))
def test_the_token_a_service_echoes_is_never_printed_and_only_the_variable_s_name_is(seed, capsys, monkeypatch) -> None:
    rng = random.Random(seed)
    key, var = _secret(rng), f"LME_TEST_CHECK_KEY_{seed}"
    monkeypatch.setenv(var, key)
    with _echoing_service() as srv:
        # first (before the run registers the key as a secret): the value itself given where the variable's name
        # belongs, as a name-like key and as a key with dashes: refused, never echoed, nothing sent
        for given in (key, f"sk-{key}"):
            assert main(["provider-check", srv.base_url, "--api-key-env", given]) == 2
            out, err = capsys.readouterr()
            assert key not in out + err and "--api-key-env" in err and not srv.requests, err
        assert main(["provider-check", srv.base_url, "--api-key-env", var]) == 1
        out, err = capsys.readouterr()
        assert srv.requests and all(r["_auth"] == f"Bearer {key}" for r in srv.requests)  # the token was sent
        assert key not in out + err and "rejected" in out, out


def test_checks_that_made_no_call_say_skip_never_pass(capsys) -> None:
    with MemoryServer(FullContextProvider()) as srv:  # no `answer`, no `stored`, no scores
        assert main(["provider-check", srv.base_url]) == 0
    out = capsys.readouterr().out
    for name in ("answer", "stored", "score_order"):
        assert f"SKIP {name}" in out and f"PASS {name}" not in out, out
    assert "conforms (3 not run: " in out
    # a failed capabilities call runs nothing else: every other check is SKIP, none PASS
    assert main(["provider-check", "http://127.0.0.1:9/v1", "--timeout-s", "3"]) == 1
    lines = [ln.replace(":", " ").split()[:2] for ln in capsys.readouterr().out.splitlines() if ln.startswith("  ")]
    assert lines[0] == ["FAIL", "capabilities"] and all(s == "SKIP" for s, _ in lines[1:]) and len(lines) == 12


class Ranked(IndexProvider):
    """BM25 whose items are handed back in a given order of the ranked list (`order`: reverse, shuffled)."""

    def __init__(self, order: str = "reverse", seed: int = 0) -> None:
        super().__init__()
        self.order, self.rng = order, random.Random(seed)

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        items = list(super().retrieve(unit, query, top_k, as_of).items)
        if self.order == "reverse":
            items.reverse()
        else:
            self.rng.shuffle(items)
        return Retrieval(tuple(items))


def test_scores_out_of_order_fail_score_order_naming_the_items(capsys) -> None:
    with MemoryServer(IndexProvider()) as srv:  # BM25 scores, best first
        assert main(["provider-check", srv.base_url]) == 0
        assert "PASS score_order" in capsys.readouterr().out
    with MemoryServer(Ranked("reverse")) as srv:
        assert main(["provider-check", srv.base_url]) == 1
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if "score_order" in ln and "FAIL" in ln]
    assert "not best first" in line and "above item" in line and "1 check(s) failed: score_order" in out


@pytest.mark.parametrize("seed", range(20))
def test_generated_score_lists_fail_exactly_when_a_score_rises(seed) -> None:
    from harness.memory.check import _score_problems

    rng = random.Random(seed)
    scores = [rng.choice([None, *(round(rng.uniform(-1, 3), 1) for _ in range(3))]) for _ in range(rng.randint(0, 8))]
    if rng.random() < 0.5:  # half of them sorted best first (None kept where it is)
        ranked = iter(sorted((s for s in scores if s is not None), reverse=True))
        scores = [None if s is None else next(ranked) for s in scores]
    items = tuple(MemoryItem(f"t{n}", s) for n, s in enumerate(scores))
    given = [s for s in scores if s is not None]
    assert bool(_score_problems(items)) == (given != sorted(given, reverse=True)), scores
    assert _score_problems((MemoryItem("x", float("nan")),))  # NaN has no place in an order


class LeaksBySession(FullContextProvider):
    """Keeps units apart, except that unit B's retrieve also returns unit A's first session, paraphrased (its text
    without the canary): only its provenance says whose it is."""

    def __init__(self) -> None:
        super().__init__()
        self.first: dict[str, MemorySession] = {}

    def ingest(self, unit: str, sessions: Sequence[MemorySession]):
        self.first.setdefault("a" if unit.endswith("-a") else "b", sessions[0])
        return super().ingest(unit, sessions)

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        got = super().retrieve(unit, query, top_k, as_of)
        if unit.endswith("-b") and "a" in self.first:
            s = self.first["a"]
            got = Retrieval((*got.items, MemoryItem("The user has a new pet.", None, Provenance(s.session_id))))
        return got


class EchoesTheQuery(FullContextProvider):
    """Returns the query itself first: it names the other unit's canary, but it is no content of that unit."""

    def retrieve(self, unit: str, query: str, top_k: int, as_of: str) -> Retrieval:
        got = super().retrieve(unit, query, top_k, as_of)
        return Retrieval((MemoryItem(query, None), *got.items)[:top_k])


def test_an_isolation_failure_names_whose_content_came_back_for_which_unit() -> None:
    with MemoryServer(LeaksBySession()) as srv:
        from harness.memory.http import HttpProvider

        rep = check_provider(HttpProvider(srv.base_url))
    (why,) = [w for n, w in rep.failed if n == "isolation"]
    assert "unit A (" in why and "'s content came back for unit B (" in why and "came back for unit A" not in why
    assert "session 'check-" in why and "-a-1'" in why and "asked without it" in why
    # an echoed query naming the other unit's canary is not that unit's content
    rep = check_provider(EchoesTheQuery())
    assert "isolation" in rep.passed, rep.text()


def test_a_python_provider_class_is_checked_from_the_command_line(capsys) -> None:
    assert main(["provider-check", "harness.memory.builtin:IndexProvider"]) == 0
    out = capsys.readouterr().out
    assert "checking harness.memory.builtin:IndexProvider" in out and "conforms" in out
    target = f"{__name__}:Ranked"
    assert main(["provider-check", target, "--kwargs", json.dumps({"order": "shuffle", "seed": 3})]) == 1
    assert "FAIL score_order" in capsys.readouterr().out
    for bad, says in (
        ("harness.memory.nowhere:X", "cannot import module 'harness.memory.nowhere'"),
        ("harness.memory.builtin:Nope", "has no 'Nope'"),
        ("harness.memory.builtin:VERSION", "could not be built"),
        ("harness.memory.provider:Usage", "not a memory provider"),
    ):
        assert main(["provider-check", bad]) == 2
        assert says in capsys.readouterr().err


@pytest.mark.parametrize("seed", range(3))
def test_a_python_target_refuses_a_literal_key_in_its_kwargs_and_anything_else_unprinted(seed, capsys) -> None:
    rng = random.Random(seed)
    secret = _secret(rng)
    for argv in (
        [f"{__name__}:Ranked", "--kwargs", json.dumps({"api_key": secret})],
        [f"{__name__}:Ranked", "--kwargs", json.dumps({"base_url": f"http://h:1/v1?key={secret}"})],
        [f"{__name__}:Ranked", "--kwargs", json.dumps({"nested": {"token": secret}})],
        [f"user:{secret}@127.0.0.1:8765/v1"],  # a URL without its scheme: neither form, never printed
        [f"{secret}"],
        ["http://127.0.0.1:9/v1", "--kwargs", json.dumps({"token": secret})],
        [f"{__name__}:Ranked", "--api-key-env", "SOME_VAR"],
        [f"{__name__}:Ranked", "--kwargs", f'["{secret}"]'],
        [f"{__name__}:Ranked", "--kwargs", f'{{"x": "{secret}"'],  # not JSON
    ):
        assert main(["provider-check", *argv]) == 2, argv
        out, err = capsys.readouterr()
        assert secret not in out + err and err.startswith("lme-harness: error: provider-check: "), (argv, err)
