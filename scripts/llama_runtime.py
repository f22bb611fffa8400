"""Build, install and check the embedded llama.cpp runtime (llama-cpp-python) for any x86-64 machine of our kind.

llama-cpp-python ships as source only and, left alone, compiles llama.cpp with `-march=native`: a wheel built on a
machine that advertises AVX-512 and AMX then contains tile instructions, and a machine (or hypervisor) that
advertises AMX but cannot execute it dies with a general protection fault on the first request. So the project
builds a named *profile* instead:

- `portable` (the default): the x86-64-v3 baseline, no runtime dispatch: AVX, AVX2, FMA, F16C and BMI2 on;
  AVX-512, AVX-VNNI and AMX off. Every x86-64 machine of this project's kind runs it (all have AVX2).
- `native` (explicit opt-in, `LME_LLAMA_PROFILE=native`): whatever the build machine's compiler detects, with AMX
  forced off (a guest may advertise AMX and fault on it). Faster on some machines (docs/models.md); a wheel
  built this way must not be copied to another CPU.

The built wheel is kept in `~/.cache/lme-harness/wheels/<version>-<profile>-<key>/` where `key` hashes the version,
the flags and the Python tag, so a changed flag builds a new wheel (pip's own wheel cache keys on the source only
and would hand back a wheel built with other flags: the build always runs with --no-cache-dir).

    python scripts/llama_runtime.py install      # build once (a few minutes on 2 cores), then pip install
    python scripts/llama_runtime.py check        # objdump the installed libraries: no instruction outside the profile
    python scripts/llama_runtime.py info         # the installed profile and flags (JSON)
    python scripts/llama_runtime.py check-xllamacpp   # the same scan over the prebuilt xllamacpp wheel's library

Standard library only: it runs before the project's dependencies are installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

VERSION = "0.3.36"
PROFILE_ENV = "LME_LLAMA_PROFILE"
BUILD_INFO = "lme_build.json"  # written next to the installed llama_cpp package

# Parts of llama.cpp the harness never uses; leaving them out cuts the compile time.
COMMON_FLAGS = (
    "-DLLAVA_BUILD=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
)
# A CMake file included after each project(): leaves llama.cpp's `common` library (never installed) out of the
# build, which llama-cpp-python forces on and no CMAKE_ARGS flag can turn off. Its text is part of the build key.
PROJECT_INCLUDE = Path(__file__).resolve().with_name("llama_build.cmake")
NO_AMX = ("-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF")
PROFILES: dict[str, tuple[str, ...]] = {
    "portable": (
        "-DGGML_NATIVE=OFF",
        "-DGGML_CPU_ALL_VARIANTS=OFF",
        "-DGGML_BACKEND_DL=OFF",
        "-DGGML_SSE42=ON",
        "-DGGML_AVX=ON",
        "-DGGML_AVX2=ON",
        "-DGGML_FMA=ON",
        "-DGGML_F16C=ON",
        "-DGGML_BMI2=ON",
        "-DGGML_AVX_VNNI=OFF",
        "-DGGML_AVX512=OFF",
        "-DGGML_AVX512_VBMI=OFF",
        "-DGGML_AVX512_VNNI=OFF",
        "-DGGML_AVX512_BF16=OFF",
        *NO_AMX,
    ),
    "native": ("-DGGML_NATIVE=ON", *NO_AMX),
}

# What x86-64-v3 code never contains, as objdump prints it (AT&T syntax).
_AMX = r"\b(ldtilecfg|sttilecfg|tilerelease|tilezero|tileloadd\w*|tilestored|tdp\w+)\b"
_AVX512 = (
    r"%zmm\d|%k[1-7]\b|\{1to\d+\}|\b(vpternlog\w|vperm[it]2\w+|v?p?compress\w+|v?p?expand\w+|vpro[lr]v?[dq]"
    r"|vpmovu?s?(db|dw|qb|qd|qw|wb)|vpmov[bwdq]2m|vpmovm2\w|vpmullq|vpabsq|vpm(ax|in)[su]q|vpsra[v]?q"
    r"|vrange\w+|vreduce\w+|vrndscale\w+|vscalef\w+|vgetexp\w+|vgetmant\w+|vfixupimm\w+|vfpclass\w+"
    r"|vpconflict\w|vplzcnt\w|v(insert|extract)[if](32x4|64x2|32x8|64x4)|vbroadcast[if](32x[248]|64x[24])"
    r"|vshuf[if](32x4|64x2)|valign[dq]|v?p?blendm\w+|vptestn?m\w|vcvtu\w+|vcvtt?p[sd]2u\w+"
    r"|vdpbf16ps|vcvtne2?ps2bf16|vpdpbusds?|vpdpwssds?|vpopcnt[bwdq]|vpmultishiftqb|vpermb|vpshldv?\w|vpshrdv?\w)\b"
)
FORBIDDEN: dict[str, dict[str, str]] = {
    "portable": {"AMX tile instruction": _AMX, "AVX-512 / AVX-VNNI instruction or register": _AVX512},
    "native": {"AMX tile instruction": _AMX},
}


def profile_name(name: str | None = None) -> str:
    name = name or os.environ.get(PROFILE_ENV) or "portable"
    if name not in PROFILES:
        raise SystemExit(f"llama_runtime: {PROFILE_ENV}={name!r} is not a profile; choose one of {sorted(PROFILES)}")
    return name


def cmake_args(profile: str) -> list[str]:
    return [*PROFILES[profile], *COMMON_FLAGS]


def build_cmake_args(profile: str) -> list[str]:
    """What the build is given: the profile's flags and the project include (by path: not part of the key)."""
    return [*cmake_args(profile), f"-DCMAKE_PROJECT_INCLUDE={PROJECT_INCLUDE}"]


