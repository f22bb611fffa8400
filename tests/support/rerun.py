"""Comparing the records of two runs of the same inputs: the fields that may differ, and a way to drop them."""

from __future__ import annotations

# Record fields that legitimately differ when the same inputs run again: wall times and cache flags.
# A cached re-run replays model latencies (latency_s, generation_ms), so those stay comparable there.
CACHED_RERUN_VOLATILE = (
    "cached",
    "cache_hits",
    "wall_ms",
    "build_ms",
    "query_ms",
    "latency_ms",
    "query_ms_reference",
    "append_embed_ms",
)  # local embedders: wall time
RERUN_VOLATILE = CACHED_RERUN_VOLATILE + ("latency_s", "generation_ms", "model_ms")


def without_keys(obj, keys):
    """`obj` (records, nested) with every dict entry named in `keys` removed."""
    if isinstance(obj, dict):
        return {k: without_keys(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [without_keys(v, keys) for v in obj]
    return obj
