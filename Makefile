# Every target does its own set-up: a fresh clone needs only python3 (3.11+).
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: all demo test lint typecheck unit bench bench-quick clean

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

demo: $(STAMP)
	$(BIN)/python -m aengine._demo

lint: $(STAMP)
	$(BIN)/ruff check aengine adapters tests bench
	$(BIN)/ruff format --check aengine adapters
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -q

test: lint typecheck unit

bench: $(STAMP)
	$(BIN)/python -m bench

bench-quick: $(STAMP)
	$(BIN)/python -m bench --quick

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache
