# Every target does its own set-up on a fresh machine: a virtual environment in .venv, torch
# only if it is missing (never a multi-GB CUDA build pulled in by a dependency), the package in
# editable mode with its C++/CUDA extension, and every plugin distribution under plugins/.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
TORCH_SPEC ?= torch==2.13.0
PLUGIN_DIRS := $(patsubst %/pyproject.toml,%,$(wildcard plugins/*/pyproject.toml))

.PHONY: setup test demo bench lint clean

$(PY):
	$(PYTHON) -m venv $(VENV)

setup: $(PY)
	@$(PY) -c "import torch" 2>/dev/null || $(PIP) install "$(TORCH_SPEC)"
	$(PIP) install -q "scikit-build-core>=0.10" "pybind11>=2.13" "setuptools>=68" wheel
	$(PIP) install -q --no-build-isolation -e ".[test]"
	@for dir in $(PLUGIN_DIRS); do \
	  echo "installing plugin $$dir"; \
	  $(PIP) install -q --no-build-isolation --no-deps -e "$$dir" || exit 1; \
	done

test: setup
	$(VENV)/bin/ruff check .
	$(PY) -m pytest

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: setup
	$(PY) -m pytest tests/benchmarks --benchmark-enable --benchmark-only \
	  --benchmark-autosave --benchmark-columns=min,median,mean,stddev,rounds
	$(VENV)/bin/pyskick bench

demo: setup
	$(VENV)/bin/pyskick info
	$(VENV)/bin/pyskick demo --out runs/demo
	@echo "demo report: $(CURDIR)/runs/demo/index.html (table: runs/demo/table.md)"

clean:
	rm -rf build .pytest_cache .hypothesis .benchmarks
