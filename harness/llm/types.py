"""Value types of the LLM layer, shared by every caller (modes, summarizer, judges)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

Message = dict[str, Any]


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None  # reported by some endpoints (prompt caching)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class ChatResult:
    """One model response, from the network or the response cache.

    `latency_s` is the wall time of the original network call (kept when replayed from cache,
    so that cached re-runs report the latency that was measured).
    """

    content: str
    tool_calls: tuple[dict[str, Any], ...]  # OpenAI shape: {"id", "type", "function": {"name", "arguments"}}
    usage: Usage
    latency_s: float
    model: str
    finish_reason: str | None = None
    cached: bool = False
    purpose: str = "answer"  # answer | summary | judge | ... (for accounting)

    def to_record(self) -> dict[str, Any]:
        d = asdict(self)
        d["tool_calls"] = list(self.tool_calls)
        return d

    def to_message(self) -> Message:
        """The assistant message to append to a conversation."""
        msg: Message = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            msg["tool_calls"] = [dict(tc) for tc in self.tool_calls]
        return msg


@dataclass(frozen=True)
class EmbeddingResult:
    """One `/embeddings` response. Records keep `to_record()` (model, usage, latency), never the vectors."""

    vectors: tuple[tuple[float, ...], ...]  # in input order
    usage: Usage
    latency_s: float
    model: str
    n_inputs: int
    cached: bool = False
    purpose: str = "embedding"

    def to_record(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "usage": asdict(self.usage),
            "latency_s": self.latency_s,
            "n_inputs": self.n_inputs,
            "cached": self.cached,
            "purpose": self.purpose,
        }


class ChatModel(Protocol):
    """What every model consumer depends on. `LLMClient` implements it; tests may script it."""

    @property
    def model(self) -> str: ...  # read-only here: an attribute or a property satisfies it (SaltedModel forwards)

    def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        purpose: str = "answer",
        **params: Any,
    ) -> ChatResult: ...


@dataclass(frozen=True)
class SaltedModel:
    """`inner` with a cache salt on every call: its responses are cached apart from identical requests of other
    salts (the salt is never sent). A caller's own salt is kept in front (`caller|salt`). The one wrapper of
    this kind: per-mode summaries (runners/summaries.py) and judge votes (harness/scoring/votes.py) use it."""

    inner: ChatModel
    salt: str

    @property
    def model(self) -> str:
        return self.inner.model

    def chat(self, messages: Sequence[Message], *, cache_salt: str | None = None, **request: Any) -> ChatResult:
        # the request (tools, purpose, params) goes through as the caller gave it: only the salt is this class's
        salt = self.salt if cache_salt is None else f"{cache_salt}|{self.salt}"
        return self.inner.chat(messages, cache_salt=salt, **request)


class LLMError(RuntimeError):
    """A model call that failed after retries; the message names the endpoint and the cause."""
