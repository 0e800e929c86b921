"""The kill matrix on a real Dask LocalCluster (issue 19): the same verdicts as the home-made
pool, a hanging or crashing cell reported with nothing left patched in the workers, a worker
killed mid-task retried, a task that keeps killing its workers reported; and first-kill.

One cluster of 2 workers for the module (Dask starts in seconds); only the cheap engines
(validate, scenarios) with the quick budget run here.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

import cloudpickle
import pytest

import model.epoch as ep
from purgecheck.cli import main
from purgecheck.cluster.client import ALLOWED_FAILURES, dask_client
from purgecheck.mutants import MUTANTS, Mutant, Patch
from purgecheck.mutants.matrix import (CRASHED, FAILED, HELD, KILLED, NOT_RUN, SURVIVED,
                                       TIMEOUT, Cell, Plan, run_matrix)

import test_mutation
from test_mutation import EXITS, HANGS, HARMLESS

# The tests' own mutants are functions of test modules, which the workers cannot import.
cloudpickle.register_pickle_by_value(sys.modules[__name__])
cloudpickle.register_pickle_by_value(test_mutation)

ORIGINAL_DUE = ep.is_epoch_due


def _due_kills_its_worker(start, now, interval):
    os.kill(os.getppid(), signal.SIGKILL)  # the run's parent is the worker
    os._exit(1)


KILLS_WORKER = Mutant("test-kills-worker", "the run kills the worker that runs it", (),
                      (Patch("model.epoch", "is_epoch_due", _due_kills_its_worker),))


@pytest.fixture(scope="module")
def client():
    with dask_client(workers=2) as c:
        yield c


@pytest.fixture
def workers_clean_cells_once(client):
    """For the tests whose subject is not the clean run (a hang, a crash, a killed worker):
    the workers' clean cells are the session's (clean_cells_once's), not the scenarios
    engine's run again in every test (3 to 5 s of a worker's CPU each).
    test_a_small_matrix_on_dask_equals_the_pool keeps the workers' own."""
    import session_cache

    session_cache.workers_clean_cells(client)
    yield
    session_cache.workers_clean_cells(client, shared=False)


def verdicts(m):
    return ({e: c.verdict for e, c in m.baseline.items()},
            {k: c.verdict for k, c in m.cells.items()})


def _small_matrix_on_dask_equals_the_pool(client, killed: str, engine: str) -> dict:
    """A kill and a survivor (HARMLESS) on the engine, on Dask and in the pool: the same
    verdicts, each cell back once with the progress line's counts; the kill's failures by
    invariant (what the report and the docs need: a replay, the step table). The pool's clean
    run is the session's (clean_cells_once), the workers' their own."""
    mutants = [MUTANTS[killed], HARMLESS]
    seen = []
    on_dask = run_matrix(mutants, [engine], quick=True, timeout=300, client=client,
                         progress=lambda n, total, cell: seen.append((n, total)))
    in_pool = run_matrix(mutants, [engine], quick=True, timeout=300, workers=2)
    assert verdicts(on_dask) == verdicts(in_pool)
    assert on_dask.cells[(killed, engine)].verdict == KILLED
    assert on_dask.cells[("test-harmless", engine)].verdict == SURVIVED
    assert on_dask.survivors() == ["test-harmless"]
    assert seen == [(n, 3) for n in range(1, 4)]
    return {f["invariant"]: f for f in on_dask.cells[(killed, engine)].failures}


def test_a_small_matrix_on_dask_equals_the_pool(client, clean_cells_once):
    """On the glibc engine (2 s of CPU a quick run, the scenarios engine's 3.5 to 5: six runs
    of the scenarios engine were a quarter of this module's CPU; that size in the slow tier,
    test_a_small_matrix_of_the_scenarios_engine_on_dask_equals_the_pool, with the same
    assertions)."""
    failures = _small_matrix_on_dask_equals_the_pool(client, "glibc-split-remainder-lost",
                                                     "glibc")
    assert failures and all(f["replay"].startswith("purgecheck glibc run ")
                            for f in failures.values())


@pytest.mark.slow
def test_a_small_matrix_of_the_scenarios_engine_on_dask_equals_the_pool(client,
                                                                       clean_cells_once):
    # (not age-lt-1 x validate: whether real threads show that mutant depends on the timing;
    # a kill and a survivor: a second kill, unit-os-page's, was 2 of the 8 runs of the engine,
    # 7 s of CPU, half of it in the workers)
    young = _small_matrix_on_dask_equals_the_pool(client, "age-lt-1", "scenarios")
    assert young["HD-YOUNG-KEPT"]["replay"].startswith("purgecheck scenario ")


