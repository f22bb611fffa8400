"""mem0 offline on the embedded model: ingest and retrieve the smallest oracle cases, timed (docs/memory-systems.md).

    python -m research.mem0_offline_probe                                   # 2 smallest oracle cases, 0.5B model
    python -m research.mem0_offline_probe --model qwen25_coder_15b --cases 3 --n-ctx 16384

Needs the `memory` extra (mem0ai). mem0's extraction system prompt alone is ~7.7k cl100k tokens, so the server's
n_ctx must be raised above the models' default 8192 (--n-ctx). Per case: ingest wall seconds, mem0's LLM calls
and tokens, items retrieved for the question, and whether one of them comes from an evidence session. The
server's measured tokens/s (prompt, generation) close the output. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

from harness.data.longmemeval import find_local, parse_cases, read_json_bytes
from harness.llm.client import LLMClient
from harness.llm.local_server import LlamaServer
from harness.llm.models import load_spec, pull
from harness.memory.mem0_provider import Mem0Provider
from harness.memory.provider import MemorySession, MemoryTurn, iso_date
from harness.retrieval.embedders import StaticEmbedder


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen25_coder_05b")
    ap.add_argument("--n-ctx", type=int, default=16384)
    ap.add_argument("--cases", type=int, default=2)
    ap.add_argument("--turns-per-add", type=int, default=2)
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--no-json-mode", action="store_true", help="drop mem0's response_format (no JSON grammar)")
    ap.add_argument("--data", default="longmemeval_oracle.json.gz")
    ap.add_argument(
        "--embedder", default=str(Path("~/.cache/lme-harness/models/m2v-minilm-l6-256").expanduser())
    )  # the default retriever's static model (python -m harness.retrieval.distill builds it)
    args = ap.parse_args(argv)

    path = find_local(args.data)
    if path is None:
        sys.exit(f"{args.data} not found (LME_DATA_DIR or ../shared/data/longmemeval)")
    cases = sorted(parse_cases(read_json_bytes(path), str(path)), key=lambda c: (c.n_turns, c.question_id))
    cases = cases[: args.cases]
    spec = load_spec(args.model, {"n_ctx": args.n_ctx})
    pull(spec)
    out: dict = {
        "command": "python -m research.mem0_offline_probe " + " ".join(argv if argv is not None else sys.argv[1:]),
        "cpu": platform.processor() or platform.machine(),
        "model": spec.name,
        "n_ctx": args.n_ctx,
        "turns_per_add": args.turns_per_add,
        "json_mode": not args.no_json_mode,
        "cases": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        server = LlamaServer(spec, log_path=Path(tmp) / "server.log", n_threads=args.threads, verify_model=False)
        t0 = time.perf_counter()
        server.start()
        out["server_load_s"] = round(time.perf_counter() - t0, 1)
        try:
            client = LLMClient(base_url=server.base_url, model=spec.model, timeout_s=1800, max_retries=0)
            provider = Mem0Provider(
                StaticEmbedder(args.embedder),
                client,
                turns_per_add=args.turns_per_add,
                json_mode=not args.no_json_mode,
                generation={"temperature": 0, "max_tokens": args.max_tokens},
            )
            out["mem0"] = provider.capabilities().version
            for c in cases:
                sessions = [
                    MemorySession(sid, iso_date(d), tuple(MemoryTurn(t.role, t.content) for t in turns))
                    for sid, d, turns in zip(c.session_ids, c.session_dates, c.sessions, strict=True)
                ]
                provider.setup(c.question_id)
                t1 = time.perf_counter()
                row: dict = {"question_id": c.question_id, "type": c.question_type, "turns": c.n_turns}
                try:
                    ing = provider.ingest(c.question_id, sessions)
                    row["ingest_s"] = round(time.perf_counter() - t1, 1)
                    row["ingest_usage"] = vars(ing.usage)
                    got = provider.retrieve(c.question_id, c.question, args.top_k, iso_date(c.question_date))
                    row["items"] = [i.text for i in got.items]
                    row["evidence_session_retrieved"] = any(
                        i.provenance and i.provenance.session_id in c.answer_session_ids for i in got.items
                    )
                except Exception as e:  # a probe reports what failed and goes on
                    row["error"] = f"{type(e).__name__}: {e}"[:600]
                    row["ingest_s"] = round(time.perf_counter() - t1, 1)
                provider.teardown(c.question_id)
                out["cases"].append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
            out["server_perf"] = server.perf()
        finally:
            server.stop()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
