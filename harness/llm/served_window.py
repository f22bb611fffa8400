"""The context window an OpenAI-compatible endpoint says it serves, where it says it.

There is no standard field, so each server's own is read from its model listing (`GET {base_url}/models`, the
request the preflight makes anyway):

- vLLM and SGLang: `max_model_len` on the model's entry (the server's `--max-model-len`);
- OpenRouter and some gateways: `context_length`;
- llama.cpp's server lists its models as `owned_by: llamacpp` with only the training context (`meta.n_ctx_train`);
  the window it serves (`-c`, per slot) is `default_generation_settings.n_ctx` of its `GET /props`, asked only then.

The run does not take this window in place of `model.context_window` (that setting is part of the run's identity:
a server restarted with another window would otherwise change a resumed run's prompts silently); it names it in
the warning when the two disagree (runners/window_check.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

LISTING_FIELDS = ("max_model_len", "context_length")  # on the model's entry of GET /models
LLAMACPP_OWNER = "llamacpp"


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return int(value) if value >= 1 and float(value).is_integer() else None


def model_entry(model: str, entries: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The listing's entry for `model`: by id, else the only entry (a server that serves one model under any name)."""
    for entry in entries:
        if entry.get("id") == model:
            return entry
    return entries[0] if len(entries) == 1 else None


def served_window(
    model: str, entries: Sequence[Mapping[str, Any]], props: Callable[[], Mapping[str, Any]] | None = None
) -> int | None:
    """The window the endpoint states for `model` (tokens), or None when it states none. `props` fetches llama.cpp's
    `/props` (called only for a llama.cpp listing)."""
    entry = model_entry(model, entries)
    if entry is None:
        return None
    for name in LISTING_FIELDS:
        if (window := _positive_int(entry.get(name))) is not None:
            return window
    if entry.get("owned_by") == LLAMACPP_OWNER and props is not None:
        settings = props().get("default_generation_settings")
        return _positive_int(settings.get("n_ctx")) if isinstance(settings, Mapping) else None
    return None


def server_root(base_url: str) -> str:
    """The server's root URL (llama.cpp's /props is beside /v1, not under it)."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url
