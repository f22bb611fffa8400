"""Fault injection on the loopback fake OpenAI-compatible server, and a deterministic fake model.

- `FakeModel`: a responder that behaves like a cooperative model (summaries, one `session_search` then
  an answer, judge verdicts, embeddings) and reports token usage (chars/4, or o200k for token budgets);
  in process (no server), `FakeModel.chat` is a `ChatModel` that answers from a script and records calls.
- `FaultInjector(base, FaultMix)`: wraps a responder and injects latency, 429 + Retry-After, 500/503,
  hangs (client timeouts), connection resets mid-body, malformed JSON, empty content, tool calls with
  invalid JSON arguments or unknown tool names.

Faults are drawn from a hash of (seed, request, attempt number), not from a shared random stream, so
a mix hits the same requests whatever the thread interleaving. A *transient* fault clears after
`max_transient` attempts (set it ≤ the client's max_retries and the run must equal a fault-free one);
a *persistent* request fails on every attempt (its case must end recorded as `failed`).

`python -m harness.testing.faults --port-file F [--latency-s 0.2] [--usage o200k] [--mix JSON]` serves
the fake model in its own process (benchmarks: the harness is measured without the server).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import signal
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.llm.types import ChatResult, Usage
from harness.testing.fake_openai import (
    FakeOpenAIServer,
    Reply,
    Responder,
    completion,
    embeddings,
    is_mem0_extraction,
    mem0_facts,
)

# The client retries these (HTTP status, timeout, transport, unparsable body) ...
TRANSPORT_FAULTS = ("429", "500", "503", "timeout", "reset", "malformed_json")
# ... and these arrive as a 200 the modes must cope with (scored, or the case recorded as failed).
CONTENT_FAULTS = ("empty_content", "bad_tool_args", "unknown_tool")
FAULTS = ("slow",) + TRANSPORT_FAULTS + CONTENT_FAULTS

SUMMARY_TEXT = "The user talked about their life."
UNKNOWN_TOOL = "web_browse"


def request_kind(req: Mapping[str, Any]) -> str:
    """What a request is for: embedding | memory_extraction (mem0's) | judge | summary | tool_answer (tools offered)
    | answer."""
    if str(req.get("_path", "")).endswith("/embeddings"):
        return "embedding"
    if is_mem0_extraction(req):
        return "memory_extraction"
    msgs = req.get("messages") or []
    last = msgs[-1].get("content") if msgs else ""
    last = last if isinstance(last, str) else json.dumps(last)
    if "expert evaluator" in last or "Answer yes or no only" in last:
        return "judge"
    if not req.get("tools") and "<conversation>" in last:
        return "summary"
    return "tool_answer" if req.get("tools") else "answer"


def chars4(text: str) -> int:
    """A cheap token estimate (4 characters a token) for benchmarks where the figure does not matter."""
    return (len(text) + 3) // 4


def _messages_text(msgs: Any) -> str:
    parts = []
    for m in msgs or []:
        c = m.get("content")
        parts.append(c if isinstance(c, str) else json.dumps(c) if c is not None else "")
        if m.get("tool_calls"):
            parts.append(json.dumps(m["tool_calls"]))
    return "\n".join(parts)


def default_answer(req: Mapping[str, Any]) -> str:
    """Deterministic, and different per prompt, so that each mode's answer (and judge request) is distinct."""
    digest = hashlib.sha256(json.dumps(req.get("messages"), sort_keys=True).encode()).hexdigest()[:6]
    return f"I am not sure ({digest})."


@dataclass(frozen=True)
class ToolStep:
    """A scripted reply of `FakeModel.chat` that calls one tool (`arguments`: JSON text, as a model sends it)."""

    name: str
    arguments: str


Step = str | Exception | ToolStep
Script = Sequence[Step] | Callable[[list[dict[str, Any]]], str]


class FakeModel:
    """A deterministic cooperative "model", behind the fake server (`__call__`) or in process (`chat`).

    Behind the server it answers: `answer(req)` (default: a fixed sentence that names the question); with
    tools offered it first calls `session_search` with the question, then answers. Summaries: `summary_text`.
    mem0's extraction calls: mem0's JSON, one fact per user line (`mem0_facts`), so mem0 stores memories.
    Judges: "incorrect" (trpc JSON) / "no" (LongMemEval). Usage is counted with `count_tokens` and tallied per
    request kind in `tally` (embedding inputs too), so a benchmark can read what a run spent.

    In process, `chat` records each call in `calls` ({messages, tools, purpose, params}) and replies with
    `fixed[purpose]` if set, else the next step of `script` (a text, an Exception to raise, a `ToolStep`; or a
    function of the messages), then `then(call number)`; with no `then`, a call past the script is an error
    (a test that expects no more calls fails). Every reply carries `usage`, `latency_s`, `model`, `finish_reason`.
    `gate` (wait for it) and `delay_s` hold each call, for concurrency tests.
    """

    def __init__(
        self,
        *,
        count_tokens: Callable[[str], int] = chars4,
        summary_text: str = SUMMARY_TEXT,
        answer: Callable[[Mapping[str, Any]], str] | None = None,
        search_first: bool = True,
        embedding_dim: int = 8,
        count_embedding_tokens: Callable[[str], int] | None = None,
        script: Script = (),
        then: Callable[[int], str] | None = None,
        fixed: Mapping[str, str] | None = None,
        usage: Usage = Usage(100, 10),  # noqa: B008 (a frozen dataclass)
        latency_s: float = 0.0,
        model: str = "fake-model",
        finish_reason: str | None = "stop",
        gate: threading.Event | None = None,
        delay_s: float = 0.0,
    ):
        self.count = count_tokens
        self.count_embedding = count_embedding_tokens or count_tokens
        self.summary_text = summary_text
        self.answer = answer or default_answer
        self.search_first = search_first
        self.embedding_dim = embedding_dim
        self.tally: dict[str, Counter] = defaultdict(Counter)
        self._lock = threading.Lock()
        self.script, self.then, self.fixed = script, then, dict(fixed or {})
        self.usage, self.latency_s, self.model, self.finish_reason = usage, latency_s, model, finish_reason
        self.gate, self.delay_s = gate, delay_s
        self.calls: list[dict[str, Any]] = []
        self._next = 0  # the script's next step

    # -- in process: a ChatModel -----------------------------------------------------------------------
    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        purpose: str = "answer",
        **params: Any,
    ) -> ChatResult:
        if self.gate is not None and not self.gate.wait(5):
            raise AssertionError("FakeModel: the test's gate never opened")
        if self.delay_s:
            time.sleep(self.delay_s)
        sent = [dict(m) for m in messages]
        with self._lock:
            self.calls.append({"messages": sent, "tools": tools, "purpose": purpose, "params": params})
            n = len(self.calls)
            step = self._step(purpose, n)
        if step is None:  # a function of the messages, called outside the lock (it may read `calls`)
            assert callable(self.script)
            step = self.script(list(sent))
        if isinstance(step, Exception):
            raise step
        if isinstance(step, ToolStep):
            call = {"id": f"call_{n}", "type": "function", "function": {"name": step.name, "arguments": step.arguments}}
            return ChatResult("", (call,), self.usage, self.latency_s, self.model, self.finish_reason, purpose=purpose)
        return ChatResult(step, (), self.usage, self.latency_s, self.model, self.finish_reason, purpose=purpose)

    def _step(self, purpose: str, n: int) -> Step | None:
        if purpose in self.fixed:
            return self.fixed[purpose]
        if callable(self.script):
            return None
        if self._next < len(self.script):
            self._next += 1
            return self.script[self._next - 1]
        if self.then is not None:
            return self.then(n)
        raise AssertionError(f"FakeModel: call {n} ({purpose}) is past the script's {len(self.script)} steps")

    # -- behind the fake server: a responder -----------------------------------------------------------

    def __call__(self, req: dict[str, Any]) -> Reply:
        kind = request_kind(req)
        if kind == "embedding":
            inputs = req.get("input") or []
            inputs = [inputs] if isinstance(inputs, str) else inputs
            used = sum(self.count_embedding(t) if isinstance(t, str) else len(t) for t in inputs)
            self._add(kind, used, 0)
            return embeddings(len(inputs), self.embedding_dim, prompt_tokens=used)
        msgs = req.get("messages") or []
        content: str | None
        tool_calls = None
        if kind == "judge":
            last = msgs[-1].get("content") or ""
            content = (
                "no"
                if "Answer yes or no only" in last
                else '{"correct": false, "confidence": 0.9, "reason": "different"}'
            )
        elif kind == "memory_extraction":  # mem0's own format: facts it stores (a sentence would store nothing)
            content = mem0_facts(req)
        elif kind == "summary":
            last = msgs[-1].get("content") or ""
            content = f"<summary>{self.summary_text}</summary>" if "<summary>" in last else self.summary_text
        elif kind == "tool_answer" and self.search_first and not any(m.get("role") == "tool" for m in msgs):
            question = next((m.get("content") for m in reversed(msgs) if m.get("role") == "user"), "") or ""
            content, tool_calls = (
                None,
                [
                    {
                        "id": "call_1",
                        "name": "session_search",
                        "arguments": {"query": question, "scope": "current_hidden"},
                    }
                ],
            )
        else:
            content = self.answer(req)
        prompt = self.count(_messages_text(msgs))
        out = self.count(content or "") + (self.count(json.dumps(tool_calls)) if tool_calls else 0)
        self._add(kind, prompt, out)
        return completion(content, tool_calls, prompt_tokens=prompt, completion_tokens=out)

    def _add(self, kind: str, prompt: int, out: int) -> None:
        with self._lock:
            t = self.tally[kind]
            t["calls"] += 1
            t["prompt_tokens"] += prompt
            t["completion_tokens"] += out

    def totals(self) -> dict[str, dict[str, int]]:
        with self._lock:
            return {k: dict(v) for k, v in self.tally.items()}


