"""What the reference's identifier shapes cost the model: session_search response and summary request sizes.

    python -m research.trpc_wire_size                          # the 70 `_s` cases, presets trpc_parity and default
    python -m research.trpc_wire_size --limit 10 --presets bm25 --out runs/trpc_wire_size
    python -m research.trpc_wire_size --presets                # the summary requests only

For each case and wire shape (runners/wire.py) the case is seeded, every event put behind the summary
(as summary_ondemand sees it) and searched with the model-like call {"query": <question>, "scope":
"current_hidden"}, as docs/retrieval.md measures; the response is counted in o200k tokens. The shapes are
the harness default, each reference switch alone, and all three (= +experiment=trpc_repro). Summary
requests are counted for the two reference prompts (trpc_default, trpc_detailed); the wire does not enter
them (the conversation text has no ids or times). Offline: static embedder, no model call.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from harness.config_files import CONFIG_DIR

SHAPES = {
    "harness default (e0384, lme-<qid>, ms)": {},
    "+ UUID event ids": {"event_ids": "uuid"},
    "+ session id <mode>-<qid>": {"session_id": "{mode}-{question_id}"},
    "+ microsecond timestamps": {"timestamps": "us"},
    "reference (all three: trpc_repro)": {
        "event_ids": "uuid",
        "session_id": "{mode}-{question_id}",
        "timestamps": "us",
    },
}


def search_tokens(preset: str, cases, counter) -> dict[str, list[int]]:
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from commands.retrieval_eval import preset_config
    from harness.session.boundary import SummaryBoundary
    from runners.wire import WireShape

    retriever = instantiate(OmegaConf.merge(preset_config(preset, OmegaConf.create({})), {"store": None}))
    out: dict[str, list[int]] = {}
    for label, shape in SHAPES.items():
        wire = WireShape.from_config(shape)
        sizes = []
        for c in cases:
            from harness.session.events import Session

            events = c.events(ids=wire.event_ids, timestamps=wire.timestamps)
            session = Session(
                id=wire.session_id(c.question_id, "summary_ondemand"), user_id=c.question_id, events=list(events)
            )
            last = events[-1]
            boundary = SummaryBoundary(version=1, filter_key="", cutoff_at=last.timestamp, last_event_id=last.id)
            tools = retriever.tools(session, boundary=boundary)
            resp = tools.call("session_search", json.dumps({"query": c.question, "scope": "current_hidden"}))
            sizes.append(counter.count(resp.content))
        out[label] = sizes
    return out


def summary_tokens(cases, counter) -> dict[str, list[int]]:
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from harness.session.summary import drop_leading_non_user, format_conversation

    out: dict[str, list[int]] = {}
    for name in ("trpc_default", "trpc_detailed"):
        prompt = instantiate(OmegaConf.load(CONFIG_DIR / "prompt" / f"{name}.yaml"))
        # the summarizer's input: the events from the first user turn on (as the reference's session holds them)
        convs = (format_conversation(drop_leading_non_user(c.events())) for c in cases)
        out[name] = [counter.count_messages(prompt.render(text)) for text in convs]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="*", default=["trpc_parity", "default"], help="none: summary requests only")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None, help="also write the numbers as JSON here")
    args = ap.parse_args(argv)

    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from harness.session.tokens import o200k_counter

    ds = OmegaConf.load(CONFIG_DIR / "dataset" / "s.yaml")
    if args.limit:
        ds.limit = args.limit
    cases, _ = instantiate(ds).load()
    counter = o200k_counter()
    result: dict[str, object] = {"cases": len(cases)}
    print(f"{len(cases)} cases; o200k tokens of one session_search response (mean / max), Δ vs the harness default\n")
    for preset in args.presets:
        sizes = search_tokens(preset, cases, counter)
        result[preset] = sizes
        base = statistics.mean(next(iter(sizes.values())))
        print(f"| {preset}: wire shape | mean | max | Δ mean |\n|---|---|---|---|")
        for label, s in sizes.items():
            m = statistics.mean(s)
            print(f"| {label} | {m:,.0f} | {max(s):,} | {m - base:+,.0f} |")
        print()
    summ = summary_tokens(cases, counter)
    result["summary_request"] = summ
    print("| summary request (o200k, all messages) | mean | max |\n|---|---|---|")
    for name, s in summ.items():
        print(f"| {name} | {statistics.mean(s):,.0f} | {max(s):,} |")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "trpc_wire_size.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
