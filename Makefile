# Two commands set everything up on a fresh machine:  make demo  |  make test
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO ?= demo/results.zarr

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# Core + dev tools (no jax): what analysing results needs.
$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

# Adds jax + crax-bench for training and its tests, and textual-serve for the browser test (--serve).
$(VENV)/.train-installed: pyproject.toml $(VENV)/.dev-installed
	$(BIN)/python -m pip install -q -e '.[dev,train,plot,parquet,remote,serve]'
	touch $@

$(DEMO): | $(VENV)/.dev-installed
	mkdir -p $(dir $(DEMO))
	$(BIN)/saferl demo $(DEMO)

demo: $(VENV)/.dev-installed $(DEMO)
	$(BIN)/saferl validate $(DEMO)
	$(BIN)/saferl-tui $(DEMO)

test: $(VENV)/.train-installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n 2 --dist worksteal

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .

bench: $(VENV)/.dev-installed
	$(BIN)/python bench/write_cube.py

clean:
	rm -rf $(VENV) demo bench/out .pytest_cache
