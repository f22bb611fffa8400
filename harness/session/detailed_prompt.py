"""The reference's alternative summary prompt (Table 7 of its report) and its output post-processing.

Source: trpc-group/trpc-agent-go-benchmark @ 1edee87bc8b4efa539329e6766fd0fcd4b03fd7b (Apache-2.0),
summary/trpc-agent-go-impl/detailed_summary.go: `detailedContinuityPrompt` (its text is kept verbatim in
configs/prompt/trpc_detailed.yaml) and `stripDetailedSummaryOutput`, re-implemented here by behaviour.
"""

from __future__ import annotations

import re

# Go's regexp `\s` is ASCII whitespace only (re.ASCII); `(?s)` only where the Go pattern has it.
_FLAGS = re.IGNORECASE | re.ASCII
_ANALYSIS_BLOCK = re.compile(r"\**\s*<\s*analysis\s*>.*?<\s*/\s*analysis\s*>\s*\**", _FLAGS | re.DOTALL)
_ANALYSIS_OPEN = re.compile(r"\**\s*<\s*analysis\s*>\s*\**", _FLAGS)
_ANALYSIS_CLOSE = re.compile(r"\**\s*<\s*/\s*analysis\s*>\s*\**", _FLAGS)
_SUMMARY_OPEN = re.compile(r"\**\s*<\s*summary\s*>\s*\**", _FLAGS)
_SUMMARY_CLOSE = re.compile(r"\**\s*<\s*/\s*summary\s*>\s*\**", _FLAGS)


def strip_detailed_summary_output(text: str) -> str:
    """What `stripDetailedSummaryOutput` returns for `text`.

    A `<summary>` opener (any case, inner spaces, optional markdown bold around it) wins: keep what
    follows it up to the first closer, or to the end when the closer is missing (an answer cut short).
    Without an opener, remove `<analysis>` blocks and any stray analysis markers. Always trimmed.
    """
    opener = _SUMMARY_OPEN.search(text)
    if opener is not None:
        inner = text[opener.end() :]
        closer = _SUMMARY_CLOSE.search(inner)
        if closer is not None:
            inner = inner[: closer.start()]
        return inner.strip()
    text = _ANALYSIS_BLOCK.sub("", text)
    text = _ANALYSIS_OPEN.sub("", text)
    text = _ANALYSIS_CLOSE.sub("", text)
    return text.strip()
