"""The reference default summary prompt (configs/prompt/trpc_default.yaml holds the same text for `prompt=`;
a test checks they are equal). The other summary prompts live only in configs/prompt/*.yaml."""

from __future__ import annotations

from harness.prompts.provenance import TRPC_AGENT_GO, verbatim

# Exact text of getDefaultSummarizerPrompt, trpc-group/trpc-agent-go @ 9b4e406ae2873b0f641425aae0d54d0211a60e04,
# session/summary/summarizer.go (kept verbatim for parity with the reference benchmark run).
TRPC_DEFAULT_INSTRUCTION = (
    "Analyze the following conversation between a user and an "
    "assistant, and provide a concise summary focusing on important "
    "information that would be helpful for future interactions. Keep the "
    "summary concise and to the point. Only include relevant information. "
    "Do not make anything up."
)
TRPC_WORD_LIMIT_SENTENCE = " Please keep the summary within {max_summary_words} words."
TRPC_CONVERSATION_BLOCK = "\n\n<conversation>\n{conversation_text}\n</conversation>\n\nSummary:"


def trpc_default_template(max_summary_words: int = 0) -> str:
    """The reference default user template; the word-limit sentence only when a limit is set."""
    limit = TRPC_WORD_LIMIT_SENTENCE if max_summary_words > 0 else ""
    return TRPC_DEFAULT_INSTRUCTION + limit + TRPC_CONVERSATION_BLOCK


SOURCES = {
    name: verbatim(TRPC_AGENT_GO, "session/summary/summarizer.go", "getDefaultSummarizerPrompt")
    for name in ("TRPC_DEFAULT_INSTRUCTION", "TRPC_WORD_LIMIT_SENTENCE", "TRPC_CONVERSATION_BLOCK")
}
