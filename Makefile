# make check: set up, then run the main job (proofs, fuzzing, conformance, docs) with a summary.
# make test:  set up, then run the test suite.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: setup check test bench clean reference tools

setup: tools $(STAMP) reference

# System tools the checks run: strace for glibc conformance (CI is a fresh Debian, as root);
# sqlite3, one of the real programs `purgecheck record` is tested on (docs/record.md).
tools:
	@command -v strace >/dev/null || (apt-get update && apt-get install -y strace)
	@command -v sqlite3 >/dev/null || (apt-get update && apt-get install -y sqlite3)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(STAMP)

reference:
	@if [ -f reference_c/Makefile ]; then $(MAKE) --no-print-directory -C reference_c; fi

check: setup
	$(BIN)/purgecheck check
	$(BIN)/purgecheck mutants --quick
	$(BIN)/purgecheck docs
	$(BIN)/python -m pytest --no-header -q -m slow tests/test_replay.py  # real programs, full scale (docs/record.md)

test: setup
	$(BIN)/python -m pytest --no-header -rfE  # a line per test module with its progress; failures listed at the end

bench: setup
	$(BIN)/python -m purgecheck.bench

clean:
	rm -rf $(VENV) .purgecheck .pytest_cache .hypothesis
	@if [ -f reference_c/Makefile ]; then $(MAKE) -C reference_c clean; fi
