"""The traces carry the free list in order and the comparison sees a different order (issue 20).

The holes walk rebuilds the free list by pushing each kept block on a new head (digest 3,
step 3), which reverses the kept blocks; which block malloc takes next is behaviour. The
`walk` event carries the list as the walk leaves it (docs/trace-format.md), the scenario
`walk-order` keeps blocks next to live ones, and a rebuild that keeps the old order, in the
C reference (switch rebuild_keeps_order) or in the model (its twin), is a divergence."""

from __future__ import annotations

import subprocess

import pytest

from model.world import Options
from purgecheck.cli import main
from purgecheck.conformance import BUILD_DIR, CDriver, diff_script
from purgecheck.formats.ops import parse_script
from purgecheck.formats.trace import model_trace
from purgecheck.mutants import MUTANTS, applied
from purgecheck.scenarios import SCENARIOS

SCENARIO = SCENARIOS["walk-order"]


@pytest.fixture(scope="module")
def driver():
    subprocess.run(["make", "-s", "-C", str(BUILD_DIR.parent)], check=True, capture_output=True)
    with CDriver() as d:
        yield d


def walks(events: list[dict]) -> list[dict]:
    return [ev for ev in events if ev["ev"] == "walk"]


def test_the_walk_event_carries_the_free_list_the_walk_leaves(driver):
    result = diff_script(SCENARIO.build(), SCENARIO.options, driver, observe="all")
    assert result.equal, result.divergence
    events = result.model[1]
    first = walks(events)[0]
    assert first["runs"] and len(first["free"]) >= 3  # a rebuild with several kept blocks
    after = next(ev for ev in events[events.index(first):] if ev["ev"] == "page_state")
    assert after["free"] == first["free"]
    # and the next malloc takes the head
    malloc = next(ev for ev in events[events.index(first):] if ev["ev"] == "malloc")
    assert malloc["block"] == first["free"][0]


def test_a_c_rebuild_in_another_order_diverges_at_the_walk(capsys):
    assert main(["diff", "--scenario", "walk-order", "--mutant", "rebuild-keeps-order"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "1 walk" in out[0]
    model, c = out[1], out[2]
    assert '"ev":"walk"' in model and '"ev":"walk"' in c
    # the same runs and the same count: only the order tells them apart
    assert model.split('"free"')[0].split("{", 1)[1] == c.split('"free"')[0].split("{", 1)[1]


def test_the_model_twin_diverges_from_the_clean_c(driver):
    text = SCENARIO.build()
    with applied(MUTANTS["rebuild-keeps-order"]):
        twin = model_trace(parse_script(text), SCENARIO.options, "sweeps", "<twin>")
    result = diff_script(text, SCENARIO.options, driver, model_cached=twin)
    assert not result.equal
    a, b = result.divergence.a, result.divergence.b
    assert a["ev"] == b["ev"] == "walk" and a["free"] == b["free"][::-1] != b["free"]
