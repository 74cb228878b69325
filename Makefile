# The two commands a user needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
OPENCODE_VERSION := 1.18.34
# make test's results as JUnit XML: .ci/run hands them to the matrix, which takes the
# pinned release's row from them instead of running its real suite again.
TEST_RESULTS := .test-results/make-test.xml
# pytest-xdist workers (measured on 2 cores: docs/compatibility.md, "CI"); 0 = no xdist.
WORKERS ?= 2
PARALLEL = $(if $(filter-out 0,$(WORKERS)),-n $(WORKERS) --dist loadfile)

.PHONY: test test-matrix lint typecheck unit venv opencode chromium postgres demo web clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

venv: $(STAMP)

## Installs the pinned real OpenCode server into .opencode/ (project-local, git-ignored).
opencode:
	@OPENCODE_VERSION=$(OPENCODE_VERSION) bash scripts/install-opencode.sh

## Debian's chromium for the browser test (Playwright drives it; it cannot download one).
chromium:
	@test -x /usr/bin/chromium || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; }

## Debian's PostgreSQL server binaries for the thread store's tests (tests/web/store:
## a throwaway server per run, started by the tests as an unprivileged user).
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq postgresql; }

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy --strict

## Everything CI runs: lint, types, and the whole test suite (real server included).
test: $(STAMP) opencode chromium postgres lint typecheck
	$(BIN)/python -m pytest -q $(PARALLEL) --junitxml=$(TEST_RESULTS)

## The real suite against every OpenCode release of tests/real/releases.toml
## (docs/compatibility.md); one release: `make test-matrix RELEASE=1.17.19`.
## PINNED_RESULTS=$(TEST_RESULTS) reuses make test's run for the pinned release.
test-matrix: $(STAMP)
	$(BIN)/python scripts/test-matrix.py --workers $(WORKERS) $(foreach r,$(RELEASE),--release $(r)) \
	  $(if $(PINNED_RESULTS),--pinned-results $(PINNED_RESULTS))

## Tests without the real server (fast loop while developing).
unit: $(STAMP) chromium postgres
	$(BIN)/python -m pytest -q -m "not real" $(PARALLEL)

demo: $(STAMP)
	$(BIN)/opencode-tree demo

## The stop-button page (adapter.web) on a real local OpenCode with a scripted model.
web: $(STAMP) opencode
	$(BIN)/opencode-tree web --try

clean:
	rm -rf $(VENV) .opencode .test-results .pytest_cache .mypy_cache .ruff_cache