@dataclass(frozen=True)
class FaultMix:
    """Which faults to inject and how often.

    `rates`: per-attempt probability of each fault in FAULTS (they should sum to ≤ 1). Transport faults
    and `slow` hit at most the first `max_transient` attempts of a request; content faults are final
    answers (a 200) and hit the first attempt only. `persistent`: share of distinct requests that get
    `persistent_fault` on every attempt. `cycle`: each new request gets the next fault of the cycle (content
    faults are dealt to tool-offering requests only, with a clean request after each round), whatever `rates`
    would have drawn; persistent requests take no card. So every card dealt is injected, and once a run has made
    as many non-persistent requests of a deck as it has cards, every kind in it was injected, in whatever order
    concurrent requests arrived.
    """

    rates: Mapping[str, float] = field(default_factory=dict)
    cycle: tuple[
        str | None, ...
    ] = ()  # faults (None: a clean reply) dealt in turn to new requests, so that every one is exercised
    persistent: float = 0.0
    persistent_fault: str = "500"
    max_transient: int = 2
    latency_s: float = 0.0  # every reply
    slow_s: float = 0.3  # the `slow` fault: a latency spike under the client's timeout
    hang_s: float = 2.0  # the `timeout` fault: longer than the client's timeout
    retry_after_s: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        unknown = (set(self.rates) | {f for f in self.cycle if f is not None}) - set(FAULTS)
        if unknown:
            raise ValueError(f"FaultMix: unknown fault(s) {sorted(unknown)}; known: {list(FAULTS)}")
        if self.persistent_fault not in TRANSPORT_FAULTS:
            raise ValueError(
                f"FaultMix.persistent_fault must be one of {TRANSPORT_FAULTS}, got {self.persistent_fault!r}"
            )
        if sum(self.rates.values()) > 1 + 1e-9:
            raise ValueError(f"FaultMix: rates sum to {sum(self.rates.values()):.3f} > 1")

    @classmethod
    def from_json(cls, text: str) -> FaultMix:
        return cls(**json.loads(text))


