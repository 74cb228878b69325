# The two commands a user needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
OPENCODE_VERSION := 1.18.34

.PHONY: test test-matrix lint typecheck unit venv opencode demo clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

## Installs the pinned real OpenCode server into .opencode/ (project-local, git-ignored).
opencode:
	@OPENCODE_VERSION=$(OPENCODE_VERSION) bash scripts/install-opencode.sh

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict -p adapter

## Everything CI runs: lint, types, and the whole test suite (real server included).
test: $(STAMP) opencode lint typecheck
	$(BIN)/python -m pytest -q

## The real suite against every OpenCode release of tests/real/releases.toml
## (docs/compatibility.md); one release: `make test-matrix RELEASE=1.17.19`.
test-matrix: $(STAMP)
	$(BIN)/python scripts/test-matrix.py $(foreach r,$(RELEASE),--release $(r))

## Tests without the real server (fast loop while developing).
unit: $(STAMP)
	$(BIN)/python -m pytest -q -m "not real"

demo: $(STAMP)
	$(BIN)/opencode-tree demo

clean:
	rm -rf $(VENV) .opencode .pytest_cache .mypy_cache .ruff_cache
