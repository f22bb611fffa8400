# Two commands for a newcomer:  `make bench` (the main job) and `make test` (the test suite).
# Both set up .venv on first use: Python deps, the embedded llama.cpp runtime (a prebuilt wheel: nothing compiles), models.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed
RAY_VENV := .venv-ray
RAY_STAMP := $(RAY_VENV)/.installed
RAY_PKGS := $(RAY_VENV)/.packages
# The main job's model (configs/experiment/quickstart.yaml: the default config's 1.5B).
BENCH_MODEL ?= qwen25_coder_15b
# The main job's model is fetched at its setup; CI, which never runs the main job, sets BENCH_PULL= to skip it.
BENCH_PULL ?= $(BENCH_MODEL)
SMOKE_MODEL := smollm2_135m

# Some hosts export PYTHONDONTWRITEBYTECODE=1 (ours do): every Python process then compiles each module it imports
# from source, every time (about 2 s of each process that loads pandas, matplotlib, Hydra and the harness; the test
# suite starts hundreds). Python's default is back for every recipe here: a module's bytecode is written once, beside
# it in __pycache__ (ignored by git), on its first import.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup bench test test-fast lint gate gate-replay gate-live gate-baseline models clean-runs behaviour runtime-compiled ray-venv

# The main job's setup (`make bench` on a fresh machine): the Python dependencies and the prebuilt llama.cpp runtime
# (xllamacpp: nothing to compile), then the main job's model file. No torch: the main job's retriever is the default's
# keyword half (configs/experiment/quickstart.yaml). docs/quickstart.md has the measured times.
$(BENCH_STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	# The model download (network) overlaps pip's install (mostly CPU and disk); the pull needs only omegaconf and tqdm.
	# --no-compile: Python compiles only the modules the job imports, when it imports them, not every installed file.
	$(BIN)/pip install -q 'omegaconf>=2.2,<2.4' tqdm
	$(if $(BENCH_PULL),PYTHONPATH=. $(BIN)/python -m harness.llm.models pull $(BENCH_PULL) & pull=$$!;,pull=;) \
	  $(BIN)/pip install --no-compile -e '.[xllama]'; status=$$?; \
	  if [ -n "$$pull" ]; then wait $$pull || { echo 'model pull failed'; exit 1; }; fi; exit $$status
	touch $(BENCH_STAMP)

# Everything else (`make test`, `make lint`, `make gate`): the main job's setup plus torch for the retriever's
# embedder, the test and cluster tools (`make test`/`make gate` pull the smoke model). Nothing is compiled: every
# embedded model runs on the prebuilt xllamacpp runtime (model.runtime, configs/model/*.yaml); the compiled
# llama-cpp-python runtime is opt-in (`make runtime-compiled`). docs/quickstart.md has the measured times.
$(STAMP): $(BENCH_STAMP) pyproject.toml
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e '.[xllama,embed,test,sweep,cluster,memory]'
	touch $(STAMP)

# Opt-in: the compiled llama-cpp-python runtime (model.runtime=llama-cpp-python), built for the portable x86-64-v3
# baseline (never -march=native: docs/models.md) once per flag set into ~/.cache/lme-harness/wheels (7-8 minutes on
# 2 cores; LME_LLAMA_PROFILE=native opts into a host-specific build), installed, then checked with objdump (binutils).
# With it installed, `make test` also runs the tests that need it (listed in docs/models.md).
runtime-compiled: $(STAMP)
	$(BIN)/python scripts/llama_runtime.py install
	$(BIN)/pip install -e '.[local,xllama,embed,test,sweep,cluster,memory]'
	$(BIN)/python scripts/llama_runtime.py check

setup: $(STAMP)

models: $(STAMP)
	$(BIN)/lme-harness models pull $(SMOKE_MODEL)
	$(BIN)/lme-harness models pull $(BENCH_MODEL)

# The main job: the shortest oracle case x all three modes on the embedded 1.5B model, sized for a slow 2-core host
# (configs/experiment/quickstart.yaml, docs/quickstart.md); writes runs/quickstart/+experiment=quickstart/report.md.
bench: $(BENCH_STAMP)
	$(BIN)/lme-harness run +experiment=quickstart $(ARGS)

# Lint: ruff (rules and format, [tool.ruff] in pyproject.toml) over the tree, mypy over every package ([tool.mypy]).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Two pytest runs: everything but the Ray test in .venv, then the Ray test (tests/system/test_ray_cluster.py) in .venv-ray
# (hydra-ray-launcher needs cloudpickle<3, the joblib launcher in .venv cloudpickle>=3; docs/cluster.md).
test: $(STAMP) $(RAY_STAMP)
	$(BIN)/lme-harness models pull $(SMOKE_MODEL)
	$(BIN)/python -m pytest -q -m "not ray" -n $${LME_TEST_WORKERS:-auto} --dist loadfile --durations=30 $(PYTEST_ARGS)
	$(RAY_VENV)/bin/python -m pytest -q -m ray $(if $(PYTEST_ARGS),$(PYTEST_ARGS),$(RAY_TESTS)) || test $$? -eq 5   # 5: PYTEST_ARGS selected no Ray test

# Ray's own packages need nothing of .venv, so `make -j2` (.ci/run) installs them beside .venv's install; the link to
# .venv and the import check come after it.
$(RAY_PKGS): scripts/ray_venv.sh
	PY=$(PY) scripts/ray_venv.sh --packages $(RAY_VENV)
	touch $(RAY_PKGS)

# The files holding Ray tests: collecting only them, not the whole suite to deselect it, saves seconds.
RAY_TESTS = $(shell grep -rl --include='test_*.py' 'mark\.ray' tests)

# The fast selection, for a contributor's loop (under two minutes on 2 cores; tests/README.md): every test but those
# that start a process, run a whole lme-harness command in process, read the large real data files, run mem0 or draw
# the figures (markers in pyproject.toml, enforced by tests/support/marker_guard.py). CI and `make test` run them all.
# Two xdist workers a core: many of these tests wait (a fake server's delay, a timeout being proven), and a second
# worker on the core runs while one waits (measured: tests/README.md "The fast selection").
FAST_TESTS = not (process or slow or postgres or ray or e2e or real_data or mem0 or figures)
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "$(FAST_TESTS)" -n $${LME_TEST_WORKERS:-$$((2 * $$(nproc)))} --dist loadfile --durations=10 $(PYTEST_ARGS)

$(RAY_STAMP): $(STAMP) $(RAY_PKGS) scripts/ray_venv.sh
	scripts/ray_venv.sh $(VENV) $(RAY_VENV)
	touch $(RAY_STAMP)

ray-venv: $(RAY_STAMP)

# The CI quality/cost gate (docs/ci-gate.md), two stages:
# 1. replay gate: the whole benchmark against the committed recorded responses (GATE_REPLAY_FIXTURE), no model:
#    only harness code is under test, so every metric is checked exactly (any machine, seconds);
# 2. live gate: the same benchmark on the embedded smallest model, run fresh (no response cache), checked with
#    tolerances measured across llama.cpp builds (strict where a figure depends on the input only); it runs on the
#    prebuilt xllamacpp runtime, as every embedded model does (docs/ci-gate.md).
# Exit 3 from `run`/`replay` (a failed case) still reaches the gate, whose `failed` check reports it.
GATE_BASELINE ?= baselines/ci_smollm2.yaml
GATE_REPLAY_FIXTURE ?= baselines/ci_replay.jsonl
GATE_REPLAY_BASELINE ?= baselines/ci_replay.yaml
GATE_DIR ?= runs/ci_gate
GATE_REPLAY_DIR ?= runs/ci_gate_replay
# The gate's run is defined once, in configs/experiment/ci_gate.yaml (the tests and the behaviour baseline use it too).
GATE_ARGS := +experiment=ci_gate
gate: gate-replay gate-live

# The stages apart: .ci/run runs the replay gate (one process, no model) beside lint and the behaviour baseline.
gate-replay: $(STAMP)
	rm -rf $(GATE_REPLAY_DIR)
	$(BIN)/lme-harness replay $(GATE_REPLAY_FIXTURE) hydra.run.dir=$(GATE_REPLAY_DIR) $(GATE_ARGS) || test $$? -eq 3
	$(BIN)/lme-harness gate --baseline $(GATE_REPLAY_BASELINE) $(GATE_REPLAY_DIR)

gate-live: $(STAMP)
	$(BIN)/lme-harness models pull $(SMOKE_MODEL)
	rm -rf $(GATE_DIR)
	$(BIN)/lme-harness run hydra.run.dir=$(GATE_DIR) $(GATE_ARGS) || test $$? -eq 3
	$(BIN)/lme-harness gate --baseline $(GATE_BASELINE) $(GATE_DIR)

# After an intended change: refresh both baselines and re-record the fixture (review `git diff baselines/`).
gate-baseline: $(STAMP)
	$(BIN)/lme-harness models pull $(SMOKE_MODEL)
	rm -rf $(GATE_DIR) $(GATE_DIR)_record $(GATE_REPLAY_DIR)
	$(BIN)/lme-harness run hydra.run.dir=$(GATE_DIR) $(GATE_ARGS)
	$(BIN)/lme-harness gate --write-baseline --policy live --baseline $(GATE_BASELINE) $(GATE_DIR)
	$(BIN)/lme-harness replay $(GATE_REPLAY_FIXTURE) --record hydra.run.dir=$(GATE_DIR)_record $(GATE_ARGS)
	$(BIN)/lme-harness replay $(GATE_REPLAY_FIXTURE) hydra.run.dir=$(GATE_REPLAY_DIR) $(GATE_ARGS)
	$(BIN)/lme-harness gate --write-baseline --policy exact --baseline $(GATE_REPLAY_BASELINE) $(GATE_REPLAY_DIR)

clean-runs:
	rm -rf runs outputs multirun

# The behaviour baseline of a refactoring (docs/behaviour-baseline.md): every question type x every mode with both
# judges, a rescore, a plan, an export and the replay gate on a fake endpoint, hashed against baselines/behaviour.json.
behaviour: $(STAMP)
	$(BIN)/python -m scripts.behaviour_baseline check
