"""Rare paths of the advance, reached from op scripts (issue 20): a fork (`fork_at`) and a clock
reading (`clock_at`, also going back) placed between the steps of another thread's advance, on
the model and on the C reference (a real fork(), the child reporting through a pipe). The
scenarios fork-while-moving and clock-back; the mutants fork-child-keeps-moving and
clock-back-not-due, in C and in the model, diverge from the other side."""

from __future__ import annotations

import dataclasses
import subprocess

import pytest

from model.epoch import MOVING, PC_CAS, PC_COMPARE, PC_INCREMENT, PC_LOAD, PC_READ_CLOCK
from model.epoch import PC_READ_CLOCK2, PC_STORE
from model.world import Options
from purgecheck.conformance import BUILD_DIR, CDriver, diff_script
from purgecheck.formats.ops import ADVANCE_STEPS, OpScriptError, parse_script
from purgecheck.formats.trace import model_trace
from purgecheck.mutants import MUTANTS, applied
from purgecheck.scenarios import SCENARIOS

BACK = Options(clock_monotone=False)


@pytest.fixture(scope="module")
def driver():
    subprocess.run(["make", "-s", "-C", str(BUILD_DIR.parent)], check=True, capture_output=True)
    with CDriver() as d:
        yield d


def events(result, kind: str) -> list[dict]:
    return [ev for ev in result.model[1] if ev["ev"] == kind]


def test_the_steps_are_the_models_program_counters_in_order():
    assert ADVANCE_STEPS == (PC_LOAD, PC_READ_CLOCK, PC_COMPARE, PC_CAS, PC_INCREMENT,
                             PC_READ_CLOCK2, PC_STORE)


@pytest.mark.parametrize("step", ADVANCE_STEPS)
def test_a_fork_at_each_step_is_the_same_on_both_sides(driver, step):
    """MOVING is held from the CAS to the store: a fork placed there sees it, and its child
    records the clock then as the epoch's beginning."""
    text = f"1 malloc a 262144\nclock_at {step} 7\n2 fork_at {step}\n1 idle\n2 fork\n"
    result = diff_script(text, Options(), driver, observe="all")
    assert result.equal, result.divergence
    inside, outside = events(result, "fork")
    held = step in ("increment", "read_clock_again", "store_start")
    assert inside["moving"] is held and outside["moving"] is False
    assert inside["start"] == (1007 if held else 0)  # a new beginning only when held (0:
    # epoch 0's start)
    # the parent's advance carries on and records its own start
    assert events(result, "epoch_advance")[0]["epoch"] == 1


@pytest.mark.parametrize("step", ["read_clock", "read_clock_again", "store_start"])
def test_a_clock_going_back_inside_the_advance_is_the_same_on_both_sides(driver, step):
    text = ("1 malloc a 262144\n1 idle\nclock 150\n"
            f"clock_at {step} -70\n1 idle\nclock 40\n1 idle\n")
    result = diff_script(text, BACK, driver, observe="all")
    assert result.equal, result.divergence
    starts = [ev["start"] for ev in events(result, "epoch_advance")]
    # before the first reading: 1080 - 1000 < 100, not due until 1120; before the second:
    # the new epoch begins at 1080; before the store: the start was read already (1150), so
    # the clock (1120) is behind the start and the next advance is due at once (digest 7)
    assert starts == {"read_clock": [1000, 1120], "read_clock_again": [1000, 1080],
                      "store_start": [1000, 1150, 1120]}[step]


def test_an_armed_interleaving_waits_for_an_advance_that_reaches_its_step(driver):
    """An advance that is not due stops at the compare: a fork armed at the CAS stays armed
    for the next advance, which reaches it."""
    text = "1 malloc a 262144\n1 idle\n2 fork_at cas\n1 idle\nclock 100\n1 idle\n"
    result = diff_script(text, Options(), driver)
    assert result.equal, result.divergence
    (fork,) = events(result, "fork")
    ops = [ev for ev in result.model[1] if ev["ev"] in ("op", "fork")]
    assert ops[ops.index(fork) - 1]["line"] == 6  # inside the third idle, not the second


def test_a_step_back_on_a_monotone_clock_is_refused_where_it_is_armed(driver):
    text = "1 malloc a 262144\nclock_at increment -5\n1 idle\n"
    result = diff_script(text, Options(), driver)
    assert result.equal
    errors = [ev for ev in result.model[1] if ev["ev"] == "error"]
    assert [ev["line"] for ev in errors] == [2]
    with pytest.raises(OpScriptError, match="not a step of the advance"):
        parse_script("2 fork_at mooving\n")
    c = driver.run("2 fork_at mooving\n", Options())[1]
    assert c[0]["ev"] == "error" and "not a step of the advance" in c[0]["msg"]


@pytest.mark.parametrize("scenario,mutant,event", [
    ("fork-while-moving", "fork-child-keeps-moving", "fork"),
    ("clock-back", "clock-back-not-due", "epoch_advance"),
])
def test_the_rare_path_mutants_diverge_in_c_and_in_the_model(driver, scenario, mutant, event):
    sc = SCENARIOS[scenario]
    clean = diff_script(sc.build(), sc.options, driver)
    assert clean.equal, clean.divergence
    c_side = diff_script(sc.build(), sc.options, driver, mutant=mutant)
    assert not c_side.equal and c_side.divergence.a["ev"] == event
    with applied(MUTANTS[mutant]):
        twin = model_trace(parse_script(sc.build()), sc.options, "sweeps", "<twin>")
    model_side = diff_script(sc.build(), sc.options, driver, model_cached=twin)
    assert not model_side.equal
    if mutant == "fork-child-keeps-moving":
        assert c_side.divergence.b["start"] == model_side.divergence.a["start"] == MOVING


def test_start_before_increment_is_now_seen_without_threads(driver):
    """A clock reading between the first reading and the increment tells the broken
    advance (its start from the first reading) from the clean one on one thread, which only
    the interleaving explorer and concurrent C runs could before."""
    text = "1 malloc a 262144\nclock_at increment 9\n1 idle\n"
    c = driver.run(text, Options(), mutant="start-before-increment")[1]
    model = model_trace(parse_script(text), Options(), "sweeps", "<m>")[1]
    adv = [ev for ev in model if ev["ev"] == "epoch_advance"]
    c_adv = [ev for ev in c if ev["ev"] == "epoch_advance"]
    assert adv[0]["start"] == 1009 and c_adv[0]["start"] == 1000


def test_validate_accepts_the_rare_paths_and_rejects_a_child_left_moving(tmp_path, capsys):
    """Trace validation replays the interleaved scenarios' C traces (a fork event, an advance
    whose two readings differ) and rejects the trace of a child that kept MOVING."""
    from purgecheck.cli import main

    for name in ("fork-while-moving", "clock-back"):
        assert main(["diff", "--scenario", name, "--keep", str(tmp_path / name)]) == 0
        assert main(["validate", str(tmp_path / name / "c.jsonl")]) == 0
    bad = tmp_path / "bad"
    assert main(["diff", "--scenario", "fork-while-moving", "--mutant",
                 "fork-child-keeps-moving", "--keep", str(bad)]) == 1
    capsys.readouterr()
    assert main(["validate", str(bad / "c.jsonl")]) == 1
    assert "still holds MOVING" in capsys.readouterr().out