def build_key(profile: str) -> str:
    tag = f"{sys.implementation.cache_tag}-{sysconfig.get_platform()}"
    include = hashlib.sha256(PROJECT_INCLUDE.read_bytes()).hexdigest()
    blob = json.dumps([VERSION, profile, cmake_args(profile), tag, include])
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def cache_root() -> Path:
    return Path(os.environ.get("LME_HARNESS_CACHE_DIR") or Path.home() / ".cache" / "lme-harness").expanduser()


def wheel_dir(profile: str) -> Path:
    return cache_root() / "wheels" / f"llama-cpp-python-{VERSION}-{profile}-{build_key(profile)}"


def _pip(*args: str, env: dict[str, str] | None = None) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env)


def build(profile: str) -> Path:
    """The wheel for `profile`, built once per key (a build that fails leaves no wheel behind)."""
    out = wheel_dir(profile)
    wheels = sorted(out.glob("llama_cpp_python-*.whl"))
    if wheels:
        return wheels[0]
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    env = {
        **os.environ,
        "CMAKE_ARGS": shlex.join(build_cmake_args(profile)),
        "CMAKE_BUILD_PARALLEL_LEVEL": os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2)),
    }
    print(f"llama_runtime: building llama-cpp-python {VERSION} ({profile}: {env['CMAKE_ARGS']})", flush=True)
    _pip(
        "wheel",
        "--no-deps",
        "--no-cache-dir",
        "--no-binary",
        "llama-cpp-python",
        "-w",
        str(tmp),
        f"llama-cpp-python=={VERSION}",
        env=env,
    )
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return sorted(out.glob("llama_cpp_python-*.whl"))[0]


def package_dir() -> Path | None:
    """The installed llama_cpp package folder (found without importing it: importing loads the libraries)."""
    import importlib.util

    spec = importlib.util.find_spec("llama_cpp")
    return Path(spec.origin).parent if spec and spec.origin else None


def installed_info() -> dict | None:
    pkg = package_dir()
    if pkg is None or not (pkg / BUILD_INFO).exists():
        return None
    return json.loads((pkg / BUILD_INFO).read_text())


