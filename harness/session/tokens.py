"""Token counting: exact o200k_base (gpt-4o family) offline, and a cheap approximation.

`tiktoken.get_encoding("o200k_base")` downloads its BPE file, which fails offline. The
`bpe-openai` package ships the same file (gzipped); we load it from there and check the
sha256 tiktoken expects, so counts equal the network-loaded encoding's.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.util
import json
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

MESSAGE_OVERHEAD = 3  # tokens per chat message (role + separators), as OpenAI's counting guide
REPLY_PRIMING = 3  # tokens that prime the assistant's reply, added once per chat prompt


@runtime_checkable
class TokenCounter(Protocol):
    def count(self, text: str) -> int: ...

    def count_messages(self, messages: Sequence[dict[str, Any]]) -> int: ...


def message_text(message: dict[str, Any]) -> str:
    """Every model-visible text of a chat message: content (str or text parts) and tool calls."""
    parts: list[str] = []
    content = message.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        parts.extend(p.get("text", "") for p in content if isinstance(p, dict))
    for tc in message.get("tool_calls") or ():
        fn = tc.get("function", {})
        parts.append(fn.get("name", ""))
        args = fn.get("arguments", "")
        parts.append(args if isinstance(args, str) else json.dumps(args))
    return "\n".join(p for p in parts if p)


class _MessagesMixin:
    def count(self, text: str) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def count_messages(self, messages: Sequence[dict[str, Any]]) -> int:
        return sum(MESSAGE_OVERHEAD + self.count(message_text(m)) for m in messages)


def api_prompt_tokens(counter: TokenCounter, messages: Sequence[dict[str, Any]]) -> int:
    """A chat prompt's tokens by the published rule (OpenAI's counting guide, which the API's
    `usage.prompt_tokens` follows for gpt-4o-mini): per message MESSAGE_OVERHEAD + the role's tokens + the
    text's (+ the name's and 1 when named), then REPLY_PRIMING. The harness's own rule, `count_messages`,
    leaves out the role tokens and the priming (one token per message and 3 per prompt fewer): it budgets
    the window, where that margin is kept free by `reserve_tokens` anyway. No tools counted here."""
    total = REPLY_PRIMING
    for m in messages:
        total += MESSAGE_OVERHEAD + counter.count(str(m.get("role") or "")) + counter.count(message_text(m))
        if m.get("name"):
            total += counter.count(str(m["name"])) + 1
    return total


class TiktokenCounter(_MessagesMixin):
    """Exact counts with a tiktoken encoding."""

    def __init__(self, encoding: Any) -> None:
        self.encoding = encoding
        self.name = encoding.name

    def count(self, text: str) -> int:
        if not text:
            return 0
        # disallowed_special=() : user text may contain "<|endoftext|>" literally; count it as text.
        return len(self.encoding.encode(text, disallowed_special=()))


class ApproxCounter(_MessagesMixin):
    """Characters / chars_per_token, rounded up: fast, no dependencies, deliberately rough
    (the reference framework's SimpleTokenCounter works the same way)."""

    def __init__(self, chars_per_token: float = 4.0) -> None:
        if chars_per_token <= 0:
            raise ValueError(f"chars_per_token must be > 0, got {chars_per_token}")
        self.chars_per_token = chars_per_token
        self.name = f"approx/{chars_per_token:g}"

    def count(self, text: str) -> int:
        return math.ceil(len(text) / self.chars_per_token) if text else 0


def _load_ranks(gz_name: str, expected_sha256: str) -> dict[bytes, int]:
    # find_spec locates the package without importing it (its __init__ costs ~0.6 s).
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("package bpe-openai is not installed (it ships the o200k_base BPE file)")
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / gz_name
    raw = gzip.decompress(path.read_bytes())
    digest = hashlib.sha256(raw).hexdigest()
    if digest != expected_sha256:
        raise RuntimeError(f"bpe_openai/data/{gz_name}: sha256 {digest} != expected {expected_sha256}")
    ranks: dict[bytes, int] = {}
    for line in raw.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def load_offline_encoding(name: str) -> Any:
    """A tiktoken Encoding (`o200k_base`, `cl100k_base`) built offline.

    The regex and special tokens come from tiktoken's own definition (tiktoken_ext.openai_public);
    only the BPE-rank loader is swapped for the file bundled in bpe-openai.
    """
    from unittest import mock

    import tiktoken
    from tiktoken_ext import openai_public

    def offline_loader(_url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        return _load_ranks(f"{name}.tiktoken.gz", expected_hash or "")

    with mock.patch.object(openai_public, "load_tiktoken_bpe", offline_loader):
        spec = getattr(openai_public, name)()
    return tiktoken.Encoding(**spec)


def load_o200k_encoding() -> Any:
    """The o200k_base tiktoken Encoding (gpt-4o-mini's tokenizer), built offline."""
    return load_offline_encoding("o200k_base")


_lock = threading.Lock()
_o200k: TiktokenCounter | None = None


def o200k_counter() -> TiktokenCounter:
    """Process-wide cached o200k_base counter (loading takes ~0.5 s)."""
    global _o200k
    with _lock:
        if _o200k is None:
            _o200k = TiktokenCounter(load_o200k_encoding())
        return _o200k


class ScaledCounter(_MessagesMixin):
    """Another counter's counts times `factor`, rounded up: a safety margin when the real model's
    tokenizer (e.g. a local Qwen model) yields more tokens than o200k for the same text."""

    def __init__(self, base: TokenCounter, factor: float) -> None:
        if factor <= 0:
            raise ValueError(f"factor must be > 0, got {factor}")
        self.base, self.factor = base, factor
        self.name = f"{getattr(base, 'name', type(base).__name__)}x{factor:g}"

    def count(self, text: str) -> int:
        return math.ceil(self.base.count(text) * self.factor)
