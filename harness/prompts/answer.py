"""Answer-call texts of the three strategies (harness/contestants/) and of the official LongMemEval mode."""

from __future__ import annotations

from harness.prompts.provenance import LONGMEMEVAL_UNPINNED, TRPC_BENCHMARK, verbatim

# Reference texts (trpc-group/trpc-agent-go-benchmark @ 1edee87, summary/trpc-agent-go-impl/longmemeval.go:
# lmeInstruction and lmeOnDemandInstruction), kept verbatim for parity with the published table.
LME_INSTRUCTION = """You are a helpful assistant with access to prior conversation history. Answer the user's question based on what was discussed in past conversations.

Rules:
- Answer directly and concisely using only information from the conversation history.
- If tools are available and important details may be hidden by session summary, inspect historical events before answering.
- Do not fabricate information not present in the history."""

LME_ONDEMAND_INSTRUCTION = """When session tools are available, treat this as a memory recall task.

Required behavior:
- Call session_search with scope=current_hidden before answering unless the visible summary already states the exact fact.
- Use specific entities, names, and topics from the question in the search query.
- If session_search returns hits but the context is insufficient, call session_load on the best hit.
- Do not claim information is unavailable if session_search returned relevant hits."""

# LongMemEval's own answer prompt (xiaowu0162/LongMemEval src/generation/run_generation.py, `prepare_prompt`,
# history_format json, no CoT), filled with str.format(sessions, question date, question).
LME_OFFICIAL_TEMPLATE = (
    "I will give you several history chats between you and a user. Please answer the question "
    "based on the relevant chat history.\n\n\nHistory Chats:\n\n{}\n\nCurrent Date: {}\n"
    "Question: {}\nAnswer:"
)
SESSION_BLOCK = "\n### Session {}:\nSession Date: {}\nSession Content:\n{}\n"

SOURCES = {
    "LME_INSTRUCTION": verbatim(TRPC_BENCHMARK, "summary/trpc-agent-go-impl/longmemeval.go", "lmeInstruction"),
    "LME_ONDEMAND_INSTRUCTION": verbatim(
        TRPC_BENCHMARK, "summary/trpc-agent-go-impl/longmemeval.go", "lmeOnDemandInstruction"
    ),
    "LME_OFFICIAL_TEMPLATE": verbatim(
        LONGMEMEVAL_UNPINNED,
        "src/generation/run_generation.py",
        "prepare_prompt",
        "the commit was not recorded when copied",
    ),
    "SESSION_BLOCK": verbatim(
        LONGMEMEVAL_UNPINNED,
        "src/generation/run_generation.py",
        "prepare_prompt",
        "the commit was not recorded when copied",
    ),
}
