# make check:   set up, then run the main job (proofs, fuzzing, conformance, docs) with a summary;
#               the kill matrix stops each mutant at its first kill (README, "What runs where").
# make nightly: the same with the whole kill matrix (every mutant x every engine), for the docs.
# make test:    set up, then run the test suite.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed

.PHONY: setup check nightly test bytecode bench bench-full bench-compare clean reference tools bun

# The Python packages and the C reference's builds (the two Relacy builds alone are half a
# minute of g++) are made side by side: 2 jobs, the C builds sharing them (GNU make's job
# server); the real Bun takes the first job either leaves. Not 3: pip's install is the longest
# chain (about 65 s of CPU, one process), and a third job took CPU from it (docs/guide.md
# section 8, the tenth round). The reference comes after the tools (Relacy's header is one).
setup: tools
	@$(MAKE) --no-print-directory -j2 $(STAMP) reference bun

# System tools the checks run (CI is a fresh Debian, as root): strace for glibc conformance,
# sqlite3, one of the real programs `purgecheck record` is tested on (docs/record.md),
# redis-server for the shared example database's tests, heaptrack and zstd for replaying
# heaptrack's recordings (docs/record.md), relacy-dev (a header-only C++ checker of weak
# memory) for the relacy engine (docs/proofs.md), perf (linux-perf) for `purgecheck measure`'s
# count of the event loop's turns (docs/measure.md), xz and perl, real programs recorded in the
# tests, and pypy3, the engine of `purgecheck simulate` for large inputs (--engine;
# purgecheck/simulate/engine.py). One apt-get update, only when one is missing.
TOOLS := strace sqlite3 redis-server heaptrack zstdcat perf xz perl pypy3
HEADERS := /usr/include/relacy/relacy.hpp
tools:
	@(for t in $(TOOLS); do command -v $$t >/dev/null || exit 1; done; \
	  for h in $(HEADERS); do test -f $$h || exit 1; done) || \
		(apt-get update && apt-get install -y strace sqlite3 redis-server heaptrack zstd relacy-dev \
		  linux-perf xz-utils perl pypy3)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(STAMP)

# The real Bun whose mimalloc is seed 000's fork (purgecheck measure): version 1.4.4 from the
# npm registry, its integrity checked against the one pinned in purgecheck/measure/bun.py,
# into .purgecheck/bun-1.4.4/ (nothing to do when it is there). bun.py needs only Python's
# standard library: the system's Python runs it from the tree, not after pip's install.
bun:
	$(PY) -m purgecheck.measure.bun install

reference: tools
	@if [ -f reference_c/Makefile ]; then $(MAKE) --no-print-directory -C reference_c; fi

check: setup
	$(BIN)/purgecheck check
	$(BIN)/purgecheck mutants --quick --first-kill
	$(BIN)/purgecheck docs

nightly: setup
	PURGECHECK_CAMPAIGN_SECONDS=600 $(BIN)/purgecheck check  # the differential campaign 600 s, not make check's 30
	$(BIN)/purgecheck mutants --quick
	$(BIN)/purgecheck docs
	$(BIN)/python -m pytest --no-header -q -rfE -n auto --dist loadfile -m slow  # the suite's slow tiers (README, "What runs where")

# The project's modules compiled once before the run: where PYTHONDONTWRITEBYTECODE is set (as
# on the helpers' machine) every process that imports them (the 2 xdist workers, each Dask
# worker, each command a test starts) compiled them again from source, 1.2 to 1.8 s of CPU
# each; compileall writes the .pyc files anyway (1 s once), and Python reads them.
# The test processes (xdist's workers, each a module at a time): one more than the cores. Beside
# a second job a third process on 2 cores takes a larger share of the machine and fills the
# others' waits (a Dask cluster's start, a hang's timeout); alone it costs about 5 % of wall
# (docs/guide.md section 8, the sixth, seventh and ninth rounds). `make test TEST_WORKERS=2`
# for one a core.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test: setup
	$(BIN)/python -m compileall -q model proofs purgecheck stateful_tests \
		tests/session_cache.py > /dev/null
	$(BIN)/python -m pytest --no-header -rfE -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder  # TEST_WORKERS processes, each module's tests in one of them (its fixtures, e.g. a Dask cluster, shared), the costliest modules first (tests/conftest.py); failures listed at the end

# The benchmarks' figures are of the modules read from .pyc files, as a user's are once each
# module has been imported (Python writes them; not here, where PYTHONDONTWRITEBYTECODE is
# set): compiled for both interpreters first, the PyPy engine's child's too (its imports 0.13
# s of CPU from source, 0.09 s from .pyc: docs/record.md, fifteenth round).
bytecode: setup
	$(BIN)/python -m compileall -q model purgecheck > /dev/null
	if command -v pypy3 > /dev/null; then pypy3 -m compileall -q model purgecheck > /dev/null; fi

bench: bytecode
	$(BIN)/python -m purgecheck.bench

bench-full: bytecode
	$(BIN)/python -m purgecheck.bench --full  # the cluster and record benchmarks at their own sizes

# Each benchmark on BASE (default: the last tag, else HEAD~1) and on this tree, alternately,
# 3 runs a side; exit 1 on a figure worse beyond the noise (docs/bench.md). ONLY=traces for one
# benchmark, QUICK=1 for tiny sizes (a few minutes).
bench-compare: setup
	$(BIN)/python -m purgecheck.bench.compare $(if $(BASE),--base $(BASE)) \
		$(foreach b,$(ONLY),--only $(b)) $(if $(QUICK),--quick)

clean:
	rm -rf $(VENV) .purgecheck .pytest_cache .hypothesis
	@if [ -f reference_c/Makefile ]; then $(MAKE) -C reference_c clean; fi
