"""The C reference against the model: every seed scenario under every design of the seed, the
C mutants caught by conformance, residency measured with mincore, the real-clock park handoff
with a scavenger thread, and the sanitizer builds (a few scripts each)."""

from __future__ import annotations

import dataclasses
import subprocess

import orjson
import pytest

from model.variants import VARIANTS
from purgecheck.conformance import (BUILD_DIR, CDriver, diff_script, driver_path, run_stress,
                                    stress_script)
from purgecheck.mutants import TRACE_INVARIANT, is_c_trace_mutant
from purgecheck.mutants import MUTANTS
from purgecheck.formats.ops import SPECS
from purgecheck.docs.facts import DESIGN_SCENARIOS
from purgecheck.scenarios import SCENARIOS
from purgecheck.formats.trace import model_trace


@pytest.fixture(scope="session", autouse=True)
def built():
    """Build reference_c once (a no-op when up to date)."""
    subprocess.run(["make", "-s", "-C", str(BUILD_DIR.parent)], check=True,
                   capture_output=True)


@pytest.fixture(scope="module")
def driver():
    with CDriver() as d:
        yield d


@pytest.fixture(scope="module")
def model_traces():
    """The clean model's trace of every scenario (the mutant runs compare against these)."""
    return {name: model_trace(sc.ops(), sc.options, source=name)
            for name, sc in SCENARIOS.items()}


def test_driver_knows_every_op_of_the_grammar():
    """The C parser's table is ops.py's: names, threaded or global, argument kinds."""
    out = subprocess.run([str(driver_path()), "--list-ops"], capture_output=True, text=True,
                         check=True).stdout.split("\n")
    c_ops = {line.split()[0]: line.split()[1:] for line in out if line}
    py_ops = {name: ["threaded" if s.threaded else "global"]
              + [f"{n}:{'str' if t is str else 'count' if c else 'int'}"
                 for n, t, c in zip(s.arg_names, s.arg_types, s.nonnegative)]
              for name, s in SPECS.items()}
    assert c_ops == py_ops


@pytest.mark.parametrize("line", ["1 malloc a -5", "-1 idle", "fail_discard -1", "clock x",
                                  "1 mallok a 5", "idle", "1 clock 5", "1 free"])
def test_driver_refuses_what_the_parser_refuses_at_the_same_line(line):
    from purgecheck.formats.ops import OpScriptError, parse_script
    with pytest.raises(OpScriptError) as e:
        parse_script("1 malloc ok 8\n" + line + "\n")
    out = subprocess.run([str(driver_path())], input="1 malloc ok 8\n" + line + "\n",
                         capture_output=True, text=True)
    error = orjson.loads(out.stdout.splitlines()[-2])
    assert out.returncode == 2 and error["ev"] == "error"
    assert (error["line"], error["msg"]) == (e.value.line, e.value.msg)


def test_driver_has_a_switch_for_every_mutant_that_names_one():
    out = subprocess.run([str(driver_path()), "--list-mutants"], capture_output=True,
                         text=True, check=True).stdout.split()
    wanted = {m.c_switch for m in MUTANTS.values() if m.c_switch}
    assert wanted <= set(out), f"no C switch for {sorted(wanted - set(out))}"


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_traces_agree(driver, model_traces, name):
    sc = SCENARIOS[name]
    r = diff_script(sc.build(), sc.options, driver, source=name,
                    model_cached=model_traces[name])
    assert r.equal, r.divergence
    assert any(e["ev"] == "resident" for e in r.c[1]), "residency was not compared"


REJECTED = [v for v in VARIANTS if v != "epoch"]
# The fast tier's scenarios for the rejected designs: every third of the catalogue and each
# design's own (purgecheck/docs/facts.py DESIGN_SCENARIOS), 22 of 58; all of them in the slow
# tier. The epoch design's traces are the module's (model_traces), not made again per design.
DESIGN_SAMPLE = [n for n in list(SCENARIOS) if n in list(SCENARIOS)[::3]
                 or n in DESIGN_SCENARIOS.values()]


