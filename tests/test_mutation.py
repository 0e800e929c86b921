"""The kill matrix runner: kills a known mutant, reports a harmless one as surviving (exit 1),
and survives runs that hang or crash without leaking a patch into the parent.

Only the scenarios engine with the quick budget runs here, to keep the suite fast.
"""

import os
import time

import pytest

import model.epoch as ep
from purgecheck import docs
from purgecheck.reports import store
from purgecheck.cli import main
from purgecheck.mutants import MUTANTS, Mutant, Patch
from purgecheck.mutants.matrix import CRASHED, KILLED, SURVIVED, TIMEOUT, run_matrix

from html_check import check_html


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PURGECHECK_STATE_DIR", str(tmp_path))
    return tmp_path


def _same_age(current, stamp):
    """Harmless: the age written another way, equal for every input."""
    return (current + (1 << 32) - stamp) & ((1 << 32) - 1)


def _due_hangs(start, now, interval):
    time.sleep(3600)


def _due_exits(start, now, interval):
    os._exit(3)


HARMLESS = Mutant("test-harmless", "the epoch age computed another way (changes nothing)",
                  ("EP-NO-SHORT-EPOCH",), (Patch("model.epoch", "compute_epoch_age", _same_age),))
HANGS = Mutant("test-hangs", "the advance never returns", (),
               (Patch("model.epoch", "is_epoch_due", _due_hangs),))
EXITS = Mutant("test-exits", "the process dies in the advance", (),
               (Patch("model.epoch", "is_epoch_due", _due_exits),))


def test_a_known_mutant_is_killed_by_the_scenarios_engine_and_nothing_leaks(clean_cells_once):
    original = ep.is_epoch_young
    m = run_matrix([MUTANTS["age-lt-1"]], ["scenarios"], quick=True, timeout=300)
    assert m.baseline["scenarios"].verdict == "held"
    cell = m.cells[("age-lt-1", "scenarios")]
    assert cell.verdict == KILLED and m.killers("age-lt-1") == ["scenarios"]
    failed = {f["invariant"]: f for f in cell.failures}
    assert set(MUTANTS["age-lt-1"].catches) <= set(failed)
    young = failed["HD-YOUNG-KEPT"]
    assert young["replay"].startswith("purgecheck scenario ")
    # the step table ends at the op where the invariant first failed
    assert any(inv == "HD-YOUNG-KEPT" for s in young["steps"] for inv, _ in s["violations"])
    assert ep.is_epoch_young is original  # the mutant lived in the worker only
    assert m.survivors() == []


def test_a_harmless_mutant_survives_and_fails_the_run(monkeypatch, capsys, tmp_path,
                                                     clean_cells_once):
    monkeypatch.setitem(MUTANTS, HARMLESS.name, HARMLESS)
    # --pool: a mutant of this module is known to this process only, not to Dask's workers
    code = main(["mutants", "--only", HARMLESS.name, "--engine", "scenarios", "--quick",
                 "--pool"])
    out = capsys.readouterr().out
    assert code == 1
    assert "SURVIVED test-harmless" in out and "0 survived" not in out
    saved = store.load(store.MUTANTS)
    [cell] = [c for c in saved["cells"] if c["mutant"] == HARMLESS.name]
    assert cell["verdict"] == SURVIVED and cell["date"]
    # the report in the docs says so, in a page that stands on its own
    files = docs.from_results()
    [row] = [r for r in files["mutants.md"].splitlines() if r.startswith("| [`test-harmless`]")]
    assert row.endswith("| **0: survived** |")
    check_html(files["results.html"], tmp_path, {"invariants.html", "results.html"})


def test_a_hanging_run_is_killed_at_the_timeout_a_crashing_one_reported_neither_a_kill(
        clean_cells_once):
    # one matrix, one clean run of the engine for both, judged once for the session's tests
    # (clean_cells_once)
    m = run_matrix([HANGS, EXITS], ["scenarios"], quick=True, timeout=4)
    assert m.cells[("test-hangs", "scenarios")].verdict == TIMEOUT
    cell = m.cells[("test-exits", "scenarios")]
    assert cell.verdict == CRASHED and "exit code 3" in cell.note
    assert m.survivors() == ["test-hangs", "test-exits"]


