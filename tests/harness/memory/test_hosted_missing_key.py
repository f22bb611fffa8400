"""A hosted memory service run without its key (issue 37 item 11): `lme-harness run mode=memory memory=<service>`
stops with one error naming the variable, exit 2, before any request (to the service or to the model) and before
any record, instead of one failed case per question. The same for `memory=http` with `memory.api_key_env` set."""

from __future__ import annotations

from pathlib import Path

import pytest

from commands.cli import main
from harness.llm.loopback import LoopbackServer, Reply
from harness.testing.faults import FakeModel
from tests.support.fake_run import fake_endpoint_args
from tests.support.hosted_replay import require_sdk

pytestmark = pytest.mark.e2e

SERVICES = {"mem0_platform": "mem0", "zep": "zep_cloud", "supermemory": "supermemory", "letta": "letta_client"}


def _run(tmp_path: Path, memory: list[str]) -> tuple[int, list[dict], list[str]]:
    """A run of six oracle cases against a loopback service and model, both recording what they are sent."""
    gets: list[str] = []
    service = LoopbackServer(lambda r: Reply(status=500, body={"error": "no request expected"}),
                             on_get=lambda p: (gets.append(p), Reply(status=500))[1])  # fmt: skip
    with service, LoopbackServer(FakeModel()) as model:
        args = [a for a in fake_endpoint_args(model.base_url, tmp_path) if not a.startswith("dataset.limit")]
        rc = main(
            [
                "run",
                f"hydra.run.dir={tmp_path / 'run'}",
                "mode=memory",
                *[a.replace("{SERVICE}", service.base_url) for a in memory],
                *args,
                "dataset=oracle",
                "dataset.limit=6",
            ]
        )
        sent = [*service.requests, *model.requests]
    return rc, sent, gets


@pytest.mark.hosted
@pytest.mark.parametrize("name", sorted(SERVICES))
def test_a_hosted_service_without_its_key_is_one_error_naming_the_variable_before_any_request(
    name: str, tmp_path: Path, capsys, monkeypatch
) -> None:
    require_sdk(SERVICES[name])
    var = f"LME_TEST_{name.upper()}_KEY"
    monkeypatch.delenv(var, raising=False)
    rc, sent, gets = _run(tmp_path, [f"memory={name}", f"memory.api_key_env={var}", "memory.base_url={SERVICE}"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.count(var) == 1 and "not set" in err, err
    assert sent == [] and gets == []  # neither the service nor the model was sent anything
    assert not (tmp_path / "run" / "records.jsonl").exists()


def test_an_http_service_whose_token_variable_is_unset_is_one_error_before_any_request(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    monkeypatch.delenv("LME_TEST_HTTP_MEMORY_TOKEN", raising=False)
    rc, sent, gets = _run(
        tmp_path, ["memory=http", "memory.url={SERVICE}", "memory.api_key_env=LME_TEST_HTTP_MEMORY_TOKEN"]
    )
    err = capsys.readouterr().err
    assert rc == 2 and err.count("LME_TEST_HTTP_MEMORY_TOKEN") == 1 and "not set" in err, err
    assert sent == [] and gets == []
    assert not (tmp_path / "run" / "records.jsonl").exists()