def rejected_design_agrees(driver, model_traces, variant, names) -> None:
    """The rejected designs run in C behind the same switch; their traces differ from the
    epoch design's somewhere among `names` (or the variant would not be seen) but agree with
    the model's."""
    differs = 0
    for name in names:
        sc = SCENARIOS[name]
        options = dataclasses.replace(sc.options, variant=variant)
        r = diff_script(sc.build(), options, driver, source=name)
        assert r.equal, (name, r.divergence)
        differs += r.model[1] != model_traces[name][1]
    assert differs > 0


@pytest.mark.parametrize("variant", REJECTED)
def test_each_rejected_design_agrees_with_its_c_twin(driver, model_traces, variant):
    """On DESIGN_SAMPLE (a design whose C twin parts from the model on a scenario of the
    sample fails here; one on another scenario only in the slow tier)."""
    rejected_design_agrees(driver, model_traces, variant, DESIGN_SAMPLE)


@pytest.mark.slow
@pytest.mark.parametrize("variant", REJECTED)
def test_each_rejected_design_agrees_with_its_c_twin_on_every_scenario(driver, model_traces,
                                                                        variant):
    rejected_design_agrees(driver, model_traces, variant, list(SCENARIOS))


def test_every_c_mutant_is_caught_by_conformance(driver, model_traces):
    """The C mutants the docs list under CF-TRACE-EQUAL (a race needs real threads:
    tests/test_concurrent*.py and test_sanitizer_mutants.py judge those) each diverge."""
    mutants = [m for m in MUTANTS.values() if is_c_trace_mutant(m)]
    assert len(mutants) >= 10
    survivors = []
    for m in mutants:
        if all(diff_script(sc.build(), sc.options, driver, mutant=m.name,
                           model_cached=model_traces[name]).equal
               for name, sc in SCENARIOS.items()):
            survivors.append(m.name)
    assert not survivors


def test_conformance_engine_reports_c_mutants_as_cf_trace_equal(driver, model_traces,
                                                                monkeypatch):
    """The engine's C mutant run speaks for CF-TRACE-EQUAL: killed when the mutant's trace
    diverges, failed naming the survivor when it does not (a race, on the virtual clock)."""
    import purgecheck.mutants
    from purgecheck.engines.conformance import _mutants

    caught = MUTANTS["purged-left-on-list"]
    monkeypatch.setattr(purgecheck.mutants, "MUTANTS", {caught.name: caught})
    r = _mutants(driver, model_traces)
    assert (r.invariant, r.status) == (TRACE_INVARIANT, "killed"), r.detail
    race = dataclasses.replace(MUTANTS["epoch-plain-read"], needs_concurrency=False)
    monkeypatch.setattr(purgecheck.mutants, "MUTANTS", {race.name: race})
    r = _mutants(driver, model_traces)
    assert (r.invariant, r.status) == (TRACE_INVARIANT, "fail")
    assert "epoch-plain-read" in r.detail and r.replay.endswith("--mutant epoch-plain-read")


def test_a_mutant_is_reported_at_its_first_divergence(driver, model_traces):
    """park-done-first marks the park done after its first sweep: the diff stops at that
    sweep's park_sweep event, shows the equal events before it and the model's state."""
    sc = SCENARIOS["park-handoff"]
    model = model_traces["park-handoff"]
    r = diff_script(sc.build(), sc.options, driver, mutant="park-done-first",
                    model_cached=model, context=4)
    div = r.divergence
    assert div is not None
    first_park_sweep = next(i for i, e in enumerate(model[1]) if e["ev"] == "park_sweep")
    assert div.index == first_park_sweep
    assert (div.a["ev"], div.a["done"], div.b["ev"], div.b["done"]) == \
        ("park_sweep", False, "park_sweep", True)
    assert div.before == model[1][div.index - 4:div.index] == r.c[1][div.index - 4:div.index]
    assert div.op["op"] == "scavenger"
    assert "thread 1: park parked" in div.state and "page 3 (large" in div.state


