"""Judge votes: one answer judged k times, the majority verdict kept, and how much the judge agrees with itself.

`VotedJudge` wraps any LLM judge (TrpcJudge, LongMemEvalJudge, ...). Vote 0 is the plain judge call; vote i > 0
is the same request with a cache salt (`judge-vote-i`), so each vote has its own response-cache entry (the salt
is never sent). With votes=1 the wrapper returns the inner judge's result untouched: same cache keys, same
records, same metrics.

With votes > 1 it declares the inner judge's metrics (same names, so reports, compare and the gate need no
change) plus `judge_agreement`:
- a binary metric (spec.binary, e.g. lme_acc) is the majority of the votes that gave a value; a tie among
  them is None with the reason in the details (`vote_ties`), never a silent 0 or 1;
- any other metric (llm_score) is the mean over the votes that gave a value;
- a verdict key of the details (`verdict`, `verdict_strict`, ...: what derived metrics read) is the majority
  of the votes' "correct"/"incorrect" (a tie: "not_run");
- judge_agreement = share of the votes with a verdict that agree with the majority verdict (`verdict`);
  None when fewer than two votes gave one (a skipped judge, or confirm_failures with a first "correct").

A vote whose call failed makes the pair's scoring fail (`ScoreResult.error`), as a single failed judge call
does: the answer is kept and the next run re-scores it (the votes already answered come from the cache).

`confirm_failures=True` casts the extra votes only when vote 0 says "incorrect". Cheaper, but biased upwards:
a wrong "correct" from vote 0 is never challenged while a wrong "incorrect" gets k-1 more chances.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.llm.types import ChatModel, SaltedModel
from harness.scoring.base import MetricSpec, ScoreInput, ScoreResult, details_key

log = logging.getLogger(__name__)

AGREEMENT = MetricSpec(
    "judge_agreement",
    True,
    "share of a case's judge votes that agree with the majority verdict (judge self-consistency)",
    "judge agreement",
    quality=False,
)
CORRECT, INCORRECT, NOT_RUN = "correct", "incorrect", "not_run"
VOTE_KEYS = ("verdict", "verdict_strict", "raw", "usage")  # what each vote keeps in details["votes"]


class VotesConfigError(ValueError):
    """A voted judge's configuration cannot work (the message names the config key)."""


VOTED_TARGET = f"{__name__}.VotedJudge"
WRAPPER_KEYS = ("votes", "confirm_failures")


