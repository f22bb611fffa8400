"""Prompt-processing and generation speed of llama.cpp builds on this machine (docs/models.md).

Each build is a folder holding an installed `llama_cpp` package (e.g. `pip install --no-deps --target DIR WHEEL`);
`installed` means the one in this environment. Builds are measured in alternation, each round in a fresh process,
so that background load hits every build alike; the medians are reported. Several `--model`s are measured in
alternation too, and each one's speed is also given as a ratio to the first model's (the main job's slow-host
estimate scales the 1.5B's measured figures by it: docs/quickstart.md).

    python -m research.runtime_speed --model smollm2_135m --build installed --build /tmp/llama_native --rounds 3
    python -m research.runtime_speed --model qwen25_coder_15b --model qwen25_coder_05b --build installed
    python -m research.runtime_speed --build installed --build xllamacpp --threads 1   # the prebuilt runtime beside ours

`xllamacpp` names the prebuilt runtime (model.runtime=xllamacpp), measured in process through its server API on the
same prompt tokens (tokenized by the installed llama_cpp): its prefill is one completion of 1 token with no cached
prefix, its generation a completion of `--gen-tokens` on the cached prompt (llama.cpp's own timings for the wall
speeds, this process's CPU time for the per-CPU-second ones).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

_CHILD = r"""
import json, sys, time
import llama_cpp
from llama_cpp import Llama
path, n_prompt, n_gen, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
llm = Llama(model_path=path, n_ctx=n_prompt + n_gen + 16, n_threads=threads, n_threads_batch=threads,
            n_batch=512, verbose=False, seed=0)
words = ("the user said they moved to a new city last spring and started a job at a bakery " * 200).split()
tokens = llm.tokenize(" ".join(words).encode())[:n_prompt]
c0 = time.process_time(); t0 = time.perf_counter(); llm.eval(tokens); t1 = time.perf_counter(); c1 = time.process_time()
out = []
for _ in range(n_gen):
    tok = llm.sample(temp=0.0)
    out.append(tok); llm.eval([tok])
t2 = time.perf_counter(); c2 = time.process_time()
print(json.dumps({"pp_tok_s": len(tokens) / (t1 - t0), "tg_tok_s": n_gen / (t2 - t1),
                  "pp_tok_per_cpu_s": len(tokens) / (c1 - c0), "tg_tok_per_cpu_s": n_gen / (c2 - c1),
                  "lib": llama_cpp.__file__}))
"""


_CHILD_XLLAMA = r"""
import json, sys, time
import xllamacpp
path, ids, n_gen, threads = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
p = xllamacpp.CommonParams()
p.model.path = path; p.n_ctx = len(ids) + n_gen + 16; p.n_parallel = 1
p.cpuparams.n_threads = threads; p.cpuparams_batch.n_threads = threads
srv = xllamacpp.Server(p)
def run(n_predict, cache):
    c0 = time.process_time()
    out = srv.handle_completions({"prompt": ids, "n_predict": n_predict, "temperature": 0, "cache_prompt": cache,
                                  "ignore_eos": True})
    return out["timings"], time.process_time() - c0
pp, pp_cpu = run(1, False)
tg, tg_cpu = run(n_gen, True)
print(json.dumps({"pp_tok_s": pp["prompt_n"] / pp["prompt_ms"] * 1000, "tg_tok_s": tg["predicted_n"] / tg["predicted_ms"] * 1000,
                  "pp_tok_per_cpu_s": pp["prompt_n"] / pp_cpu, "tg_tok_per_cpu_s": tg["predicted_n"] / tg_cpu,
                  "lib": xllamacpp.__file__}))
"""


def _prompt_ids(model_path: str, n_prompt: int) -> list[int]:
    from llama_cpp import Llama

    llm = Llama(model_path=model_path, vocab_only=True, verbose=False)
    words = ("the user said they moved to a new city last spring and started a job at a bakery " * 200).split()
    return llm.tokenize(" ".join(words).encode())[:n_prompt]


def measure(build: str, model_path: str, n_prompt: int, n_gen: int, threads: int) -> dict:
    if build == "xllamacpp":
        ids = json.dumps(_prompt_ids(model_path, n_prompt))
        out = subprocess.run(
            [sys.executable, "-c", _CHILD_XLLAMA, model_path, ids, str(n_gen), str(threads)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return json.loads(out.stdout.strip().splitlines()[-1])
    env = dict(os.environ)
    if build != "installed":
        env["PYTHONPATH"] = os.pathsep.join([build, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, model_path, str(n_prompt), str(n_gen), str(threads)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    from harness.llm.models import load_spec, pull

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", action="append", help="a model name (repeatable); default qwen25_coder_15b")
    ap.add_argument(
        "--build", action="append", required=True, help="'installed', 'xllamacpp' or a folder holding llama_cpp"
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    a = ap.parse_args(argv)
    models = a.model or ["qwen25_coder_15b"]
    paths = {m: str(pull(load_spec(m))) for m in models}
    runs: dict[tuple[str, str], list[dict]] = {(m, b): [] for m in models for b in a.build}
    for _ in range(a.rounds):
        for m in models:
            for b in a.build:
                runs[(m, b)].append(measure(b, paths[m], a.prompt_tokens, a.gen_tokens, a.threads))
    rows = {
        key: {
            "lib": Path(r[0]["lib"]).parent.as_posix(),
            "pp_tok_s": round(statistics.median(x["pp_tok_s"] for x in r), 1),
            "tg_tok_s": round(statistics.median(x["tg_tok_s"] for x in r), 1),
            # tokens per CPU-second of this process: with --threads 1, nearly unaffected by other load on the machine
            "pp_tok_per_cpu_s": round(statistics.median(x["pp_tok_per_cpu_s"] for x in r), 1),
            "tg_tok_per_cpu_s": round(statistics.median(x["tg_tok_per_cpu_s"] for x in r), 1),
        }
        for key, r in runs.items()
    }
    for (_m, b), row in rows.items():  # speed relative to the first model on the same build
        first = rows[(models[0], b)]
        row["pp_ratio"] = round(row["pp_tok_s"] / first["pp_tok_s"], 2)
        row["tg_ratio"] = round(row["tg_tok_s"] / first["tg_tok_s"], 2)
        row["pp_cpu_ratio"] = round(row["pp_tok_per_cpu_s"] / first["pp_tok_per_cpu_s"], 2)
        row["tg_cpu_ratio"] = round(row["tg_tok_per_cpu_s"] / first["tg_tok_per_cpu_s"], 2)
    print(
        json.dumps(
            {
                "models": models,
                "threads": a.threads,
                "rounds": a.rounds,
                "prompt_tokens": a.prompt_tokens,
                "gen_tokens": a.gen_tokens,
                "results": {m: {b: rows[(m, b)] for b in a.build} for m in models},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
