"""The behaviour baseline's normaliser (scripts/behaviour_baseline.py): what a machine decides is masked, what the
harness decides is kept, so the same tree checks identical in a dev venv and in CI's fresh one."""

import json
import random
from importlib import metadata
from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_dir

from commands.cli import CONFIG_DIR
from harness.run_meta import GitState
from runners import provenance as prov_mod
from scripts.behaviour_baseline import _mask_machine


def _meta(packages: dict[str, str | None]) -> dict[str, object]:
    return {
        "git": {"sha": "abc", "dirty": False},
        "packages": packages,
        "config": {"mode": "summary", "retrieval": {"k": 5}},
        "rescore": [{"git": {"sha": "def"}, "metric": "f1"}],
    }


def test_which_optional_packages_are_installed_does_not_change_the_normalised_run():
    dev = _mask_machine(_meta({"openai": "1.2.3", "llama-cpp-python": "0.3.36"}))
    ci = _mask_machine(_meta({"openai": "1.9.0", "llama-cpp-python": None}))
    assert dev == ci
    assert dev["packages"] == {"openai": "<machine>", "llama-cpp-python": "<machine>"}


def test_a_package_list_that_changes_is_still_seen():
    one = _mask_machine(_meta({"openai": "1"}))
    two = _mask_machine(_meta({"openai": "1", "bm25s": "0.2"}))
    assert one != two


def test_only_machine_keys_are_masked():
    out = _mask_machine(_meta({"openai": "1"}))
    assert out["git"] == {"sha": "<machine>", "dirty": False}
    assert out["rescore"] == [{"git": {"sha": "<machine>"}, "metric": "f1"}]
    assert out["config"] == {"mode": "summary", "retrieval": {"k": 5}}


def test_the_cpu_and_its_flags_do_not_change_the_normalised_run():
    """The s14 host was a Zen 5 (more of the flags that matter to the embedded build than the Zen 3 that recorded the
    baseline): a same-shape mask kept the list's length, so every run.json and report differed there."""

    def host(flags: list[str], model: str) -> dict[str, object]:
        meta = _meta({"openai": "1"})
        meta["host"] = {"cpu_model": model, "cpu_id": "x86_64", "cpu_flags": flags, "cores": 2, "cores_usable": 2}
        return meta

    zen3 = _mask_machine(host(["avx", "avx2", "fma"], "AMD EPYC (family 25, model 1)"))
    zen5 = _mask_machine(host(["avx", "avx2", "avx512f", "avx512bw", "amx_tile", "fma"], "AMD EPYC (family 26)"))
    bare = _mask_machine(host([], "QEMU Virtual CPU"))
    assert zen3 == zen5 == bare
    assert zen3["host"]["cpu_flags"] == ["<machine>"]
    # a list of records under a machine key keeps its length (a resumed run's invocations are behaviour's count)
    one = _mask_machine({**_meta({"openai": "1"}), "invocations": [{"argv": ["run"], "pairs_run": 3}]})
    two = _mask_machine({**_meta({"openai": "1"}), "invocations": [{"argv": ["run"]}, {"argv": ["run"]}]})
    assert one != two and len(two["invocations"]) == 2


