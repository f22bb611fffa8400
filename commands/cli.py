"""`lme-harness` command line: run, rescore, report, compare, gate, export, models pull, data info, retrieval-eval."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from harness import config_files

CONFIG_DIR = str(config_files.CONFIG_DIR)  # Hydra takes a str

EXIT_FAILED_CASES = 3  # the run finished, some (case, mode) pairs failed (recorded; retried by the next run)
EXIT_STOPPED = (
    4  # the run stopped early, records kept: the circuit breaker (run.max_consecutive_failures) or a dead model server
)
EXIT_INTERRUPTED = 5  # stopped by Ctrl-C (SIGINT) or SIGTERM: records kept, run.json and a partial report written;
# the same command resumes. A second Ctrl-C exits at once with 128 + the signal number (130), waiting for nothing.
NOISY_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2", "openai")


def _hydra_main(task_fn, argv: list[str]) -> int:
    """Run `task_fn(cfg, run_dir)` under Hydra with `argv` as overrides (supports -m multirun).
    A secret enters only through the environment (harness/secrets.py: overrides checked here, the composed config
    by runners/rundir.py before Hydra writes); the env values are also masked in what the run prints, logs or
    writes, as defence in depth."""
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig

    from harness import progress, secrets
    from runners.console import quiet_console
    from runners.extensions import config_dir_problems, register_memory_providers, user_config_dirs
    from runners.interrupt import SweepInterrupted, stop_on_signals
    from runners.rundir import RunNameError, check_run_name, register_resolvers

    status = {"code": 0}

    @hydra.main(config_path=CONFIG_DIR, config_name="config", version_base="1.3")
    def _main(cfg: DictConfig) -> None:
        run_dir = Path(HydraConfig.get().runtime.output_dir)
        secrets.register(secrets.config_secrets(cfg))
        secrets.install_log_filter()  # on the handlers Hydra has just configured (console, cli.log)
        for name in NOISY_LOGGERS:  # Hydra's logging is INFO: one line per HTTP request otherwise
            logging.getLogger(name).setLevel(logging.WARNING)
        progress.configure(bool(cfg.get("run", {}).get("progress", True)))
        try:
            with quiet_console(run_dir):  # one line per failure on the terminal, tracebacks in RUN_DIR/cli.log
                status["code"] = max(status["code"], _guard(lambda: task_fn(cfg, run_dir)))
        finally:  # logs written by other processes (the embedded server) cannot be filtered as they are written
            for log in run_dir.glob("*.log"):
                secrets.scrub_file(log)
        _stop_sweep_if_interrupted()

    bad = secrets.check_overrides(argv)
    if bad:  # before Hydra: it prints and snapshots override text (a sweep's job lines, multirun.yaml)
        print(f"lme-harness: error: {'; '.join(bad)}; nothing was written", file=sys.stderr)
        return 2
    bad = config_dir_problems(user_config_dirs(argv))
    if bad:  # the user's own config directory (docs/extending.md): a file there Hydra would never read
        print(f"lme-harness: error: {'; '.join(bad)}; nothing was written", file=sys.stderr)
        return 2
    for warning in register_memory_providers():  # memory=NAME of installed packages (entry points)
        print(f"lme-harness: warning: {warning}", file=sys.stderr)
    for arg in argv:
        key, eq, value = arg.partition("=")
        if eq and key.lstrip("+") == "run.name":
            try:
                check_run_name(value.strip().strip("'\""))
            except RunNameError as e:
                print(f"lme-harness: error: {e}", file=sys.stderr)
                return 2
    register_resolvers()
    saved = sys.argv, sys.stdout, sys.stderr
    sys.argv = [saved[0][0], *argv]
    sys.stdout, sys.stderr = secrets.RedactingStream(sys.stdout), secrets.RedactingStream(sys.stderr)
    try:
        with stop_on_signals():
            _main()
    except SweepInterrupted:
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:  # a stop before the pairs started (model load, embedder build)
        print("lme-harness: stopped before any (case, mode) pair ran; the same command starts again", file=sys.stderr)
        return EXIT_INTERRUPTED
    except SystemExit as e:  # Hydra exits on config errors after printing them; keep main() returning a code
        return e.code if isinstance(e.code, int) else 1
    except Exception as e:  # a run.name set in a config file fails while Hydra names the run directory
        if not any(isinstance(c, RunNameError) or RunNameError.__name__ in str(c) for c in _causes(e)):
            raise
        print(f"lme-harness: error: {str(e).split(': ', 1)[-1].splitlines()[0]}", file=sys.stderr)
        return 2
    finally:
        sys.argv, sys.stdout, sys.stderr = saved
    return status["code"]


def _is_multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    try:
        return HydraConfig.get().mode == RunMode.MULTIRUN
    except ValueError:
        return False


def _stop_sweep_if_interrupted() -> None:
    """After a job: a stop requested by a signal ends the sweep through Hydra's launcher, which would otherwise start
    the next job. Module-level (not in `_main`'s closure): the Ray launcher pickles `_main`, and the stop flag holds a
    lock."""
    from runners.interrupt import STOP, SweepInterrupted

    if STOP.is_set():
        if _is_multirun():
            print("lme-harness: the sweep stopped; its later jobs were not started", file=sys.stderr)
        raise SweepInterrupted()


def _causes(e: BaseException | None):
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def _run_task(cfg, run_dir: Path) -> int:
    from harness.records import RECORDS_FILE
    from reports.render import build_report
    from runners.interrupt import RunInterrupted
    from runners.replay import RunStopped, run_benchmark

    try:
        summary = run_benchmark(cfg, run_dir)
    except (RunInterrupted, KeyboardInterrupt) as e:
        if (run_dir / RECORDS_FILE).exists():  # the records kept so far, reported
            print(f"partial report: {build_report(run_dir)['markdown']}")
        why = str(e) if isinstance(e, RunInterrupted) else "stopped before the first (case, mode) pair"
        print(f"lme-harness: run interrupted: {why}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except RunStopped as e:
        if (run_dir / RECORDS_FILE).exists():  # what was recorded before the stop is reported, not lost
            print(f"partial report: {build_report(run_dir)['markdown']}")
        print(f"lme-harness: run stopped: {e}", file=sys.stderr)
        return EXIT_STOPPED
    paths = build_report(run_dir)
    print(f"run directory: {run_dir}")
    _print_outcome(summary, paths, failed="failed this run", calls="model")
    print(Path(paths["markdown"]).read_text())
    return EXIT_FAILED_CASES if summary.n_failed else 0


# A retrieval evaluation's directories: under the run name like a run's, but in retrieval-eval/, which no run's
# directory name can be (those are `key=value` lists), so `retrieval-eval dataset=s` never writes into the directory
# of `run dataset=s` (its report files landed there, among the run's records).
RETRIEVAL_EVAL_DIRS = {
    "hydra.run.dir": "runs/${lme.run_name:${run.name}}/retrieval-eval/${lme.run_dirname:}",
    "hydra.sweep.dir": "runs/${lme.run_name:${run.name}}/retrieval-eval/multirun",
}


def _own_dirs(argv: list[str], dirs: dict[str, str]) -> list[str]:
    """`dirs` as overrides, but for a key the command line sets itself."""
    given = {a.partition("=")[0].lstrip("+") for a in argv}
    return [f"{key}='{value}'" for key, value in dirs.items() if key not in given]  # quoted: nested ${}


def _retrieval_task(cfg, run_dir: Path) -> int:
    from commands.retrieval_eval import run_retrieval_eval
    from runners.snapshot import write_snapshot

    out = run_retrieval_eval(cfg, run_dir)
    write_snapshot(run_dir, cfg)  # what produced the report files just written (runners/snapshot.py)
    print(f"retrieval report: {out}")
    return 0


def _rescore_task(src: Path):
    def task(cfg, run_dir: Path) -> int:
        from commands.rescore import rescore_run
        from harness.records import RECORDS_FILE
        from reports.render import build_report
        from runners.replay import RunStopped

        try:
            summary = rescore_run(cfg, src, run_dir)
        except RunStopped as e:  # the embedded judge's server died: records kept, the same command resumes
            if (run_dir / RECORDS_FILE).exists():
                build_report(run_dir)
            print(f"lme-harness: rescore stopped: {e}", file=sys.stderr)
            return EXIT_STOPPED
        paths = build_report(run_dir)
        print(f"rescored {src} -> {run_dir}")
        _print_outcome(summary, paths, failed="not scored", calls="judge")
        return EXIT_FAILED_CASES if summary.n_failed else 0

    return task


def _plan_task(out: str | None, pricing: str | None):
    def task(cfg, run_dir: Path) -> int:
        from commands.plan import PLAN_FILE, plan_run, render_table, write_plan

        plan = plan_run(cfg, run_dir, pricing=pricing)
        print(render_table(plan))
        print(f"plan: {write_plan(plan, Path(out) if out else run_dir / PLAN_FILE)}")
        return 0

    return task


class PlanUsageError(ValueError):
    pass


def _split_plan_options(argv: list[str]) -> tuple[list[str], str | None, str | None]:
    """(Hydra overrides, --out, --pricing) of `plan ARGS` / `run ARGS --plan`."""
    rest: list[str] = []
    opts: dict[str, str | None] = {"--out": None, "--pricing": None}
    it = iter(argv)
    for a in it:
        name, eq, value = a.partition("=")
        if name in opts:
            opts[name] = value if eq else next(it, None)
            value = opts[name] or ""
            # a Hydra override (key=value, no "/" in the key) taken for the path: a run dir name may hold "="
            if not value or (not eq and "=" in value and "/" not in value.split("=", 1)[0]):
                raise PlanUsageError(f"{name} needs a value (a file path)")
        elif a != "--plan":
            rest.append(a)
    return rest, opts["--out"], opts["--pricing"]


def _print_outcome(summary, paths: dict[str, Any], *, failed: str, calls: str) -> None:
    """The closing lines of a run or a rescore: records, scoring failures, model calls, the report's path."""
    print(f"records: {summary.n_records} ({summary.n_skipped} already done, {summary.n_failed} {failed})")
    _print_scoring_failed(summary)
    stats = summary.stats
    print(f"{calls} calls: {stats.get('network_calls', 0)} network, {stats.get('cache_hits', 0)} from cache")
    print(f"report: {paths['markdown']}")


def _print_scoring_failed(summary) -> None:
    if summary.n_scoring_failed:
        print(
            f"lme-harness: scoring failed for {summary.n_scoring_failed} answered pair(s) (judge endpoint error): "
            "answers are kept, the same command scores them again",
            file=sys.stderr,
        )


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the command itself (`lme-harness`, `python -m commands.cli`), not a caller in this process
        return _exit_interrupted_at_once(_main(list(sys.argv[1:])))
    return _main(list(argv))


def _exit_interrupted_at_once(code: int) -> int:
    """An interrupted command has kept its records and written run.json and the report; a thread abandoned in a
    model call (a summary call in a ThreadPoolExecutor, which the interpreter joins at exit) must not hold the exit
    until its call times out, so the process ends here, streams and logs flushed."""
    if code != EXIT_INTERRUPTED:
        return code
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    logging.shutdown()
    os._exit(code)


def build_parser() -> argparse.ArgumentParser:
    """Every sub-command, its options and its handler (`handler`: one function per sub-command). The commands that
    compose a Hydra config take their arguments as overrides and are dispatched before parsing (HYDRA_HANDLERS); they
    are listed here for `--help` and the generated reference (docs/reference/cli.md)."""
    parser = argparse.ArgumentParser(prog="lme-harness", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser(
        "run", help="run the benchmark (Hydra overrides follow, e.g. dataset=s model=openai)", add_help=False
    )
    sub.add_parser(
        "replay",
        help="the benchmark against a recorded response fixture: replay FIXTURE [--record] "
        "[Hydra overrides] (docs/ci-gate.md)",
        add_help=False,
    )
    sub.add_parser(
        "plan",
        help="what a run would spend (calls, tokens, USD, cache share), no model call: "
        "plan [HYDRA OVERRIDES] [--out FILE] [--pricing FILE] (also: run ... --plan)",
        add_help=False,
    )
    sub.add_parser("retrieval-eval", help="retrieval-only evaluation (Hydra overrides follow)", add_help=False)
    sub.add_parser(
        "rescore",
        help="score a run's answers again (other scorers/judge), no answer calls: "
        "rescore SRC_RUN_DIR [Hydra overrides]",
        add_help=False,
    )
    p = sub.add_parser("report", help="rebuild tables and plots from a run directory's records (no model calls)")
    p.add_argument("run_dir")
    p.add_argument("--pricing", help="price table YAML (default configs/pricing/default.yaml)")
    p.set_defaults(handler=_cmd_report)
    p = sub.add_parser(
        "merge",
        help="one run from the run directories of its shards (dataset.shard=I/N): "
        "merge OUT RUN_DIR... then the report of OUT",
    )
    p.add_argument("out")
    p.add_argument("run_dirs", nargs="+")
    p.add_argument("--pricing", help="price table YAML (default configs/pricing/default.yaml)")
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help="merge even when (case, mode) pairs of the run have no record; run.json and the report say so",
    )
    p.set_defaults(handler=_cmd_merge)
    p = sub.add_parser("compare", help="paired comparison of runs (A = first; accepts a multirun sweep directory)")
    p.add_argument("runs", nargs="+", help="run directories, or a sweep directory such as runs/NAME/multirun")
    p.add_argument("--out", help="output directory (default: <first run's parent>/compare)")
    p.add_argument("--pricing", help="price table YAML (default configs/pricing/default.yaml)")
    p.set_defaults(handler=_cmd_compare)
    p = sub.add_parser("gate", help="check a run against a committed baseline; exit 1 when a check fails")
    p.add_argument("run_dir")
    p.add_argument("--baseline", required=True, help="baseline YAML (e.g. baselines/ci_smollm2.yaml)")
    p.add_argument("--pricing", help="price table YAML (default configs/pricing/default.yaml)")
    p.add_argument(
        "--write-baseline",
        action="store_true",
        help="write the baseline from this run (default tolerances) instead of checking",
    )
    p.add_argument(
        "--policy",
        choices=("default", "live", "exact"),
        help="with --write-baseline: tolerances (default), cross-build tolerances (live CI gate) or "
        "exact checks (replay gate); "
        "default: the existing baseline's policy",
    )
    p.set_defaults(handler=_cmd_gate)
    p = sub.add_parser(
        "export", help="write each mode's answers as a LongMemEval hypothesis file (question_id, hypothesis)"
    )
    p.add_argument("run_dir")
    p.add_argument("--out", help="output directory (default: RUN_DIR/export)")
    p.add_argument(
        "--dataset",
        action="store_true",
        help="also the per-case table as a Hugging Face dataset (OUT/cases) and OUT/cases.parquet",
    )
    p.set_defaults(handler=_cmd_export)
    p = sub.add_parser(
        "provider-check",
        help="does a memory provider keep the provider contract (shapes, isolation, as-of, score order, errors)? "
        "exit 1 naming each failed check, 2 for a refused target (docs/memory-systems.md)",
    )
    p.add_argument(
        "target",
        metavar="TARGET",
        help="a service's base URL (http://127.0.0.1:8765/v1; no userinfo, query or fragment) or a Python provider "
        "class (module.path:ClassName)",
    )
    p.add_argument("--kwargs", help="a Python provider's constructor arguments, as a JSON object")
    p.add_argument("--timeout-s", type=float, default=60.0, help="per call")
    p.add_argument("--api-key-env", help="the NAME of the environment variable holding a bearer token (a URL only)")
    p.set_defaults(handler=lambda args: _guard(lambda: _provider_check(args)))
    p = sub.add_parser("models", help="manage embedded models")
    msub = p.add_subparsers(dest="models_cmd", required=True)
    pp = msub.add_parser("pull", help="assemble and sha256-verify a model file")
    pp.add_argument("name")
    pp.set_defaults(handler=_cmd_models_pull)
    msub.add_parser("list", help="list declared models").set_defaults(handler=_cmd_models_list)
    p = sub.add_parser("data", help="dataset tools")
    dsub = p.add_subparsers(dest="data_cmd", required=True)
    dp = dsub.add_parser("info", help="question count, types, abstention count, sha256")
    dp.add_argument("path")
    dp.set_defaults(handler=_cmd_data_info)
    return parser


# What each exit status of a command means (docs/reference/cli.md is generated from this list).
EXIT_STATUSES: tuple[tuple[int, str], ...] = (
    (0, "done: every (case, mode) pair scored, every check passed"),
    (1, "`gate` or `provider-check`: a check failed (each named)"),
    (2, "nothing ran: a bad config value, data, endpoint, key or argument (one error naming it; nothing written)"),
    (EXIT_FAILED_CASES, "the run finished, some (case, mode) pairs failed: recorded, retried by the same command"),
    (
        EXIT_STOPPED,
        "stopped early, records kept: the circuit breaker (run.max_consecutive_failures) or a dead model server",
    ),
    (
        EXIT_INTERRUPTED,
        "interrupted by Ctrl-C or SIGTERM: records kept, run.json says interrupted; the same command resumes",
    ),
    (130, "a second Ctrl-C: exits at once (run.json says interrupted)"),
)


def _main(argv: list[str]) -> int:
    if argv and argv[0] in HYDRA_HANDLERS:
        from runners.extensions import config_dir_options

        # --config-dir DIR, anywhere among a Hydra command's arguments (docs/extending.md)
        rest, config_dir = config_dir_options(argv[1:])
        command = "plan" if argv[0] == "run" and "--plan" in rest else argv[0]  # `run --plan` = `plan`
        logging.basicConfig(level=logging.WARNING)
        return HYDRA_HANDLERS[command](rest, config_dir)
    args = build_parser().parse_args(argv)
    return int(args.handler(args))


def _cmd_run(argv: list[str], config_dir: list[str]) -> int:
    return _hydra_main(_run_task, [*config_dir, *argv])


def _cmd_retrieval_eval(argv: list[str], config_dir: list[str]) -> int:
    return _hydra_main(_retrieval_task, [*config_dir, *argv, *_own_dirs(argv, RETRIEVAL_EVAL_DIRS)])


def _cmd_plan(argv: list[str], config_dir: list[str]) -> int:
    try:
        overrides, out, pricing = _split_plan_options(argv)
    except PlanUsageError as e:
        print(f"lme-harness: error: plan: {e}", file=sys.stderr)
        return 2
    return _hydra_main(_plan_task(out, pricing), [*config_dir, *overrides])


def _cmd_rescore(argv: list[str], config_dir: list[str]) -> int:
    if not argv or ("=" in argv[0] and not Path(argv[0]).is_dir()):  # run dirs hold `=` too
        print("lme-harness: error: usage: lme-harness rescore SRC_RUN_DIR [HYDRA OVERRIDES...]", file=sys.stderr)
        return 2
    src = Path(argv[0])
    overrides = argv[1:]
    if not any(o.startswith("hydra.run.dir=") for o in overrides):  # next to the source, named by the overrides
        quoted = str(src / "rescore").replace("\\", "\\\\").replace("'", "\\'")  # `=` and `,` stay one value
        overrides.append(f"hydra.run.dir='{quoted}/${{lme.run_dirname:}}'")
    return _hydra_main(_rescore_task(src), [*config_dir, *overrides])


def _cmd_replay(argv: list[str], config_dir: list[str]) -> int:
    """replay FIXTURE [--record] [HYDRA OVERRIDES...] (docs/ci-gate.md)"""
    rest = [a for a in argv if a != "--record"]
    if not rest or "=" in rest[0]:
        print(
            "lme-harness: error: usage: lme-harness replay FIXTURE.jsonl [--record] [HYDRA OVERRIDES...]",
            file=sys.stderr,
        )
        return 2
    from commands.replay_gate import replay_main

    return _guard(lambda: replay_main(rest[0], [*config_dir, *rest[1:]], run=main, record="--record" in argv))


HYDRA_HANDLERS = {
    "run": _cmd_run,
    "plan": _cmd_plan,
    "rescore": _cmd_rescore,
    "replay": _cmd_replay,
    "retrieval-eval": _cmd_retrieval_eval,
}


def _cmd_report(args: argparse.Namespace) -> int:
    from reports.render import build_report

    def report() -> int:
        paths = build_report(Path(args.run_dir), prices=args.pricing)
        print(Path(paths["markdown"]).read_text())
        print(json.dumps({k: str(v) for k, v in paths.items()}, indent=1))
        return 0

    return _guard(report)


def _cmd_merge(args: argparse.Namespace) -> int:
    from commands.merge import merge_runs
    from reports.render import build_report

    def merge() -> int:
        merge_runs(Path(args.out), [Path(d) for d in args.run_dirs], allow_partial=args.allow_partial)
        paths = build_report(Path(args.out), prices=args.pricing)
        print(Path(paths["markdown"]).read_text())
        return 0

    return _guard(merge)


def _cmd_compare(args: argparse.Namespace) -> int:
    from commands.compare_runs import compare_main

    return _guard(lambda: compare_main(args.runs, out=args.out, pricing=args.pricing))


def _cmd_gate(args: argparse.Namespace) -> int:
    from commands.check_gate import gate_main

    return _guard(
        lambda: gate_main(
            args.run_dir, args.baseline, pricing=args.pricing, write=args.write_baseline, policy=args.policy
        )
    )


def _cmd_export(args: argparse.Namespace) -> int:
    from reports.export import export_hypotheses

    def export() -> int:
        res = export_hypotheses(args.run_dir, args.out)
        for mode, f in res.files.items():
            print(f"{mode}: {res.counts[mode]} hypotheses -> {f}")
        for qid, mode, error in res.missing:
            print(
                f"lme-harness: warning: no answer for {qid} / {mode} (failed: {error}); rerun the run to fill it",
                file=sys.stderr,
            )
        for qid, mode, n in res.truncated:
            print(
                f"lme-harness: warning: {qid} / {mode}: the answer ({n} characters) was cut in the export "
                f"(a note in the hypothesis says so)",
                file=sys.stderr,
            )
        print("re-judge with LongMemEval's script: python src/evaluation/evaluate_qa.py gpt-4o FILE REF_FILE")
        if args.dataset:
            from reports.export import export_cases_dataset

            for kind, path in export_cases_dataset(args.run_dir, args.out).items():
                print(f"per-case {kind}: {path}")
        return EXIT_FAILED_CASES if res.missing else 0

    return _guard(export)


def _cmd_models_list(args: argparse.Namespace) -> int:
    from harness.llm.models import available_models

    print("\n".join(available_models()))
    return 0


def _cmd_models_pull(args: argparse.Namespace) -> int:
    from harness.llm.models import load_spec, pull

    return _guard(lambda: (print(pull(load_spec(args.name), progress=True)), 0)[1])


def _cmd_data_info(args: argparse.Namespace) -> int:
    from harness.data.longmemeval import info

    return _guard(lambda: (print(json.dumps(info(args.path), indent=1)), 0)[1])


def _provider_check(args: argparse.Namespace) -> int:
    """`provider-check TARGET`: the report on stdout, exit 1 when a check failed, 2 when the target is refused (no
    call made). The token's value is registered as a secret and the output masked (a service may echo it)."""
    from harness import secrets
    from harness.memory.check import TargetError, check_provider, provider_of

    if args.api_key_env and secrets.env_field_problem("--api-key-env", args.api_key_env) is None:
        secrets.register([os.environ.get(args.api_key_env)])
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = secrets.RedactingStream(sys.stdout), secrets.RedactingStream(sys.stderr)
    try:
        try:
            kwargs = json.loads(args.kwargs) if args.kwargs is not None else None
            if kwargs is not None and not isinstance(kwargs, dict):
                raise TargetError(f"--kwargs: expected a JSON object, got {type(kwargs).__name__}")
            provider, shown = provider_of(
                args.target, kwargs=kwargs, timeout_s=args.timeout_s, api_key_env=args.api_key_env
            )
        except (TargetError, ValueError) as e:  # json's error names a position, never the text
            print(f"lme-harness: error: provider-check: {e}", file=sys.stderr)
            return 2
        print(f"checking {shown}")
        rep = check_provider(provider)
        print(rep.text())
        return 0 if rep.ok else 1
    finally:
        sys.stdout, sys.stderr = saved


def _guard(fn) -> int:
    """Known input errors become one clear line and exit code 2, not a traceback."""
    from harness.data.longmemeval import DataError
    from harness.llm.fixture import FixtureError
    from harness.llm.models import ModelError
    from harness.llm.types import LLMError
    from harness.records import RecordError
    from reports.compare import CompareError
    from reports.cost import PricingError
    from reports.gate import GateError
    from reports.results_file import ResultsError
    from runners.replay import RunConfigError

    try:
        return fn()
    except (
        DataError,
        ModelError,
        RecordError,
        RunConfigError,
        FileNotFoundError,
        CompareError,
        GateError,
        PricingError,
        LLMError,
        FixtureError,
        ResultsError,
    ) as e:
        print(f"lme-harness: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
