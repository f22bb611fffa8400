"""The behaviour baseline of a refactoring (issue 22): what the harness writes, hashed, so a change of structure can
show that it changed no behaviour.

    python -m scripts.behaviour_baseline record   # writes baselines/behaviour.json from this tree
    python -m scripts.behaviour_baseline check    # runs the same again and names every file that differs

What runs, offline, on a deterministic fake endpoint (harness/testing/faults.py `FakeModel`, with answers that are
right for some questions and judge verdicts that vary, so the scores are not all zero):
- `run` of every question type (the first oracle question of each type, one abstention question, one case whose
  sessions are not in date order) x every mode (`+experiment=lme_official`: lme_official, long_context, summary,
  summary_ondemand), once with each judge (`judge=longmemeval`, `judge=trpc`);
- `rescore` of the first run with the other judge;
- `plan` of the same configuration (plan.json);
- `export` of the first run (the hypothesis files);
- the replay gate (`replay baselines/ci_replay.jsonl`, then `gate`), as `make gate` runs it.

What differs between two identical runs is taken out before hashing, and nothing else: wall-clock and latency fields
(any key ending in `_ms`, `_s` or named like a time stamp), the git commit and host of run.json, and the temporary
directory's path. The reports are then rebuilt from the normalised records (`lme-harness report`, no model call), so
report.md/.html and the CSVs are compared byte for byte. The retriever is BM25 (`retrieval=bm25`), whose ranking
does not depend on the machine's floating point.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gzip
import hashlib
import io
import json
import re
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "baselines" / "behaviour.json"
# Keys whose values are clock readings: zeroed before hashing (they differ between two runs of the same code).
TIME_KEY = re.compile(r"(_ms(_|$)|_s$|_at$|^updated$|^started$|^finished$|^created$|^timestamp$|^time$|^elapsed)")
# The loopback endpoint's port and the run's fingerprint (a hash of a config holding that port and the temporary
# paths) change from run to run; fingerprints and directory names are checked apart, on fixed configs (`identities`).
VOLATILE = (
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
    (re.compile(r'("(?:\w+_)?fingerprint": ?)"[0-9a-f]{8,64}"'), r'\1"<fingerprint>"'),
)
# Override sets whose run fingerprint and directory name must not change (old run directories resume into them).
# (Each ends with dataset.limit=1: the plan then reads one case; the name and fingerprint rules are the same.)
IDENTITY_OVERRIDES: tuple[tuple[str, ...], ...] = tuple(
    (*o, "dataset.limit=1")
    for o in (
        (),
        ("+experiment=quickstart",),
        ("+experiment=trpc_repro",),
        ("+experiment=lme_official", "judge=trpc", "retrieval=bm25"),
        ("dataset=s", "model=openai", "run.concurrency=4", "cache.path=/x/c.sqlite", "mode=[summary_ondemand]"),
        ("retrieval.config.budget_chars=4000", "generation.max_tokens=64", "run.progress=false", "client.timeout_s=30"),
        ("model=endpoint", "model.base_url=http://127.0.0.1:1/v1", "model.model=m", "judge=longmemeval"),
    )
)
# run.json keys that name the machine or the commit, not the behaviour (`platform` holds the kernel's release: the
# baseline recorded on one kernel differed on another, s19).
MACHINE_KEYS = ("git", "host", "platform", "python", "packages", "invocations", "argv", "cwd", "hostname", "pid")
# The static embedder's weights are distilled on each machine (harness/retrieval/distill.py) and their digest differs
# from one CPU to another: run.json's `retrieval.embedder` (`model2vec:<digest prefix>`) keeps the kind, the digest is
# the machine's (s20: the baseline recorded on one host differed on every fresh clone of another). A pinned digest is
# behaviour and still shows, in the config's `embedder.sha256`.
BUILT_WEIGHTS = re.compile(r"^(model2vec):[0-9a-f]+$")
HASHED_SUFFIXES = (".md", ".html", ".csv", ".json", ".jsonl", ".yaml", ".txt")


def _subset_rows(oracle: Path) -> list[dict[str, Any]]:
    rows = json.loads(gzip.decompress(oracle.read_bytes()))
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for r in rows:
        if r["question_type"] not in seen and not r["question_id"].endswith("_abs"):
            seen.add(r["question_type"])
            out.append(r)
    out.append(next(r for r in rows if r["question_id"].endswith("_abs")))
    out.append(next(r for r in rows if r["haystack_dates"] != sorted(r["haystack_dates"]) and r not in out))
    return out


def _fake_model(rows: list[dict[str, Any]]):
    """FakeModel whose answers are right for every other question and whose judge verdicts depend on the prompt."""
    from harness.testing.faults import FakeModel, default_answer, request_kind

    answers = {r["question"]: str(r["answer"]) for r in rows}

    def answer(req: Mapping[str, Any]) -> str:
        text = json.dumps(req.get("messages"), ensure_ascii=False)
        for i, (question, ref) in enumerate(sorted(answers.items())):
            if question in text and i % 2 == 0:
                return f"The answer is {ref}."
        return default_answer(req)

    class Model(FakeModel):
        def __call__(self, req: dict[str, Any]):
            if request_kind(req) == "judge":
                from harness.testing.fake_openai import completion

                last = (req.get("messages") or [{}])[-1].get("content") or ""
                yes = int(hashlib.sha256(last.encode()).hexdigest(), 16) % 3 != 0
                if "Answer yes or no only" in last:
                    return completion("yes" if yes else "no")
                return completion(json.dumps({"correct": yes, "confidence": 0.8, "reason": "baseline"}))
            return super().__call__(req)

    return Model(answer=answer)


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield


def _cli(*argv: str) -> int:
    from commands.cli import main

    with _quiet():
        return main(list(argv))


def produce(work: Path) -> dict[str, Path]:
    """Every output of the baseline's commands under `work`; the directories to hash, by name."""
    from harness.data.longmemeval import find_local
    from harness.testing.fake_openai import FakeOpenAIServer

    oracle = find_local("longmemeval_oracle.json.gz")
    if oracle is None:
        raise SystemExit("behaviour_baseline: longmemeval_oracle.json.gz not found (../shared/data/longmemeval)")
    rows = _subset_rows(Path(oracle))
    data = work / "subset.json"
    data.write_text(json.dumps(rows))
    out = {name: work / name for name in ("run_lme", "run_trpc", "rescore", "plan", "export", "gate_replay")}
    with FakeOpenAIServer(_fake_model(rows)) as srv:
        common = [
            "model=endpoint",
            f"model.base_url={srv.base_url}",
            "model.model=fake-model",
            "run.progress=false",
            "retrieval=bm25",
            "+experiment=lme_official",
            f"dataset.path={data}",
            "dataset.sha256=null",
        ]
        for name, judge in (("run_lme", "longmemeval"), ("run_trpc", "trpc")):
            code = _cli(
                "run",
                f"hydra.run.dir={out[name]}",
                f"cache.path={work / (name + '.sqlite')}",
                f"judge={judge}",
                *common,
            )
            _expect(code, 0, f"run judge={judge}")
        code = _cli(
            "rescore",
            str(out["run_lme"]),
            f"hydra.run.dir={out['rescore']}",
            f"cache.path={work / 'rescore.sqlite'}",
            "judge=trpc",
            *common,
        )
        _expect(code, 0, "rescore")
    out["plan"].mkdir()
    code = _cli(
        "plan",
        f"hydra.run.dir={work / 'plan_dir'}",
        *[c for c in common if not c.startswith("model.base_url")],
        "model.base_url=http://127.0.0.1:9/v1",
        "judge=longmemeval",
        "--out",
        str(out["plan"] / "plan.json"),
    )
    _expect(code, 0, "plan")
    _expect(_cli("export", str(out["run_lme"]), "--out", str(out["export"])), 0, "export")
    gate_args = ["+experiment=ci_gate"]  # as `make gate` runs it
    code = _cli(
        "replay", str(ROOT / "baselines" / "ci_replay.jsonl"), f"hydra.run.dir={out['gate_replay']}", *gate_args
    )
    _expect(code, 0, "replay")
    gate_out = io.StringIO()
    from commands.cli import main

    with contextlib.redirect_stdout(gate_out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["gate", "--baseline", str(ROOT / "baselines" / "ci_replay.yaml"), str(out["gate_replay"])])
    _expect(code, 0, "gate (replay)")
    (out["gate_replay"] / "gate-output.txt").write_text(gate_out.getvalue())
    return out