def voted_config(judge_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """A judge's Hydra config, wrapped in VotedJudge when it sets `votes`/`confirm_failures` on a plain judge
    (`judge=longmemeval +judge.votes=3`); any other config unchanged."""
    cfg = dict(judge_cfg)
    if cfg.get("_target_") == VOTED_TARGET or not any(k in cfg for k in WRAPPER_KEYS):
        return cfg
    inner = {k: v for k, v in cfg.items() if k not in WRAPPER_KEYS}
    return {
        "_target_": VOTED_TARGET,
        **{k: cfg[k] for k in WRAPPER_KEYS if k in cfg},
        "judge": {**inner, "_partial_": True},
    }


def vote_salt(i: int) -> str | None:
    """The cache salt of vote `i` (vote 0 is the plain call)."""
    return None if i == 0 else f"judge-vote-{i}"


def check_votes(votes: Any) -> int:
    """The vote count as an int: an odd number >= 1, an integral float (`9.0`) accepted as every integer
    setting accepts it (harness.settings.Setting.problem)."""
    if isinstance(votes, float) and votes.is_integer():
        votes = int(votes)
    if isinstance(votes, bool) or not isinstance(votes, int) or votes < 1 or votes % 2 == 0:
        raise VotesConfigError(f"judge.votes must be an odd number >= 1 (a majority needs an odd count), got {votes!r}")
    return votes


def majority(labels: Sequence[Any]) -> tuple[Any, int, int]:
    """(the most common label or None on a tie, its count, how many labels) of the non-None labels."""
    counted = [x for x in labels if x is not None]
    if not counted:
        return None, 0, 0
    (top, n), *rest = Counter(counted).most_common()
    if rest and rest[0][1] == n:
        return None, n, len(counted)
    return top, n, len(counted)


def _tie_reason(labels: Sequence[Any]) -> str:
    counts = Counter(x for x in labels if x is not None)
    return "judge votes tied: " + ", ".join(f"{n}x {v}" for v, n in sorted(counts.items(), key=str))


def _verdict_label(v: Any) -> str | None:
    return v if v in (CORRECT, INCORRECT) else None


class VotedJudge:
    """`judge` judged `votes` times per answer; the majority verdict and the judge's agreement (module doc).

    `judge` makes one inner judge from a model (Hydra: the inner judge's config with `_partial_: true`).
    """

    def __init__(
        self,
        judge: Callable[..., Any],
        model: ChatModel,
        votes: int = 3,
        confirm_failures: bool = False,
    ) -> None:
        self.votes = check_votes(votes)
        self.confirm_failures = bool(confirm_failures)
        self.judges = [
            judge(model=model if i == 0 else SaltedModel(model, vote_salt(i) or "")) for i in range(self.votes)
        ]
        inner = self.judges[0]
        self.details_name = details_key(inner)  # records keep the inner judge's details key: reports find them
        self.metrics: tuple[MetricSpec, ...] = tuple(inner.metrics) + ((AGREEMENT,) if self.votes > 1 else ())
        self.derived_metrics: tuple[MetricSpec, ...] = tuple(getattr(inner, "derived_metrics", ()))
        self._binary = {s.name for s in inner.metrics if s.binary}
        self._verdict_keys = tuple(
            dict.fromkeys(["verdict", "verdict_strict", *(s.verdict for s in self.derived_metrics if s.verdict)])
        )
        if self.votes > 1 and not temperature_set(getattr(inner, "params", {}), model):
            log.warning(
                "judge.votes=%d at judge temperature 0 (or unset): a deterministic endpoint gives the same verdict "
                "every vote; set the inner judge's params.temperature > 0 (docs/judge-votes.md)",
                self.votes,
            )

    def score(self, item: ScoreInput) -> ScoreResult:
        first = self.judges[0].score(item)
        if self.votes == 1:
            return first  # byte-identical to the plain judge
        details0 = first.details or {}
        if first.error is not None:
            return self._failed(first, [first], 0)
        if not details0.get("judge_called", True):  # no judge asked (exact match, no prompt): nothing to vote on
            return ScoreResult({**first.values, AGREEMENT.name: None}, {**details0, "votes": []})
        if self.confirm_failures and details0.get("verdict") != INCORRECT:
            return self._combine([first])
        results = [first]
        for i in range(1, self.votes):
            res = self.judges[i].score(item)
            results.append(res)
            if res.error is not None:
                return self._failed(res, results, i)
        return self._combine(results)

    def _failed(self, res: ScoreResult, results: list[ScoreResult], i: int) -> ScoreResult:
        values: dict[str, float | None] = {s.name: None for s in self.metrics}
        details = {**(res.details or {}), "votes": [_vote(r) for r in results]}
        return ScoreResult(values, details, error=f"{res.error} (vote {i + 1} of {self.votes})")

    def _combine(self, results: list[ScoreResult]) -> ScoreResult:
        ties: dict[str, str] = {}
        values: dict[str, float | None] = {}
        for spec in self.metrics:
            if spec is AGREEMENT:
                continue
            got = [r.values.get(spec.name) for r in results]
            counted = [float(v) for v in got if v is not None]
            if spec.name in self._binary:
                top, _, _ = majority(counted)
                values[spec.name] = top
                if top is None and counted:
                    ties[spec.name] = _tie_reason(counted)
            else:
                values[spec.name] = sum(counted) / len(counted) if counted else None
        per_vote = [r.details or {} for r in results]
        merged: dict[str, Any] = {}
        for key in self._verdict_keys:
            if not any(key in d for d in per_vote):
                continue
            labels = [_verdict_label(d.get(key)) for d in per_vote]
            top, _, n = majority(labels)
            merged[key] = top or NOT_RUN
            if top is None and n:
                ties[key] = _tie_reason(labels)
        top, agree, n = majority([_verdict_label(d.get("verdict")) for d in per_vote])
        values[AGREEMENT.name] = agree / n if n >= 2 else None
        # The majority's details shape: those of the first vote that gave the majority verdict, verdicts merged.
        rep = next((d for d in per_vote if top is not None and d.get("verdict") == top), per_vote[0])
        details = {**rep, **merged, "votes": [_vote(r) for r in results], "vote_ties": ties or None}
        if "verdict_strict" in ties and "strict_reason" in details:
            details["strict_reason"] = ties["verdict_strict"]
        return ScoreResult(values, details)


def _vote(res: ScoreResult) -> dict[str, Any]:
    d = res.details or {}
    out = {k: d.get(k) for k in VOTE_KEYS}
    if res.error is not None:
        out["error"] = res.error
    return out


def temperature_set(params: Any, model: Any) -> bool:
    """Whether the judge calls go out with a temperature above 0 (its params, else the client's defaults)."""
    t = (params or {}).get("temperature")
    if t is None:
        t = (getattr(model, "default_params", None) or {}).get("temperature")
    try:
        return t is not None and float(t) > 0
    except (TypeError, ValueError):
        return False
