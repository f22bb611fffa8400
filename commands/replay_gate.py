"""`lme-harness replay FIXTURE [--record] [Hydra overrides]`: the benchmark against recorded responses.

Replay: a loopback endpoint answers exactly the requests in FIXTURE (harness/llm/fixture.py) and rejects any
other, so only harness code is under test and every metric is reproducible on any machine. `--record` puts a
recording proxy in front of the configured model instead (a local one is started in the embedded server) and
rewrites FIXTURE from what it answered.
The model config is kept (name, n_ctx, first_tool_choice...) and only pointed at the loopback URL.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from harness.config_files import CONFIG_DIR
from harness.llm.fixture import ResponseFixture, recording_responder, replay_responder
from harness.llm.loopback import LoopbackServer


def _model_cfg(overrides: Sequence[str]):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[o for o in overrides if not o.startswith("hydra.")])
    return cfg.model


@contextlib.contextmanager
def _endpoint(
    fixture_path: Path, overrides: Sequence[str], record: bool
) -> Iterator[tuple[str, ResponseFixture, dict]]:
    if not record:
        fixture = ResponseFixture.load(fixture_path)
        with LoopbackServer(replay_responder(fixture), record=False) as srv:
            yield srv.base_url, fixture, {}
        return
    from harness.llm.endpoint import open_endpoint

    model_cfg = _model_cfg(overrides)  # local: the embedded server; remote: its base_url is the upstream
    fixture, outcome = ResponseFixture(), {"code": None}
    with (
        open_endpoint(model_cfg, log_dir=Path(tempfile.gettempdir()), progress=False) as ep,
        LoopbackServer(recording_responder(fixture, ep.base_url), record=False) as srv,
    ):
        yield srv.base_url, fixture, outcome
    if outcome["code"] != 0 or not fixture.entries:  # an incomplete recording must not replace a good fixture
        print(
            f"replay: the recording run did not complete (exit {outcome['code']}, {len(fixture.entries)} requests): "
            f"{fixture_path} left unchanged"
        )
        return
    fixture.save(fixture_path)
    print(f"replay fixture written: {fixture_path} ({len(fixture.entries)} requests)")


def replay_main(
    fixture_path: str | Path, overrides: Sequence[str], *, run: Callable[[list[str]], int], record: bool = False
) -> int:
    """`run(["run", *OVERRIDES])` against the replay (or recording) endpoint; the run's exit code. `run` is the
    command line's `main` (commands/cli.py), passed in: the command line calls this module, not the reverse."""
    with _endpoint(Path(fixture_path), overrides, record) as (url, fixture, outcome):
        # `++`: local model configs have no base_url key to override
        own = [o for o in overrides if o.lstrip("+~").split("=", 1)[0] not in ("model.base_url", "model.kind")]
        code = run(["run", *own, "model.kind=remote", f"++model.base_url={url}"])
        outcome["code"] = code
    if fixture.misses:
        print(
            f"replay: {len(fixture.misses)} request(s) not in {fixture_path}: {', '.join(sorted(set(fixture.misses))[:10])} "
            "(the harness's requests changed: re-record the fixture if the change is intended, docs/ci-gate.md)"
        )
    return code
