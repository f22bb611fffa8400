"""The few GGUF metadata values a chat server needs (chat template, BOS/EOS token text), read without loading the
model. The `gguf` package's reader parses every field, the 150K-token vocabulary and merges included, which took a
minute on a busy 2-core host; this reader walks the key/value section once and keeps only what was asked for."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

# GGUF value types (the GGUF spec): fixed-size scalars by struct code, 8 = string, 9 = array.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class GGUFError(ValueError):
    """The file is not a GGUF this reader understands (names the file and what was wrong)."""


@dataclass(frozen=True)
class ChatMeta:
    chat_template: str | None
    bos_token: str
    eos_token: str
    eos_token_id: int | None


def read_chat_meta(path: Path | str) -> ChatMeta:
    path = Path(path)
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise GGUFError(f"{path}: not a GGUF file (bad magic)")
        (version,) = _unpack(f, "<I", path)
        if version < 2:
            raise GGUFError(f"{path}: GGUF version {version} is not supported (2 or later)")
        _tensors, n_kv = _unpack(f, "<QQ", path)
        scalars: dict[str, object] = {}
        wanted_ids: dict[int, str] = {}
        tokens_at: int | None = None
        for _ in range(n_kv):
            key = _string(f, path)
            (vtype,) = _unpack(f, "<I", path)
            if key == "tokenizer.ggml.tokens" and vtype == _ARRAY:
                tokens_at = f.tell()
                _skip_value(f, vtype, path)
            elif key in ("tokenizer.chat_template", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"):
                scalars[key] = _value(f, vtype, path)
            else:
                _skip_value(f, vtype, path)
        for name in ("bos", "eos"):
            tid = scalars.get(f"tokenizer.ggml.{name}_token_id")
            if isinstance(tid, int):
                wanted_ids[tid] = name
        texts = _token_texts(f, tokens_at, wanted_ids, path) if tokens_at is not None else {}
    template = scalars.get("tokenizer.chat_template")
    eos_id = scalars.get("tokenizer.ggml.eos_token_id")
    return ChatMeta(
        chat_template=template if isinstance(template, str) else None,
        bos_token=texts.get("bos", ""),
        eos_token=texts.get("eos", ""),
        eos_token_id=eos_id if isinstance(eos_id, int) else None,
    )


def _unpack(f: BinaryIO, fmt: str, path: Path) -> tuple:
    size = struct.calcsize(fmt)
    raw = f.read(size)
    if len(raw) != size:
        raise GGUFError(f"{path}: truncated metadata")
    return struct.unpack(fmt, raw)


def _string(f: BinaryIO, path: Path) -> str:
    (n,) = _unpack(f, "<Q", path)
    raw = f.read(n)
    if len(raw) != n:
        raise GGUFError(f"{path}: truncated string in metadata")
    return raw.decode("utf-8", errors="replace")


def _value(f: BinaryIO, vtype: int, path: Path) -> object:
    if vtype in _SCALARS:
        return _unpack(f, "<" + _SCALARS[vtype], path)[0]
    if vtype == _STRING:
        return _string(f, path)
    _skip_value(f, vtype, path)
    return None


def _skip_value(f: BinaryIO, vtype: int, path: Path) -> None:
    if vtype in _SCALARS:
        f.seek(struct.calcsize(_SCALARS[vtype]), 1)
    elif vtype == _STRING:
        (n,) = _unpack(f, "<Q", path)
        f.seek(n, 1)
    elif vtype == _ARRAY:
        etype, count = _unpack(f, "<IQ", path)
        if etype in _SCALARS:
            f.seek(struct.calcsize(_SCALARS[etype]) * count, 1)
        else:
            for _ in range(count):
                _skip_value(f, etype, path)
    else:
        raise GGUFError(f"{path}: unknown metadata value type {vtype}")


def _token_texts(f: BinaryIO, at: int, wanted: dict[int, str], path: Path) -> dict[str, str]:
    f.seek(at)
    etype, count = _unpack(f, "<IQ", path)
    if etype != _STRING:
        raise GGUFError(f"{path}: tokenizer.ggml.tokens is not an array of strings")
    found: dict[str, str] = {}
    last = max(wanted, default=-1)
    for i in range(min(count, last + 1)):
        if i in wanted:
            found[wanted[i]] = _string(f, path)
        else:
            (n,) = _unpack(f, "<Q", path)
            f.seek(n, 1)
    return found