def test_hanging_and_crashing_cells_are_reported_and_leave_no_patch(client,
                                                                   workers_clean_cells_once):
    m = run_matrix([HANGS, EXITS], ["scenarios"], quick=True, timeout=6, client=client)
    hang, crash = m.cells[("test-hangs", "scenarios")], m.cells[("test-exits", "scenarios")]
    assert hang.verdict == TIMEOUT and hang.seconds >= 6
    assert crash.verdict == CRASHED and "exit code 3" in crash.note
    assert m.survivors() == ["test-hangs", "test-exits"]  # neither is a kill
    # the run was forked off: the workers' model is the original one
    names = client.run(lambda: __import__("model.epoch").epoch.is_epoch_due.__name__)
    assert set(names.values()) == {"is_epoch_due"}


def test_a_worker_killed_mid_task_is_retried(client, tmp_path, workers_clean_cells_once):
    """The test kills the worker running the cell; Dask gives the task to a worker again and
    the cell comes back with the verdict of an undisturbed run. On the validate engine, the
    cheapest that runs the model's advance (its run again in the new worker: the scenarios
    engine's made this test and the module's tear-down 28 s of CPU, validate's 11, alone)."""
    marker = tmp_path / "worker.pid"

    def due_slow_once(start, now, interval, _marker=str(marker)):
        if not os.path.exists(_marker):
            worker = os.getppid()
            with open(_marker, "w") as f:
                f.write(str(worker))
            while os.getppid() == worker:  # until the test kills the worker
                time.sleep(0.1)
            os._exit(1)  # orphaned: nobody reads this run any more
        return ORIGINAL_DUE(start, now, interval)

    slow = Mutant("test-slow-once", "the first run stalls (and its worker is killed)", (),
                  (Patch("model.epoch", "is_epoch_due", due_slow_once),))
    out = {}
    runner = threading.Thread(target=lambda: out.update(m=run_matrix(
        [slow], ["validate"], quick=True, timeout=120, client=client)))
    runner.start()
    deadline = time.monotonic() + 60
    while not marker.exists() or not marker.read_text():
        assert time.monotonic() < deadline, "the slow cell never started"
        time.sleep(0.1)
    os.kill(int(marker.read_text()), signal.SIGKILL)
    runner.join(180)
    assert not runner.is_alive()
    cell = out["m"].cells[("test-slow-once", "validate")]
    assert cell.verdict == SURVIVED, cell.note  # run again, to the end: nothing lost
    client.wait_for_workers(2, timeout=180)  # the replacement's start: 60 s was short at load 10


@pytest.mark.slow
def test_first_kill_on_dask_stops_at_the_cheapest_killer(client):
    mutants = [MUTANTS["unit-os-page"], HARMLESS]
    m = run_matrix(mutants, ["scenarios", "validate"], quick=True, timeout=300,
                   client=client, first_kill=True)
    # validate is cheaper: it kills unit-os-page and scenarios is not run on it
    assert m.cells[("unit-os-page", "validate")].verdict == KILLED
    assert m.cells[("unit-os-page", "scenarios")].verdict == NOT_RUN
    # a survivor goes through every engine
    assert {m.cells[("test-harmless", e)].verdict for e in ("scenarios", "validate")} == \
        {SURVIVED}
    assert m.survivors() == ["test-harmless"]


# -- the first-kill plan, cell by cell (no runs) --------------------------------------------

A, B = MUTANTS["age-lt-1"], MUTANTS["unit-os-page"]


def cell(m, e, verdict):
    return Cell(m.name if m else None, e, verdict)


def test_first_kill_plan_orders_engines_cheapest_first_and_stops_at_a_judged_kill():
    plan = Plan([A, B], ["prove", "scenarios", "validate"], first_kill=True)
    start = plan.initial()
    assert [(m.name if m else None, e, part) for m, e, part in start] == [
        (None, "prove", None), (None, "scenarios", None), (None, "validate", None),
        ("age-lt-1", "validate", None), ("unit-os-page", "validate", None)]
    assert plan.after(cell(None, "validate", HELD)) == []
    assert plan.after(cell(A, "validate", KILLED)) == []  # a judged kill ends A's chain
    assert plan.after(cell(B, "validate", SURVIVED)) == [(B, "scenarios", None)]
    # a kill by an engine whose baseline is not in yet waits for it ...
    assert plan.after(cell(B, "scenarios", KILLED)) == []
    # ... and a failing baseline means the kill does not count: B goes on to prove
    assert plan.after(cell(None, "scenarios", FAILED)) == [(B, "prove", None)]
    assert plan.after(cell(B, "prove", SURVIVED)) == []
    assert plan.total(done=9, queued=0) == 9


