"""Untrusted tool arguments: parse JSON and coerce each field, recording every adjustment.

Nothing here raises on model input: bad JSON or a non-object is an `ArgumentError` the tool turns into
a tool message; a field of the wrong type is coerced or dropped to its default, and the change is
recorded so that records show what the model asked for and what ran.
"""

from __future__ import annotations

import json
import math
from typing import Any


class ArgumentError(ValueError):
    """Arguments that cannot be read as a JSON object."""


def parse_arguments(arguments: str | dict | None) -> dict[str, Any]:
    if arguments is None:
        return {}
    if isinstance(arguments, dict):
        return dict(arguments)
    if isinstance(arguments, (bytes, bytearray)):
        arguments = arguments.decode("utf-8", errors="replace")
    if not isinstance(arguments, str):
        raise ArgumentError(f"arguments must be a JSON object, got {type(arguments).__name__}")
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as e:
        raise ArgumentError(f"arguments are not valid JSON ({e.msg} at position {e.pos})") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ArgumentError(f"arguments must be a JSON object, got JSON {type(value).__name__}")
    return value


class Coercer:
    """Reads fields of a parsed argument object; `notes` lists each value that was changed."""

    def __init__(self, args: dict[str, Any]) -> None:
        self.args = args
        self.notes: list[str] = []

    def _note(self, field: str, value: Any, used: Any, why: str) -> None:
        self.notes.append(f"{field}={json.dumps(value, ensure_ascii=False, default=str)[:80]} {why}; used {used!r}")

    def string(self, field: str, default: str = "") -> str:
        value = self.args.get(field)
        if value is None:
            return default
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            used = str(value)
            self._note(field, value, used, "is not a string")
            return used
        self._note(field, value, default, "is not a string")
        return default

    def integer(self, field: str, default: int) -> int:
        value = self.args.get(field)
        if value is None:
            return default
        if isinstance(value, bool):
            self._note(field, value, default, "is not an integer")
            return default
        if isinstance(value, int):
            return value
        number: float | None = None
        if isinstance(value, float):
            number = value
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                number = None
        if number is None or not math.isfinite(number):
            self._note(field, value, default, "is not an integer")
            return default
        used = int(number)
        if used != number or not isinstance(value, float):
            self._note(field, value, used, "was converted to an integer")
        return used

    def number(self, field: str, default: float) -> float:
        value = self.args.get(field)
        if value is None:
            return default
        if isinstance(value, bool):
            self._note(field, value, default, "is not a number")
            return default
        if isinstance(value, (int, float)):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                self._note(field, value, default, "is not a number")
                return default
            self._note(field, value, number, "was converted to a number")
        else:
            self._note(field, value, default, "is not a number")
            return default
        if not math.isfinite(number):
            self._note(field, value, default, "is not finite")
            return default
        return number

    def clamp(self, field: str, value: float, lo: float, hi: float):
        used = min(max(value, lo), hi)
        if used != value:
            self._note(field, value, used, f"is outside [{lo}, {hi}]")
        return used
