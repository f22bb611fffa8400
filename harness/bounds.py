"""What one record may cost on disk: model replies and other long texts are cut, visibly, before writing.

A 5 MB model reply would otherwise be copied into the prediction, each call's content, the final messages
and the judge's details (47 MB for one record), and from there into every report. Scores are computed on
the full reply first; only what is written is bounded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger(__name__)

DEFAULT_MAX_REPLY_CHARS = 50_000  # an answer of the reference settings (384 tokens) is ~2k characters
DEFAULT_MAX_FIELD_CHARS = 200_000  # any other text (a turn in final_messages, a tool result, a summary)


@dataclass(frozen=True)
class RecordBounds:
    max_reply_chars: int = DEFAULT_MAX_REPLY_CHARS
    max_field_chars: int = DEFAULT_MAX_FIELD_CHARS

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> RecordBounds:  # a run's config, or run.json's copy
        run = cfg.get("run") or {}
        return cls(
            int(run.get("max_reply_chars") or DEFAULT_MAX_REPLY_CHARS),
            int(run.get("max_record_field_chars") or DEFAULT_MAX_FIELD_CHARS),
        )


def cut_note(removed: int, setting: str) -> str:
    return f"\n[... {removed} more characters cut from the record: {setting}]"


def cut_text(value: str, limit: int, setting: str) -> str:
    """`value` cut to `limit` characters with a note naming `setting` (e.g. run.max_reply_chars); as is if it fits."""
    return value if len(value) <= limit else value[:limit] + cut_note(len(value) - limit, f"{setting}={limit}")


def _is_reply(path: str) -> bool:
    """Model output: the prediction and the content of every recorded call (answer, summary, judge)."""
    return path == "prediction" or (path.endswith(".content") and ".calls[" in f".{path}")


def bound_record(rec: dict[str, Any], bounds: RecordBounds) -> dict[str, Any]:
    """`rec` with every string over its bound cut (with a note saying so). When anything was cut, the record
    gets `truncated: true` and `truncated_fields: {path: original length}`, and a warning is logged."""
    cut: dict[str, int] = {}

    def walk(value: Any, path: str) -> Any:
        if isinstance(value, str):
            reply = _is_reply(path)
            limit = bounds.max_reply_chars if reply else bounds.max_field_chars
            if len(value) <= limit:
                return value
            cut[path] = len(value)
            return cut_text(value, limit, "run.max_reply_chars" if reply else "run.max_record_field_chars")
        if isinstance(value, dict):
            return {k: walk(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return value

    out = walk(rec, "")
    if cut:
        out["truncated"] = True
        out["truncated_fields"] = cut
        log.warning(
            "%s / %s: record fields over their bound were cut: %s",
            rec.get("question_id"),
            rec.get("mode"),
            ", ".join(f"{p} ({n} chars)" for p, n in cut.items()),
        )
    return out
