"""The program driver (stateful_tests.program): how a byte string is read as a machine's
program, that it runs the machine's own rules and invariants, that a failure shrinks and
replays, and that it refuses what it cannot read."""

from __future__ import annotations

import functools

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from purgecheck.fuzz import FuzzUsageError, machine_test, run_machine
from stateful_tests.profiles import profile_settings
from stateful_tests.program import Program, choice, choice_list


class Recorder(RuleBasedStateMachine):
    """Records what the driver calls, in order."""

    calls: list = []

    @initialize(size=choice((10, 20, 30)), tags=choice_list("abc", 1, 3))
    def init(self, size, tags):
        self.calls.append(("init", size, tags))
        self.open = False

    @rule(k=choice(range(4)))
    def alpha(self, k):
        self.calls.append(("alpha", k))

    @precondition(lambda self: self.open)
    @rule()
    def beta(self):
        self.calls.append(("beta",))

    @rule()
    def gamma(self):
        self.open = True
        self.calls.append(("gamma",))

    @invariant()
    def seen(self):
        self.calls.append(("check",))


def test_slots_are_read_as_rules_and_arguments_in_name_order():
    p = Program(Recorder)
    # init: size byte, list length byte + 3 element bytes; step slot: rule byte + 1 argument.
    assert (p.init_size, p.slot, p.size(3)) == (5, 2, 11)
    Recorder.calls = []
    data = bytes([1, 1, 2, 0, 9,   # size 20; 2 tags: "c", "a" (the fourth byte is unused)
                  1, 6,            # rule byte 1 -> rule 0, alpha(k=6 % 4)
                  3, 0,            # rule 2 -> gamma
                  0, 7])           # rule byte 0: no step
    p.run(data, 3)
    assert Recorder.calls == [("init", 20, ["c", "a"]), ("check",), ("alpha", 2), ("check",),
                              ("gamma",), ("check",)]


def test_a_rule_whose_precondition_fails_gives_way_to_the_next_one():
    p = Program(Recorder)
    Recorder.calls = []
    # rule byte 2 names rule 1, beta, which needs gamma first: the next rule in name order,
    # gamma, runs instead; the same byte then runs beta.
    p.run(bytes([0, 0, 0, 0, 0, 2, 0, 2, 0]), 2)
    assert [c[0] for c in Recorder.calls if c[0] != "check"] == ["init", "gamma", "beta"]


def test_missing_bytes_read_as_zero_and_end_the_program():
    p = Program(Recorder)
    Recorder.calls = []
    p.run(b"", 10)
    assert Recorder.calls == [("init", 10, ["a"]), ("check",)]


class Unreadable(RuleBasedStateMachine):
    @rule(n=st.integers(0, 10))
    def step(self, n):
        pass


def test_a_rule_with_a_strategy_that_is_not_a_choice_is_refused_by_name():
    with pytest.raises(TypeError, match="rule step: argument n is not a finite choice"):
        Program(Unreadable)
    with pytest.raises(FuzzUsageError, match="--driver rules"):
        machine_test(Unreadable, "program", profile_settings("ci"))


def test_choices_are_bounded_by_one_byte():
    with pytest.raises(ValueError, match="1 to 256 values"):
        choice(range(257))


@functools.cache
def no_hold_found(driver: str):
    """The page machine under the no-hold design, seed 5, 300 examples: run once a driver for
    the two tests that read it (a seeded run: the same failure each time)."""
    return run_machine("page", "no-hold", profile="ci", seed=5, examples=300, driver=driver)


@pytest.mark.parametrize("driver", ["program", "rules"])
def test_both_drivers_find_the_no_hold_defect_and_shrink_it(driver):
    """The same machine under either driver finds the rejected design's defect; the shrunk
    program is a few steps, and its replay command fails again the same way."""
    r = no_hold_found(driver)
    assert not r.ok and r.failure.invariant in ("HD-YOUNG-KEPT", "HD-INTERVAL")
    steps = [s for s in r.failure.program.splitlines() if s.startswith("state.")]
    assert 2 <= len(steps) <= 6, r.failure.program
    again = run_machine("page", "no-hold", profile="dev", replay=r.failure.blob,
                        driver=driver, steps=r.max_steps)
    assert again.failure is not None and again.failure.invariant == r.failure.invariant
    assert again.failure.program == r.failure.program


def test_the_replay_command_names_the_step_bound_the_blob_was_drawn_under():
    r = no_hold_found("program")
    assert r.driver == "program" and f"--steps {r.max_steps} --replay " in r.replay_command()
    r = no_hold_found("rules")
    assert "--driver rules" in r.replay_command() and "--steps" not in r.replay_command()


def test_more_steps_than_one_example_can_carry_is_a_usage_error():
    """Hypothesis draws at most its buffer (8 KiB) per example: the page machine's slots of 5
    bytes after 8 of initializers carry 1,636 steps; more is refused before anything runs,
    rather than every example being discarded as too large."""
    from purgecheck.fuzz import load_machine

    program = Program(load_machine("page"))
    assert program.size(program.max_steps()) <= program.max_size() < program.size(
        program.max_steps() + 1)
    with pytest.raises(FuzzUsageError, match=f"reads at most {program.max_steps()} steps"):
        run_machine("page", profile="ci", examples=1, steps=program.max_steps() + 1)
