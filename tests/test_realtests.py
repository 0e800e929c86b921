"""The real tests' cases beside the scenarios (purgecheck/realtests/cases.py) and the checks that
state their assertions over a trace (purgecheck/realtests/checks.py): each declared check holds on the
model's and the C reference's trace of its scenario, each is broken by a named mutant, and the
status of a case follows from what its scenario checks.
"""

from __future__ import annotations

import pytest

from purgecheck.realtests.checks import CHECKS, KILLED_ELSEWHERE, KILLS, run_checks
from purgecheck.formats.trace import model_trace
from purgecheck.mutants import MUTANTS, applied
from purgecheck.realtests.cases import CASES, RealCase, assess, real_tests_page, run_scenario_checks
from purgecheck.scenarios import SCENARIOS

from test_reference_c import built, driver  # noqa: F401 (the C build and its driver, as fixtures)

CHECKED = [name for name, sc in SCENARIOS.items() if sc.checks]




def test_every_check_is_broken_by_some_mutant():
    assert {k[0] for k in KILLS} | set(KILLED_ELSEWHERE) == set(CHECKS)


def test_every_declared_check_exists():
    for name, sc in SCENARIOS.items():
        unknown = [c for c in sc.checks if c not in CHECKS]
        assert not unknown, f"scenario {name} declares unknown checks {unknown}"


def test_every_case_names_a_scenario_that_exists_or_says_why_not():
    for case in CASES:
        if case.scenario is None:
            assert case.grid or case.unmodelled or case.out_of_scope, case.name
    names = [(c.source, c.name) for c in CASES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("name", CHECKED)
def test_declared_checks_hold_on_the_model_and_on_c(name, driver):
    results = run_scenario_checks({name}, driver)[name]
    for engine, found in results.items():
        bad = {c: p for c, p in found.items() if p}
        assert not bad, f"{name} on {engine}: {bad}"


# -- the status is computed -------------------------------------------------------------------

def _case(scenario: str | None, asserts: tuple[str, ...]) -> RealCase:
    return RealCase("test", "case", "", "", asserts, scenario)


def test_status_full_partial_missing_follow_the_results():
    sc = SCENARIOS["heap-destroy"]
    held = {c: [] for c in sc.checks}
    full = assess(_case(sc.name, sc.checks), {sc.name: {"model": held, "C": held}})
    assert full.status == "FULL" and full.engines == ("model", "C")
    # one check fails on C: PARTIAL, and it says which
    broken = {**held, sc.checks[0]: ["broken"]}
    part = assess(_case(sc.name, sc.checks), {sc.name: {"model": held, "C": broken}})
    assert part.status == "PARTIAL" and f"fails on C: {sc.checks[0]}" in part.missing
    assert part.checked == ()
    # an assertion the scenario does not declare: PARTIAL, named
    more = assess(_case(sc.name, sc.checks + ("aligned",)), {sc.name: {"model": held, "C": held}})
    assert more.status == "PARTIAL" and "not checked: aligned" in more.missing
    # not run on C
    model_only = assess(_case(sc.name, sc.checks), {sc.name: {"model": held}})
    assert model_only.status == "PARTIAL" and "not run on C" in model_only.missing
    # no scenario
    assert assess(_case("no-such-scenario", ("aligned",)), {}).status == "MISSING"


def test_the_page_lists_every_case():
    from purgecheck.realtests.cases import Assessment
    page = real_tests_page([Assessment(c, "MISSING", (), (), "x") for c in CASES])
    for c in CASES:
        assert f"| {c.name} |" in page


# -- every check can fail: a named mutant breaks it, on the model and on C ----------------------

@pytest.mark.parametrize("check,scenario,mutant", KILLS)
def test_a_mutant_breaks_the_check(check, scenario, mutant, driver):
    sc = SCENARIOS[scenario]
    m = MUTANTS[mutant]
    try:
        with applied(m):
            header, events = model_trace(sc.ops(), sc.options)
        assert run_checks((check,), header, events)[check], f"model under {mutant}"
    except AssertionError:
        raise
    except Exception as e:  # a broken rule may stop the model: the run fails all the same
        assert m.c_switch, f"the model stopped under {mutant}: {e}"
    if m.c_switch:
        header, events = driver.run(sc.build(), sc.options, mutant=mutant)
        assert run_checks((check,), header, events)[check], f"C under {mutant}"


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_counters_agree_with_the_trace_in_every_scenario(name):
    """holes_stats (model/stats.py) against the events of the same trace; the C reference's
    counters are compared with the model's by `diff` (tests/test_reference_c.py)."""
    sc = SCENARIOS[name]
    header, events = model_trace(sc.ops(), sc.options)
    assert run_checks(("stats-agree",), header, events)["stats-agree"] == []


# -- the real tests' full sizes (the named scenarios run smaller ones) ----------------------------

def _full_sizes():
    from purgecheck.realtests.cases import scenarios as rs
    return {"churn": (rs.churn_script(20_000), SCENARIOS["churn"]),
            "survivors-small": (rs.survivors_script(rs.SURVIVORS), SCENARIOS["survivors-small"]),
            "survivors-sizes": (rs.sizes_script(32), SCENARIOS["survivors-sizes"]),
            "lifecycle-small": (rs.lifecycle_script(512), SCENARIOS["lifecycle-small"]),
            "abandoned-small": (rs.abandoned_small_script(256), SCENARIOS["abandoned-small"])}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["churn", "survivors-small", "lifecycle-small", "abandoned-small",
                                  "survivors-sizes"])
def test_the_real_sizes_hold_on_the_model_and_on_c(name, driver):
    """The real test's counts (churn: 20,000 steps, a sweep every 97): the scenario's checks on
    both traces, and the traces equal."""
    from purgecheck.conformance import compare
    from purgecheck.formats.ops import parse_script

    text, sc = _full_sizes()[name]
    model = model_trace(parse_script(text), sc.options)
    c = driver.run(text, sc.options)
    for engine, (header, events) in (("model", model), ("C", c)):
        bad = {k: v for k, v in run_checks(sc.checks, header, events).items() if v}
        assert not bad, f"{name} at the real size on {engine}: {bad}"
    assert compare(*model, *c) is None


def test_each_check_is_an_invariant_of_the_registry_with_its_clause():
    from model.invariants import load_registry
    from purgecheck.realtests.checks import CLAUSES, invariant_id

    registry = load_registry()
    for name in CHECKS:
        inv = registry[invariant_id(name)]
        assert inv.scope == "trace" and inv.clause == CLAUSES[name]
        assert ("seed 000" in inv.clause or "digest" in inv.clause or ".c" in inv.clause)


@pytest.mark.parametrize("mutant", ["zalloc-clears-link-only", "option-off-ignored",
                                    "unpurge-without-reuse", "purge-max-blocks-cap",
                                    "aligned-at-block-start"])
def test_the_scenarios_engine_now_catches_what_only_the_tests_caught(mutant):
    """Mutants that only conformance (and the suite's case checks) killed: the scenarios
    engine of `check` runs the case checks on the model's traces and fails under each."""
    from purgecheck.realtests.checks import caught_by
    from purgecheck.engines.scenarios import model_case_checks

    with applied(MUTANTS[mutant]):
        failed = {r.invariant for r in model_case_checks() if not r.ok}
    assert set(caught_by(mutant)) & failed, (mutant, failed)
