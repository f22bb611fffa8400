# Two commands for a newcomer:  `make bench` (the main job) and `make test` (the test suite).
# Both set up .venv on first use: Python deps, the embedded llama.cpp server (compiled, ~5 min once), models.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_MODEL ?= qwen25_coder_05b
SMOKE_MODEL := smollm2_135m

.PHONY: setup bench test models clean-runs

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install -e '.[local,test]'
	touch $(STAMP)

setup: $(STAMP)

models: $(STAMP)
	$(BIN)/lme-harness models pull $(SMOKE_MODEL)
	$(BIN)/lme-harness models pull $(BENCH_MODEL)

# The main job: a few oracle cases x all three modes on the embedded model; writes runs/quickstart/report.md.
bench: $(STAMP)
	$(BIN)/lme-harness run $(ARGS)

test: $(STAMP)
	$(BIN)/lme-harness models pull $(SMOKE_MODEL)
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

clean-runs:
	rm -rf runs outputs multirun
