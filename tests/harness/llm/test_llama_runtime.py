"""The embedded llama.cpp runtime is portable: no instruction outside the x86-64-v3 baseline in its libraries.

The check runs on every machine, including ones whose CPU would happily execute AVX-512 or AMX code: a build that
contains such code crashes elsewhere (a guest that advertises AMX but faults on `ldtilecfg`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

sys.path.insert(0, str(REPO / "scripts"))
import llama_runtime as rt  # noqa: E402

needs_tools = pytest.mark.skipif(not (shutil.which("objdump") and shutil.which("gcc")), reason="needs gcc and objdump")


def _shared_lib(tmp_path: Path, name: str, body: str, flags: list[str]) -> Path:
    src = tmp_path / f"{name}.c"
    src.write_text(body)
    out = tmp_path / f"lib{name}.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", *flags, "-o", str(out), str(src)], check=True)
    return out


AVX2_CODE = """
#include <immintrin.h>
__m256 f(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
"""
AVX512_CODE = """
#include <immintrin.h>
__m512 f(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
"""
AVX512VL_CODE = """
#include <immintrin.h>
__m256i f(__m256i a, __m256i b, __m256i c) { return _mm256_ternarylogic_epi32(a, b, c, 0x96); }
"""
AMX_CODE = """
void f(const void *cfg) { __asm__ volatile("ldtilecfg (%0)" :: "r"(cfg)); __asm__ volatile("tilerelease"); }
"""


@pytest.mark.process
@needs_tools
def test_scan_accepts_x86_64_v3_code(tmp_path):
    lib = _shared_lib(tmp_path, "v3", AVX2_CODE, ["-mavx2", "-mfma"])
    assert rt.scan(lib, "portable") == {}


@pytest.mark.process
@needs_tools
@pytest.mark.parametrize(
    "name,code,flags,kind",
    [
        ("zmm", AVX512_CODE, ["-mavx512f"], "AVX-512 / AVX-VNNI instruction or register"),
        ("evex_ymm", AVX512VL_CODE, ["-mavx512f", "-mavx512vl"], "AVX-512 / AVX-VNNI instruction or register"),
        ("amx", AMX_CODE, ["-mamx-tile"], "AMX tile instruction"),
    ],
)
def test_scan_flags_code_outside_the_baseline(tmp_path, name, code, flags, kind):
    lib = _shared_lib(tmp_path, name, code, flags)
    found = rt.scan(lib, "portable")
    assert kind in found, found


@pytest.mark.process
@needs_tools
def test_native_profile_still_forbids_amx(tmp_path):
    lib = _shared_lib(tmp_path, "amx", AMX_CODE, ["-mamx-tile"])
    assert "AMX tile instruction" in rt.scan(lib, "native")
    assert rt.scan(_shared_lib(tmp_path, "zmm", AVX512_CODE, ["-mavx512f"]), "native") == {}


def test_portable_profile_is_the_default_and_pins_the_baseline(monkeypatch):
    monkeypatch.delenv(rt.PROFILE_ENV, raising=False)
    assert rt.profile_name() == "portable"
    args = rt.cmake_args("portable")
    for flag in (
        "-DGGML_NATIVE=OFF",
        "-DGGML_AVX2=ON",
        "-DGGML_FMA=ON",
        "-DGGML_F16C=ON",
        "-DGGML_BMI2=ON",
        "-DGGML_AVX512=OFF",
        "-DGGML_AMX_TILE=OFF",
        "-DGGML_AMX_INT8=OFF",
        "-DGGML_AVX_VNNI=OFF",
    ):
        assert flag in args
    assert not any(a.startswith("-DGGML_NATIVE=ON") for a in args)
    with pytest.raises(SystemExit, match="not a profile"):
        rt.profile_name("fastest")


def test_a_changed_flag_gets_its_own_wheel_folder(monkeypatch):
    before = rt.wheel_dir("portable")
    monkeypatch.setitem(rt.PROFILES, "portable", (*rt.PROFILES["portable"], "-DGGML_LTO=ON"))
    assert rt.wheel_dir("portable") != before
    assert rt.wheel_dir("native") != before


def test_the_build_leaves_out_the_uninstalled_common_library(monkeypatch, tmp_path):
    """The project include forces LLAMA_BUILD_COMMON off in llama.cpp's project; its text is part of the key."""
    include = rt.PROJECT_INCLUDE.read_text()
    assert 'PROJECT_NAME STREQUAL "llama.cpp"' in include
    assert "set(LLAMA_BUILD_COMMON OFF CACHE BOOL" in include and "FORCE)" in include
    assert f"-DCMAKE_PROJECT_INCLUDE={rt.PROJECT_INCLUDE}" in rt.build_cmake_args("portable")
    before = rt.wheel_dir("portable")
    changed = tmp_path / "llama_build.cmake"
    changed.write_text(include + "# changed\n")
    monkeypatch.setattr(rt, "PROJECT_INCLUDE", changed)
    assert rt.wheel_dir("portable") != before


def _required(flag: str) -> bool:
    """A required-in-CI check fails where `flag` (set by .ci/run) or CI is set, instead of skipping."""
    return os.environ.get(flag) == "1" or os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.mark.process
@needs_tools
def test_installed_runtime_is_the_portable_build_and_is_clean():
    """The compiled runtime (opt-in since issue 21: `make runtime-compiled`), where installed, contains nothing outside
    the portable baseline. Not installed by `make test`/.ci/run; LME_REQUIRE_COMPILED_RUNTIME=1 makes its absence fail."""
    if rt.package_dir() is None:
        if os.environ.get("LME_REQUIRE_COMPILED_RUNTIME") == "1":
            pytest.fail("LME_REQUIRE_COMPILED_RUNTIME=1 but llama_cpp is not installed (make runtime-compiled)")
        pytest.skip("the compiled llama-cpp-python runtime is not installed (opt-in: make runtime-compiled)")
    info = rt.installed_info()
    assert info is not None, "llama_cpp was not installed by scripts/llama_runtime.py (its build flags are unknown)"
    if info["profile"] != "portable":
        pytest.skip(f"opt-in {info['profile']} build installed: only portable builds are checked against x86-64-v3")
    libs = rt.libraries()
    assert any(p.name.startswith("libggml-cpu") for p in libs), libs
    problems = {lib.name: found for lib in libs if (found := rt.scan(lib, "portable"))}
    assert problems == {}, problems


@pytest.mark.process
def test_prebuilt_xllamacpp_runtime_is_clean():
    """The prebuilt runtime every embedded model runs on by default (model.runtime=xllamacpp) is scanned like a build
    of ours. Needs only objdump; required where .ci/run sets LME_REQUIRE_XLLAMACPP=1 (or CI is set)."""
    import importlib.util

    required = _required("LME_REQUIRE_XLLAMACPP")
    missing = []
    if not shutil.which("objdump"):
        missing.append("objdump (Debian package binutils)")
    if importlib.util.find_spec("xllamacpp") is None:
        missing.append("xllamacpp (make test installs the xllama extra)")
    if missing:
        if required:
            pytest.fail(f"LME_REQUIRE_XLLAMACPP=1 or CI set but missing: {', '.join(missing)}")
        pytest.skip(f"missing: {', '.join(missing)}")
    assert rt.check_xllamacpp() == 0


def _make_target(name: str) -> str:
    text = (REPO / "Makefile").read_text()
    return text.split(f"\n{name}:", 1)[1].split("\n\n", 1)[0]


def test_make_test_and_ci_never_compile():
    """Issue 21: `make test`'s setup and .ci/run install no source-only runtime; the compile is one opt-in target."""
    root = REPO
    for target in ("$(STAMP)", "$(BENCH_STAMP)", "test", "lint", "gate", "gate-baseline", "behaviour"):
        body = _make_target(target)
        assert "llama_runtime.py" not in body and "runtime-compiled" not in body, target
        assert "[local" not in body and ",local" not in body, target  # the llama-cpp-python extra
    assert "llama_runtime.py install" in _make_target("runtime-compiled")
    ci = "\n".join(line.split("#", 1)[0] for line in (root / ".ci" / "run").read_text().splitlines())  # commands only
    assert "runtime-compiled" not in ci and "llama_runtime.py" not in ci
    assert "LME_REQUIRE_XLLAMACPP=1" in ci  # the prebuilt runtime's objdump scan cannot be skipped in CI


def test_every_embedded_model_defaults_to_the_prebuilt_runtime():
    from harness.llm.local_server import xllama_server_args
    from harness.llm.models import ModelSpec, available_models, load_spec

    local = available_models(kind="local")
    assert set(local) >= {"smollm2_135m", "qwen25_coder_05b", "qwen25_coder_15b"}
    for name in local:
        spec = load_spec(name)
        assert spec.runtime == "xllamacpp", name
        xllama_server_args(spec, 1, 1)  # its chat format is one the prebuilt runtime serves (raises otherwise)
    bare = ModelSpec.from_config({"name": "m", "kind": "local", "model": "m", "file": "f", "sha256": "x"})
    assert bare.runtime == "xllamacpp"
    assert load_spec("smollm2_135m", {"runtime": "llama-cpp-python"}).runtime == "llama-cpp-python"  # the opt-in
