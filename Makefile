# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev

.PHONY: run test stress lint bench clean pg

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[plot]'
	touch $@

$(STAMP_DEV): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(STAMP_RUN)

run: $(STAMP_RUN)
	$(BIN)/python -m ektelo.demo

test: $(STAMP_DEV)
	$(BIN)/ruff check src tests benchmarks experiments
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

# the load and crash tests at the full scale of issue #26 (16 × 200 requests, 50
# kill rounds); `make test` runs them at a quick scale
stress: $(STAMP_DEV)
	EKTELO_STRESS=full $(BIN)/python -m pytest -q -m slow

lint: $(STAMP_DEV)
	$(BIN)/ruff check src tests benchmarks experiments
	$(BIN)/mypy

bench: $(STAMP_RUN)
	for f in benchmarks/bench_*.py; do PYTHONPATH=. $(BIN)/python $$f || exit 1; done

# a throwaway PostgreSQL cluster for the ledger store; prints its URL
# (export EKTELO_PG_URL=<url> to run tests/store against it)
pg: $(STAMP_DEV)
	$(BIN)/python tests/store/pgcluster.py start

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
