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

.PHONY: setup test demo bench lint docs clean sanitize sanitize-check

$(PY):
	$(PYTHON) -m venv $(VENV)

setup: $(PY)
	@$(PY) -c "import torch" 2>/dev/null || $(PIP) install "$(TORCH_SPEC)"
	$(PIP) install -q "scikit-build-core>=0.11" "pybind11>=2.13" "setuptools>=68" wheel
	$(PIP) install -q --no-build-isolation -e ".[test]"
	@for dir in $(PLUGIN_DIRS); do \
	  echo "installing plugin $$dir"; \
	  $(PIP) install -q --no-build-isolation --no-deps -e "$$dir" || exit 1; \
	done

# The suite on every core (pytest-xdist), each test module in one worker (its module fixtures
# made once).
test: setup
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -n auto --dist loadscope

# The CPU kernels built with AddressSanitizer + UndefinedBehaviorSanitizer into build/sanitize
# (the normal install in $(VENV) is left alone), then the ops tests, hypothesis cases included,
# run against that build: any memory error or undefined behaviour aborts the run. Python is not
# sanitized, so the ASan runtime is preloaded (libstdc++ with it, or ASan cannot intercept
# C++ throws) and leak checking is off (the interpreter never frees everything). GCC only.
SANITIZE_DIR ?= build/sanitize
SANITIZE_CXX ?= g++
SANITIZE_TESTS ?= tests/ops tests/reliability/test_kernel_inputs.py
# No GPU: the sanitized build has no CUDA kernels (the tests would demand them on a GPU machine)
# and ASan's shadow memory clashes with the CUDA driver's mappings (protect_shadow_gap=0).
SANITIZE_ENV = CUDA_VISIBLE_DEVICES= \
  PYSKICK_NATIVE_LIBRARY="$(abspath $(SANITIZE_DIR))/_C$$($(PY) -c \
    'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')" \
  LD_PRELOAD="$$($(SANITIZE_CXX) -print-file-name=libasan.so) \
    $$($(SANITIZE_CXX) -print-file-name=libstdc++.so)" \
  ASAN_OPTIONS=detect_leaks=0:protect_shadow_gap=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# -print-file-name prints the bare name when the compiler has no such library (and a missing
# compiler prints nothing): fail here in one line rather than in the preloads below.
sanitize-check:
	@asan="$$($(SANITIZE_CXX) -print-file-name=libasan.so 2>/dev/null)"; \
	if [ "$${asan#/}" = "$$asan" ] || [ ! -e "$$asan" ]; then \
	  echo "make sanitize: '$(SANITIZE_CXX)' has no AddressSanitizer runtime (libasan.so); install GCC's libasan (Debian/Ubuntu: apt-get install libasan8) or set SANITIZE_CXX to a g++ that has it" >&2; \
	  exit 1; \
	fi

sanitize: sanitize-check setup
	cmake -S . -B $(SANITIZE_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=$(SANITIZE_CXX) -DPYSKICK_SANITIZE=ON -DPYSKICK_WITH_CUDA=OFF \
	  -DPython_EXECUTABLE=$(abspath $(PY)) -Dpybind11_DIR="$$($(PY) -m pybind11 --cmakedir)" \
	  -DSKBUILD_PROJECT_NAME=pyskick \
	  -DSKBUILD_PROJECT_VERSION="$$($(PY) -c 'import pyskick; print(pyskick.__version__)')"
	cmake --build $(SANITIZE_DIR) --parallel
	$(SANITIZE_ENV) $(PY) -c "from pyskick.ops import build_info; \
	  assert build_info().get('sanitizers'), 'not the sanitized build: %s' % build_info()"
	$(SANITIZE_ENV) $(PY) -m pytest -p no:cacheprovider --capture=sys $(SANITIZE_TESTS)

# The type check: mypy's settings, and the modules still excused from some of its checks, are in
# pyproject.toml ([tool.mypy]); its cache is .mypy_cache (about 30 s cold, 1 s warm).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

bench: setup
	$(PY) -m pytest tests/benchmarks --benchmark-enable --benchmark-only \
	  --benchmark-autosave --benchmark-columns=min,median,mean,stddev,rounds
	$(VENV)/bin/pyskick bench

# docs/cli.md, the command-line reference, generated from the Click commands (a test fails when
# it is stale).
docs: setup
	$(PY) -m pyskick_cli.docgen --out docs/cli.md

demo: setup
	$(VENV)/bin/pyskick info
	$(VENV)/bin/pyskick demo --out runs/demo
	@echo "demo report: $(CURDIR)/runs/demo/index.html (table: runs/demo/table.md)"

clean:
	rm -rf build .pytest_cache .hypothesis .benchmarks .mypy_cache
