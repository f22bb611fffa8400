"""The one run skeleton: what every command that runs model calls over a run directory assembles around its own
work, in one place. `run` (and so the replay gate, which is a `run` against the loopback endpoint), `rescore` and
`plan` each open one `RunSkeleton` and take the parts they need:

- the run directory's lock (one process at a time writes it: harness/runlock.py);
- the failure note: anything raised before the run started leaves only FAILED.txt (none in a directory that
  holds another run's results: it is left as it was), after it the note says the run stopped
  (runners/lifecycle.py); an interrupted run leaves none (run.json says "interrupted");
- the response cache (runners/store_backend.py picks SQLite or PostgreSQL), closed with the skeleton;
- the answer and judge clients: the endpoints opened (an embedded server started) and closed with the skeleton,
  one client each through `make_client`, and their preflight; for a plan, the same clients with the stand-in
  in place of the endpoint (commands/plan.py `planning_client`), so requests and cache keys are the client's own;
- `start`: the point after which the run has started (the note of an earlier failed start removed, the
  fingerprint and the configuration snapshot .hydra/ written: runners/snapshot.py) and the record writer;
- the server watch over the clients' embedded servers, the progress ticker, and the stop signals.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from harness.llm.cache import ReadOnlyCache, ResponseCache
from harness.llm.client import LLMClient, Observer, Responder
from harness.llm.endpoint import Endpoint, make_client, open_endpoint, planning_endpoint
from harness.llm.liveness import Liveness, ServerDied, ServerWatch
from harness.progress import Ticker
from harness.records import RECORDS_FILE, RecordWriter
from harness.runlock import run_dir_lock
from harness.settings import ClientSettings
from runners.components import open_cache, preflight
from runners.fingerprint import write_fingerprint
from runners.interrupt import STOP, RunInterrupted, StopRequest
from runners.lifecycle import clear_failure, write_failure
from runners.run_config import RunConfig
from runners.snapshot import holds_run, write_snapshot

# the plan's: an endpoint -> (what answers in its place, what logs each call)
StandInFactory = Callable[[Endpoint], tuple[Responder, Observer]]


@dataclass
class Clients:
    """The run's model clients: `answer` (None when the command answers nothing) and `judge` (the answer client
    itself when the judge has no endpoint of its own; None when nothing is judged), and their endpoints."""

    answer: LLMClient | None = None
    judge: LLMClient | None = None
    answer_endpoint: Endpoint | None = None
    judge_endpoint: Endpoint | None = None
    answer_window_served: int | None = None  # the answer model's window as its endpoint states it (the preflight)

    @property
    def endpoints(self) -> list[Endpoint]:
        eps = [e for e in (self.answer_endpoint, self.judge_endpoint) if e is not None]
        return [e for i, e in enumerate(eps) if all(e is not f for f in eps[:i])]  # by identity: specs hold dicts

    @property
    def distinct(self) -> list[LLMClient]:
        return list(dict.fromkeys(c for c in (self.answer, self.judge) if c is not None))

    @property
    def liveness(self) -> list[Liveness]:
        """The liveness probes of the embedded servers behind the clients."""
        return [lv for c in self.distinct if (lv := c.liveness) is not None]

    @property
    def halts(self) -> list[Callable[[], None]]:
        """Stop the embedded servers at once (a stopping run: their calls in flight fail now)."""
        return [e.halt for e in self.endpoints if e.halt is not None]

    @property
    def speeds(self) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
        """(model name, its measured tokens/s so far) of each embedded server."""
        return [(e.spec.name, e.perf) for e in self.endpoints if e.perf is not None]

    def stats(self) -> dict[str, Any]:
        """run.json's llm_stats: the answer client's totals, and the judge's when it has its own endpoint; a
        judge-only command (rescore): the judge's totals."""
        main = self.answer or self.judge
        if main is None:
            return {}
        stats = main.stats.as_dict()
        if self.answer is not None and self.judge is not None and self.judge is not self.answer:
            stats["judge"] = self.judge.stats.as_dict()
        return stats


