"""session_search / session_load: parameter rules, response shapes, windows, scopes and bad arguments."""

from __future__ import annotations

import json
import random

import pytest

from harness.prompts.ondemand import DEFAULT_POST_TOOL_PROMPT, ONDEMAND_SESSION_OVERVIEW, has_pending_tool_result
from harness.retrieval import reference as ref
from harness.retrieval import text as tx
from harness.retrieval.embedders import HashingEmbedder
from harness.retrieval.retriever import Retriever
from harness.retrieval.tools import SearchConfig, normalize_window, preset, rfc3339
from harness.session.boundary import SummaryBoundary
from harness.session.events import Event, Session

BASE = 1_700_000_000.0

FILLER = [
    "Can you suggest a recipe for lentil soup with cumin?",
    "Here is a lentil soup recipe: rinse lentils, saute onion, add cumin and stock, simmer.",
    "What are good stretches after running?",
    "Try hamstring stretches, calf raises and a quad stretch after each run.",
    "How do I repot a snake plant?",
    "Use a slightly larger pot with drainage and a cactus mix; water sparingly afterwards.",
]


def make_session(texts: list[tuple[str, str]], sid="ondemand-q1", user="q1", app="summary-lme-ondemand") -> Session:
    s = Session(id=sid, user_id=user, app=app)
    for i, (role, content) in enumerate(texts):
        s.append(Event(id=f"e{i:04d}", index=i, role=role, content=content, timestamp=BASE + 0.001 * (i + 1)))
    return s


def haystack(
    n_filler_rounds: int = 6, fact: str = "I adopted a golden retriever named Max last spring."
) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for i in range(n_filler_rounds):
        out.append(("user", FILLER[(2 * i) % len(FILLER)] + f" (round {i})"))
        out.append(("assistant", FILLER[(2 * i + 1) % len(FILLER)]))
    out.insert(6, ("user", fact))
    out.insert(7, ("assistant", "Congratulations on adopting Max! Golden retrievers are friendly dogs."))
    return out


def boundary_at(session: Session, pos: int | None = None) -> SummaryBoundary:
    e = session.events[-1 if pos is None else pos]
    return SummaryBoundary(version=1, filter_key="", cutoff_at=e.timestamp, last_event_id=e.id)


def tools_for(session, *, boundary="all", config=None, embedder=None, others=()):
    b = boundary_at(session) if boundary == "all" else boundary
    return Retriever(config or SearchConfig(), embedder=embedder).tools(session, boundary=b, others=others)


def search(tools, **args):
    out = tools.call("session_search", json.dumps(args))
    assert out.ok, out.content
    return json.loads(out.content), out


# --- reference texts and schemas -------------------------------------------------------------------


def test_specs_are_the_reference_wire_schemas():
    specs = tools_for(make_session(haystack())).specs()
    assert [s["function"]["name"] for s in specs] == ["session_load", "session_search"]  # sorted, as sent
    load, srch = (s["function"] for s in specs)
    assert srch["parameters"]["required"] == ["query"]
    assert load["parameters"]["required"] == ["event_id"]
    assert list(srch["parameters"]["properties"]) == ["min_score", "query", "scope", "search_mode", "top_k"]
    assert srch["parameters"]["properties"]["scope"]["description"] == "Search scope: current_hidden"
    assert srch["parameters"]["properties"]["top_k"]["type"] == "integer"
    assert srch["parameters"]["properties"]["min_score"]["type"] == "number"
    assert srch["description"].startswith(ref.SEARCH_DESCRIPTION + "\nOutput schema: {")
    out_schema = json.loads(srch["description"].split("\nOutput schema: ", 1)[1])
    assert out_schema["required"] == ["query", "scope", "results", "count"]
    assert json.loads(load["description"].split("\nOutput schema: ", 1)[1])["properties"]["note"] == {"type": "string"}


