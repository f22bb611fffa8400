"""The few GGUF metadata values a chat server needs (chat template, BOS/EOS token text), read without loading the
model. The `gguf` package's reader parses every field, the 150K-token vocabulary and merges included, which took a
minute on a busy 2-core host; this reader walks the key/value section once and keeps only what was asked for."""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

# GGUF value types (the GGUF spec): fixed-size scalars by struct code, 8 = string, 9 = array.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_MAX_DEPTH = 16  # arrays of arrays nest this deep at most: a corrupt file must not recurse without bound


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
        r = _Reader(f, path)
        if f.read(4) != b"GGUF":
            raise GGUFError(f"{path}: not a GGUF file (bad magic)")
        (version,) = r.unpack("<I")
        if version < 2:
            raise GGUFError(f"{path}: GGUF version {version} is not supported (2 or later)")
        _tensors, n_kv = r.unpack("<QQ")
        scalars: dict[str, object] = {}
        wanted_ids: dict[int, str] = {}
        tokens_at: int | None = None
        for _ in range(n_kv):
            key = r.string()
            (vtype,) = r.unpack("<I")
            if key == "tokenizer.ggml.tokens" and vtype == _ARRAY:
                tokens_at = f.tell()
                r.skip_value(vtype)
            elif key in ("tokenizer.chat_template", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"):
                scalars[key] = r.value(vtype)
            else:
                r.skip_value(vtype)
        for name in ("bos", "eos"):
            tid = scalars.get(f"tokenizer.ggml.{name}_token_id")
            if isinstance(tid, int):
                wanted_ids[tid] = name
        texts = r.token_texts(tokens_at, wanted_ids) if tokens_at is not None else {}
    template = scalars.get("tokenizer.chat_template")
    eos_id = scalars.get("tokenizer.ggml.eos_token_id")
    return ChatMeta(
        chat_template=template if isinstance(template, str) else None,
        bos_token=texts.get("bos", ""),
        eos_token=texts.get("eos", ""),
        eos_token_id=eos_id if isinstance(eos_id, int) else None,
    )


class _Reader:
    """Reads metadata values of one open file. Every length is checked against the file's size before it is read
    or skipped: a corrupt length or count is one GGUFError naming the file, never a huge allocation or a hang."""

    def __init__(self, f: BinaryIO, path: Path) -> None:
        self.f, self.path = f, path
        self.size = os.fstat(f.fileno()).st_size

    def _room(self, n: int, what: str) -> None:
        if n > self.size - self.f.tell():
            raise GGUFError(f"{self.path}: truncated {what}")

    def skip(self, n: int, what: str = "metadata") -> None:
        self._room(n, what)
        self.f.seek(n, 1)

    def unpack(self, fmt: str) -> tuple:
        size = struct.calcsize(fmt)
        raw = self.f.read(size)
        if len(raw) != size:
            raise GGUFError(f"{self.path}: truncated metadata")
        return struct.unpack(fmt, raw)

    def string(self) -> str:
        (n,) = self.unpack("<Q")
        self._room(n, "string in metadata")
        return self.f.read(n).decode("utf-8", errors="replace")

    def value(self, vtype: int) -> object:
        if vtype in _SCALARS:
            return self.unpack("<" + _SCALARS[vtype])[0]
        if vtype == _STRING:
            return self.string()
        self.skip_value(vtype)
        return None

    def skip_value(self, vtype: int, depth: int = 0) -> None:
        if vtype in _SCALARS:
            self.skip(struct.calcsize(_SCALARS[vtype]))
        elif vtype == _STRING:
            (n,) = self.unpack("<Q")
            self.skip(n)
        elif vtype == _ARRAY:
            etype, count = self.unpack("<IQ")
            if depth >= _MAX_DEPTH:
                raise GGUFError(f"{self.path}: metadata arrays nested deeper than {_MAX_DEPTH}")
            if etype in _SCALARS:
                self.skip(struct.calcsize(_SCALARS[etype]) * count)
            elif etype == _STRING:
                self.skip_strings(count)
            else:
                for _ in range(count):  # each element takes 8 bytes or more: a corrupt count meets the file's end
                    self.skip_value(etype, depth + 1)
        else:
            raise GGUFError(f"{self.path}: unknown metadata value type {vtype}")

    def skip_strings(self, count: int) -> None:
        """`count` strings skipped: the vocabulary's 150K, so the loop is kept to a read and a seek each."""
        f, size, u64 = self.f, self.size, struct.Struct("<Q")
        pos = f.tell()
        for _ in range(count):
            raw = f.read(8)
            if len(raw) != 8:
                raise GGUFError(f"{self.path}: truncated metadata")
            pos += 8 + u64.unpack(raw)[0]
            if pos > size:
                raise GGUFError(f"{self.path}: truncated string in metadata")
            f.seek(pos)

    def token_texts(self, at: int, wanted: dict[int, str]) -> dict[str, str]:
        self.f.seek(at)
        etype, count = self.unpack("<IQ")
        if etype != _STRING:
            raise GGUFError(f"{self.path}: tokenizer.ggml.tokens is not an array of strings")
        found: dict[str, str] = {}
        i = 0
        for tid in sorted(wanted):
            if tid >= count:
                break
            self.skip_strings(tid - i)
            found[wanted[tid]] = self.string()
            i = tid + 1
        return found