def test_a_two_kill_plan_goes_on_after_the_first_judged_kill_and_stops_at_the_second():
    """--kills 2: a judged kill (its engine held clean) counts; a kill whose engine fails clean
    does not; the chain stops at the second that counts, or runs out of engines, so a mutant
    that fewer engines kill has a word from every engine."""
    plan = Plan([A, B], ["prove", "scenarios", "validate"], kills=2)
    assert plan.first_kill and len(plan.initial()) == 5
    plan.after(cell(None, "validate", HELD))
    assert plan.after(cell(A, "validate", KILLED)) == [(A, "scenarios", None)]
    assert plan.after(cell(None, "scenarios", FAILED)) == []
    assert plan.after(cell(A, "scenarios", KILLED)) == [(A, "prove", None)]  # not judged
    assert plan.after(cell(A, "prove", KILLED)) == []  # waits for prove's clean run
    assert plan.after(cell(B, "validate", SURVIVED)) == [(B, "scenarios", None)]
    assert plan.after(cell(B, "scenarios", SURVIVED)) == [(B, "prove", None)]
    assert plan.after(cell(None, "prove", HELD)) == []
    assert plan.killed == {"age-lt-1": 2} and "age-lt-1" in plan.done_chains
    assert plan.after(cell(B, "prove", KILLED)) == []  # one kill, no engine left: done
    assert plan.killed["unit-os-page"] == 1 and "unit-os-page" in plan.done_chains


def killed_at(m, e, part):
    return Cell(m.name, e, KILLED, part=part)


def test_first_kill_runs_an_engine_of_parts_clean_only_at_the_parts_a_kill_needs():
    """The prove engine is not run clean up front: a kill at part P asks for P alone, once,
    and a mutant killed at a part that held clean is done; one killed at a part that fails
    clean goes on down its chain."""
    C = MUTANTS["unit-outside-area"]
    plan = Plan([A, B, C], ["prove", "validate"], first_kill=True, parted={"prove"})
    start = plan.initial()
    assert [(m.name if m else None, e, p) for m, e, p in start] == [
        (None, "validate", None), ("age-lt-1", "validate", None),
        ("unit-os-page", "validate", None), ("unit-outside-area", "validate", None)]
    plan.after(cell(None, "validate", HELD))
    for m in (A, B, C):
        assert plan.after(cell(m, "validate", SURVIVED)) == [(m, "prove", None)]
    assert plan.after(killed_at(A, "prove", "proof:age")) == [(None, "prove", "proof:age")]
    assert plan.after(killed_at(B, "prove", "proof:age")) == []  # asked for already
    assert plan.after(killed_at(C, "prove", "twin:x")) == [(None, "prove", "twin:x")]
    assert plan.after(Cell(None, "prove", HELD, part="proof:age")) == []
    assert {"age-lt-1", "unit-os-page"} <= plan.done_chains
    assert plan.after(Cell(None, "prove", FAILED, part="twin:x")) == []  # C's chain ends
    assert "unit-outside-area" in plan.done_chains


def test_first_kill_starts_a_glibc_mutant_at_the_glibc_engine():
    """Only the glibc engine checks the glibc model's invariants: a mutant of them starts its
    chain there; a mutant of the page rules keeps the cheapest-first order."""
    engines = ["scenarios", "glibc", "fuzz", "validate"]
    glibc, page = MUTANTS["rfc-ratio-le"], MUTANTS["unit-os-page"]
    plan = Plan([glibc, page], engines, first_kill=True)
    start = [(m.name, e) for m, e, _ in plan.initial() if m]
    assert start == [("rfc-ratio-le", "glibc"), ("unit-os-page", "validate")]
    assert plan.after(cell(glibc, "glibc", SURVIVED)) == [(glibc, "validate", None)]
    assert plan.after(cell(page, "validate", SURVIVED)) == [(page, "scenarios", None)]
    assert plan.orders["rfc-ratio-le"] == ["glibc", "validate", "scenarios", "fuzz"]


def test_first_kill_starts_a_weakening_at_the_weak_engine():
    """A weakened C11 ordering is seen only under weak memory: its chain starts at the weak
    engine and then Relacy, also for one that catches a property of the epoch
    (weak-fetch-add-acquire)."""
    engines = ["validate", "scenarios", "relacy", "weak"]
    plan = Plan([MUTANTS["weak-fetch-add-acquire"], MUTANTS["no-cas-exclusion"]], engines,
                first_kill=True)
    assert plan.orders["weak-fetch-add-acquire"] == ["weak", "relacy", "validate", "scenarios"]
    assert plan.orders["no-cas-exclusion"] == ["validate", "scenarios", "relacy", "weak"]


def test_without_first_kill_every_cell_is_planned_at_once():
    plan = Plan([A, B], ["scenarios", "validate"], parted={"scenarios"})
    assert len(plan.initial()) == 6 and plan.total(0, 6) == 6
    assert plan.after(cell(A, "scenarios", KILLED)) == []


