"""Does a llama.cpp build compute on this CPU? A tiny random-weight llama model, evaluated end to end.

Real model files are 98 MB and up; this probe needs none: it writes a 2-layer llama-architecture GGUF with random
weights (Q4_1 matrices, the smoke model's quantisation, and Q8_0), then prefills a prompt and generates tokens with
the `llama_cpp` it imports, so the CPU kernels of the build really run. Used to check a build on another machine
(docs/models.md), where carrying a real model is not possible.

    pip install gguf                                   # only to write the model
    python -m research.portability_probe write /tmp/tiny.gguf
    python -m research.portability_probe run /tmp/tiny.gguf      # JSON: cpu flags, system info, tok/s
"""

from __future__ import annotations

import json
import sys
import time

VOCAB_WORDS = 200
DIM, FF, LAYERS, HEADS = 256, 512, 2, 4


def write(path: str, seed: int = 0) -> None:
    import gguf
    import numpy as np

    rng = np.random.default_rng(seed)
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + [f"▁w{i}" for i in range(VOCAB_WORDS)]
    types = (
        [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
        + [gguf.TokenType.BYTE] * 256
        + [gguf.TokenType.NORMAL] * VOCAB_WORDS
    )
    vocab = len(tokens)
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(2048)
    w.add_embedding_length(DIM)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FF)
    w.add_head_count(HEADS)
    w.add_head_count_kv(HEADS)
    w.add_rope_dimension_count(DIM // HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 259 + [-float(i) for i in range(VOCAB_WORDS)])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)

    def mat(rows: int, cols: int, qtype):
        data = (rng.standard_normal((rows, cols)) * 0.05).astype(np.float32)
        return gguf.quants.quantize(data, qtype), qtype

    def add(name: str, arr_q) -> None:
        arr, qtype = arr_q
        w.add_tensor(name, arr, raw_dtype=qtype)

    q41, q80 = gguf.GGMLQuantizationType.Q4_1, gguf.GGMLQuantizationType.Q8_0
    ones = np.ones(DIM, dtype=np.float32)
    w.add_tensor("token_embd.weight", (rng.standard_normal((vocab, DIM)) * 0.05).astype(np.float32))
    w.add_tensor("output_norm.weight", ones)
    add("output.weight", mat(vocab, DIM, q80))
    for i in range(LAYERS):
        w.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        for part in ("q", "k", "v", "output"):
            add(f"blk.{i}.attn_{part}.weight", mat(DIM, DIM, q41))
        add(f"blk.{i}.ffn_gate.weight", mat(FF, DIM, q41))
        add(f"blk.{i}.ffn_up.weight", mat(FF, DIM, q41))
        add(f"blk.{i}.ffn_down.weight", mat(DIM, FF, q80))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def cpu_flags() -> list[str]:
    wanted = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")
    try:
        flags = next(ln for ln in open("/proc/cpuinfo") if ln.startswith("flags")).split(":")[1].split()
        model = next(ln for ln in open("/proc/cpuinfo") if ln.startswith("model name")).split(":")[1].strip()
    except (OSError, StopIteration):
        return []
    return [model] + [f for f in wanted if f in flags]


def run(path: str, n_prompt: int = 256, n_gen: int = 64, threads: int | None = None) -> dict:
    import os

    import llama_cpp
    from llama_cpp import Llama

    threads = threads or min(8, len(os.sched_getaffinity(0)))
    llm = Llama(
        model_path=path, n_ctx=n_prompt + n_gen + 8, n_threads=threads, n_threads_batch=threads, verbose=False, seed=0
    )
    prompt = [1] + [259 + (i * 7) % VOCAB_WORDS for i in range(n_prompt - 1)]
    t0 = time.perf_counter()
    llm.eval(prompt)
    t1 = time.perf_counter()
    out = []
    for _ in range(n_gen):
        tok = llm.sample(temp=0.0)
        out.append(int(tok))
        llm.eval([tok])
    t2 = time.perf_counter()
    return {
        "cpu": cpu_flags(),
        "lib": llama_cpp.__file__,
        "threads": threads,
        "system_info": llama_cpp.llama_print_system_info().decode(errors="replace").strip(),
        "pp_tok_s": round(n_prompt / (t1 - t0), 1),
        "tg_tok_s": round(n_gen / (t2 - t1), 1),
        "generated": out[:16],
    }


if __name__ == "__main__":
    cmd, target = sys.argv[1], sys.argv[2]
    if cmd == "write":
        write(target)
    else:
        print(json.dumps(run(target)))