def _expect(code: int, want: int, what: str) -> None:
    if code != want:
        raise SystemExit(f"behaviour_baseline: `{what}` exited {code}, expected {want}")


def _normalise(value: Any, work: str) -> Any:
    if isinstance(value, dict):
        return {k: (_clock(v) if TIME_KEY.search(k) else _normalise(v, work)) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v, work) for v in value]
    if isinstance(value, str):
        return _volatile(value.replace(work, "<work>"))
    return value


@functools.cache
def _places() -> tuple[tuple[str, str], ...]:
    """The machine's paths that outputs name: the shared data folder (../shared beside a clone, wherever CI puts
    it) and this checkout; longest first, so the data folder inside a checkout is named as data."""
    from harness.data.longmemeval import find_local

    oracle = find_local("longmemeval_oracle.json.gz")
    places = [(str(ROOT), "<checkout>")]
    if oracle is not None:
        places += [(str(Path(oracle).resolve().parent), "<data>"), (str(Path(oracle).parent), "<data>")]
    return tuple(sorted(set(places), key=lambda p: -len(p[0])))


def _clock(value: Any) -> Any:
    """A clock reading's fixed stand-in: 0 for a number, "<time>" for a time stamp; other values kept."""
    if isinstance(value, bool) or value is None:
        return value
    return 0 if isinstance(value, int | float) else "<time>" if isinstance(value, str) else value


