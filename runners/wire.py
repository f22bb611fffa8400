"""`wire:` config: the shapes of the identifiers a model sees (event ids, session id, timestamps).

The defaults are this harness's compact forms; `+experiment=trpc_repro` switches to the reference's
(UUID event ids, `<mode>-<question_id>` session ids, microsecond timestamps), which cost the model
more tokens per search response (measured in docs/reproduction.md).
"""
from __future__ import annotations

import dataclasses
import string
from dataclasses import dataclass
from typing import Any, Mapping

from harness.data.longmemeval import EVENT_ID_STYLES, TIMESTAMP_STYLES
from harness.session.events import Session

_SESSION_ID_FIELDS = {"question_id", "mode"}


@dataclass(frozen=True)
class WireShape:
    event_ids: str = "sequential"
    session_id_format: str = "lme-{question_id}"
    timestamps: str = "ms"

    def __post_init__(self) -> None:
        if self.event_ids not in EVENT_ID_STYLES:
            raise ValueError(f"wire.event_ids: {self.event_ids!r} is not one of {list(EVENT_ID_STYLES)}")
        if self.timestamps not in TIMESTAMP_STYLES:
            raise ValueError(f"wire.timestamps: {self.timestamps!r} is not one of {list(TIMESTAMP_STYLES)}")
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(self.session_id_format) if f is not None}
        except ValueError as e:
            raise ValueError(f"wire.session_id: {self.session_id_format!r} is not a format string ({e})") from e
        if "question_id" not in fields or not fields <= _SESSION_ID_FIELDS:
            raise ValueError(f"wire.session_id: {self.session_id_format!r} must contain {{question_id}} and no "
                             f"placeholder other than {sorted(_SESSION_ID_FIELDS)}")

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> "WireShape":
        cfg = dict(cfg or {})
        unknown = set(cfg) - {"event_ids", "session_id", "timestamps"}
        if unknown:
            raise ValueError(f"wire: unknown key(s) {sorted(unknown)}; allowed: event_ids, session_id, timestamps")
        d = cls()
        return cls(event_ids=str(cfg.get("event_ids", d.event_ids)),
                   session_id_format=str(cfg.get("session_id", d.session_id_format)),
                   timestamps=str(cfg.get("timestamps", d.timestamps)))

    def session_id(self, question_id: str, mode: str) -> str:
        return self.session_id_format.format(question_id=question_id, mode=mode)

    def session_for(self, session: Session, mode: str) -> Session:
        """`session` under the id this mode's run uses (the events list is shared, never copied)."""
        sid = self.session_id(session.user_id, mode)
        return session if sid == session.id else dataclasses.replace(session, id=sid)
