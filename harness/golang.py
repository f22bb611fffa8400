"""Go standard-library text semantics that the reference's wire and scoring depend on, where Python differs.

The reference (trpc-agent-go and its benchmark) is Go; each helper names the Go function it mirrors. The
expected values in tests/fixtures/go/semantics.json were printed by tests/fixtures/go/semantics.go.
"""

from __future__ import annotations

import json
import re
from json.decoder import scanstring  # type: ignore[attr-defined]  # the decoder's own string scanner (C)
from typing import Any

# Go's unicode.IsSpace; Python's str.isspace additionally accepts U+001C..U+001F.
GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"

# Go's regexp `\s` (RE2): ASCII space, \t, \n, \f, \r; not \v, which Python's ASCII `\s` includes.
GO_RE_SPACE = r"[\t\n\f\r ]"

# Case folding in Go's `(?i)`: an ASCII letter also matches the other members of its simple-fold orbit,
# which leaves ASCII only for k (KELVIN SIGN) and s (LATIN SMALL LETTER LONG S). Python's ASCII-only
# IGNORECASE folds neither; its Unicode IGNORECASE also folds U+0130/U+0131 into i, which Go does not.
_FOLD_EXTRA = {"k": "\u212a", "s": "\u017f"}

# encoding/json's maximum nesting depth (arrays and objects together); deeper input is a syntax error.
GO_JSON_MAX_DEPTH = 10_000


def go_trim_space(text: str) -> str:
    """Go `strings.TrimSpace`."""
    return text.strip(GO_SPACE)


def go_lower(text: str) -> str:
    """Go `strings.ToLower`: per-character simple lowercase mapping."""
    if "Σ" not in text and "\u0130" not in text:
        return text.lower()  # identical to the per-character mapping for every other string
    return "".join("i" if c == "\u0130" else c.lower() for c in text)


def go_fold(word: str) -> str:
    """A regex for `word` matched as Go's `(?i)` matches it (ASCII letters only; other characters escaped)."""
    out = []
    for c in word:
        if c.isascii() and c.isalpha():
            low = c.lower()
            out.append(f"[{low}{low.upper()}{_FOLD_EXTRA.get(low, '')}]")
        else:
            out.append(re.escape(c))
    return "".join(out)


def go_json(value: Any) -> str:
    """Compact JSON as Go's encoding/json writes it with SetEscapeHTML(false): `<`, `>`, `&` stay raw, but
    U+2028 and U+2029 are escaped all the same (JSONP safety). Outside strings JSON is ASCII, so replacing
    the two characters in the output only touches string contents."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


class JsonPairs(list):  # type: ignore[type-arg]
    """A JSON object kept as ordered (key, value) pairs, distinguishable from a JSON array."""


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_LITERALS = {"true": True, "false": False, "null": None}


def json_loads_deep(text: str, max_depth: int = GO_JSON_MAX_DEPTH) -> Any:
    """`json.loads(text, parse_int=float, object_pairs_hook=<pairs>)` without recursion, so nesting deeper
    than Python's recursion limit decodes as Go decodes it, up to Go's own limit (ValueError beyond).
    NaN/Infinity are rejected (Go has no such literals). Objects come back as lists of (key, value)."""
    n = len(text)
    stack: list[tuple[list[Any], list[str]]] = []  # (open container, [pending key]) ; key list empty for arrays

    def ws(i: int) -> int:
        m = _WS.match(text, i)
        return m.end() if m else i

    def key_at(i: int) -> tuple[str, int]:
        if i >= n or text[i] != '"':
            raise ValueError(f"expected an object key at char {i}")
        key, i = scanstring(text, i + 1, True)
        i = ws(i)
        if i >= n or text[i] != ":":
            raise ValueError(f"expected ':' at char {i}")
        return key, ws(i + 1)

    i = ws(0)
    while True:
        c = text[i] if i < n else ""
        value: Any
        if c in ("{", "["):
            if len(stack) + 1 > max_depth:
                raise ValueError("exceeded max depth")
            container: list[Any] = JsonPairs() if c == "{" else []
            i = ws(i + 1)
            if i < n and text[i] == ("}" if c == "{" else "]"):
                value, i = container, i + 1
            else:
                pending: list[str] = []
                if c == "{":
                    key, i = key_at(i)
                    pending.append(key)
                stack.append((container, pending))
                continue
        elif c == '"':
            value, i = scanstring(text, i + 1, True)
        elif (m := _NUMBER.match(text, i)) is not None:
            value, i = float(m.group()), m.end()
        else:
            word = next((w for w in _LITERALS if text.startswith(w, i)), None)
            if word is None:
                raise ValueError(f"invalid JSON value at char {i}")
            value, i = _LITERALS[word], i + len(word)
        # A value is complete: attach it, closing every container it completes.
        while True:
            if not stack:
                i = ws(i)
                if i != n:
                    raise ValueError(f"extra data at char {i}")
                return value
            container, pending = stack[-1]
            is_object = isinstance(container, JsonPairs)
            container.append((pending[0], value) if is_object else value)
            i = ws(i)
            c = text[i] if i < n else ""
            if c == ",":
                i = ws(i + 1)
                if is_object:
                    pending[0], i = key_at(i)
                break
            if c == ("}" if is_object else "]"):
                stack.pop()
                value, i = container, i + 1
                continue
            raise ValueError(f"expected ',' or a closing bracket at char {i}")
