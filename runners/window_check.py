"""Before an endpoint run's first call: does the model's window hold the prompts the selected contestants send?

A remote model's `model.context_window` is what the config says (configs/model/endpoint.yaml: 32,768), not what the
model takes. The contestants that send a case's whole history (`WholeHistory`: long_context, lme_official) cut the
oldest part of it to fit that window, which a report shows only as a "truncated" share. So the run (and the plan)
count, with the contestants' own prompt assembly and the run's token counter, the window each case's prompt needs,
and say in one line which setting to change; the endpoint's own window is named where it states one
(harness/llm/served_window.py). A local model's window is the server the harness starts (`model.n_ctx`), so only
remote models are checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from harness.contestants.base import CaseHistory, Contestant, Question, Toolkit, WholeHistory
from harness.data.longmemeval import Case
from runners.wire import WireShape

SETTING = "model.context_window"


@dataclass(frozen=True)
class WindowShortfall:
    """One contestant's cases whose whole-history prompt the window cuts."""

    mode: str
    cut: int  # cases whose prompt needs more than the window
    checked: int  # cases checked
    largest: int  # the largest window one of them needs (prompt, reply and reserve)


def window_shortfalls(
    pairs: Iterable[tuple[Case, Sequence[Contestant]]], wire: WireShape, kit: Toolkit
) -> list[WindowShortfall]:
    """The whole-history contestants of `pairs` (case, its contestants to run) whose prompts `kit`'s window cuts."""
    needs: dict[str, list[int]] = {}
    for case, modes in pairs:
        whole = [m for m in modes if isinstance(m, WholeHistory)]
        if not whole:
            continue
        session = wire.case_session(case)
        question = Question.of(case, wire.question(case.question, case.question_date))
        for mode in whole:
            history = CaseHistory.of(case, wire.session_for(session, mode.name))
            needs.setdefault(mode.name, []).append(mode.window_needed(history, question, kit))
    out = []
    for name, values in needs.items():
        over = [n for n in values if n > kit.context_window]
        if over:
            out.append(WindowShortfall(name, len(over), len(values), max(over)))
    return out


def window_warnings(shortfalls: Sequence[WindowShortfall], window: int, served: int | None) -> list[str]:
    """One line per problem (short: the console cuts a log line at 300 characters), the setting first: the
    configured window cuts prompts (to what to set it where the endpoint says), or it is larger than the endpoint
    serves (a prompt over the served window is refused)."""
    lines = []
    if served is not None and served < window:
        lines.append(
            f"{SETTING}={window} is larger than the endpoint serves ({served:,} tokens): longer prompts are refused; "
            f"set {SETTING}={served}"
        )
    if shortfalls:
        largest = max(s.largest for s in shortfalls)
        if served is not None and served > window:
            advice = f"set {SETTING}={served}, the window the endpoint serves"
        elif served is None:
            advice = f"set {SETTING} to the model's real window"
        else:
            advice = "the endpoint serves no larger window"
        modes = " and ".join(f"{s.mode} ({s.cut}/{s.checked} cases)" for s in shortfalls)
        lines.append(
            f"{SETTING}={window} is smaller than the prompts {modes} send (needing a window of up to {largest:,} tokens): "
            f"their oldest turns are cut; {advice}"
        )
    return lines


def window_check(
    pairs: Iterable[tuple[Case, Sequence[Contestant]]],
    wire: WireShape,
    kit: Toolkit,
    *,
    local: bool,
    served: int | None,
) -> list[str]:
    """The warnings for a run of `pairs` on `kit`'s model (none for a local model): the run logs them before its
    first call, the plan shows them with its table."""
    if local:
        return []
    return window_warnings(window_shortfalls(pairs, wire, kit), kit.context_window, served)
