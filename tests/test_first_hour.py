"""What a new user meets first (issue 18, "the first hour"): --version, a check table that
fits a CI log, and a scenario that ends with its verdict and names each failure once."""

from __future__ import annotations

import orjson
import pytest

from purgecheck import __version__, cbuild
from purgecheck.cli import main
from purgecheck.mutants import MUTANTS, applied

LONG_PATH = "/check/work/main/" + "deep/" * 12 + "reference_c/build/driver_mutant"  # CI-like


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"purgecheck {__version__}"


def test_check_prints_one_line_per_row_and_the_statements_only_when_verbose(capsys,
                                                                           engines_run_once):
    """Two `check`s of one scenarios run (tests/conftest.py): the JSON with --verbose, and the
    summary as a CI log shows it."""
    from model.invariants import load_registry
    assert main(["check", "--engine", "scenarios", "--quick", "--verbose", "--json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    statement = load_registry()["PG-UNIT"].statement
    assert doc["statements"]["PG-UNIT"] == statement
    # CI's regression (stop 33): a test before, in the same process, had built a mutant in a
    # temporary folder with a long path; `check` printed that build's line, 100+ columns,
    # though the check itself had run no C build.
    cbuild.RAN[LONG_PATH] = cbuild.BuildInfo(LONG_PATH, "a" * 12, "b" * 12, True)
    assert main(["check", "--engine", "scenarios", "--quick"]) == 0
    out = capsys.readouterr().out
    ids = {r["invariant"] for r in doc["results"]}
    rows = [line for line in out.splitlines() if line.split(" ")[0] in ids]
    assert len(rows) == len(doc["results"]) > 20  # one per invariant of the engine, unwrapped
    assert all(len(line) <= 100 for line in out.splitlines())  # a CI log's columns
    assert statement[:30] not in out
    assert "C build:" not in out and "deep/" not in out  # no C build ran in this check


def test_the_summary_fits_100_columns_and_the_long_form_keeps_every_figure_whole():
    """A figure longer than its column ends in an ellipsis; --verbose (the long form, the
    table of before) has it whole, and its lines do not fit 100 columns: the check can fail."""
    import io

    from purgecheck.reports.results import Result, print_table
    long = "3 + 3 forks while MOVING was held (before + after the increment), " * 3
    results = [Result("EP-MOVING-HELD", "validate", "hold", long, 0.25),
               Result("PG-UNIT", "scenarios", "fail", "16,096 steps", 1.5, detail="a reason",
                      replay="purgecheck check --engine scenarios")]
    short, verbose = io.StringIO(), io.StringIO()
    print_table(results, "purgecheck check", file=short)
    print_table(results, "purgecheck check", {"PG-UNIT": "a statement"}, file=verbose)
    lines = short.getvalue().splitlines()
    assert all(len(line) <= 100 for line in lines)
    assert lines[2].startswith("EP-MOVING-HELD") and lines[2].endswith("…")
    assert "FAIL PG-UNIT (scenarios): a reason" in lines and lines[-1] == "1 passed, 1 failed"
    assert "a statement" in verbose.getvalue() and "the increment)" in verbose.getvalue()
    assert max(len(line) for line in verbose.getvalue().splitlines()) > 100


def test_a_row_of_long_names_still_shows_its_verdict_and_time():
    """`make check`'s log (stop 38): a row for several invariants at once
    (`EP-NO-SHORT-EPOCH,EP-RECORDED-NOT-BEFORE-REAL,EP-ONE-PER-SWEEP`) made the invariant
    column 62 wide and an engine name 36, and every row lost its result and time past column
    100. The names are cut instead; a summary that sizes the columns to the longest name
    fails here."""
    from purgecheck.reports.results import Result, summary_rows
    results = [Result("EP-NO-SHORT-EPOCH,EP-RECORDED-NOT-BEFORE-REAL,EP-ONE-PER-SWEEP",
                      "z3:glibc-trim-floor-model-no-threshold-at-all", "fail", "2 of 3", 12.5),
               Result("PG-UNIT", "scenarios", "hold", "110 ops", 0.25)]
    head, long_row, short_row = summary_rows(results)
    assert all(len(line) <= 100 for line in (head, long_row, short_row))
    assert head.split() == ["invariant", "engine", "result", "time", "figure"]
    assert long_row.startswith("EP-NO-SHORT-EPOCH,EP-RECORDED…  z3:…-model-no-threshold-at-all")
    assert long_row.split()[2:] == ["fail", "12.50s", "2", "of", "3"]
    assert short_row.split() == ["PG-UNIT", "scenarios", "hold", "0.25s", "110", "ops"]


def test_a_full_checks_rows_keep_room_for_the_figure_and_tell_engines_apart():
    """`make check`'s log (stop 39): beside `refuted-as-expected` and a mutant's engine name of
    30 the figure had 6 characters (`16,366…` in every row), and the explorer's mutants all
    read `explorer:explore-ba…`. The names give way down to their floors so the figure keeps
    FIGURE_MIN, and an engine's name keeps its family and its end; a summary that sizes the
    names first, or cuts an engine's name at its end, fails here."""
    from purgecheck.reports.results import FIGURE_MIN, Result, summary_rows
    figure = "288,966 states, 675,695 transitions, depth 64"
    results = [Result("EP-NO-SHORT-EPOCH,EP-RECORDED-NOT-BEFORE-REAL", f"explorer:explore-{end}",
                      "refuted-as-expected", figure, 39.86) for end in ("bare-1", "bare-2")]
    results.append(Result("PG-SURVIVORS-KEEP-BYTES", "z3:glibc-rfc-counters-not-halved",
                          "proved", "64-bit size_t", 0.5))
    head, *rows = summary_rows(results)
    assert all(len(line) <= 100 for line in [head, *rows])
    start = head.index("figure")
    assert all(len(row[start:]) >= FIGURE_MIN for row in rows[:2])
    assert rows[0][start:].startswith(figure[:FIGURE_MIN - 1])
    engines = [row.split()[1] for row in rows]
    assert engines[0] != engines[1] and engines[0].startswith("explorer:")
    assert engines[0].endswith("bare-1") and engines[2].endswith("not-halved")
    assert rows[2].split()[0] == "PG-SURVIVORS-KEEP-BYTES"  # a name under its floor stays whole


def test_a_scenario_ends_with_its_verdict(capsys):
    assert main(["scenario", "every-third"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].endswith("invariants held after "
                                                                     "each of 110 ops")


def test_a_failing_scenario_names_each_failure_once_and_json_carries_them(capsys):
    with applied(MUTANTS["purged-left-on-list"]):
        assert main(["scenario", "every-third"]) == 1
        err = capsys.readouterr().err.splitlines()
        assert main(["scenario", "every-third", "--json"]) == 1
        last = orjson.loads(capsys.readouterr().out.splitlines()[-1])
    fails = [line for line in err if line.startswith("FAIL")]
    assert len(fails) == len({f.split(": ")[1] for f in fails}) >= 1  # once per invariant
    assert err[-1].endswith("ops") and "failed" in err[-1]
    assert last["verdict"] == "fail" and len(last["failures"]) == len(fails)


def test_prove_lists_the_glibc_proofs_and_only_takes_each_name(capsys):
    from proofs.glibc_throttle import PROOFS, TWINS
    assert main(["prove", "--list"]) == 0
    listed = {line.split()[0] for line in capsys.readouterr().out.splitlines() if line[:1] != " "}
    assert {p.name for p in [*PROOFS, *TWINS]} <= listed
    assert main(["prove", "--quick", "--only", "glibc-rfc-condition", "--json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert {r["engine"] for r in doc["results"]} == {"z3:glibc-rfc-condition"}
    assert main(["prove", "--quick", "--mutants", "--only", "rfc-no-halving", "--json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert [r["status"] for r in doc["results"]] == ["refuted-as-expected"]


def test_docs_keeps_the_dated_pages_out_of_the_work_tree(tmp_path, monkeypatch):
    """make check ends with `purgecheck docs`: the pages of the last runs, dated, go under
    .purgecheck/docs/ and not into docs/ unless asked (--results)."""
    import purgecheck.docs as docs_mod
    import purgecheck.docs.real_bun_page as bun_page
    import purgecheck.docs.simulate_page as sim_page
    monkeypatch.setenv("PURGECHECK_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(docs_mod, "deterministic", lambda facts=None: {"invariants.md": "x\n"})
    monkeypatch.setattr(docs_mod, "from_results", lambda: {"results.md": "dated\n"})
    monkeypatch.setattr(sim_page, "simulate_files", lambda: {"simulate.md": "s\n"})
    monkeypatch.setattr(bun_page, "real_bun_files", lambda root: {"real-bun.md": "r\n"})
    out = tmp_path / "docs"
    assert main(["docs", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["invariants.md", "real-bun.md",
                                                     "simulate.md"]
    assert (tmp_path / "state" / "docs" / "results.md").read_text() == "dated\n"
    assert main(["docs", "--out", str(out), "--results"]) == 0
    assert (out / "results.md").read_text() == "dated\n"



def test_a_builds_line_keeps_the_end_of_a_long_path_within_the_columns():
    cbuild.RAN[LONG_PATH] = cbuild.BuildInfo(LONG_PATH, "a" * 12, "b" * 12, True)
    try:
        (line,) = cbuild.summary_lines(100)
    finally:
        cbuild.RAN.clear()
    assert len(line) == 100 and line.startswith("C build: …")
    assert line.endswith("driver_mutant (sources aaaaaaaaaaaa, binary bbbbbbbbbbbb, rebuilt now)")