def test_specs_without_wire_quirks_use_full_texts():
    t = tools_for(make_session(haystack()), config=SearchConfig(wire_exact_schema=False))
    srch = t.specs()[1]["function"]
    assert srch["description"] == ref.SEARCH_DESCRIPTION
    assert srch["parameters"]["properties"]["scope"]["description"] == ref.SCOPE_DESC_FULL
    assert "keyword" in srch["parameters"]["properties"]["search_mode"]["description"]


def test_ondemand_texts_and_post_tool_trigger():
    assert ONDEMAND_SESSION_OVERVIEW.startswith("Progressive disclosure for session history is available.\n")
    assert ONDEMAND_SESSION_OVERVIEW.count("\n") == 3
    assert DEFAULT_POST_TOOL_PROMPT.startswith("[Tool Prompt] Analyze the tool result.")
    assert DEFAULT_POST_TOOL_PROMPT.endswith("to the point.\n")
    assert has_pending_tool_result([{"role": "user"}, {"role": "assistant"}, {"role": "tool"}, {"role": "system"}])
    assert not has_pending_tool_result([{"role": "tool"}, {"role": "assistant"}])
    assert not has_pending_tool_result([{"role": "system"}])


# --- parameter rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, used",
    [
        (None, 5),
        (0, 5),
        (-3, 5),
        (1, 1),
        (7, 7),
        (10, 10),
        (11, 10),
        (999, 10),
        ("3", 3),
        (4.0, 4),
        (True, 5),
        ("x", 5),
    ],
)
def test_top_k_default_cap_and_coercion(raw, used):
    t = tools_for(make_session(haystack(12)))
    args = {"query": "lentil soup stretches plant"}
    if raw is not None:
        args["top_k"] = raw
    body, out = search(t, **args)
    assert out.trace["arguments"]["top_k"] == used
    assert body["count"] <= used


@pytest.mark.parametrize(
    "raw, used",
    [
        (None, "current_hidden"),
        ("", "current_hidden"),
        ("bogus", "current_hidden"),
        ("CURRENT_SESSION", "current_session"),
        (" other_sessions ", "other_sessions"),
        ("all_sessions", "all_sessions"),
        (5, "current_hidden"),
    ],
)
def test_scope_normalisation(raw, used):
    t = tools_for(make_session(haystack()))
    args = {"query": "golden retriever"} | ({} if raw is None else {"scope": raw})
    body, out = search(t, **args)
    assert body["scope"] == used


@pytest.mark.parametrize("raw, used", [(None, 0.0), (0.5, 0.5), (-1, 0.0), (7, 1.0), ("0.25", 0.25), ("high", 0.0)])
def test_min_score_is_clamped_to_unit_interval(raw, used):
    t = tools_for(make_session(haystack()))
    args = {"query": "golden retriever"} | ({} if raw is None else {"min_score": raw})
    _, out = search(t, **args)
    assert out.trace["arguments"]["min_score"] == used


def test_min_score_filters_dense_candidates():
    t = tools_for(make_session(haystack()), embedder=HashingEmbedder(), config=SearchConfig(lexical_fallback=False))
    body, _ = search(t, query="golden retriever Max", search_mode="dense", min_score=0.99)
    assert body["count"] == 0
    body, _ = search(t, query="golden retriever Max", search_mode="dense", min_score=0.0)
    assert body["count"] > 0


@pytest.mark.parametrize(
    "raw, cfg, used",
    [
        (None, SearchConfig(), "hybrid"),
        ("dense", SearchConfig(), "dense"),
        ("KEYWORD", SearchConfig(), "keyword"),
        ("fuzzy", SearchConfig(), "hybrid"),
        ("keyword", preset("trpc_parity"), "hybrid"),
        (None, SearchConfig(default_mode="keyword"), "keyword"),
    ],
)
def test_search_mode_rules(raw, cfg, used):
    t = tools_for(make_session(haystack()), config=cfg, embedder=HashingEmbedder())
    args = {"query": "golden retriever"} | ({} if raw is None else {"search_mode": raw})
    _, out = search(t, **args)
    assert out.trace["arguments"]["search_mode"] == used