def _unit(*parts: Any) -> float:
    """A deterministic number in [0, 1) from `parts`."""
    h = hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def request_identity(req: Mapping[str, Any]) -> str:
    """The same request (retried) has the same identity; anything else that differs does not."""
    keep = {k: v for k, v in req.items() if k not in ("_auth",)}
    return hashlib.sha256(json.dumps(keep, sort_keys=True, default=str).encode()).hexdigest()[:20]


class FaultInjector:
    """A responder that injects `mix` into the replies of `base`; `injected` counts what it did."""

    def __init__(self, base: Responder, mix: FaultMix):
        self.base = base
        self.mix = mix
        self.injected: Counter = Counter()
        self.attempts: Counter = Counter()  # request identity → attempts seen
        self.persistent_ids: set[str] = set()
        self.log: list[tuple[str, int, str]] = []  # (identity, attempt, fault or "ok")
        self._lock = threading.Lock()
        self._dealt: dict[str, str | None] = {}
        self._decks: dict[str, list[str | None]] = {
            "transport": [f for f in mix.cycle if f not in CONTENT_FAULTS],
            "content": [f for f in mix.cycle if f in CONTENT_FAULTS],
        }
        if self._decks["content"]:
            self._decks["content"].append(None)
        self._turn: Counter[str] = Counter()

    def _deal(self, ident: str, req: Mapping[str, Any]) -> None:
        """Called under the lock on a request's first attempt. A persistent request takes no card: it gets its
        persistent fault on every attempt, so a card dealt to it would never be injected, and which kind was
        lost would depend on the order requests arrive in (that is, on thread scheduling)."""
        deck = "content" if request_kind(req) == "tool_answer" and self._decks["content"] else "transport"
        if request_kind(req) == "embedding" or not self._decks[deck] or self.is_persistent(ident):
            return
        cards = self._decks[deck]
        self._dealt[ident] = cards[self._turn[deck] % len(cards)]
        self._turn[deck] += 1

    def is_persistent(self, ident: str) -> bool:
        return bool(self.mix.persistent) and _unit(self.mix.seed, ident, "persistent") < self.mix.persistent

    def choose(self, ident: str, attempt: int) -> str | None:
        m = self.mix
        if self.is_persistent(ident):
            return m.persistent_fault
        if ident in self._dealt:
            fault = self._dealt[ident]
            if fault in CONTENT_FAULTS:
                return fault if attempt == 0 else None
            return fault if fault and attempt < m.max_transient else None
        u, acc = _unit(m.seed, ident, attempt), 0.0
        for fault in FAULTS:
            acc += m.rates.get(fault, 0.0)
            if u < acc:
                if fault in CONTENT_FAULTS:
                    return fault if attempt == 0 else None
                return fault if attempt < m.max_transient else None
        return None

    def __call__(self, req: dict[str, Any]) -> Reply:
        ident = request_identity(req)
        with self._lock:
            attempt = self.attempts[ident]
            self.attempts[ident] += 1
            if attempt == 0:
                self._deal(ident, req)
        fault = self.choose(ident, attempt)
        if fault in CONTENT_FAULTS and not self._applies(fault, req):
            fault = None
        with self._lock:
            self.log.append((ident, attempt, fault or "ok"))
            if fault:
                self.injected[fault] += 1
                if self.is_persistent(ident):
                    self.persistent_ids.add(ident)
        reply = self._inject(fault, req) if fault else self.base(req)
        if self.mix.latency_s and fault != "timeout":
            reply = Reply(
                reply.status, reply.body, reply.headers, reply.delay_s + self.mix.latency_s, reply.reset_after
            )
        return reply

    @staticmethod
    def _applies(fault: str, req: Mapping[str, Any]) -> bool:
        kind = request_kind(req)
        if kind == "embedding":
            return False
        return fault == "empty_content" or kind == "tool_answer"

    def _inject(self, fault: str, req: dict[str, Any]) -> Reply:
        err = {"error": {"message": f"injected fault: {fault}", "type": "fault_injection"}}
        if fault == "slow":
            r = self.base(req)
            return Reply(r.status, r.body, r.headers, r.delay_s + self.mix.slow_s, r.reset_after)
        if fault == "429":
            return Reply(status=429, body=err, headers={"Retry-After": f"{self.mix.retry_after_s:g}"})
        if fault in ("500", "503"):
            return Reply(status=int(fault), body=err)
        if fault == "timeout":
            return Reply(body=err, delay_s=self.mix.hang_s)
        if fault == "reset":
            r = self.base(req)
            data = json.dumps(r.body).encode() if isinstance(r.body, dict) else bytes(r.body or b"")
            return Reply(r.status, data, r.headers, r.delay_s, reset_after=max(1, len(data) // 2))
        if fault == "malformed_json":
            return Reply(body='{"id": "chatcmpl-fake", "object": "chat.completion", "choices": [{"index": 0, "mess')
        if fault == "empty_content":
            return completion("", prompt_tokens=10, completion_tokens=0)
        if fault == "bad_tool_args":
            return completion(
                None, [{"id": "call_bad", "name": "session_search", "arguments": '{"query": "unterminated'}]
            )
        if fault == "unknown_tool":
            return completion(
                None, [{"id": "call_unknown", "name": UNKNOWN_TOOL, "arguments": {"url": "http://example.invalid"}}]
            )
        raise AssertionError(fault)


# ----------------------------------------------------------------------------- standalone server


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Serve the fake model (optionally with faults) on 127.0.0.1.")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file", required=True, help="written with the port once the server listens")
    ap.add_argument("--stats-file", help="written on SIGTERM/SIGINT with token tallies per request kind")
    ap.add_argument("--latency-s", type=float, default=0.0, help="delay of every reply")
    ap.add_argument(
        "--usage",
        choices=("chars4", "o200k"),
        default="chars4",
        help="how reported usage is counted (o200k: chat in o200k, embeddings in cl100k)",
    )
    ap.add_argument("--mix", help='FaultMix as JSON, e.g. \'{"rates": {"500": 0.1}}\'')
    args = ap.parse_args(argv)

    count = count_embedding = chars4
    if args.usage == "o200k":  # chat as gpt-4o-mini counts (o200k), embeddings as text-embedding-3-small (cl100k)
        from harness.retrieval.embedders import cl100k_count
        from harness.session.tokens import o200k_counter

        count, count_embedding = o200k_counter().count, cl100k_count
    model = FakeModel(count_tokens=count, count_embedding_tokens=count_embedding)
    mix = FaultMix.from_json(args.mix) if args.mix else FaultMix()
    if args.latency_s:
        mix = FaultMix(**{**mix.__dict__, "latency_s": args.latency_s})
    responder: Responder = (
        FaultInjector(model, mix) if (mix.rates or mix.cycle or mix.persistent or mix.latency_s) else model
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with FakeOpenAIServer(responder, record=False, port=args.port) as srv:
        port = srv.base_url.rsplit(":", 1)[1].split("/")[0]
        tmp = Path(args.port_file + ".tmp")
        tmp.write_text(port)
        tmp.replace(args.port_file)
        stop.wait()
    if args.stats_file:
        stats = {
            "tokens": model.totals(),
            "faults": dict(responder.injected) if isinstance(responder, FaultInjector) else {},
        }
        Path(args.stats_file).write_text(json.dumps(stats, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
