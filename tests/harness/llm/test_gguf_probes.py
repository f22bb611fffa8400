"""Generated-input probes of the GGUF metadata reader (harness/llm/gguf_meta.py): seeded random, well-formed small
GGUF headers (every value type, nested arrays, the wanted keys anywhere or absent) read back what was written;
every truncation and random corruption of them is either read or one GGUFError naming the file, never another
exception, a hang or an allocation of a corrupt length."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from harness.llm.gguf_meta import ChatMeta, GGUFError, read_chat_meta

SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
TEXTS = ["", "a", "<|im_end|>", "ünï", "🐈\n", "{{ messages }}", "x" * 70]


def _s(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _scalar(rng: random.Random, t: int) -> bytes:
    code = SCALARS[t]
    if code in "fd":
        return struct.pack("<" + code, rng.uniform(-1, 1))
    if code == "?":
        return struct.pack("<?", rng.random() < 0.5)
    bits = struct.calcsize(code) * 8
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if code.islower() else (0, 2**bits - 1)
    return struct.pack("<" + code, rng.randint(lo, hi))


def _value(rng: random.Random, depth: int = 0) -> tuple[int, bytes]:
    """(type, encoded value) of a random type, arrays of arrays up to 3 deep."""
    t = rng.choice([*SCALARS, STRING, ARRAY] if depth < 3 else [*SCALARS, STRING])
    if t in SCALARS:
        return t, _scalar(rng, t)
    if t == STRING:
        return t, _s(rng.choice(TEXTS))
    et = rng.choice([*SCALARS, STRING, ARRAY] if depth < 2 else [*SCALARS, STRING])
    n = rng.randrange(0, 5)
    items = []
    for _ in range(n):
        while True:  # an element of the chosen type
            vt, raw = _value(rng, depth + 1)
            if vt == et:
                break
        items.append(raw)
    return t, struct.pack("<IQ", et, n) + b"".join(items)


def gguf(seed: int) -> tuple[bytes, ChatMeta]:
    """A random well-formed GGUF header and the ChatMeta it holds."""
    rng = random.Random(seed)
    kv: list[bytes] = []
    for i in range(rng.randrange(0, 8)):
        t, raw = _value(rng)
        kv.append(_s(f"general.k{i}") + struct.pack("<I", t) + raw)
    tokens = [rng.choice(TEXTS) + str(i) for i in range(rng.randrange(0, 40))]
    template = rng.choice([None, "", "{% for m in messages %}{{ m.content }}{% endfor %}", "🐈" * 50])
    bos = rng.choice([None, *range(len(tokens) + 2)])
    eos = rng.choice([None, *range(len(tokens) + 2)])
    if tokens or rng.random() < 0.5:
        kv.append(_s("tokenizer.ggml.tokens") + struct.pack("<IIQ", ARRAY, STRING, len(tokens)))
        kv[-1] += b"".join(_s(t) for t in tokens)
    if template is not None:
        kv.append(_s("tokenizer.chat_template") + struct.pack("<I", STRING) + _s(template))
    for key, tid in (("bos", bos), ("eos", eos)):
        if tid is not None:
            kv.append(_s(f"tokenizer.ggml.{key}_token_id") + struct.pack("<II", 4, tid))
    rng.shuffle(kv)
    data = b"GGUF" + struct.pack("<IQQ", rng.choice([2, 3]), rng.randrange(0, 9), len(kv)) + b"".join(kv)

    def text(tid: int | None, other: int | None, later: bool) -> str:
        # one id wanted for both names: the reader keeps it under the later name (eos)
        if tid is None or tid >= len(tokens) or (tid == other and not later):
            return ""
        return tokens[tid]

    return data, ChatMeta(template, text(bos, eos, False), text(eos, bos, True), eos)


SEEDS = range(30)


@pytest.mark.parametrize("seed", SEEDS)
def test_well_formed_headers_read_back_what_was_written(tmp_path: Path, seed: int) -> None:
    data, want = gguf(seed)
    path = tmp_path / "m.gguf"
    path.write_bytes(data)
    assert read_chat_meta(path) == want


def _read_or_named_error(path: Path) -> None:
    try:
        read_chat_meta(path)
    except GGUFError as e:
        assert str(path) in str(e), e
    # any other exception (MemoryError, OverflowError, RecursionError, struct.error, ...) fails the probe


@pytest.mark.parametrize("seed", SEEDS)
def test_every_truncation_is_one_error_naming_the_file(tmp_path: Path, seed: int) -> None:
    data, _ = gguf(seed)
    path = tmp_path / "cut.gguf"
    cuts = range(len(data))
    for cut in sorted(random.Random(seed).sample(cuts, min(len(data), 40))):
        path.write_bytes(data[:cut])
        with pytest.raises(GGUFError, match="truncated|bad magic") as err:
            read_chat_meta(path)
        assert str(path) in str(err.value)


@pytest.mark.parametrize("seed", SEEDS)
def test_corrupt_bytes_are_read_or_one_error_naming_the_file(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    data, _ = gguf(seed)
    path = tmp_path / "bad.gguf"
    for _ in range(20):
        bad = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            at = rng.randrange(4, len(bad))
            bad[at] = rng.choice([0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)])
        path.write_bytes(bytes(bad))
        _read_or_named_error(path)


@pytest.mark.parametrize(
    "length",
    [2**63 - 1, 2**64 - 1, 2**40],
    ids=["i64 max", "u64 max", "a terabyte"],
)
def test_a_corrupt_length_is_never_allocated_or_seeked_to(tmp_path: Path, length: int) -> None:
    """A string length, an array count of scalars, of strings and of arrays, each set to a corrupt value."""
    key = _s("general.k")
    cases = {
        "string": key + struct.pack("<IQ", STRING, length),
        "scalars": key + struct.pack("<IIQ", ARRAY, 10, length),
        "strings": key + struct.pack("<IIQ", ARRAY, STRING, length) + _s("a"),
        "arrays": key + struct.pack("<IIQ", ARRAY, ARRAY, length) + struct.pack("<IQ", 0, 0),
        "key": struct.pack("<Q", length) + b"k",
        "template": _s("tokenizer.chat_template") + struct.pack("<IQ", STRING, length) + b"{{",
    }
    for name, kv in cases.items():
        path = tmp_path / f"{name}.gguf"
        path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + kv + b"\0" * 64)
        with pytest.raises(GGUFError, match="truncated") as err:
            read_chat_meta(path)
        assert str(path) in str(err.value)


def test_arrays_nested_without_end_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "deep.gguf"
    nest = struct.pack("<IQ", ARRAY, 1) * 5000
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + _s("general.k") + struct.pack("<I", ARRAY) + nest)
    with pytest.raises(GGUFError, match="nested deeper") as err:
        read_chat_meta(path)
    assert str(path) in str(err.value)