def test_empty_query_returns_empty_result_in_current_hidden():
    t = tools_for(make_session(haystack()))
    for q in ("", "   ", None):
        body, _ = search(t, **({"scope": "all_sessions"} | ({} if q is None else {"query": q})))
        assert body == {"query": "", "scope": "current_hidden", "results": [], "count": 0}


@pytest.mark.parametrize(
    "before, after, expected",
    [
        (0, 0, (1, 1)),
        (-2, -9, (1, 1)),
        (1, 1, (1, 1)),
        (2, 2, (2, 2)),
        (3, 3, (2, 2)),
        (0, 9, (0, 4)),
        (9, 0, (4, 0)),
        (5, 1, (3, 1)),
        (2, 5, (2, 2)),
        (1, 4, (1, 3)),
        (0, 2, (0, 2)),
    ],
)
def test_load_window_normalisation(before, after, expected):
    assert normalize_window(before, after) == expected


# --- response shapes and windows ---------------------------------------------------------------------


def test_search_response_shape_and_top2_windows():
    s = make_session(haystack(12))
    t = tools_for(s, config=SearchConfig(default_mode="keyword"))
    body, out = search(t, query="golden retriever Max lentil soup", top_k=5)
    assert list(body) == ["query", "scope", "results", "count"]
    assert body["count"] == len(body["results"]) == 5
    for rank, r in enumerate(body["results"]):
        assert list(r)[:7] == ["scope", "session_id", "event_id", "created", "role", "score", "snippet"]
        assert r["scope"] == "current_hidden" and r["session_id"] == s.id
        assert len(r["snippet"]) <= 280
        if rank < 2:
            ctx = r["context"]
            pos = int(r["event_id"][1:])
            ids = [m["event_id"] for m in ctx]
            assert ids == [f"e{i:04d}" for i in range(max(pos - 2, 0), min(pos + 2, len(s) - 1) + 1)]
            for m in ctx:  # full, untruncated text
                assert m["content"] == s.by_id(m["event_id"]).content
                assert list(m) == ["event_id", "role", "created", "content"]
            assert "[match] " + r["role"] + ": " in r["snippet"]
        else:
            assert "context" not in r
            assert r["snippet"] == tx.compact(s.by_id(r["event_id"]).content, 280)
    assert [h["event_id"] for h in out.trace["hits"]] == [r["event_id"] for r in body["results"]]


def test_window_at_session_start_and_snippet_cut():
    long_text = "word " * 200
    s = make_session([("user", "quasar telescope " + long_text), ("assistant", long_text), ("user", long_text)])
    t = tools_for(s, config=SearchConfig(default_mode="keyword"))
    body, _ = search(t, query="quasar telescope")
    hit = body["results"][0]
    assert hit["event_id"] == "e0000"
    assert [m["event_id"] for m in hit["context"]] == ["e0000", "e0001", "e0002"]
    assert hit["snippet"].startswith("[match] user: quasar telescope")
    assert len(hit["snippet"].encode()) <= 280
    assert hit["snippet"].split("\n")[0].endswith("...")  # each line is compacted to 96 characters


def test_hit_snippet_for_lower_ranks_is_compacted_text():
    assert tx.compact("a  b\n c", 280) == "a b c"
    assert tx.compact("x" * 300, 280) == "x" * 277 + "..."
    assert tx.hit_snippet("   ") == "<empty>"


def test_excerpt_keeps_short_texts_and_centres_long_ones_on_the_query():
    from harness.retrieval.keyword import analyze

    assert tx.excerpt("  short   text ", set(), 50) == "short text"
    filler = "The weather was mild and we walked a lot. " * 12
    text = filler + "My sister got a yellow dress for her birthday. " + filler
    out = tx.excerpt(text, set(analyze("sister birthday dress")), 200)
    assert "My sister got a yellow dress for her birthday." in out
    assert out.startswith("...") and out.endswith("...") and len(out) <= 200


