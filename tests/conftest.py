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
import json
import os
import resource

import pytest


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
# run in this process at that budget (a copy). Only for tests of the output: a test of what an
# engine finds, or one with a mutant applied, runs the engine itself.
_FIRST_RUNS: dict = {}


@pytest.fixture
def engines_run_once(monkeypatch):
    from purgecheck.engines import load_engines
    from purgecheck.mutants.patching import active

    loaded = load_engines()
    for name, engine in list(loaded.items()):
        def run(budget, _engine=engine):
            # a mutant applied around the call is in the key: its run is never another's
            key = (_engine.name, budget, tuple(m.name for m in active()))
            if key not in _FIRST_RUNS:
                _FIRST_RUNS[key] = _engine.run(budget)
            return copy.deepcopy(_FIRST_RUNS[key])
        monkeypatch.setitem(loaded, name, dataclasses.replace(engine, run=run))
