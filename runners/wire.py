"""`wire:` config: the shapes of the identifiers a model sees (event ids, session id, timestamps).

The defaults are this harness's compact forms; `+experiment=trpc_repro` switches to the reference's
(UUID event ids, `<mode>-<question_id>` session ids, microsecond timestamps), which cost the model
more tokens per search response (measured in docs/reproduction.md).
"""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.data.longmemeval import EVENT_ID_STYLES, TIMESTAMP_STYLES, DataError
from harness.session.events import Session
from harness.settings import config_field

_SESSION_ID_FIELDS = {"question_id", "mode"}
_QUESTION_FIELDS = {"question", "question_date"}
_KEYS = ("event_ids", "session_id", "timestamps", "session_header", "question_template")


def _fields(template: str, key: str) -> set[str]:
    try:
        return {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as e:
        raise ValueError(f"wire.{key}: {template!r} is not a format string ({e})") from e


@dataclass(frozen=True)
class WireShape:
    """The `wire:` settings (defaults: configs/config.yaml)."""

    event_ids: str = config_field("wire", "event_ids", choices=EVENT_ID_STYLES)
    session_id_format: str = config_field("wire", "session_id")
    timestamps: str = config_field("wire", "timestamps", choices=TIMESTAMP_STYLES)
    # Dates (LongMemEval has them; the published single-session-user protocol shows none): null keeps the
    # default requests byte-identical. session_header: "{date}" line before each session's first turn;
    # question_template: the question message, with {question} and {question_date}.
    session_header: str | None = config_field("wire", "session_header")
    question_template: str | None = config_field("wire", "question_template")

    def __post_init__(self) -> None:
        if self.event_ids not in EVENT_ID_STYLES:
            raise ValueError(f"wire.event_ids: {self.event_ids!r} is not one of {list(EVENT_ID_STYLES)}")
        if self.timestamps not in TIMESTAMP_STYLES:
            raise ValueError(f"wire.timestamps: {self.timestamps!r} is not one of {list(TIMESTAMP_STYLES)}")
        fields = _fields(self.session_id_format, "session_id")
        if self.session_header is not None and _fields(self.session_header, "session_header") != {"date"}:
            raise ValueError(
                f"wire.session_header: {self.session_header!r} must contain {{date}} and no other placeholder"
            )
        if self.question_template is not None:
            qf = _fields(self.question_template, "question_template")
            if "question" not in qf or not qf <= _QUESTION_FIELDS:
                raise ValueError(
                    f"wire.question_template: {self.question_template!r} must contain {{question}} and "
                    f"no placeholder other than {sorted(_QUESTION_FIELDS)}"
                )
        if "question_id" not in fields or not fields <= _SESSION_ID_FIELDS:
            raise ValueError(
                f"wire.session_id: {self.session_id_format!r} must contain {{question_id}} and no "
                f"placeholder other than {sorted(_SESSION_ID_FIELDS)}"
            )

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> WireShape:
        cfg = dict(cfg or {})
        unknown = set(cfg) - set(_KEYS)
        if unknown:
            raise ValueError(f"wire: unknown key(s) {sorted(unknown)}; allowed: {', '.join(_KEYS)}")
        d = cls()
        opt = {k: (None if cfg.get(k) is None else str(cfg[k])) for k in ("session_header", "question_template")}
        return cls(
            event_ids=str(cfg.get("event_ids", d.event_ids)),
            session_id_format=str(cfg.get("session_id", d.session_id_format)),
            timestamps=str(cfg.get("timestamps", d.timestamps)),
            **opt,
        )

    def question(self, question: str, question_date: str) -> str:
        """The question message's text: the question itself unless `question_template` is set."""
        if self.question_template is None:
            return question
        if not question_date.strip() and "question_date" in _fields(self.question_template, "question_template"):
            raise ValueError("field 'question_date' is empty, but wire.question_template shows it")
        return self.question_template.format(question=question, question_date=question_date)

    def check_cases(self, cases: Sequence[Any], source: str) -> None:
        """DataError naming every case whose dates this shape shows but cannot use (an empty `question_date`
        under a template that shows it; a session date that does not parse where events are dated or headed):
        called on the loaded dataset, so such a case stops the run before any record, not as a failed pair."""
        dated = self.timestamps == "session" or self.session_header is not None
        shows_qdate = self.question_template is not None and "question_date" in _fields(
            self.question_template, "question_template"
        )
        problems: list[str] = []
        for c in cases:
            if shows_qdate and not str(c.question_date).strip():
                problems.append(
                    f"question_id={c.question_id}: field 'question_date' is empty, but wire.question_template shows it"
                )
            for k in range(len(c.sessions)) if dated else ():
                try:
                    c.session_epoch(k)
                except DataError as e:
                    problems.append(f"{e} (wire.timestamps={self.timestamps}, wire.session_header)")
                    break  # one per case: a file without dates would list every session
        if problems:
            more = f"; ... and {len(problems) - 10} more" if len(problems) > 10 else ""
            raise DataError(
                f"{source}: {len(problems)} case(s) lack dates this run needs: {'; '.join(problems[:10])}{more}"
            )

    def session_id(self, question_id: str, mode: str) -> str:
        return self.session_id_format.format(question_id=question_id, mode=mode)

    def case_session(self, case: Any) -> Session:
        """The case's events as one session, in this wire's shapes (run and plan build cases the same way)."""
        session = Session(id=self.session_id(case.question_id, ""), user_id=case.question_id)
        session.extend(case.events(ids=self.event_ids, timestamps=self.timestamps, session_header=self.session_header))
        return session

    def session_for(self, session: Session, mode: str) -> Session:
        """`session` under the id this mode's run uses (the events list is shared, never copied)."""
        sid = self.session_id(session.user_id, mode)
        return session if sid == session.id else dataclasses.replace(session, id=sid)
