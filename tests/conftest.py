"""The suite never writes into the project's own state folder (`.purgecheck/`).

Commands keep their last results there (`check`'s results.json, the kill matrix's
mutants.json, fuzzing's failures and example database, `docs`' result pages), and
`purgecheck docs` publishes them. A test that ran `mutants` once saved its one-cell matrix over
an hour's kill matrix there, and `make test` left a results.json of its own checks. So every
test session gets a state folder of its own (`$PURGECHECK_STATE_DIR`, inherited by the
commands the tests start); a test that sets its own still wins. The real Bun stays where
`make setup` put it (purgecheck/measure/bun.py does not read the state folder).
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import json
import os
import resource

import pytest

import session_cache


# Python's cyclic garbage collector, in each test process: a young collection every 50,000
# allocations of containers rather than 700, and after the collection every object it made
# (the modules, the test items: a few hundred thousand, never garbage) out of its full passes
# (gc.freeze). Each full pass walked them all, and the suite's runs (explorers' state sets,
# models' pages, traces) allocate millions of objects: 8 to 10 % of the CPU of the explorer,
# weak, docs and mutant modules (docs/guide.md section 8, the thirteenth round). The forked
# runs (the kill matrix's pool, the docs' timelines) inherit it. Garbage is still collected,
# later; no test's result depends on when (purgecheck.glibc.replay pauses the collector itself).
GC_THRESHOLDS = (50_000, 20, 100)


def pytest_configure(config):
    gc.set_threshold(*GC_THRESHOLDS)


def pytest_collection_finish(session):
    gc.collect()
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def own_state_dir(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PURGECHECK_STATE_DIR", str(tmp_path_factory.mktemp("purgecheck-state")))
        yield


# The suite's cost is CPU, not wall (issue 30, 6: `make test` within 10 minutes on 2 cores
# under a second job's load). With PURGECHECK_TEST_CPU=FILE each test appends one line to FILE:
# its node id and the user+system seconds its process and the children it waited for (C builds,
# the real Bun, solvers' children) spent in its set-up, call and tear-down. A session or module
# fixture is charged to the first test that asks for it.

def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = os.environ.get("PURGECHECK_TEST_CPU")
    start = _cpu_seconds() if path else 0.0
    yield
    if path:
        with open(path, "a") as out:
            out.write(json.dumps({"test": item.nodeid, "cpu": round(_cpu_seconds() - start, 3)}) + "\n")


# The tests of what `check` prints (a table, JSON, one line per row, the statements) need real
# results, not the engines run again: the scenarios engine is 4 to 6 s of CPU a run, and six
# tests ran it. With this fixture every engine gives, for a budget, the results of its first
# run in this process at that budget (a copy). For tests of the output, and of what an engine
# finds on the model as it is (the session's first run is a real run of it: test_concurrent's
# validate and test_glibc_cli's glibc runs are test_cluster_matrix's in-process table's); a
# test with a mutant applied, or one that changes the model or the engine, runs it itself.
_FIRST_RUNS: dict = {}


@pytest.fixture
def engines_run_once(monkeypatch):
    from purgecheck.engines import load_engines
    from purgecheck.mutants.patching import active

    loaded = load_engines()
    for name, engine in list(loaded.items()):
        def run(budget, _engine=engine):
            # a mutant applied around the call is in the key: its run is never another's; the
            # run is the session's (tests/session_cache.py: test_cli's, test_docs' and
            # test_first_hour's check of the scenarios engine, in any process, is one run)
            key = (_engine.name, budget, tuple(m.name for m in active()))
            if key not in _FIRST_RUNS:
                where = f"{_engine.run.__module__}.{_engine.run.__qualname__}"
                _FIRST_RUNS[key] = session_cache.once(f"engine run {key!r} {where}",
                                                      lambda: _engine.run(budget))
            return copy.deepcopy(_FIRST_RUNS[key])
        monkeypatch.setitem(loaded, name, dataclasses.replace(engine, run=run))


# The kill matrix's tests judge each mutant against a clean run of the engine (the baseline),
# and each test's matrix ran that clean run again: the scenarios engine's, 2 to 3 s of CPU, in
# five tests. With this fixture a clean cell of the matrix (no mutant) is judged once per test
# session (tests/session_cache.py), in whichever process asks first (a forked child of the
# pool). The key is the engine (by the function that runs it: a test's own engine under a
# known name is another key) and the judge's arguments (session_cache.clean_cells; the Dask
# workers of test_cluster_matrix read it too). Only for tests whose clean runs are the plain
# model's: a test that changes the model without a mutant must not ask for it.
@pytest.fixture(scope="session", autouse=True)
def session_cache_folder(request, tmp_path_factory):
    root, run = tmp_path_factory.getbasetemp(), ""
    worker = getattr(request.config, "workerinput", None)
    if worker is not None:  # gw0, gw1: the session's folder holds theirs; named by the run
        root, run = root.parent, f"-{worker['testrunuid']}"  # (a --basetemp outlives it)
    session_cache.start(root / f"session-cache{run}")


@pytest.fixture
def clean_cells_once(monkeypatch):
    from purgecheck.mutants import matrix

    monkeypatch.setattr(matrix, "_judged", session_cache.clean_cells(matrix._judged))


# The simulator's full-size runs against the recorded measurements: compare.run_model runs
# every design for each caller, and the modules that compare (test_simulate_real,
# test_scavenger_wake, test_retire, test_measure, test_claims) ran some of the same runs
# (7.7 s of their 77 s of simulation). In a module that sets SIMULATIONS_ONCE, each run of a
# named workload is kept for the session (session_cache.shared_simulate: keyed by the
# workload's parameters, every argument and the mutants applied). Only for modules that do
# not change the simulator or the model around a run.
@pytest.fixture(scope="module", autouse=True)
def simulations_once(request):
    if not getattr(request.module, "SIMULATIONS_ONCE", False):
        yield
        return
    import purgecheck.simulate.mimalloc as mimalloc

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mimalloc, "simulate", session_cache.shared_simulate(mimalloc.simulate))
        yield


# `make test` runs the modules in TEST_WORKERS processes (the cores and one: the Makefile), a
# module at a time (`--dist loadfile`), in the order of the collection (`--no-loadscope-reorder`:
# xdist's own order is by test count, which put the costliest module, 13 tests, among the last).
# Nothing here counts on the number: the session's runs are kept in files any process reads
# (tests/session_cache.py), each process has its own tmp folder, Dask and redis take free ports.
# A module that starts last while the others have nothing left holds the run alone, a core idle
# (or taken by a second job):
# the costliest modules go first (longest first), the rest in their own order after them.
# The modules of most CPU are listed, longest first (with the ninth round's thirteen, the
# modules of 10 to 20 s that came late in the alphabet, test_scavenger_wake, test_validate_rare
# and test_weak_fork, started among the last and ended the run with the other processes
# idle), so what is left at the end is the short modules.
# Measured with PURGECHECK_TEST_CPU (s of CPU, the whole fast tier, `-n 3`, the mean of two
# runs at load 5 to 7, 2026-12-05, issue 30's thirteenth round after its changes, on a machine
# about three times the tenth round's speed; every module of 1.6 s or more). That round moved
# test_validate_rare (8.4 s) from 23rd to 8th and test_concurrent (6.3 s) from 35th to 13th.
COSTLIEST_FIRST = (
    "test_cluster_matrix.py",         # 17.9 (and its waits: a hang's timeout, a killed worker)
    "test_bench.py",                  # 16.9 (the cluster, the real Bun: waits too)
    "test_measure.py",                # 12.4
    "test_proofs_z3.py",              # 11.5
    "test_weak_engines.py",           # 9.7
    "test_proofs_explorer.py",        # 9.3
    "test_simulate_real.py",          # 8.5
    "test_validate_rare.py",          # 8.4
    "test_doc_examples_run.py",       # 7.7
    "test_weak_protocol.py",          # 6.8
    "test_docs.py",                   # 6.4
    "test_replay.py",                 # 6.4
    "test_concurrent.py",             # 6.3
    "test_retire.py",                 # 5.7
    "test_fuzz_cli.py",               # 5.5
    "test_campaign.py",               # 5.4
    "test_reference_c.py",            # 5.3
    "test_explorer_cluster.py",       # 5.0
    "test_proofs_cli.py",             # 4.7
    "test_glibc_proofs.py",           # 4.7
    "test_scavenger_wake.py",         # 4.5
    "test_fuzz_machines.py",          # 4.3
    "test_bad_input.py",              # 3.7
    "test_proofs_mirror.py",          # 3.6
    "test_hold_mutants.py",           # 3.4
    "test_cli.py",                    # 3.3
    "test_bench_compare.py",          # 3.3
    "test_mutation.py",               # 3.2
    "test_realtests.py",              # 3.0
    "test_incremental_check.py",      # 2.7
    "test_validate.py",               # 2.7
    "test_docs_shown.py",             # 2.4
    "test_program_driver.py",         # 2.3
    "test_weak_fork.py",              # 2.2
    "test_claims.py",                 # 2.0
    "test_simulate_glibc.py",         # 2.0
    "test_replay_stream.py",          # 1.9
    "test_cbuild.py",                 # 1.8
    "test_conformance_campaign.py",   # 1.8
    "test_diff.py",                   # 1.8
    "test_bad_input_commands.py",     # 1.8
    "test_simulate.py",               # 1.7
    "test_page_mutants.py",           # 1.7
    "test_variants.py",               # 1.7
)


def pytest_collection_modifyitems(config, items):
    rank = {name: n for n, name in enumerate(COSTLIEST_FIRST)}
    # a stable sort: each module's tests keep their order, the other modules theirs
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
