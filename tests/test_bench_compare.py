"""bench-compare's judgement of figures (purgecheck/bench/compare.py): beyond the noise only
when the repeats' ranges do not overlap and the medians differ by more than the threshold;
the better way follows the unit; a figure on one side only is listed as such; exit 1 only on
a figure worse beyond the noise. Figures here are given, never measured, except one tiny run
on two worktrees of this repository, whose verdicts are not asserted (DESIGN.md: no timed
tests)."""

from __future__ import annotations

import json
import subprocess

import pytest

from purgecheck.bench import BENCHMARKS
from purgecheck.bench import compare as cmp
from purgecheck.bench.compare import Row, direction, judge, merge


def _row(unit, base, head):
    return judge(Row("traces", "validate", unit, list(base), list(head)))


def test_a_rate_down_beyond_the_noise_is_worse():
    r = _row("events/s", [300_000, 310_000, 305_000], [150_000, 160_000, 155_000])
    assert r.worse and r.verdict == "WORSE beyond the noise"
    assert r.ratio == pytest.approx(155 / 305)


def test_a_rate_up_beyond_the_noise_is_better():
    r = _row("events/s", [150_000, 160_000], [300_000, 310_000])
    assert not r.worse and r.verdict == "better beyond the noise"


def test_lower_is_better_for_seconds_and_memory():
    assert _row("s", [1.0, 1.1], [2.0, 2.2]).worse
    assert _row("MB", [100, 101], [150, 151]).worse
    assert not _row("s", [2.0, 2.2], [1.0, 1.1]).worse


def test_overlapping_ranges_are_within_the_noise_however_far_the_medians():
    r = _row("events/s", [100, 300, 310], [150, 160, 290])
    assert r.verdict == "within the noise" and not r.worse


def test_apart_but_within_the_threshold_is_within_the_noise():
    r = _row("events/s", [100, 101, 102], [95, 96, 97])  # 5 % slower, ranges apart
    assert r.verdict == "within the noise" and not r.worse
    assert judge(Row("t", "v", "events/s", [100, 101, 102], [95, 96, 97]),
                 threshold=0.02).worse


def test_a_figure_with_no_direction_is_changed_never_worse():
    r = _row("steps/ex", [10, 10], [20, 20])
    assert direction("steps/ex") == 0
    assert r.verdict == "changed beyond the noise" and not r.worse


def test_one_run_a_side_is_not_judged():
    r = _row("events/s", [300_000], [100_000])
    assert r.verdict == "one run: not judged" and not r.worse


def test_figures_on_one_side_only():
    runs = {"base": [[{"bench": "traces", "name": "old", "value": 1.0, "unit": "s"}]],
            "head": [[{"bench": "traces", "name": "new", "value": 2.0, "unit": "s"},
                      {"bench": "traces", "name": "nan", "value": None, "unit": "s"}]]}
    rows = {r.name: judge(r) for r in merge(runs)}
    assert rows["old"].verdict == "only on base"
    assert rows["new"].verdict == "only on head"
    assert rows["nan"].verdict == "measured on neither"
    assert not any(r.worse for r in rows.values())


def test_compare_is_a_tool_not_a_benchmark():
    assert "compare" not in BENCHMARKS and "traces" in BENCHMARKS


def _fake_runs(monkeypatch, base_value, head_value):
    """run_once answers from given figures: `base_value` on the base's worktree, else
    `head_value` (this tree)."""
    def run_once(tree, name, tiny, env):
        v = head_value if tree == cmp.ROOT else base_value
        return [{"bench": name, "name": "validate: events per second by CPU time",
                 "value": v, "unit": "events/s", "note": ""},
                {"bench": name, "name": "only here" if tree == cmp.ROOT else "only there",
                 "value": 1.0, "unit": "s", "note": ""}], ""
    monkeypatch.setattr(cmp, "run_once", run_once)


@pytest.mark.parametrize("head_value, code", [(100_000, 1), (300_000, 0), (200_000, 0)])
def test_exit_status_follows_the_verdicts(monkeypatch, capsys, head_value, code):
    _fake_runs(monkeypatch, 200_000, head_value)
    assert cmp.main(["--base", "HEAD", "--only", "traces", "--quick", "--repeats", "2"]) == code
    out = capsys.readouterr().out
    assert "| traces | only here | s | - | 1.00 (1.00-1.00) | - | only on head |" in out
    assert "only on base" in out
    assert ("1 figure worse beyond the noise" in out) == (code == 1)


def test_json_rows(monkeypatch, capsys):
    _fake_runs(monkeypatch, 200_000, 100_000)
    assert cmp.main(["--base", "HEAD", "--only", "traces", "--quick", "--repeats", "2",
                     "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    worse = [r for r in d["rows"] if r["worse"]]
    assert [r["name"] for r in worse] == ["validate: events per second by CPU time"]
    assert worse[0]["base"] == [200_000, 200_000] and worse[0]["ratio"] == 0.5


def test_bad_base_is_bad_usage(capsys):
    assert cmp.main(["--base", "no-such-commit-xyz", "--only", "traces"]) == 2
    assert "is not a commit" in capsys.readouterr().err


def test_the_temporary_worktree_is_removed(monkeypatch):
    _fake_runs(monkeypatch, 1.0, 1.0)
    before = subprocess.run(["git", "worktree", "list"], cwd=cmp.ROOT, capture_output=True,
                            text=True).stdout
    cmp.main(["--base", "HEAD", "--only", "traces", "--quick", "--repeats", "1"])
    after = subprocess.run(["git", "worktree", "list"], cwd=cmp.ROOT, capture_output=True,
                           text=True).stdout
    added = set(after.splitlines()) - set(before.splitlines())
    assert not [w for w in added if "purgecheck-compare-" in w]


def test_a_tiny_run_end_to_end(capsys):
    """The traces benchmark at its tiny size on HEAD's worktree and on this tree, twice each
    (about 10 s): every figure on both sides, each judged; the speed is not asserted."""
    cmp.main(["--base", "HEAD", "--only", "traces", "--quick", "--repeats", "2"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| traces |")]
    assert len(rows) == 9
    assert all("only on" not in r and "neither" not in r for r in rows)
