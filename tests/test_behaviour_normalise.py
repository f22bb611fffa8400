"""The behaviour baseline's normaliser (scripts/behaviour_baseline.py): what a machine decides is masked, what the
harness decides is kept, so the same tree checks identical in a dev venv and in CI's fresh one."""

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
