"""The table of docs/conformance.md, which engine that runs C reaches which rule of the seed
(purgecheck/reach.py): every rule is reached by some engine that runs C, the committed table
has every rule, and a rule's test sees its absence."""

from __future__ import annotations

from pathlib import Path

from purgecheck import reach

DOC = Path(__file__).resolve().parent.parent / "docs" / "conformance.md"


def test_every_rule_of_the_seed_is_reached_by_an_engine_that_runs_c():
    scenarios = reach.reach(reach.scenario_traces())
    campaign = reach.reach(reach.campaign_traces(300))
    unreached = [r.id for r in reach.RULES if scenarios[r.id] + campaign[r.id] == 0]
    assert unreached == []
    # the rare paths are in the scenarios the conformance engine runs on every budget
    for rule in ("a fork while MOVING is held: the child records a new start",
                 "a clock that goes back makes the advance due",
                 "a clock reading between the steps of an advance",
                 "walk keeps blocks next to live ones, reversed",
                 "an age of 2^31 epochs or more is old"):
        assert scenarios[rule] >= 1, rule


def test_a_rule_is_not_reached_by_a_trace_that_does_not_show_it():
    fork = {"ev": "fork", "thread": 2, "moving": False, "epoch": 0, "start": 0}
    counts = reach.reach([[fork], [{**fork, "moving": True}]])
    assert counts["a fork while MOVING is held: the child records a new start"] == 1
    clocks = [{"ev": "op", "op": "clock"}, {"ev": "clock", "now": 1000},
              {"ev": "op", "op": "clock"}, {"ev": "clock", "now": 1001}]
    assert reach.reach([clocks])["a clock that goes back makes the advance due"] == 0
    clocks[-1] = {"ev": "clock", "now": 999}
    assert reach.reach([clocks])["a clock that goes back makes the advance due"] == 1


def test_the_committed_table_has_every_rule():
    assert reach.rules_in(DOC.read_text()) == [r.id for r in reach.RULES]


def test_write_replaces_only_the_table(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(f"before\n{reach.BEGIN}\nold\n{reach.END}\nafter\n")
    reach.write(page, "| rule of the seed | x |\n|---|---|\n| r | 1 |")
    text = page.read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "old" not in text
    assert reach.rules_in(text) == ["r"]