def test_the_command_reports_a_scheduler_that_does_not_answer(capsys, monkeypatch):
    monkeypatch.setenv("PURGECHECK_SCHEDULER", "tcp://127.0.0.1:9")
    assert main(["mutants", "--only", "age-lt-1", "--engine", "validate"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("purgecheck mutants: tcp://127.0.0.1:9: nothing answers there")


def test_check_on_an_existing_scheduler_gives_the_in_process_table(client, capsys,
                                                                   monkeypatch, tmp_path,
                                                                   engines_run_once):
    """`check --scheduler ADDRESS`: the engines as tasks on that cluster; the same rows, in
    the same order, as one engine after another in this process. The workers run the engines
    (their own load_engines); this process's runs are the session's first of each engine at
    the quick budget (engines_run_once: test_glibc_cli's and test_concurrent's run)."""
    import orjson

    monkeypatch.setenv("PURGECHECK_STATE_DIR", str(tmp_path))
    # two of the cheaper engines (glibc's 2 s of CPU, validate's 1.4; scenarios' 3.5)
    args = ["check", "--quick", "--json", "--engine", "glibc", "--engine", "validate"]

    def rows(*more):
        assert main(args + list(more)) == 0
        doc = orjson.loads(capsys.readouterr().out)
        return [(r["invariant"], r["engine"], r["status"]) for r in doc["results"]]

    on_dask = rows("--scheduler", client.scheduler_info()["address"])
    assert on_dask == rows("--in-process")
    assert {e for _, e, _ in on_dask} == {"glibc", "validate"}


@pytest.mark.slow
def test_a_task_that_keeps_killing_its_worker_is_reported(client):
    """Last in the module: Dask gives up after ALLOWED_FAILURES + 1 deaths, and its workers
    are still being restarted when the test ends."""
    m = run_matrix([KILLS_WORKER], ["scenarios"], quick=True, timeout=120, client=client)
    cell = m.cells[("test-kills-worker", "scenarios")]
    assert cell.verdict == CRASHED and "died" in cell.note
    assert f"the {ALLOWED_FAILURES + 1} workers that ran it died" in cell.note
    assert m.baseline["scenarios"].verdict == HELD


def test_the_prove_engine_splits_into_its_proofs_and_twins_each_once():
    """`check` on a cluster runs the prove engine's parts as tasks of their own: every proof
    and twin is one part, in the order of a whole run, and a part runs that alone (a proof's
    part does not also run the twins that name it)."""
    from proofs.catalogue import proofs, twins
    from purgecheck.engines import Budget, load_engines

    prove = load_engines()["prove"]
    quick = Budget(quick=True)
    parts = prove.parts(quick)
    assert parts[:len(proofs(True))] == [f"proof:{p.name}" for p in proofs(True)]
    assert [p for p in parts if p.startswith("twin:") and p != "twin:glibc"] == \
        [f"twin:{t.name}" for t in twins(True)]
    assert len(set(parts)) == len(parts)
    [unit] = prove.run(Budget(quick=True, part="proof:unit"))
    assert unit.ok and unit.engine == "z3:unit" and "PG-UNIT" in unit.invariant
    [twin] = prove.run(Budget(quick=True, part="twin:unit-os-page"))
    assert twin.ok and twin.status == "refuted-as-expected"


def test_first_kill_stops_an_engine_with_parts_at_its_first_failing_part(monkeypatch):
    """An engine of parts (the prove engine's proofs) judging a mutant in first-kill mode
    runs them one by one and stops at the first that fails; the baseline runs them all."""
    from purgecheck import engines
    from purgecheck.reports.results import Result

    def run(budget):
        parts = [budget.part] if budget.part else ["a", "b", "c"]
        return [Result("PG-UNIT", "parted", "fail" if budget.mutant and p == "b" else "hold",
                       p) for p in parts]

    loaded = engines.load_engines()
    monkeypatch.setitem(loaded, "parted", engines.Engine("parted", "three parts", run,
                                                         parts=lambda b: ["a", "b", "c"]))
    m = run_matrix([HARMLESS], ["parted"], quick=True, timeout=60, workers=1, first_kill=True)
    # the clean run needed is of part b alone
    assert m.baseline["parted"].verdict == HELD
    assert m.baseline["parted"].note.endswith("needed: b")
    cell = m.cells[("test-harmless", "parted")]
    assert cell.verdict == KILLED and "stopped at b (2 of 3 parts)" in cell.note
    assert cell.part == "b" and m.killers("test-harmless") == ["parted"]
    assert cell.note.startswith("1 of 2 results failed")  # part c never ran
    whole = run_matrix([HARMLESS], ["parted"], quick=True, timeout=60, workers=1)
    assert whole.cells[("test-harmless", "parted")].note == "1 of 3 results failed"