def _volatile(text: str) -> str:
    for path, name in _places():  # where the checkout and the data happen to lie is not behaviour
        text = text.replace(path, name)
    for pattern, repl in VOLATILE:
        text = pattern.sub(repl, text)
    return text


def _mask(value: Any) -> Any:
    """The same shape with every leaf replaced by a fixed value of its type (the report formats them as before). A
    list of plain values becomes one stand-in whatever its length: how many of the flags that matter to the embedded
    build a CPU has (run.json host.cpu_flags: 17 on a Zen 3, more on a Zen 5) is the machine's, not behaviour."""
    if isinstance(value, dict):
        return {k: _mask(v) for k, v in value.items()}
    if isinstance(value, list):
        if all(not isinstance(v, dict | list) for v in value):
            return ["<machine>"]
        return [_mask(v) for v in value]
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return 0
    return None if value is None else "<machine>"


def _mask_machine(value: Any) -> Any:
    """run.json with every MACHINE_KEYS entry masked, at any depth (a rescore names its own commit)."""
    if isinstance(value, dict):
        return {k: _mask_entry(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask_machine(v) for v in value]
    return value


def _mask_entry(key: str, value: Any) -> Any:
    if key == "packages":
        return _installed(value)
    if key in MACHINE_KEYS:
        return _mask(value)
    out = _mask_machine(value)
    if key == "retrieval" and isinstance(out, dict) and isinstance(out.get("embedder"), str):
        if m := BUILT_WEIGHTS.match(out["embedder"]):  # weights built on this machine: the kind stays
            out["embedder"] = f"{m.group(1)}:<machine>"
    return out


def _installed(packages: Any) -> Any:
    """Every package's version, installed or not (null), as one stand-in: which optional extras a venv holds
    (the compiled runtime in a dev venv, none in CI) is the machine's, not the harness's behaviour."""
    return {k: "<machine>" for k in packages} if isinstance(packages, dict) else _mask(packages)


def _normalise_run_dir(d: Path, work: str) -> None:
    """Clock readings, commit and host out of records.jsonl and run.json; then the report rebuilt from them."""
    records = d / "records.jsonl"
    if records.exists():
        lines = [json.loads(x) for x in records.read_text().splitlines() if x.strip()]
        records.write_text("".join(json.dumps(_normalise(x, work), sort_keys=True) + "\n" for x in lines))
    meta_path = d / "run.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        meta = _mask_machine(meta)
        meta_path.write_text(json.dumps(_normalise(meta, work), indent=2, sort_keys=True))
    if records.exists():
        _expect(_cli("report", str(d)), 0, f"report {d.name}")


def digest(out: Mapping[str, Path], work: Path) -> dict[str, str]:
    """sha256 of every text output, by path relative to `work` (the Hydra bookkeeping in .hydra/ excepted)."""
    for d in out.values():
        for sub in [d, *[p.parent for p in d.rglob("records.jsonl")]]:
            if (sub / "records.jsonl").exists() or (sub / "run.json").exists():
                _normalise_run_dir(sub, str(work))
    hashes: dict[str, str] = {}
    for d in out.values():
        for f in sorted(d.rglob("*")):
            rel = f.relative_to(work).as_posix()
            if not f.is_file() or ".hydra" in f.parts or f.suffix not in HASHED_SUFFIXES or f.name.endswith(".log"):
                continue
            text = _volatile(f.read_text(errors="replace").replace(str(work), "<work>"))
            if f.suffix == ".json" and f.name != "run.json":
                with contextlib.suppress(ValueError):
                    text = json.dumps(_normalise(json.loads(text), str(work)), indent=1, sort_keys=True)
            hashes[rel] = hashlib.sha256(text.encode()).hexdigest()
    return hashes


def identities(work: Path) -> dict[str, str]:
    """Each fixed override set's run fingerprint and run directory name (as `lme-harness plan` names it)."""
    import os

    from hydra import compose, initialize_config_dir

    from commands.cli import CONFIG_DIR
    from runners.fingerprint import fingerprint
    from runners.rundir import register_resolvers

    register_resolvers()
    out: dict[str, str] = {}
    for i, overrides in enumerate(IDENTITY_OVERRIDES):
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            cfg = compose(config_name="config", overrides=list(overrides))
        where = work / f"names{i}"
        where.mkdir()
        cwd = os.getcwd()
        try:
            os.chdir(where)
            _expect(_cli("plan", *overrides, "--out", str(where / "plan.json")), 0, f"plan {' '.join(overrides)}")
        finally:
            os.chdir(cwd)
        # the directory Hydra made for the plan (its job log: a plan writes no .hydra/ snapshot, runners/snapshot.py)
        dirs = sorted(p.parent.relative_to(where).as_posix() for p in where.rglob("cli.log"))
        key = " ".join(overrides) or "(defaults)"
        out[f"identity/{key}"] = json.dumps({"fingerprint": fingerprint(cfg), "run_dirs": dirs})
    return out


def compute(keep: Path | None = None) -> dict[str, str]:
    if keep is not None:  # the outputs kept for a look (a new or empty directory)
        keep.mkdir(parents=True, exist_ok=True)
        if any(keep.iterdir()):
            raise SystemExit(f"behaviour_baseline: --keep {keep} is not empty")
        return {**digest(produce(keep.resolve()), keep.resolve()), **identities(keep.resolve())}
    with tempfile.TemporaryDirectory(prefix="lme-behaviour-") as tmp:
        work = Path(tmp)
        return {**digest(produce(work), work), **identities(work)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("record", "check", "show"))
    ap.add_argument("--baseline", type=Path, default=BASELINE)
    ap.add_argument("--keep", type=Path, help="write the outputs into this (new or empty) directory and keep them")
    args = ap.parse_args(argv)
    got = compute(args.keep)
    if args.action == "show":
        print(json.dumps(got, indent=1, sort_keys=True))
        return 0
    if args.action == "record":
        args.baseline.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"behaviour baseline: {len(got)} files -> {args.baseline}")
        return 0
    want = json.loads(args.baseline.read_text())
    changed = sorted(k for k in want.keys() & got.keys() if want[k] != got[k])
    for k in changed:
        if k.startswith("identity/"):
            print(f"identity {k[9:]}: was {want[k]}, now {got[k]}")
    missing, added = sorted(want.keys() - got.keys()), sorted(got.keys() - want.keys())
    for label, names in (("differs", changed), ("missing", missing), ("new", added)):
        for name in names:
            print(f"{label}: {name}")
    if changed or missing or added:
        print(f"behaviour baseline: {len(changed)} differ, {len(missing)} missing, {len(added)} new of {len(want)}")
        return 1
    print(f"behaviour baseline: all {len(want)} files identical")
    return 0


def _check_tree() -> None:
    """The code under test must be this tree's (an editable install elsewhere would test another checkout)."""
    import runners

    where = Path(runners.__file__).resolve().parent.parent
    if where != ROOT:
        raise SystemExit(
            f"behaviour_baseline: runners is imported from {where}, not {ROOT}: run `python -m scripts.behaviour_baseline` from {ROOT}"
        )


if __name__ == "__main__":
    _check_tree()
    raise SystemExit(main())
