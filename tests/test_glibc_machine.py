"""The Hypothesis state machine over the glibc model: it holds derandomized, and it finds the
mutants that break an arena's structure."""

from __future__ import annotations

import pytest

from purgecheck.mutants import MUTANTS, applied
from stateful_tests.glibc_machine import run_glibc_machine


def test_machine_holds_on_the_model():
    run_glibc_machine(max_examples=60, steps=50)


@pytest.mark.parametrize("name,invariant", [
    ("glibc-top-coalesce-skipped", "GL-NO-FREE-NEIGHBOURS"),
    ("glibc-every-free-trims", "GL-TRIM-TRIGGER"),
])
def test_machine_catches_mutant(name, invariant):
    with applied(MUTANTS[name]):
        with pytest.raises(AssertionError, match=invariant):
            run_glibc_machine(max_examples=60, steps=50, shrink=False)


@pytest.mark.slow
def test_machine_holds_long():
    run_glibc_machine(max_examples=600, steps=80)
