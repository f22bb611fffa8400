#!/usr/bin/env bash
# A second virtualenv for runs on a Ray cluster (docs/cluster.md): hydra-ray-launcher needs cloudpickle<3 while
# joblib (the `sweep` extra) needs cloudpickle>=3, so Ray lives in .venv-ray, which sees everything else of .venv
# through a .pth file (its own packages first). Usage: scripts/ray_venv.sh [VENV=.venv] [RAY_VENV=.venv-ray]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv}; ray_venv=${2:-.venv-ray}
py=$("$venv/bin/python" -c 'import sys; print(sys.base_prefix)')/bin/python3
[ -x "$ray_venv/bin/python" ] || "$py" -m venv "$ray_venv"
"$ray_venv/bin/pip" install -q "hydra-ray-launcher==1.2.2" "ray[default]>=2.40,<3"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ray_site=$("$ray_venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# addsitedir (not a bare path line): .venv's own .pth files (the editable install of this repo) apply too;
# appended after the Ray venv's own packages, so its cloudpickle wins.
echo "import site; site.addsitedir('$site')" > "$ray_site/zz_lme_main_venv.pth"
"$ray_venv/bin/python" -c 'import ray, hydra_plugins.hydra_ray_launcher, harness, runners; print("ray", ray.__version__)'
