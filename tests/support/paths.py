"""Where things are, for tests: the checkout, its configs, and the tests' data fixtures (tests/fixtures/)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs"
FIXTURES = REPO / "tests" / "fixtures"
