# Every target does its own set-up: a fresh clone needs only python3 (3.11+).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# `make demo` has its own, small environment: the package's runtime
# dependencies (numpy, anyio, sniffio) and trio, without the dev tools.
DEMO_VENV  := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed
DEMO_PIP   := install -q --disable-pip-version-check -e . 'trio>=0.25'
# `make docs` adds the site generator (the `docs` extra) to .venv.
DOCS_STAMP := $(VENV)/.docs-installed

.PHONY: all demo docs test lint typecheck unit bench bench-quick gpu-check clean

all: test

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	@# torch is the test oracle (CPU build, a local file on these machines);
	@# its tests skip with a reason where it cannot be installed.
	-$(BIN)/python -m pip install -q torch==2.13.0 || echo "torch 2.13.0 not installable: torch-oracle tests will skip"
	-$(BIN)/python -m pip install -q autograd mygrad || echo "autograd/mygrad not installable: their benchmark columns will be empty"
	touch $(STAMP)

# python3's own pip installs into the demo venv where it can (pip >= 22.3:
# --python), which saves bootstrapping a pip inside it; else the venv gets one.
$(DEMO_STAMP): pyproject.toml
	$(PY) -m venv --without-pip $(DEMO_VENV)
	if $(PY) -m pip --python $(DEMO_VENV)/bin/python --version >/dev/null 2>&1; then \
		$(PY) -m pip --python $(DEMO_VENV)/bin/python $(DEMO_PIP); \
	else \
		$(DEMO_VENV)/bin/python -m ensurepip >/dev/null && $(DEMO_VENV)/bin/python -m pip $(DEMO_PIP); \
	fi
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(DEMO_VENV)/bin/python -m aengine._demo

$(DOCS_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[docs]'
	touch $(DOCS_STAMP)

# The site (mkdocs.yml) into site/; --strict: a broken link, anchor or API
# reference fails the build.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check aengine adapters tests bench
	$(BIN)/ruff format --check aengine adapters
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	@# faulthandler stays on after pytest: a crash at exit prints every thread's stack
	PYTHONFAULTHANDLER=1 $(BIN)/python -m pytest -q

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python -m bench

bench-quick: $(STAMP)
	$(BIN)/python -m bench --quick

# On a machine with an NVIDIA GPU, CuPy and a CUDA build of torch (which it
# uses as they are installed there): the op tests on cuda:0 in float64 and
# float32, the GPU tests and the GPU benchmark, results in $(GPU_OUT)/.
GPU_OUT ?= gpu-check
gpu-check:
	scripts/gpu-check $(GPU_OUT)

clean:
	rm -rf $(VENV) $(DEMO_VENV) build site *.egg-info .mypy_cache .ruff_cache
