"""Scorers: each declares its metrics (name, direction) and scores one answer at a time."""

from harness.scoring.base import MetricSpec, ScoreInput, Scorer, ScoreResult
from harness.scoring.judges import LongMemEvalJudge, TrpcJudge
from harness.scoring.lexical import LexicalScorer

__all__ = ["LexicalScorer", "LongMemEvalJudge", "MetricSpec", "ScoreInput", "ScoreResult", "Scorer", "TrpcJudge"]
