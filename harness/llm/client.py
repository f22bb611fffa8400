"""The one place every model call goes through (openai SDK, any OpenAI-compatible base URL).

It owns timeouts, bounded retries (exponential backoff with jitter, honouring Retry-After), a
concurrency limit, the content-keyed response cache and token accounting. `timeout_s` bounds each
attempt's whole duration (harness/llm/deadline.py), not only each socket read.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import logging
import math
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import openai
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from harness.llm.cache import ReadOnlyCache, ResponseCache, request_key
from harness.llm.deadline import DeadlineHttpxClient, call_deadline
from harness.llm.liveness import Liveness, ServerDied, wait_dead
from harness.llm.types import ChatResult, EmbeddingResult, LLMError, Message, Usage
from harness.secrets import describe_endpoint
from harness.settings import ClientSettings

RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504}
MAX_RETRY_AFTER_S = 120.0
ANNOUNCE_WAIT_S = 10.0  # a retry wait longer than this is logged at WARNING: a run must not look hung

log = logging.getLogger(__name__)


def _sleep(seconds: float) -> None:
    """The retry wait (a module function so tests can patch it without patching time.sleep everywhere)."""
    time.sleep(seconds)


class CallTimeout(openai.APITimeoutError):
    """An attempt ran past `timeout_s` (in total, or one read did); retried like any timeout."""

    def __init__(self, request: Any, timeout_s: float) -> None:
        openai.APIConnectionError.__init__(
            self,
            message=f"no complete response within timeout_s={timeout_s:g} s (a bound on the whole attempt)",
            request=request,
        )


def _is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRYABLE_STATUS
    return isinstance(exc, _MalformedResponse)


class _MalformedResponse(Exception):
    """The endpoint answered 200 with something that is not a chat completion (or embedding list)."""


# Embedding calls happen deep inside retrieval (index builds, query vectors), far from the code that writes
# a record; a case runs in one thread, so a context-local log carries them to the record (`embedding_calls`).
_EMBEDDING_LOG: contextvars.ContextVar[list[dict[str, Any]] | None] = contextvars.ContextVar(
    "embedding_log", default=None
)


@contextlib.contextmanager
def embedding_call_log() -> Iterator[list[dict[str, Any]]]:
    """Collect the records of every `LLMClient.embed` call made in this context (thread) meanwhile."""
    calls: list[dict[str, Any]] = []
    token = _EMBEDDING_LOG.set(calls)
    try:
        yield calls
    finally:
        _EMBEDDING_LOG.reset(token)


def _retry_after_s(exc: BaseException | None) -> float | None:
    """The server's requested wait in seconds, or None (then the client's own backoff applies): a header that
    is not a finite number (`nan`, `inf`, an HTTP date) is ignored, never passed on to sleep()."""
    resp = getattr(exc, "response", None)
    headers = getattr(resp, "headers", None)
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except (TypeError, ValueError):
            continue
        if math.isfinite(seconds):
            return seconds
    return None


@dataclass
class CallStats:
    """Thread-safe running totals, per purpose (answer, summary, judge, ...)."""

    network_calls: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    tokens: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # for the console's progress line (not in as_dict): tokens the endpoint computed, and the calls in flight
    _network_tokens: list[int] = field(default_factory=lambda: [0, 0], repr=False)
    _in_flight: dict[int, float] = field(default_factory=dict, repr=False)
    _next_call: int = field(default=0, repr=False)

    def add(self, result: ChatResult | EmbeddingResult) -> None:
        with self._lock:
            if result.cached:
                self.cache_hits += 1
            else:
                self.network_calls += 1
                self._network_tokens[0] += result.usage.prompt_tokens
                self._network_tokens[1] += result.usage.completion_tokens
            t = self.tokens[result.purpose]
            t["calls"] += 1
            t["prompt_tokens"] += result.usage.prompt_tokens
            t["completion_tokens"] += result.usage.completion_tokens
            t["cached_tokens"] += result.usage.cached_tokens or 0

    def bump(self, name: str) -> None:
        with self._lock:
            setattr(self, name, getattr(self, name) + 1)

    @contextlib.contextmanager
    def in_flight(self) -> Iterator[None]:
        """Marks one network request in flight (the progress line shows how many, and the oldest one's age)."""
        with self._lock:
            self._next_call += 1
            call = self._next_call
            self._in_flight[call] = time.monotonic()
        try:
            yield
        finally:
            with self._lock:
                self._in_flight.pop(call, None)

    def snapshot(self) -> dict[str, Any]:
        """Totals for a progress line: calls (network + cache), prompt and completion tokens (all, and those the
        endpoint computed), requests in flight and the age in seconds of the oldest."""
        with self._lock:
            oldest = min(self._in_flight.values(), default=None)
            return {
                "calls": self.network_calls + self.cache_hits,
                "cache_hits": self.cache_hits,
                "prompt_tokens": sum(t["prompt_tokens"] for t in self.tokens.values()),
                "completion_tokens": sum(t["completion_tokens"] for t in self.tokens.values()),
                "network_tokens": sum(self._network_tokens),
                "in_flight": len(self._in_flight),
                "oldest_in_flight_s": time.monotonic() - oldest if oldest is not None else None,
            }

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            return {
                "network_calls": self.network_calls,
                "cache_hits": self.cache_hits,
                "retries": self.retries,
                "failures": self.failures,
                "tokens": {k: dict(v) for k, v in self.tokens.items()},
            }


# (messages, tools, params with max_tokens as given, purpose) -> the response to a request the cache lacks
Responder = Callable[[list[Message], Sequence[dict[str, Any]] | None, dict[str, Any], str], ChatResult]
Observer = Callable[[list[Message], Sequence[dict[str, Any]] | None, ChatResult], None]


class LLMClient:
    """An OpenAI-compatible chat client implementing `ChatModel`.

    `cache_namespace` identifies the endpoint in cache keys; it defaults to the base URL, and the
    embedded server sets it to the model file's sha256 so a fresh random port still hits the cache.
    """

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        settings: ClientSettings | None = None,
        timeout_s: float | None = None,
        max_retries: int | None = None,
        backoff_base_s: float | None = None,
        backoff_max_s: float | None = None,
        concurrency: int | None = None,
        cache: ResponseCache | ReadOnlyCache | None = None,
        use_cache: bool = True,
        cache_namespace: str | None = None,
        default_params: dict[str, Any] | None = None,
        max_tokens_param: str | None = None,
        liveness: Liveness | None = None,
        responder: Responder | None = None,
        observer: Observer | None = None,
    ):
        # The defaults are the `client:` block of configs/config.yaml (harness/settings.py); a keyword overrides one.
        given: dict[str, Any] = {
            "timeout_s": timeout_s,
            "max_retries": max_retries,
            "backoff_base_s": backoff_base_s,
            "backoff_max_s": backoff_max_s,
            "concurrency": concurrency,
            "max_tokens_param": max_tokens_param,
        }
        s = dataclasses.replace(
            settings or ClientSettings.default(), **{k: v for k, v in given.items() if v is not None}
        )
        if s.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {s.concurrency}")
        self.settings = s
        self.base_url = base_url
        self.endpoint = describe_endpoint(base_url)  # how messages name it: scheme, host, port, path only
        self.model = model
        self.cache = cache if use_cache else None
        self.cache_namespace = cache_namespace or base_url
        self.default_params = dict(default_params or {})
        self.max_tokens_param = s.max_tokens_param
        self.max_retries = s.max_retries
        self.liveness = liveness  # None while the server process behind base_url runs (see harness/llm/liveness.py)
        # What answers a request the cache does not hold: the endpoint, or the plan's stand-in (commands/plan.py),
        # so a plan's requests, cache keys and accounting are this class's own.
        self._respond: Responder = responder or self._call_once
        self.observer = observer  # told of every chat result, replayed or not (the plan's per-call log)
        self.backoff_base_s = s.backoff_base_s
        self.backoff_max_s = s.backoff_max_s
        self.stats = CallStats()
        self.timeout_s = float(s.timeout_s)
        self._sem = threading.BoundedSemaphore(s.concurrency)
        # The SDK's own retries are off: this class owns retry policy so it is the same for every backend.
        # The http client enforces `call_deadline` (httpx alone bounds each read, not the call).
        self._sdk = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or "no-key",
            timeout=self.timeout_s,
            max_retries=0,
            http_client=DeadlineHttpxClient(),
        )
        self._secret = api_key or None  # scrubbed from every error message (an endpoint may echo it back)

    # -- public API -----------------------------------------------------------------------------
    def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        purpose: str = "answer",
        cache_salt: str | None = None,
        **params: Any,
    ) -> ChatResult:
        """One chat completion. `cache_salt` only separates cache entries (it is not sent): a caller that
        must regenerate an identical request (e.g. the reference's per-mode summaries) salts it."""
        merged = self._merged(params)
        msgs = [dict(m) for m in messages]
        key = self.chat_key(msgs, tools=tools, cache_salt=cache_salt, **params)
        result: ChatResult = self._cached(
            key, lambda hit: result_from_cache(hit, purpose), _to_cache, self._respond, msgs, tools, merged, purpose
        )
        if self.observer is not None:
            self.observer(msgs, tools, result)
        return result

    def _merged(self, params: dict[str, Any]) -> dict[str, Any]:
        return {**self.default_params, **{k: v for k, v in params.items() if v is not None}}

    def chat_key(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        cache_salt: str | None = None,
        **params: Any,
    ) -> str:
        """The response-cache key `chat` uses for this request (the planner looks requests up with it)."""
        merged = self._merged(params)
        key_params = {**merged, "_cache_salt": cache_salt} if cache_salt else merged
        return request_key(
            self.cache_namespace, self.model, [dict(m) for m in messages], list(tools) if tools else None, key_params
        )

    def embed_key(self, texts: Sequence[str], **params: Any) -> str:
        """The response-cache key `embed` uses for these inputs."""
        params = {k: v for k, v in params.items() if v is not None}
        return request_key(
            self.cache_namespace, self.model, [str(t) for t in texts], None, {**params, "_endpoint": "embeddings"}
        )

    def embedding_hit(self, texts: Sequence[str], **params: Any) -> dict[str, Any] | None:
        """The cached `/embeddings` reply `embed` would replay for these inputs, else None; sends nothing
        (the planner's stand-in reads it)."""
        return self._lookup(self.embed_key(texts, **params))

    def embed(self, texts: Sequence[str], *, purpose: str = "embedding", **params: Any) -> EmbeddingResult:
        """One `/embeddings` request for `texts` (params such as `dimensions` are sent as given), with the
        same retries, concurrency limit, cache and accounting as chat; logged for the case's record."""
        inputs = [str(t) for t in texts]
        params = {k: v for k, v in params.items() if v is not None}
        key = self.embed_key(inputs, **params)

        def decode(hit: dict[str, Any]) -> EmbeddingResult:
            return EmbeddingResult(
                tuple(tuple(v) for v in hit["vectors"]),
                Usage(**hit["usage"]),
                float(hit["latency_s"]),
                hit["model"],
                len(inputs),
                True,
                purpose,
            )

        def encode(r: EmbeddingResult) -> dict[str, Any]:
            return {
                "vectors": [list(v) for v in r.vectors],
                "usage": asdict(r.usage),
                "latency_s": r.latency_s,
                "model": r.model,
            }

        result = self._cached(key, decode, encode, self._embed_once, inputs, params, purpose)
        log = _EMBEDDING_LOG.get()
        if log is not None:
            log.append(result.to_record())
        return result

    # -- internals --------------------------------------------------------------------------------
    def _cached(self, key: str, decode, encode, call, *args) -> Any:
        """The cached response for `key`, else `call(*args)` with retries, stored; counted either way."""
        # A shared cache (PostgreSQL) serializes one key across processes: the second asker finds the reply.
        claim = getattr(self.cache, "claim", None)
        with claim(key) if claim is not None else contextlib.nullcontext():
            hit = self._lookup(key)
            if hit is not None:
                result = decode(hit)
            else:
                result = self._call_with_retries(call, *args)
                if self.cache is not None:
                    self.cache.put(key, encode(result))
        self.stats.add(result)
        return result

    def _lookup(self, key: str) -> dict[str, Any] | None:
        return self.cache.get(key) if self.cache is not None else None

    def _wait_s(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        after = _retry_after_s(exc)
        if after is not None:
            return min(max(after, 0.0), MAX_RETRY_AFTER_S)
        expo = min(self.backoff_max_s, self.backoff_base_s * 2 ** (state.attempt_number - 1))
        return random.uniform(0, expo)  # full jitter

    def _call_with_retries(self, call, *args) -> Any:
        def before_sleep(state: RetryCallState) -> None:
            self.stats.bump("retries")
            wait = state.next_action.sleep if state.next_action else 0.0
            if wait > ANNOUNCE_WAIT_S:
                exc = state.outcome.exception() if state.outcome else None
                why = "Retry-After" if _retry_after_s(exc) is not None else "backoff"
                log.warning(
                    "%s model=%s: waiting %.0f s (%s) before attempt %d of %d, after %s",
                    self.endpoint,
                    self.model,
                    wait,
                    why,
                    state.attempt_number + 1,
                    self.max_retries + 1,
                    type(exc).__name__ if exc else "an error",
                )

        if self.liveness is not None:
            call = self._watched(call)
        retrying = Retrying(
            retry=retry_if_exception(_is_retryable),
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait_s,
            before_sleep=before_sleep,
            sleep=lambda s: _sleep(s),
            reraise=True,
        )
        try:
            return retrying(call, *args)
        except ServerDied:
            self.stats.bump("failures")
            raise
        except Exception as e:
            self.stats.bump("failures")
            msg = f"{self.endpoint} model={self.model}: {type(e).__name__}: {_short(e)}"
            if self._secret:
                msg = msg.replace(self._secret, "***")
            raise LLMError(msg) from None if self._secret and self._secret in str(e) else e

    def _watched(self, call):
        """`call`, but a dead server raises `ServerDied` (never retried) instead of a connection error."""
        liveness = self.liveness
        assert liveness is not None

        def attempt(*args: Any) -> Any:
            died = liveness()
            if died is not None:
                raise died
            try:
                return call(*args)
            except openai.APIConnectionError:  # incl. timeouts
                died = wait_dead(liveness, grace_s=1.0)  # the reset may arrive before the process is reaped
                if died is not None:
                    raise died from None
                raise
            except openai.APIStatusError:  # a 5xx: the server may have answered while going down
                died = liveness()
                if died is not None:
                    raise died from None
                raise

        return attempt

    def preflight(self, timeout_s: float | None = None) -> int | None:
        """Fail fast, before a run writes anything, when the endpoint cannot be used at all: unreachable,
        or the API key rejected. Any other answer (even 404 from a server without `/models`) passes.
        `timeout_s` defaults to the settings' preflight bound (never longer than their timeout_s).
        Returns the context window the endpoint states for this model (harness/llm/served_window.py), or None."""
        if timeout_s is None:
            timeout_s = min(self.timeout_s, self.settings.preflight_timeout_s)
        sdk = self._sdk.with_options(timeout=timeout_s, max_retries=1)
        try:
            page = sdk.models.list()
        except (openai.APIConnectionError, openai.APITimeoutError) as e:
            raise LLMError(
                f"endpoint {self.endpoint} is unreachable ({type(e).__name__}: {_short(e, 200)}); "
                f"is the server running and model.base_url right?"
            ) from None
        except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
            raise LLMError(
                f"endpoint {self.endpoint} rejected the API key (HTTP {e.status_code}); "
                f"check the key for model={self.model}"
            ) from None
        except openai.APIStatusError:
            return None
        return self._served_window(page, sdk)

    def _served_window(self, page: Any, sdk: openai.OpenAI) -> int | None:
        """What the listing (or llama.cpp's /props) says of this model's window; None when it says nothing usable:
        the window is advice for a warning, never a reason for the preflight to fail."""
        from harness.llm.served_window import served_window, server_root

        def props() -> dict[str, Any]:
            body = sdk.with_options(max_retries=0).get(server_root(self.base_url) + "/props", cast_to=object)
            return body if isinstance(body, dict) else {}

        try:
            return served_window(self.model, [m.model_dump() for m in page.data], props)
        except Exception as e:  # an odd listing, a server without /props
            log.debug("the endpoint's window is not known: %s: %s", type(e).__name__, _short(e))
            return None

    def _call_once(self, msgs, tools, params, purpose) -> ChatResult:
        kwargs: dict[str, Any] = {"model": self.model, "messages": msgs}
        if tools:
            kwargs["tools"] = list(tools)
        for k, v in params.items():
            kwargs[self.max_tokens_param if k == "max_tokens" else k] = v
        with self._sem, self.stats.in_flight():
            t0 = time.perf_counter()
            try:
                with call_deadline(self.timeout_s):
                    resp = self._sdk.chat.completions.create(**kwargs)
            except openai.APITimeoutError as e:
                raise CallTimeout(e.request, self.timeout_s) from e
            except json.JSONDecodeError as e:  # a 200 whose body is not JSON (cut off, a proxy's page): retried
                raise _MalformedResponse(f"response body is not JSON ({e})") from e
            latency = time.perf_counter() - t0
        choices = getattr(resp, "choices", None)
        if not choices:
            raise _MalformedResponse(f"response has no choices: {str(resp)[:200]}")
        msg = choices[0].message
        if msg is None or any(getattr(tc, "function", None) is None for tc in (msg.tool_calls or [])):
            raise _MalformedResponse(f"response has no message or a tool call without a function: {str(resp)[:200]}")
        tool_calls = tuple(
            {
                "id": tc.id,
                "type": "function",
                "function": {"name": tc.function.name or "", "arguments": tc.function.arguments or ""},
            }
            for tc in (msg.tool_calls or [])
        )
        u = resp.usage
        cached = None
        details = getattr(u, "prompt_tokens_details", None) if u else None
        if details is not None and getattr(details, "cached_tokens", None) is not None:
            cached = int(details.cached_tokens)
        usage = Usage(int(getattr(u, "prompt_tokens", 0) or 0), int(getattr(u, "completion_tokens", 0) or 0), cached)
        return ChatResult(
            content=msg.content or "",
            tool_calls=tool_calls,
            usage=usage,
            latency_s=latency,
            model=resp.model or self.model,
            finish_reason=choices[0].finish_reason,
            purpose=purpose,
        )

    def _embed_once(self, inputs: list[str], params: dict[str, Any], purpose: str) -> EmbeddingResult:
        with self._sem, self.stats.in_flight():
            t0 = time.perf_counter()
            try:
                with call_deadline(self.timeout_s):
                    resp = self._sdk.embeddings.create(model=self.model, input=inputs, **params)
            except openai.APITimeoutError as e:
                raise CallTimeout(e.request, self.timeout_s) from e
            except ValueError as e:  # not JSON, or the SDK's "No embedding data received"
                raise _MalformedResponse(f"malformed embeddings response ({e})") from e
            latency = time.perf_counter() - t0
        data = getattr(resp, "data", None) or []
        if len(data) != len(inputs) or any(getattr(d, "embedding", None) is None for d in data):
            raise _MalformedResponse(f"expected {len(inputs)} embeddings, got {len(data)}: {str(resp)[:200]}")
        ordered = sorted(data, key=lambda d: d.index)
        if [d.index for d in ordered] != list(range(len(inputs))):
            raise _MalformedResponse(
                f"embedding indexes are not 0..{len(inputs) - 1}: {[d.index for d in ordered][:20]}"
            )
        u = getattr(resp, "usage", None)
        usage = Usage(int(getattr(u, "prompt_tokens", 0) or 0), 0, None)
        return EmbeddingResult(
            tuple(tuple(float(x) for x in d.embedding) for d in ordered),
            usage,
            latency,
            getattr(resp, "model", None) or self.model,
            len(inputs),
            False,
            purpose,
        )


def _short(e: BaseException, n: int = 300) -> str:
    s = str(e)
    return s if len(s) <= n else s[:n] + "..."


def _to_cache(r: ChatResult) -> dict[str, Any]:
    d = r.to_record()
    d.pop("cached", None)
    d.pop("purpose", None)
    return d


def result_from_cache(d: dict[str, Any], purpose: str) -> ChatResult:
    u = d.get("usage") or {}
    return ChatResult(
        content=d.get("content") or "",
        tool_calls=tuple(d.get("tool_calls") or ()),
        usage=Usage(u.get("prompt_tokens", 0), u.get("completion_tokens", 0), u.get("cached_tokens")),
        latency_s=float(d.get("latency_s", 0.0)),
        model=d.get("model", ""),
        finish_reason=d.get("finish_reason"),
        cached=True,
        purpose=purpose,
    )