class RunSkeleton:
    """One command's run over `run_dir` (open it with `run_skeleton`)."""

    def __init__(self, config: RunConfig | None, run_dir: Path, stack: contextlib.ExitStack) -> None:
        self._config, self.run_dir, self.stack = config, run_dir, stack
        self.started = False  # a failure after this point is a run that stopped, not one that could not start
        self.cache: Any = None
        self.stop: StopRequest = STOP  # set by SIGINT/SIGTERM (runners/interrupt.py)

    def configure(self, cfg: DictConfig) -> RunConfig:
        """The run's settings built once from the composed config (`RunConfig.build`: validated once), here so
        that an invalid config leaves the failure note like any failure before the run starts."""
        self._config = RunConfig.build(cfg)
        return self._config

    @property
    def config(self) -> RunConfig:
        if self._config is None:
            raise RuntimeError("the run skeleton has no settings yet: configure(cfg) first")
        return self._config

    def open_cache(self) -> ResponseCache | None:
        """The response cache of the run's `cache:`/`store:` (None when disabled), closed with the skeleton."""
        self.cache = open_cache(self.config, self.stack)
        return self.cache

    def open_clients(
        self,
        *,
        answer: bool = True,
        judge: bool = True,
        stand_in: StandInFactory | None = None,
    ) -> Clients:
        """The answer model's client (`answer`) and the judge's (`judge`): its own endpoint when `judge.endpoint`
        is set (harness.settings.judge_model), else the answer client, or, judging only, the answer model's
        endpoint. Endpoints open (embedded servers start) now and close with the skeleton; then the preflight:
        one clear error before anything runs.

        `stand_in` (the plan): the endpoints are resolved without starting a server and each client answers what
        the response cache lacks through `stand_in(endpoint)`'s responder, reads the cache without writing it,
        and tells its observer of every call; no preflight (nothing is sent)."""
        settings = self.config.client
        clients = Clients()
        if answer:
            clients.answer, clients.answer_endpoint = self._client(self.config.model, settings, stand_in)
            clients.judge, clients.judge_endpoint = clients.answer, clients.answer_endpoint
        if judge:
            if self.config.judge_has_own_model or not answer:
                clients.judge, clients.judge_endpoint = self._client(self.config.judge_model, settings, stand_in)
        if stand_in is None:
            served = preflight(settings, *clients.distinct)
            clients.answer_window_served = served.get(clients.answer) if clients.answer is not None else None
        return clients

    def _client(
        self, model_cfg: Any, settings: ClientSettings, stand_in: StandInFactory | None
    ) -> tuple[LLMClient, Endpoint]:
        if stand_in is not None:
            ep = planning_endpoint(model_cfg)
            responder, observer = stand_in(ep)
            cache = ReadOnlyCache(self.cache) if self.cache is not None else None
            return make_client(ep, settings, cache, responder=responder, observer=observer), ep
        ep = self.stack.enter_context(open_endpoint(model_cfg, log_dir=self.run_dir, progress=self.config.run.progress))
        return make_client(ep, settings, self.cache), ep

    def start(self, fp: str, *, snapshot: Any = None, **fingerprint_extra: Any) -> None:
        """The run is accepted and starts: the note of an earlier failed start goes, the fingerprint is written
        (with `fingerprint_extra`), and the configuration snapshot (.hydra/: `snapshot`, by default the run's
        composed config; runners/snapshot.py), the first time anything describing the run is written."""
        self.started = True
        clear_failure(self.run_dir)
        write_fingerprint(self.run_dir, fp, **fingerprint_extra)
        config = snapshot if snapshot is not None else self._config.composed if self._config is not None else None
        if config is not None:
            write_snapshot(self.run_dir, config)

    def record_writer(self) -> RecordWriter:
        """The writer of records.jsonl (a torn last line, from a killed run, is cut first)."""
        return RecordWriter(self.run_dir / RECORDS_FILE)

    def server_watch(self, clients: Clients, on_death: Callable[[ServerDied], None] | None = None) -> ServerWatch:
        """Watches the clients' embedded servers while pairs run (a dead one stops the run: none is recorded
        with its failure)."""
        return ServerWatch(clients.liveness, on_death=on_death)

    def ticker(self) -> Ticker:
        """The progress line (run.progress)."""
        return Ticker(enabled=self.config.run.progress)


@contextlib.contextmanager
def run_skeleton(
    run_dir: Path, *, config: RunConfig | None = None, lock: bool = True, note: bool = True
) -> Iterator[RunSkeleton]:
    """A `RunSkeleton` over `run_dir` with the run's settings (`config`, or `configure(cfg)` inside): locked
    (`lock`; RunDirLocked, writing nothing, when another process holds it), with FAILED.txt written for any failure (`note`) but an interrupt, and everything it opened closed."""
    run_dir = Path(run_dir)
    with run_dir_lock(run_dir) if lock else contextlib.nullcontext():
        skeleton: RunSkeleton | None = None
        try:
            with contextlib.ExitStack() as stack:
                skeleton = RunSkeleton(config, run_dir, stack)
                yield skeleton
        except RunInterrupted:
            raise  # not a failure: run.json says "interrupted", the console says how to resume
        except Exception as e:
            started = skeleton is not None and skeleton.started
            # before it started, a run leaves a directory holding another run's results as it was (no note beside
            # finished records: the error is on the console)
            if note and (started or not holds_run(run_dir)):
                write_failure(run_dir, e, started)
            raise
