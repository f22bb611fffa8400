"""The reference's alternative summary prompt (Table 7 of its report) and its output post-processing.

Source: trpc-group/trpc-agent-go-benchmark @ 1edee87bc8b4efa539329e6766fd0fcd4b03fd7b (Apache-2.0),
summary/trpc-agent-go-impl/detailed_summary.go: `detailedContinuityPrompt` (its text is kept verbatim in
configs/prompt/trpc_detailed.yaml) and `stripDetailedSummaryOutput`, re-implemented here by behaviour.
"""

from __future__ import annotations

import re

from harness.golang import GO_RE_SPACE, go_fold, go_trim_space

# The Go patterns are `(?i)` (one with `(?s)`), read with Go's semantics: `\s` is GO_RE_SPACE (no \v), and
# case folding is Go's simple folding (ſ matches s; K would match k), spelled out per letter by go_fold.
_S = GO_RE_SPACE + "*"


def _tag(name: str, closing: bool = False) -> str:
    return rf"<{_S}" + (rf"/{_S}" if closing else "") + go_fold(name) + rf"{_S}>"


def _marker(name: str, closing: bool = False) -> re.Pattern[str]:
    return re.compile(rf"\**{_S}{_tag(name, closing)}{_S}\**")


_ANALYSIS_BLOCK = re.compile(rf"\**{_S}{_tag('analysis')}.*?{_tag('analysis', True)}{_S}\**", re.DOTALL)
_ANALYSIS_OPEN = _marker("analysis")
_ANALYSIS_CLOSE = _marker("analysis", True)
_SUMMARY_OPEN = _marker("summary")
_SUMMARY_CLOSE = _marker("summary", True)


def strip_detailed_summary_output(text: str) -> str:
    """What `stripDetailedSummaryOutput` returns for `text`.

    A `<summary>` opener (any case, inner spaces, optional markdown bold around it) wins: keep what
    follows it up to the first closer, or to the end when the closer is missing (an answer cut short).
    Without an opener, remove `<analysis>` blocks and any stray analysis markers. Always trimmed (Go's
    strings.TrimSpace).
    """
    opener = _SUMMARY_OPEN.search(text)
    if opener is not None:
        inner = text[opener.end() :]
        closer = _SUMMARY_CLOSE.search(inner)
        if closer is not None:
            inner = inner[: closer.start()]
        return go_trim_space(inner)
    text = _ANALYSIS_BLOCK.sub("", text)
    text = _ANALYSIS_OPEN.sub("", text)
    text = _ANALYSIS_CLOSE.sub("", text)
    return go_trim_space(text)