def test_an_engine_that_fails_on_the_clean_model_cannot_kill(monkeypatch):
    from purgecheck import engines
    from purgecheck.reports.results import Result

    load = engines.load_engines()
    broken = engines.Engine("always-fails", "fails whatever it is given",
                            lambda b: [Result("PG-UNIT", "always-fails", "fail", "")])
    monkeypatch.setitem(load, "always-fails", broken)
    m = run_matrix([HARMLESS], ["always-fails"], quick=True, timeout=60)
    assert m.baseline["always-fails"].verdict == "failed"
    assert m.cells[("test-harmless", "always-fails")].verdict == KILLED  # it "killed" it ...
    assert m.killers("test-harmless") == []  # ... but an engine that cannot hold is no judge


def test_unknown_mutant_or_engine_is_bad_usage(capsys):
    assert main(["mutants", "--only", "no-such-mutant"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown mutant 'no-such-mutant'" in err
    assert main(["mutants", "--engine", "no-such-engine"]) == 2


def test_the_matrix_page_tells_the_last_run_from_earlier_ones_and_why_one_engine_alone():
    """A --kills 2 run leaves the cells it did not run as an earlier run said them: shown in
    parentheses, and not counted as the last run's kills. A mutant killed by one engine gets
    its `seen_by_one` reason, or a loud "no reason given"."""
    from purgecheck.docs.md import Links
    from purgecheck.docs.results_pages import mutants_page

    old, new = "2026-12-01 10:00 UTC", "2026-12-03 18:00 UTC"
    explained = next(m for m in MUTANTS.values() if m.seen_by_one)

    def cell(m, e, verdict, date):
        return {"mutant": m, "engine": e, "verdict": verdict, "seconds": 1.0, "failures": [],
                "note": "", "date": date, "quick": True}

    doc = {"saved": new,
           "baseline": {e: cell(None, e, "held", new) for e in ("scenarios", "validate")},
           "cells": [cell("age-lt-1", "scenarios", "killed", new),
                     cell("age-lt-1", "validate", "killed", old),
                     cell(explained.name, "scenarios", "killed", new),
                     cell(explained.name, "validate", "survived", new)]}
    page = mutants_page(doc, Links(page="mutants.md"))
    [row] = [r for r in page.splitlines() if r.startswith("| [`age-lt-1`]")]
    assert "| (killed 1.0 s) |" in row and row.endswith("| 1 (+1 earlier) |")
    assert "**no reason given** for `age-lt-1`" in page
    assert f"*Seen by one engine:* {explained.seen_by_one}" in page


def test_a_first_kill_run_prints_a_line_per_mutant_within_100_columns():
    """`make check`'s `mutants --first-kill` printed a column per engine, about 170 wide, each
    row mostly "-": it prints a line per mutant now, its killer, the time and how many engines
    ran. A survivor says so on its line and below; the full table stays for other runs."""
    import io

    from purgecheck.mutants.matrix import HELD, NOT_RUN, Cell, Matrix
    from purgecheck.mutants.report import print_matrix
    engines = ["scenarios", "glibc", "fuzz", "conformance", "validate", "prove",
               "sanitizers", "relacy", "z3:glibc-trim-floor-model-no-threshold-at-all"]
    cells = {}
    for m, killer, seconds in (("age-lt-1", "validate", 0.8), ("huge-purges", "scenarios", 0.4),
                               ("unit-os-page", None, 0.0)):
        for e in engines:
            verdict = KILLED if e == killer else SURVIVED if e in ("scenarios", "validate") \
                else NOT_RUN
            cells[(m, e)] = Cell(m, e, verdict, seconds if e == killer else 1.0)
    matrix = Matrix(engines, ["age-lt-1", "huge-purges", "unit-os-page"],
                    {e: Cell(None, e, HELD) for e in engines}, cells)
    lines, table = io.StringIO(), io.StringIO()
    print_matrix(matrix, lines, first_kill=True)
    print_matrix(matrix, table)
    out = lines.getvalue().splitlines()
    assert all(len(line) <= 100 for line in out)
    assert out[1].split() == ["age-lt-1", "validate", "0.8s", "2"]
    assert out[2].split() == ["huge-purges", "scenarios", "0.4s", "2"]
    assert out[3].split() == ["unit-os-page", "SURVIVED", "-", "2"]
    assert "SURVIVED unit-os-page:" in lines.getvalue()
    assert out[-1] == "3 mutants: 2 killed (0 by more than one engine), 1 survived"
    assert max(map(len, table.getvalue().splitlines())) > 100  # the table: every engine