def test_created_is_go_rfc3339_utc():
    assert rfc3339(1_700_000_000.0) == "2023-11-14T22:13:20Z"
    assert rfc3339(1_700_000_000.001) == "2023-11-14T22:13:20.001Z"
    assert rfc3339(1_700_000_000.12345) == "2023-11-14T22:13:20.12345Z"


def test_compact_response_style_fits_budget_and_keeps_hit_text():
    s = make_session(haystack(12))
    cfg = SearchConfig(default_mode="keyword", response_style="compact", budget_chars=600, expand_top=0)
    body, _ = search(tools_for(s, config=cfg), query="adopted golden retriever named Max", top_k=10)
    assert body["results"][0]["event_id"] == "e0006"
    assert body["results"][0]["snippet"] == s.by_id("e0006").content
    assert list(body["results"][0]) == ["event_id", "role", "score", "snippet"]
    assert sum(len(r["snippet"]) for r in body["results"]) <= 600


# --- scopes and boundaries -----------------------------------------------------------------------------


def test_current_hidden_never_returns_events_after_the_boundary():
    s = make_session(haystack() + [("user", "My golden retriever Max loves the beach.")])
    b = boundary_at(s, pos=len(s) - 2)
    t = tools_for(s, boundary=b, config=SearchConfig(default_mode="keyword"))
    body, _ = search(t, query="golden retriever Max beach", top_k=10)
    ids = [r["event_id"] for r in body["results"]]
    assert ids and s.events[-1].id not in ids
    body, _ = search(t, query="golden retriever Max beach", scope="current_session", top_k=10)
    assert body["results"][0]["event_id"] == s.events[-1].id
    assert body["results"][0]["scope"] == "current_session"


def test_current_hidden_without_boundary_is_empty():
    t = tools_for(make_session(haystack()), boundary=None)
    body, out = search(t, query="golden retriever")
    assert body["count"] == 0 and out.trace["path"] == "no_boundary"


def test_hybrid_fuses_dense_and_keyword_by_reciprocal_rank():
    s = make_session(haystack())
    t = tools_for(s, embedder=HashingEmbedder())
    body, out = search(t, query="adopted golden retriever named Max last spring")
    assert body["results"][0]["event_id"] == "e0006"
    assert all(h["source"] == "hybrid" for h in out.trace["hits"])
    assert body["results"][0]["score"] == pytest.approx(2 / 61)  # rank 0 in both lists
    assert all(r["score"] <= 2 / 61 for r in body["results"])


def test_rrf_ties_prefer_newer_events():
    import numpy as np

    from harness.retrieval.index import rrf_fuse

    fused = rrf_fuse([[(0, 1.0)], [(1, 1.0)]], np.array([1.0, 2.0]), 5)
    assert [i for i, _ in fused] == [1, 0]
    assert fused[0][1] == pytest.approx(1 / 61)


def test_parity_tail_filter_keeps_only_tail_hits():
    s = make_session(haystack(20))  # the fact sits far before the last 20 events
    tail = {e.id for e in s.events[-20:]}
    t = tools_for(s, config=preset("trpc_parity"), embedder=HashingEmbedder())
    body, out = search(t, query="golden retriever Max")
    # Dense search always returns candidates, some in the tail: only those survive, no scan.
    assert out.trace["tail_filter"]["kept"] > 0 and out.trace["path"] == "search"
    assert {r["event_id"] for r in body["results"]} <= tail


def test_parity_tail_filter_then_lexical_scan():
    s = make_session(haystack(20))
    t = tools_for(s, config=preset("trpc_parity"))  # keyword-only: every keyword hit is outside the tail
    body, out = search(t, query="golden retriever named Max")
    assert out.trace["tail_filter"]["kept"] == 0 and out.trace["tail_filter"]["dropped"] > 0
    assert out.trace["path"] == "lexical_scan"
    assert body["results"][0]["event_id"] == "e0006"
    assert body["results"][0]["score"] == pytest.approx(1 + 0.75 + 0.15)  # lexical, not RRF's ~0.03
    assert body["results"][1]["event_id"] == "e0007"  # equal keyword coverage: 1.15
    _, out2 = search(tools_for(s, config=SearchConfig()), query="golden retriever Max")
    assert out2.trace["path"] == "search"