def test_mincore_sees_the_discards(driver):
    """Independently of the model: after the walk of every-third, page 1 has exactly as many
    resident OS pages fewer as its discards covered (THP off, one madvise per run)."""
    sc = SCENARIOS["every-third"]
    _, events = driver.run(sc.build(), sc.options, observe="all")
    walk_op = max(i for i, e in enumerate(events) if e["ev"] == "op" and e["op"] == "walk")

    def resident_pages(upto: range) -> int:
        ev = [events[i] for i in upto if events[i]["ev"] == "resident" and events[i]["page"] == 1]
        return sum(b - a for a, b in ev[-1]["runs"])

    before = resident_pages(range(walk_op))
    after = resident_pages(range(walk_op, len(events)))
    discarded = sum(e["size"] for e in events[walk_op:] if e["ev"] == "discard"
                    and e["page"] == 1 and e["ok"])
    assert discarded > 0 and before - after == discarded // 4096


def test_real_clock_park_handoff_with_a_scavenger_thread():
    """Real threads and CLOCK_MONOTONIC: the scavenger sweeps the parked thread until the
    park is done (at most MI_PARK_SWEEPS_MAX passes, whatever the machine's load: each
    `scavenge` waits for one pass); the epochs it moves last the interval at least."""
    text = SCENARIOS["park-handoff"].build().replace(
        "scavenger 1000", "\n".join(["clock 50", "scavenge"] * 6))
    out = subprocess.run([str(driver_path()), "--clock", "real", "--interval", "40"],
                         input=text, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    events = [orjson.loads(line) for line in out.stdout.splitlines()[1:]]
    sweeps = [e for e in events if e["ev"] == "park_sweep"]
    assert sweeps and sweeps[-1]["done"] and not sweeps[0]["done"]
    assert any(e["ev"] == "discard" for e in events)
    starts = [e["start"] for e in events if e["ev"] == "epoch_advance"]
    assert len(starts) >= 2 and all(b - a >= 40 for a, b in zip(starts, starts[1:]))


def test_asan_build_agrees_on_a_few_scenarios():
    with CDriver("asan") as asan:
        for name in ("every-third", "reuse-after-purge", "park-handoff", "abandoned-two-parks"):
            sc = SCENARIOS[name]
            assert diff_script(sc.build(), sc.options, asan).equal, name
        report = asan.close()
    assert report == ""


def test_tsan_build_runs_a_concurrent_stress_script_clean():
    ok, detail = run_stress("tsan", stress_script(seed=1, threads=4, ops=300))
    assert ok, detail


def test_concurrent_mode_runs_every_op_of_every_thread_once():
    """In the concurrent mode each thread runs its own ops on its own OS thread (in whatever
    interleaving the machine gives): every op of the script runs exactly once, none fails."""
    script = stress_script(seed=3, ops=300)
    out = subprocess.run([str(driver_path())], input="%options clock=real concurrent=1 "
                         "interval=2\n" + script + "---\n", capture_output=True, text=True,
                         timeout=60)
    events = [orjson.loads(line) for line in out.stdout.splitlines()[1:]]
    assert out.returncode == 0 and not any(e["ev"] == "error" for e in events), out.stderr
    ran = sorted((e["line"], e["thread"] if e["thread"] is not None else -1, e["op"])
                 for e in events if e["ev"] == "op")
    lines = [line.split() for line in script.splitlines()]
    wanted = sorted((n, int(w[0]) if w[0].isdigit() else -1, w[1] if w[0].isdigit() else w[0])
                    for n, w in enumerate(lines, 1))
    assert ran == wanted