@pytest.mark.parametrize("seed", range(12))
def test_every_machine_fact_provenance_writes_is_masked(seed, monkeypatch):
    """run.json as runners/provenance.py builds it, on generated machines (kernel release and platform string,
    Python version, commit and whether the tree is dirty, package versions or absence, CPU model, flags and cores): the normalised
    run.json is the same on all of them. Before s19 `platform` (the kernel's release) was kept, so a baseline
    recorded on one kernel differed on another; the config, which is behaviour, still shows."""
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(config_name="config", overrides=["dataset.limit=1"])

    def on_machine(rng: random.Random) -> dict:
        kernel = f"{rng.randint(4, 7)}.{rng.randint(0, 30)}.{rng.randint(0, 99)}-{rng.choice(['fc', 'generic', 'aws'])}"
        monkeypatch.setattr(
            prov_mod.platform, "platform", lambda: f"Linux-{kernel}-x86_64-with-glibc2.{rng.randint(28, 40)}"
        )
        monkeypatch.setattr(
            prov_mod, "sys", SimpleNamespace(version=f"3.{rng.randint(10, 13)}.{rng.randint(0, 9)} (main)")
        )
        # a machine of our kind has a git checkout (an install without one, sha null, is not checked against it)
        sha = "".join(rng.choice("0123456789abcdef") for _ in range(40))
        dirty = rng.choice([True, False])
        monkeypatch.setattr(prov_mod, "git_state", lambda: GitState(sha=sha, dirty=dirty))
        versions = {
            p: (f"{rng.randint(0, 9)}.{rng.randint(0, 9)}" if rng.random() < 0.7 else None) for p in prov_mod.PACKAGES
        }

        def version(p: str) -> str:
            if versions[p] is None:
                raise metadata.PackageNotFoundError(p)
            return str(versions[p])

        monkeypatch.setattr(prov_mod.metadata, "version", version)
        monkeypatch.setattr(prov_mod.os, "cpu_count", lambda: rng.randint(1, 256))
        flags = " ".join(
            rng.sample(["avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "amx_tile", "sse4_2"], rng.randint(0, 8))
        )
        cpuinfo = f"model name\t: CPU {rng.randint(0, 10**6)}\ncpu family\t: {rng.randint(6, 30)}\nmodel\t\t: {rng.randint(0, 200)}\nflags\t\t: {flags}\n"
        meta = prov_mod.provenance(cfg, {"sha256": "d" * 64, "n_selected": 1})
        meta.host = prov_mod.host_info(cpuinfo)
        return _mask_machine(json.loads(json.dumps(meta.to_json())))

    rng = random.Random(seed)
    first, second = on_machine(rng), on_machine(rng)
    assert first == second
    cfg.generation.max_tokens = int(cfg.generation.max_tokens) + 1  # behaviour is not masked
    assert on_machine(random.Random(seed))["config"] != first["config"]


def _hexes(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _every_field(rng: random.Random, work: str, *, embedder_kind: str = "model2vec") -> dict:
    """A run.json with every field of harness/run_meta.py set: what the machine decides drawn from `rng` (commit,
    interpreter, kernel, packages, CPU, the embedded model's speed, the digest of embedder weights distilled here,
    clock readings, where the run directory lies), what the harness decides fixed."""
    from harness.run_meta import GitState, Host, Invocation, ModelRef, RescoreInfo, RunMeta

    def git() -> GitState:
        return GitState(sha=_hexes(rng, 40), dirty=rng.choice([True, False]))

    def stamp() -> str:
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:00:00Z"

    def model(name: str) -> ModelRef:  # an embedded server listens on a port the machine hands out
        url = f"http://127.0.0.1:{rng.randint(1024, 65535)}/v1"
        return ModelRef(
            name=name,
            kind="local",
            model="q",
            file="q.gguf",
            sha256="e" * 64,
            base_url=url,
            n_ctx=4096,
            runtime="xllamacpp",
        )

    flags = rng.sample(["avx", "avx2", "fma", "avx512f", "amx_tile", "sse4_2"], rng.randint(0, 6))
    embedder = f"model2vec:{_hexes(rng, 16)}" if embedder_kind == "model2vec" else embedder_kind
    meta = RunMeta(
        dataset={"source": "oracle", "sha256": "d" * 64, "n_selected": 2},
        git=git(),
        python=f"3.{rng.randint(10, 13)}.{rng.randint(0, 9)}",
        platform=f"Linux-{rng.randint(4, 7)}.{rng.randint(0, 30)}-x86_64",
        packages={"openai": f"1.{rng.randint(0, 99)}", "torch": rng.choice([None, "2.13.0"])},
        model=model("answer"),
        judge_model=model("judge"),
        config={"mode": {"summary": {}}, "retrieval": {"config": {"name": "default"}}},
        host=Host(
            cpu_model=f"CPU {rng.randint(0, 10**6)}",
            cpu_id=rng.choice(["x86_64", "AuthenticAMD 25/17"]),
            cpu_flags=flags,
            cores=rng.randint(1, 256),
            cores_usable=rng.randint(1, 256),
            model_speed={
                "answer": {"prompt_tokens_per_s": rng.uniform(1, 500), "gen_tokens_per_s": rng.uniform(1, 90)}
            },
        ),
        retrieval={"preset": "default", "embedder": embedder, "max_embed_tokens": None, "stopwords": "lucene"},
        metrics=[{"name": "f1", "direction": "higher"}],
        invocations=[Invocation(git=git(), started=stamp(), pairs_run=3, run_dir=f"{work}/shard-0")],
        state="finished",
        updated=stamp(),
        fingerprint=_hexes(rng, 16),
        records=f"{work}/records.jsonl",
        elapsed_s=rng.uniform(0, 1000),
        cases_elapsed_s=rng.uniform(0, 1000),
        skipped_already_done=0,
        llm_stats={"calls": 6, "prompt_tokens": 1234, "latency_ms": rng.uniform(0, 10**5)},
        merged_from=[f"{work}/shard-0", f"{work}/shard-1"],
        shards=["0/2", "1/2"],
        merge_missing=[],
        rescore=RescoreInfo(
            source=f"{work}/src",
            source_fingerprint=_hexes(rng, 16),
            elapsed_s=rng.uniform(0, 100),
            judge_stats={"calls": 3},
            git=git(),
            started=stamp(),
        ),
    )
    return meta.to_json()


def _all_fields() -> set[str]:
    from harness.run_meta import RunMeta

    out: set[str] = set()

    def walk(cls: type, prefix: str) -> None:
        for name in cls._names():
            out.add(prefix + name)
            if name in cls._nested():
                walk(cls._nested()[name][0], f"{prefix}{name}.")

    walk(RunMeta, "")
    return out


def _set_fields(raw: dict, prefix: str = "") -> set[str]:
    out: set[str] = set()
    for k, v in raw.items():
        out.add(prefix + k)
        items = v if isinstance(v, list) else [v]
        for e in items:
            if isinstance(e, dict) and f"{prefix}{k}" in _all_fields() and k not in ("config", "dataset"):
                out |= {f for f in _set_fields(e, f"{prefix}{k}.") if f in _all_fields()}
    return out


@pytest.mark.parametrize("seed", range(12))
def test_every_run_json_field_on_generated_machines_normalises_the_same(seed, tmp_path):
    """Issue 38: a fresh clone on a Zen 4 differed from the baseline at gate_replay/run.json, the run whose retriever
    embeds with the static model distilled on the machine (`retrieval.embedder` = model2vec:<digest of those
    weights>). Every field run.json has is set here; what the machine decides is drawn per machine, and the
    normalised file is the same on every one. A field added to harness/run_meta.py fails the coverage check until
    it is drawn here (machine) or fixed (behaviour)."""
    from scripts.behaviour_baseline import _normalise, _volatile

    def on_machine(rng: random.Random, **kw) -> dict:
        """run.json as the baseline hashes it (scripts/behaviour_baseline.py `_normalise_run_dir`, then `digest`)."""
        work = str(tmp_path / _hexes(rng, 6))
        meta = _normalise(_mask_machine(json.loads(json.dumps(_every_field(rng, work, **kw)))), work)
        return json.loads(_volatile(json.dumps(meta, indent=2, sort_keys=True).replace(work, "<work>")))

    rng = random.Random(seed)
    first = on_machine(rng)
    assert _set_fields(_every_field(random.Random(seed), "w")) == _all_fields()
    assert on_machine(rng) == first
    assert first["retrieval"]["embedder"] == "model2vec:<machine>"
    # another embedder is behaviour, and still shows
    assert on_machine(random.Random(seed), embedder_kind="hashing:256")["retrieval"]["embedder"] == "hashing:256"
