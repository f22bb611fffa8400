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