def install(profile: str) -> dict:
    info = installed_info()
    if info and info.get("key") == build_key(profile) and info.get("version") == VERSION:
        print(f"llama_runtime: llama-cpp-python {VERSION} ({profile}) already installed", flush=True)
        return info
    wheel = build(profile)
    _pip("install", "--no-deps", "--force-reinstall", "--no-cache-dir", str(wheel))
    pkg = package_dir()
    if pkg is None:
        raise SystemExit("llama_runtime: llama_cpp is not importable after installing " + str(wheel))
    info = {
        "version": VERSION,
        "profile": profile,
        "key": build_key(profile),
        "cmake_args": cmake_args(profile),
        "wheel": str(wheel),
        "wheel_sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
    }
    (pkg / BUILD_INFO).write_text(json.dumps(info, indent=2) + "\n")
    return info


def libraries(pkg: Path | None = None) -> list[Path]:
    pkg = pkg or package_dir()
    if pkg is None:
        return []
    return sorted(p for p in (pkg / "lib").glob("*.so*") if p.is_file() and not p.is_symlink())


def scan(lib: Path, profile: str, limit: int = 5) -> dict[str, list[str]]:
    """Disassembly lines of `lib` that `profile` forbids, by kind (at most `limit` examples each)."""
    objdump = shutil.which("objdump")
    if objdump is None:
        raise SystemExit("llama_runtime: objdump not found (Debian package binutils): cannot check the build")
    patterns = {k: re.compile(v) for k, v in FORBIDDEN[profile].items()}
    found: dict[str, list[str]] = {k: [] for k in patterns}
    proc = subprocess.Popen(
        [objdump, "-d", "--no-show-raw-insn", str(lib)], stdout=subprocess.PIPE, text=True, errors="replace"
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "\t" not in line:  # labels and headers: instructions are tab-separated
            continue
        for kind, pat in patterns.items():
            if len(found[kind]) < limit and pat.search(line):
                found[kind].append(line.strip())
    if proc.wait() != 0:
        raise SystemExit(f"llama_runtime: objdump failed on {lib}")
    return {k: v for k, v in found.items() if v}


def check(profile: str | None = None) -> int:
    info = installed_info()
    if info is None:
        print(
            "llama_runtime: no llama_cpp built by this script is installed (run: python scripts/llama_runtime.py "
            "install)",
            file=sys.stderr,
        )
        return 1
    profile = profile or info["profile"]
    bad = 0
    libs = libraries()
    for lib in libs:
        for kind, lines in scan(lib, profile).items():
            bad += 1
            print(f"{lib.name}: {kind} outside the {profile} profile, e.g.:", *lines, sep="\n  ", file=sys.stderr)
    print(
        f"llama_runtime: {len(libs)} libraries checked against the {profile} profile: "
        f"{'clean' if not bad else 'NOT clean'}"
    )
    return 1 if bad or not libs else 0


def check_xllamacpp() -> int:
    """The prebuilt runtime (model.runtime=xllamacpp) is a registry wheel nobody here compiled: scan its native
    library against the portable profile, as a build of ours is scanned."""
    import importlib.util

    spec = importlib.util.find_spec("xllamacpp")
    if spec is None or not spec.submodule_search_locations:
        print("llama_runtime: xllamacpp is not installed (pip install -e '.[xllama]')", file=sys.stderr)
        return 1
    pkg = Path(next(iter(spec.submodule_search_locations)))
    libs = sorted(p for p in pkg.rglob("*.so*") if p.is_file() and not p.is_symlink())
    bad = 0
    for lib in libs:
        for kind, lines in scan(lib, "portable").items():
            bad += 1
            print(f"{lib.name}: {kind} outside the portable profile, e.g.:", *lines, sep="\n  ", file=sys.stderr)
    print(f"llama_runtime: {len(libs)} xllamacpp libraries checked against the portable profile: "
          f"{'clean' if not bad else 'NOT clean'}")  # fmt: skip
    return 1 if bad or not libs else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("command", choices=["install", "build", "check", "check-xllamacpp", "info"])
    ap.add_argument("--profile", help=f"portable (default) or native; also ${PROFILE_ENV}")
    a = ap.parse_args(argv)
    if a.command == "check":
        return check(a.profile and profile_name(a.profile))
    if a.command == "check-xllamacpp":
        return check_xllamacpp()
    if a.command == "info":
        print(json.dumps(installed_info(), indent=2))
        return 0
    profile = profile_name(a.profile)
    if a.command == "build":
        print(build(profile))
        return 0
    install(profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
