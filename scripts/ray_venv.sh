#!/usr/bin/env bash
# A second virtualenv for runs on a Ray cluster (docs/cluster.md): hydra-ray-launcher needs cloudpickle<3 while
# joblib (the `sweep` extra) needs cloudpickle>=3, so Ray lives in .venv-ray, which sees everything else of .venv
# through a .pth file (its own packages first).
# Usage: scripts/ray_venv.sh [VENV=.venv] [RAY_VENV=.venv-ray]
#        scripts/ray_venv.sh --packages [RAY_VENV=.venv-ray]   # only Ray's own packages, before .venv exists (make
#                                                              # runs this beside .venv's install; PY: the Python)
set -euo pipefail
cd "$(dirname "$0")/.."
packages() {  # $1: the Python to make the venv with, $2: the Ray venv
  [ -x "$2/bin/python" ] || "$1" -m venv "$2"
  "$2/bin/pip" install -q "hydra-ray-launcher==1.2.2" "ray[default]>=2.40,<3"
}
if [ "${1:-}" = "--packages" ]; then
  packages "${PY:-python3}" "${2:-.venv-ray}"
  exit 0
fi
venv=${1:-.venv}; ray_venv=${2:-.venv-ray}
py=$("$venv/bin/python" -c 'import sys; print(sys.base_prefix)')/bin/python3
packages "$py" "$ray_venv"   # a no-op for pip when --packages has run
# .venv's packages are seen through a .pth file, so both venvs must be one Python version.
want=$("$venv/bin/python" -c 'import sys; print(sys.version_info[:2])')
have=$("$ray_venv/bin/python" -c 'import sys; print(sys.version_info[:2])')
if [ "$want" != "$have" ]; then
  echo "ray_venv: $ray_venv is Python $have but $venv is Python $want; remove $ray_venv and run again" >&2
  exit 1
fi
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ray_site=$("$ray_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# addsitedir (not a bare path line): .venv's own .pth files (the editable install of this repo) apply too;
# appended after the Ray venv's own packages, so its cloudpickle wins.
echo "import site; site.addsitedir('$site')" > "$ray_site/zz_lme_main_venv.pth"
"$ray_venv/bin/python" -c 'import ray, hydra_plugins.hydra_ray_launcher, harness, runners; print("ray", ray.__version__)'
