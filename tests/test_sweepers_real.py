"""Sweepers at the same time in the fork's own test's shape (test-purge-holes-large.c): on the
C reference's real threads and clock (`stress --scenario real`, lower bounds only), and on the
virtual clock (scenario `sweepers-real`, whose checks run on the model's and the C reference's
traces in tests/test_realtests.py), with the mutants that break each assertion.
"""

from __future__ import annotations

import pytest

from purgecheck.realtests.checks import run_checks
from purgecheck.engines.validate import run_stress
from purgecheck.formats.trace import model_trace
from purgecheck.mutants import MUTANTS, applied
from purgecheck.scenarios import SCENARIOS

from test_reference_c import driver  # noqa: F401 (the C driver, as a fixture)

INTERVAL = 50  # the real test's


def test_the_real_shape_holds_on_real_threads(tmp_path):
    """Four sweepers beside the thread under test for 12 intervals and 4 epoch moves: every
    check of the real test holds; the figures are lower bounds (the clock is real)."""
    run = run_stress(tmp_path, scenario="real", interval=INTERVAL, ms=0, traced=False)
    assert run.returncode == 0, run.stderr[-600:]
    real, bad = run.summary["real"], run.summary["violations"]
    assert not any(bad[k] for k in "efgh"), bad
    assert real["ran_ms"] >= 12 * INTERVAL and real["epoch_moves"] >= 4
    assert real["checked"] > 0  # sweeps of a busy page were judged: not vacuous
    assert real["shortest_ms"] >= INTERVAL - 1


def test_real_threads_catch_an_epoch_that_is_not_rate_limited(tmp_path):
    """With the thread under test alone, each of its sweeps moves the epoch by one under the
    mutant, so two epochs in a row last only as long as two rounds: (f) reports it."""
    run = run_stress(tmp_path, scenario="real", interval=INTERVAL, ms=0, traced=False,
                     mutant="epoch_not_rate_limited", more=("--sweepers", "0"))
    assert run.returncode == 1 and run.summary["violations"]["f"] > 0, run.stderr[-600:]


@pytest.mark.parametrize("check,mutant", [("epoch-not-shorter", "epoch-not-rate-limited"),
                                          ("epoch-not-shorter", "double-increment"),
                                          ("busy-page-keeps", "age-lt-1")])
def test_a_mutant_breaks_the_virtual_clock_check(check, mutant, driver):
    sc = SCENARIOS["sweepers-real"]
    with applied(MUTANTS[mutant]):
        header, events = model_trace(sc.ops(), sc.options)
    assert run_checks((check,), header, events)[check], f"model under {mutant}"
    header, events = driver.run(sc.build(), sc.options, mutant=mutant)
    assert run_checks((check,), header, events)[check], f"C under {mutant}"


def test_the_shape_is_not_vacuous():
    """A run too short for the real test's shape, or without a busy page, fails the checks."""
    sc = SCENARIOS["sweepers-real"]
    from purgecheck.formats.ops import parse_script
    from purgecheck.realtests.scenarios import sweepers_script
    header, events = model_trace(parse_script(sweepers_script(rounds=20)), sc.options)
    assert run_checks(("epoch-not-shorter",), header, events)["epoch-not-shorter"]
    header, events = model_trace(parse_script("1 malloc a 8\n1 idle\n"), sc.options)
    assert run_checks(("busy-page-keeps",), header, events)["busy-page-keeps"]


def test_the_case_says_where_the_real_threads_failed():
    """The table's case needs the real-thread run as well: held, it adds "C threads" to the
    engines; failed or not run, the case is PARTIAL and says so."""
    from purgecheck.realtests.cases import CASES, assess

    case = next(c for c in CASES if c.threads == "real")
    sc = SCENARIOS[case.scenario]
    held = {c: [] for c in sc.checks}
    both = {sc.name: {"model": held, "C": held}}
    full = assess(case, {**both, "threads:real": {"failed": [], "figures": {}}})
    assert full.status == "FULL" and full.engines == ("model", "C", "C threads")
    failed = assess(case, {**both, "threads:real": {"failed": ["e"], "figures": {}}})
    assert failed.status == "PARTIAL" and "fails on C's real threads: e" in failed.missing
    assert assess(case, both).status == "PARTIAL"
