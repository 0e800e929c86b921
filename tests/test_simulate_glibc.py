"""purgecheck simulate on the glibc model (seed 001): the madvise calls of each trim rule on
bench-free and the ebizzy-like loop, the residency read off the system calls, and glibc
mutants that change cost moving the figures the expected way."""

from __future__ import annotations

import pytest

from purgecheck.cli import main
from purgecheck.mutants import MUTANTS, applied
from purgecheck.simulate.glibc import glibc_claims, simulate_glibc


def by_version(runs):
    return {r.design: r.counters for r in runs}


@pytest.fixture(scope="module")
def bench():
    return by_version(simulate_glibc("bench-free", num=200))


@pytest.fixture(scope="module")
def ebizzy():
    return by_version(simulate_glibc("ebizzy", seconds=0.3))


def test_bench_free_madvises_at_every_free_on_2_21_and_almost_never_with_the_rfc(bench):
    assert bench["2.21"]["madvise"] >= 199  # the first free is a munmap (mmapped chunk)
    assert bench["rfc-2015"]["madvise"] <= 2
    assert bench["2.21"]["madvise"] > 50 * max(1, bench["rfc-2015"]["madvise"])
    assert bench["2.23+"]["madvise"] == 0  # the top stays below trim_threshold


def test_ebizzy_madvises_thousands_a_second_on_2_21_and_below_one_with_the_rfc(ebizzy):
    old, rfc = ebizzy["2.21"], ebizzy["rfc-2015"]
    assert old["madvise"] >= 0.9 * old["allocations"]
    assert old["madvise_per_s"] >= 5000 and rfc["madvise_per_s"] < 10


def test_what_2_21_madvises_is_not_resident_what_the_rfc_keeps_is(ebizzy):
    assert ebizzy["2.21"]["rss_end"] < ebizzy["rfc-2015"]["rss_end"]
    assert ebizzy["2.21"]["discarded_bytes_load"] > 100 * ebizzy["rfc-2015"]["discarded_bytes_load"]


def test_the_series_is_consistent():
    for run in simulate_glibc("ebizzy", seconds=0.2):
        times = [s.t_ms for s in run.samples]
        assert times == sorted(times)
        assert all(s.resident >= s.free_resident >= 0 for s in run.samples)
        assert [s.discards for s in run.samples] == sorted(s.discards for s in run.samples)
        assert run.samples[-1].discards == run.counters["madvise"]


def test_2_23_without_its_threshold_check_pays_2_21s_madvise_calls(bench):
    with applied(MUTANTS["glibc-2.23-no-threshold"]):
        broken = by_version(simulate_glibc("bench-free", num=200))
    assert broken["2.23+"]["madvise"] >= 199 > bench["2.23+"]["madvise"]
    assert broken["2.23+"]["rss_end"] < bench["2.23+"]["rss_end"]


def test_a_trim_that_ignores_top_pad_gives_back_more(bench):
    with applied(MUTANTS["glibc-pad-ignored"]):
        broken = by_version(simulate_glibc("bench-free", num=200))
    assert broken["2.21"]["rss_end"] < bench["2.21"]["rss_end"]


def test_the_seed_001_claims_hold_in_the_model():
    claims = glibc_claims()
    assert [c["workload"] for c in claims] == ["bench-free", "ebizzy"]
    assert all(c["holds"] for c in claims), claims
    assert "on 2.21" in claims[0]["model_figures"]


@pytest.mark.parametrize("argv,expected", [
    (["simulate", "ebizzy", "--version", "2.99"], "unknown glibc version"),
    (["simulate", "ebizzy", "--set", "threads=9"], "threads must be in"),
    (["simulate", "ebizzy", "--set", "colour=1"], "no parameter 'colour'"),
    (["simulate", "bench-free", "--design", "epoch"], "--version, not --design"),
])
def test_bad_glibc_usage_is_one_line_and_exit_2(argv, expected, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and len(err.splitlines()) == 1


def test_the_glibc_table(capsys):
    assert main(["simulate", "bench-free", "--set", "num=50", "--version", "2.21",
                 "--version", "rfc-2015"]) == 0
    out = capsys.readouterr().out
    assert "madvise" in out and "rfc-2015" in out and "2.23+" not in out


def test_a_mimalloc_workload_runs_on_glibc_too(capsys):
    """The same calls on the glibc model: Bun.serve's 256 KiB bodies in the main arena."""
    import orjson
    assert main(["simulate", "bun-serve", "--set", "requests=400", "--version", "2.21",
                 "--design", "epoch", "--idle-ms", "100", "--json"]) == 0
    runs = orjson.loads(capsys.readouterr().out)["runs"]
    assert [(r["model"], r["design"]) for r in runs] == [("glibc", "2.21"), ("mimalloc", "epoch")]
    assert runs[0]["counters"]["allocations"] == runs[1]["counters"]["allocations"] == 400
    assert runs[0]["counters"]["brk_grow"] >= 1  # the main thread's arena grows by brk
