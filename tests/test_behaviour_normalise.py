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
