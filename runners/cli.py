"""`lme-harness` command line: run, report, models pull, data info, retrieval-eval."""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

CONFIG_DIR = str(Path(__file__).resolve().parents[1] / "configs")

EXIT_FAILED_CASES = 3


def _hydra_main(task_fn, argv: list[str]) -> int:
    """Run `task_fn(cfg, run_dir)` under Hydra with `argv` as overrides (supports -m multirun)."""
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import DictConfig

    status = {"code": 0}

    @hydra.main(config_path=CONFIG_DIR, config_name="config", version_base="1.3")
    def _main(cfg: DictConfig) -> None:
        run_dir = Path(HydraConfig.get().runtime.output_dir)
        status["code"] = max(status["code"], _guard(lambda: task_fn(cfg, run_dir)))

    saved = sys.argv
    sys.argv = [saved[0], *argv]
    try:
        _main()
    except SystemExit as e:  # Hydra exits on config errors after printing them; keep main() returning a code
        return e.code if isinstance(e.code, int) else 1
    finally:
        sys.argv = saved
    return status["code"]


def _run_task(cfg, run_dir: Path) -> int:
    from reports.render import build_report
    from runners.replay import run_benchmark

    summary = run_benchmark(cfg, run_dir)
    paths = build_report(run_dir)
    print(f"run directory: {run_dir}")
    print(f"records: {summary.n_records} ({summary.n_skipped} already done, {summary.n_failed} failed this run)")
    print(f"model calls: {summary.stats.get('network_calls', 0)} network, {summary.stats.get('cache_hits', 0)} from cache")
    print(f"report: {paths['markdown']}")
    print(Path(paths["markdown"]).read_text())
    return EXIT_FAILED_CASES if summary.n_failed else 0


def _retrieval_task(cfg, run_dir: Path) -> int:
    from runners.retrieval_eval import run_retrieval_eval

    out = run_retrieval_eval(cfg, run_dir)
    print(f"retrieval report: {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="lme-harness", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("run", help="run the benchmark (Hydra overrides follow, e.g. dataset=s model=openai)", add_help=False)
    sub.add_parser("retrieval-eval", help="retrieval-only evaluation (Hydra overrides follow)", add_help=False)
    p = sub.add_parser("report", help="rebuild tables and plots from a run directory's records (no model calls)")
    p.add_argument("run_dir")
    p = sub.add_parser("models", help="manage embedded models")
    msub = p.add_subparsers(dest="models_cmd", required=True)
    pp = msub.add_parser("pull", help="assemble and sha256-verify a model file")
    pp.add_argument("name")
    msub.add_parser("list", help="list declared models")
    p = sub.add_parser("data", help="dataset tools")
    dsub = p.add_subparsers(dest="data_cmd", required=True)
    dp = dsub.add_parser("info", help="question count, types, abstention count, sha256")
    dp.add_argument("path")

    if argv and argv[0] in ("run", "retrieval-eval"):
        logging.basicConfig(level=logging.WARNING)
        task = _run_task if argv[0] == "run" else _retrieval_task
        return _hydra_main(task, argv[1:])
    args = parser.parse_args(argv)
    if args.cmd == "report":
        from reports.render import build_report

        def report() -> int:
            paths = build_report(Path(args.run_dir))
            print(Path(paths["markdown"]).read_text())
            print(json.dumps({k: str(v) for k, v in paths.items()}, indent=1))
            return 0
        return _guard(report)
    if args.cmd == "models":
        from harness.llm.models import available_models, load_spec, pull

        if args.models_cmd == "list":
            print("\n".join(available_models()))
            return 0
        return _guard(lambda: (print(pull(load_spec(args.name), progress=True)), 0)[1])
    if args.cmd == "data":
        from harness.data.longmemeval import info

        return _guard(lambda: (print(json.dumps(info(args.path), indent=1)), 0)[1])
    return 2


def _guard(fn) -> int:
    """Known input errors become one clear line and exit code 2, not a traceback."""
    from harness.data.longmemeval import DataError
    from harness.llm.models import ModelError
    from harness.records import RecordError
    from runners.replay import RunConfigError

    try:
        return fn()
    except (DataError, ModelError, RecordError, RunConfigError, FileNotFoundError) as e:
        print(f"lme-harness: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