def test_scope_isolation_across_sessions_and_users():
    mine = make_session(haystack(), sid="ondemand-q1", user="q1")
    my_other = make_session([("user", "Our sailboat is called Seabird.")], sid="other-q1", user="q1")
    stranger = make_session([("user", "My golden retriever Max and my sailboat Seabird.")], sid="x-q2", user="q2")
    other_app = make_session([("user", "sailboat Seabird golden retriever")], sid="y-q1", user="q1", app="another-app")
    t = tools_for(mine, config=SearchConfig(default_mode="keyword"), others=[my_other, stranger, other_app])
    for scope in ("current_hidden", "current_session", "other_sessions", "all_sessions"):
        body, _ = search(t, query="golden retriever Max sailboat Seabird", scope=scope, top_k=10)
        assert {r["session_id"] for r in body["results"]} <= {"ondemand-q1", "other-q1"}, scope
    body, _ = search(t, query="sailboat Seabird", scope="other_sessions")
    assert [(r["session_id"], r["scope"]) for r in body["results"]] == [("other-q1", "other_sessions")]
    body, _ = search(t, query="sailboat Seabird", scope="current_hidden")
    assert all(r["session_id"] == "ondemand-q1" for r in body["results"])
    bad = t.call("session_load", {"session_id": "x-q2", "event_id": "e0000"})
    assert not bad.ok and "anchor event not found" in bad.content


def test_lexical_score_formula():
    kws = tx.keyword_tokens("golden retriever Max")
    assert kws == ["golden", "retriever", "max"]
    text = "I have a golden retriever."
    assert tx.lexical_score("golden retriever max", kws, text) == pytest.approx(2 / 3 + 0.15)
    assert tx.lexical_score("golden retriever", ["golden", "retriever"], text) == pytest.approx(1 + 0.75 + 0.15)
    assert tx.lexical_score("x", ["golden", "a1", "zzz", "yyy"], text) == 0.0  # 0.25 < 0.45 → dropped


def test_query_variants_follow_the_reference_rules():
    v = tx.query_variants("What did I say about Max, and what is my dog's breed?")
    assert v[0] == "What did I say about Max, and what is my dog's breed?"
    assert "I say about Max" in v and "my dog's breed" in v
    assert tx.keyword_tokens("What is the 3rd of a 5k?") == ["3rd", "5k"]
    assert tx.fallback_queries("alpha beta gamma delta epsilon") == []  # identical to the primary
    fb = tx.fallback_queries("What is alpha beta gamma delta epsilon?")
    assert fb == ["alpha beta gamma delta epsilon", "alpha beta gamma delta", "beta gamma delta epsilon"]
    many = tx.fallback_queries("one1 two2 three3 four4 five5 six6 seven7 eight8 nine9 ten10")
    assert many[0] == "one1 two2 three3 four4 seven7 eight8 nine9 ten10" and len(many) == 4
    assert tx.should_broaden("a b", 0, 5) and not tx.should_broaden("a b", 5, 5)
    assert tx.should_broaden("a, b", 3, 5) and not tx.should_broaden("a b", 3, 5)


# --- session_load -----------------------------------------------------------------------------------------


def test_load_shape_and_normalised_window():
    s = make_session(haystack())
    t = tools_for(s)
    out = t.call("session_load", {"event_id": "e0006", "before": 0, "after": 9})
    body = json.loads(out.content)
    assert list(body) == ["session_id", "event_id", "before", "after", "note", "messages", "count"]
    assert (body["before"], body["after"], body["count"]) == (0, 4, 5)
    assert body["note"] == ref.LOAD_NOTE and body["session_id"] == s.id
    assert [m["event_id"] for m in body["messages"]] == ["e0006", "e0007", "e0008", "e0009", "e0010"]
    body = json.loads(t.call("session_load", '{"event_id": " e0006 "}').content)
    assert (body["before"], body["after"], body["count"]) == (1, 1, 3)


