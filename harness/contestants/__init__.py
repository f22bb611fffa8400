"""Contestants: what the benchmark compares (harness/contestants/base.py says what one must provide)."""

from harness.contestants.base import (
    Answer,
    CaseHistory,
    Contestant,
    DatedSession,
    Ingested,
    Question,
    Toolkit,
)

__all__ = ["Answer", "CaseHistory", "Contestant", "DatedSession", "Ingested", "Question", "Toolkit"]
