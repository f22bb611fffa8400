"""Parse a JSON array of objects one element at a time, from its UTF-8 bytes.

`json.loads(bytes)` first decodes the whole file into one str, and a str holding a single character above
U+FFFF (an emoji in one turn) stores every character in 4 bytes: the 500-question `_s` file (~250 MB) became a
~1 GB transient str beside the bytes and the parsed rows. Here each element is decoded and parsed on its own,
so the transient is one question. Anything unusual (not UTF-8, not an array of objects, a syntax error)
returns None and the caller parses the whole file as before, keeping its exact error messages.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Any

# A JSON string (unrolled: fast in `re`) or a bracket; the scan only needs strings to skip their brackets.
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)
_OPEN, _CLOSE = frozenset(b"[{"), frozenset(b"]}")
_WS = b" \t\r\n"


def array_of_objects(data: bytes) -> list[Any] | None:
    """The elements of `data` (a top-level JSON array of objects, UTF-8), or None to parse it whole."""
    start = len(data) - len(data.lstrip(_WS))
    if data[start : start + 1] != b"[" or data.startswith(codecs.BOM_UTF8):
        return None
    view = memoryview(data)
    rows: list[Any] = []
    depth, begin, prev_end = 0, -1, start + 1
    try:
        for m in _TOKEN.finditer(data, start):
            c = data[m.start()]
            if c == 0x22:  # a string
                if depth == 1:
                    return None  # an array element that is not an object
                continue
            if c in _OPEN:
                depth += 1
                if depth == 2:
                    if c != 0x7B:
                        return None
                    gap = data[prev_end : m.start()].strip(_WS)
                    if gap != (b"," if rows else b""):
                        return None
                    begin = m.start()
            elif c in _CLOSE:
                depth -= 1
                if depth == 1:
                    # Decoded straight from the buffer (no bytes copy), parsed, and the str dropped.
                    rows.append(json.loads(codecs.utf_8_decode(view[begin : m.end()], "strict", True)[0]))
                    prev_end = m.end()
                elif depth == 0:
                    ok = (
                        c == 0x5D and data[prev_end : m.start()].strip(_WS) == b"" and data[m.end() :].strip(_WS) == b""
                    )
                    return rows if ok else None
                elif depth < 0:
                    return None
    except (ValueError, UnicodeDecodeError, RecursionError):  # JSONDecodeError is a ValueError
        return None
    finally:
        view.release()
    return None