def test_load_errors_are_tool_messages():
    t = tools_for(make_session(haystack()))
    out = t.call("session_load", {"event_id": "e9999"})
    assert not out.ok
    assert out.content == "Error: callable tool execution failed: session load tool: anchor event not found: e9999"
    out = t.call("session_load", {"before": 2})
    assert out.content.endswith("session load tool: event_id is required")


def test_unindexed_events_cannot_be_loaded_or_windowed_but_are_scanned():
    big = "zebra " * 40
    s = make_session([("user", "hello there"), ("assistant", "general reply"), ("user", "quokka facts " + big)] * 2)
    r = Retriever(preset("trpc_parity"), max_embed_tokens=30)
    t = r.tools(s, boundary=boundary_at(s))
    assert not t.call("session_load", {"event_id": "e0002"}).ok
    body, _ = search(t, query="quokka facts")
    assert body["results"][0]["event_id"] in ("e0002", "e0005")
    assert "context" not in body["results"][0]


def test_only_indexed_events_are_embedded():
    class Counting(HashingEmbedder):
        def __init__(self):
            super().__init__()
            self.texts = []

        def embed(self, texts):
            self.texts += list(texts)
            return super().embed(texts)

    big = "zebra " * 40
    s = make_session([("user", "hello there"), ("assistant", "general reply"), ("user", "quokka facts " + big)])
    emb = Counting()
    t = Retriever(preset("default"), embedder=emb, max_embed_tokens=30).tools(s, boundary=boundary_at(s))
    assert emb.texts == ["hello there", "general reply"]  # the over-long message is never sent to the embedder
    body, _ = search(t, query="hello")
    assert body["results"][0]["event_id"] == "e0000"


def test_a_session_without_searchable_text_searches_without_error():
    s = make_session([("user", "   "), ("assistant", "")])
    body, _ = search(tools_for(s, config=preset("default"), embedder=HashingEmbedder()), query="anything")
    assert body["results"] == [] and body["count"] == 0


# --- untrusted arguments ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, args, fragment",
    [
        ("session_search", "{not json", "not valid JSON"),
        ("session_search", "[1, 2]", "must be a JSON object"),
        ("session_search", '"golden"', "must be a JSON object"),
        ("session_load", "{", "not valid JSON"),
        ("session_lookup", "{}", "tool not found"),
        ("", "{}", "tool not found"),
    ],
)
def test_bad_arguments_and_unknown_tools_become_errors(name, args, fragment):
    out = tools_for(make_session(haystack())).call(name, args)
    assert not out.ok and fragment in out.content and out.error


def test_wrong_types_are_coerced_and_recorded():
    t = tools_for(make_session(haystack()))
    body, out = search(t, query=12345, top_k="2", scope=["x"], search_mode=3, extra="ignored")
    assert out.trace["arguments"]["query"] == "12345" and out.trace["arguments"]["top_k"] == 2
    assert len(out.trace["adjustments"]) >= 3
    for empty in ("", "null", None, {}):
        assert t.call("session_search", empty).ok


def test_call_never_raises_on_random_input():
    t = tools_for(make_session(haystack()), embedder=HashingEmbedder())
    rng = random.Random(7)
    values = [None, True, -1, 0, 3, 2**70, 1e308, float("nan"), "", "x", "current_hidden", [], {}, ["a"], {"a": 1}]
    for _ in range(300):
        name = rng.choice(["session_search", "session_load", "nope"])
        args = {
            k: rng.choice(values)
            for k in rng.sample(
                ["query", "scope", "top_k", "min_score", "search_mode", "event_id", "before", "after", "session_id"], 4
            )
        }
        raw = json.dumps(args) if rng.random() < 0.5 else args
        out = t.call(name, raw)
        assert isinstance(out.content, str) and out.content
        assert "internal error" not in out.content
