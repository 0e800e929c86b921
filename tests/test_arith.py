"""The real tests' unit arithmetic over their grids (purgecheck/arith.py), on the model and on
the C reference: the lines of both are equal, each holds against the definition (the
checks `unit-blocks-grid` and `os-page-blocks-grid` of purgecheck/realtests/checks.py), and the
mutant that leaves the last block of a unit out breaks the check on both sides.
"""

from __future__ import annotations

import pytest

from purgecheck import arith
from purgecheck.realtests.checks import run_checks
from purgecheck.mutants import MUTANTS, applied
from purgecheck.realtests.cases import CASES, assess

from test_reference_c import built  # noqa: F401 (the C build, as a fixture)

GRIDS = list(arith.GRIDS)


def test_the_grids_are_the_real_tests_sizes():
    """The counts follow from the real tests' grids: 3 units x 7 blocks x 3 offsets, and
    2 OS pages x 12 blocks x 7 offsets x 4 capacities, every unit index of each."""
    large = list(arith.geometries("large"))
    small = list(arith.geometries("small"))
    assert len(large) == 3 * 7 * 3 and len(small) == 2 * 12 * 7 * 4
    assert {cap for *_, cap, _ in small} >= {0, 1}
    # a full 4 MiB page of 512 KiB blocks at offset 0: 8 blocks, 256 units of 16 KiB
    assert (16 * 1024, 512 * 1024, 0, 8, 256) in large


@pytest.mark.parametrize("grid", GRIDS)
def test_model_and_c_agree_and_hold(grid, built):
    result = arith.run_grid(grid)
    assert result["diff"] is None
    for engine in ("model", "C"):
        assert result[engine] == {arith.GRIDS[grid].check: []}, engine


def test_outside_means_first_and_last_zero_and_capacity_zero_is_never_inside():
    lines = arith.model_grid("small")
    assert not any(ln["inside"] for ln in lines if ln["capacity"] == 0)
    outside = [ln for ln in lines if not ln["inside"]]
    assert outside and all(ln["first"] == ln["last"] == 0 for ln in outside)
    # a block straddles a unit edge somewhere: first < last happens with a unit inside
    assert any(ln["inside"] and ln["first"] < ln["last"] for ln in lines)


@pytest.mark.parametrize("grid", GRIDS)
def test_the_check_fails_on_a_wrong_line(grid):
    """Each way a line can be wrong is reported: inside flipped, outside not [0, 0], and a
    range one block long or short at either end."""
    check = arith.GRIDS[grid].check
    lines = arith.model_grid(grid)
    inside = next(ln for ln in lines if ln["inside"] and ln["first"] > 0
                  and ln["last"] < ln["capacity"] - 1)
    outside = next(ln for ln in lines if not ln["inside"])
    for bad in ({**inside, "inside": False}, {**outside, "first": 1, "last": 1},
                {**inside, "first": inside["first"] - 1}, {**inside, "first": inside["first"] + 1},
                {**inside, "last": inside["last"] + 1}, {**inside, "last": inside["last"] - 1}):
        assert run_checks((check,), arith.HEADER, [bad])[check], bad
    assert run_checks((check,), arith.HEADER, [])[check]  # no line: not vacuous


@pytest.mark.parametrize("grid", GRIDS)
def test_the_last_block_short_mutant_breaks_the_check_on_both(grid, built):
    m = MUTANTS["unit-last-block-short"]
    check = arith.GRIDS[grid].check
    with applied(m):
        model = arith.model_grid(grid)
    assert run_checks((check,), arith.HEADER, model)[check]
    c = arith.c_grid(grid, m.name)
    assert run_checks((check,), arith.HEADER, c)[check]
    assert arith.first_difference(arith.model_grid(grid), c)


def test_a_c_grid_that_differs_makes_the_case_partial():
    case = next(c for c in CASES if c.grid == "large")
    held = {"unit-blocks-grid": []}
    full = assess(case, {"grid:large": {"model": held, "C": held, "diff": None}})
    assert full.status == "FULL"
    part = assess(case, {"grid:large": {"model": held, "C": held, "diff": "line 3: ..."}})
    assert part.status == "PARTIAL" and "C differs from the model" in part.missing
