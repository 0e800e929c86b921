"""purgecheck simulate on the glibc model (seed 001): what each trim rule costs on bench-free
and the ebizzy-like loop, computed by the simulator on small instances: madvise calls,
refaults and resident pages (the model's own ghost state), the series over virtual time, and
glibc mutants of the catalogue that change cost moving the figures the expected way."""

from __future__ import annotations

import pytest

from model.glibc.constants import PAGESIZE
from model.glibc.heap import MMAPPED
from model.glibc.resident import ResidentPages
from purgecheck.cli import main
from purgecheck.glibc import workloads as glibc_workloads
from purgecheck.mutants import MUTANTS, applied
from purgecheck.simulate.claims import glibc_claims
from purgecheck.simulate.glibc import (MAX_SAMPLES, Costs, GlibcSimulation, ebizzy,
                                       script_lane, simulate_glibc)
from purgecheck.simulate.result import COUNTERS

SMALL_EBIZZY = {"seconds": 0.05}  # about 750 records on 2.21, 2,200 with the RFC
# A record that grows a page each time, with fixed thresholds: the heap grows between the
# shrinks, what the RFC's ratio weighs (with the dynamic threshold every record is mmapped).
GROWING = {"seconds": 0.02, "grow": PAGESIZE, "mmap_threshold": 32 << 20,
           "trim_threshold": 128 << 10}


def by_version(runs):
    return {r.design: r.counters for r in runs}


@pytest.fixture(scope="module")
def bench():
    return by_version(simulate_glibc("bench-free"))


@pytest.fixture(scope="module")
def ebizzy_runs():
    return simulate_glibc("ebizzy", **SMALL_EBIZZY)


@pytest.fixture(scope="module")
def eb(ebizzy_runs):
    return by_version(ebizzy_runs)


# -- seed 001's directions and orders of magnitude ----------------------------------------------

def test_bench_free_2_21_madvises_hundreds_of_times_more_than_the_rfc(bench):
    """Seed 001: "Before the patch, this resulted in 1024 calls to madvise. With the patch
    applied, madvise is called twice." (one of each is the worker's stack at its exit)"""
    old, rfc = bench["2.21"], bench["rfc-2015"]
    assert old["madvise"] >= 1000 and old["heap_madvise"] >= 1000
    assert rfc["madvise"] <= 2
    assert old["madvise"] >= 100 * rfc["madvise"]
    assert bench["2.22"]["madvise"] <= 2


def test_bench_free_on_2_23_madvises_only_the_stack_as_the_digest_measured(bench):
    """The digest (glibc 2.36 under strace): 0 heap madvise, 1 for the stack; the first
    block is mmapped and its free raises trim_threshold above what the top ever holds."""
    today = bench["2.23+"]
    assert today["heap_madvise"] == 0 and today["madvise"] == 1
    assert today["mmap"] >= 1 and today["munmap"] >= 1


def test_bench_free_refaults_a_page_per_iteration_on_2_21_though_it_writes_no_block(bench):
    """The seed's dostuff writes nothing: what refaults is the page of the top chunk's header
    that malloc writes past the block, in the tail shrink_heap had just madvised."""
    old, rfc = bench["2.21"], bench["rfc-2015"]
    assert old["refaults"] >= 1000 and rfc["refaults"] <= 2
    assert old["sys_ms"] > 100 * rfc["sys_ms"]


def test_ebizzy_2_21_madvises_at_nearly_every_free_and_the_rfc_almost_never(eb):
    old, rfc, today = eb["2.21"], eb["rfc-2015"], eb["2.23+"]
    assert old["heap_madvise"] >= 0.99 * old["allocations"]
    assert rfc["heap_madvise"] <= 0.01 * rfc["allocations"]
    assert today["heap_madvise"] == 0  # the digest: trim_threshold doubled at the first free
    # thousands a second (seed: about 9,000), and a handful in the whole run with the RFC
    assert 1000 <= old["madvise_per_s"] <= 90_000
    assert rfc["madvise"] <= 2 and rfc["madvise_per_s"] < old["madvise_per_s"] / 100


def test_ebizzy_2_21_refaults_its_record_and_spends_its_time_in_the_kernel(eb):
    """Seed 001: 22.49 s of 30 in the kernel on 2.21, none with the patch; about four times
    the records a second."""
    old, rfc = eb["2.21"], eb["rfc-2015"]
    assert old["refaults"] >= 10 * old["allocations"]  # pages of each record, every time
    assert rfc["refaults"] <= 0.1 * rfc["allocations"]
    assert old["sys_ms"] > old["user_ms"] and rfc["sys_ms"] < 0.01 * rfc["user_ms"]
    assert 1.5 < rfc["records_per_s"] / old["records_per_s"] < 40


def test_the_rfc_keeps_slightly_more_resident(eb):
    """Seed 001: "This reduces the overhead in the worst case at that cost of slightly
    higher RSS." What 2.21 madvises is not resident between records; the RFC keeps it."""
    old, rfc = eb["2.21"], eb["rfc-2015"]
    assert old["rss_mean"] < rfc["rss_mean"] <= 2 * old["rss_mean"]
    assert old["discarded_bytes_load"] > 100 * rfc["discarded_bytes_load"]


def test_ebizzy_threads_each_pay_on_2_21():
    runs = by_version(simulate_glibc("ebizzy", ["2.21", "rfc-2015"], threads=3, seconds=0.02))
    one = by_version(simulate_glibc("ebizzy", ["2.21", "rfc-2015"], seconds=0.02))
    for v in ("2.21", "rfc-2015"):  # three arenas, three clocks: three times the records
        assert runs[v]["allocations"] == pytest.approx(3 * one[v]["allocations"], rel=0.01)
    assert runs["2.21"]["heap_madvise"] >= 0.99 * runs["2.21"]["allocations"]
    assert runs["rfc-2015"]["heap_madvise"] <= 3


# -- the series and the accounting --------------------------------------------------------------

def _check_series(run):
    s = run.samples
    assert s and s[0].t_ms == 0.0
    assert [x.t_ms for x in s] == sorted(x.t_ms for x in s)
    assert s[-1].t_ms == pytest.approx(run.end_ms)
    assert all(x.resident >= x.free_resident >= 0 for x in s)
    assert all(x.resident % PAGESIZE == 0 for x in s)
    assert all(a.discards <= b.discards and a.discarded_bytes <= b.discarded_bytes
               for a, b in zip(s, s[1:]))
    assert s[-1].discards == run.counters["madvise"]
    assert s[-1].resident == run.counters["rss_end"]
    assert 0 <= run.load_end_ms <= run.end_ms


def test_the_series_is_consistent(ebizzy_runs):
    runs = list(ebizzy_runs) + simulate_glibc("bench-free", num=100)
    runs += simulate_glibc("ebizzy", ["2.21"], threads=3, seconds=0.01)
    for run in runs:
        _check_series(run)
        assert set(run.counters) <= set(COUNTERS)


def test_a_long_run_keeps_its_memory_bounded():
    """Only counters and a thinned series grow with a run: the process's call log and trim
    records are cleared after every step."""
    sim = GlibcSimulation("2.21", Costs(), None, sample_ms=0.001)
    sim.run(ebizzy(seconds=0.2), idle_ms=1.0)
    assert sim.allocations > 2000 and sim.counters()["heap_madvise"] > 2000
    assert len(sim.samples) <= MAX_SAMPLES + 2
    assert not sim.p.calls and all(not av.trims for av in sim.p.arenas)
    assert len(sim.p.resident.regions) <= 4 and not sim.p.blocks


def test_the_simulation_is_deterministic():
    a, b = (simulate_glibc("ebizzy", ["2.21"], threads=2, seconds=0.01)[0] for _ in range(2))
    assert a.counters == b.counters and a.samples == b.samples


def _mapped_runs(p) -> list[tuple[int, int]]:
    """The pages malloc's memory may occupy, as merged runs: every heap and the break up to
    its size, and the live mmapped chunks."""
    runs = [(seg.base // PAGESIZE, -(-seg.end // PAGESIZE))
            for av in p.arenas for seg in av.segments]
    runs += [(c.addr // PAGESIZE, c.end // PAGESIZE)
             for c in p.blocks.values() if c.state == MMAPPED]
    merged: list[list[int]] = []
    for lo, hi in sorted(runs):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return [(lo, hi) for lo, hi in merged]


def _inside(run: tuple[int, int], mapped: list[tuple[int, int]]) -> bool:
    return any(lo <= run[0] and run[1] <= hi for lo, hi in mapped)


@pytest.mark.parametrize("name", ["bench-free", "mixed", "threads", "heap-delete", "lifo-main"])
@pytest.mark.parametrize("version", ["2.21", "rfc-2015", "2.23+"])
def test_resident_pages_are_mapped_and_counted(name, version):
    """After every step, each resident page lies in a heap, the break or a live mmapped
    chunk, and the count matches the runs (the quick conformance scripts; the two heaps of
    heap-delete are looked at every 15th step and at the end)."""
    script = glibc_workloads.WORKLOADS[name].script(quick=True)
    sim = GlibcSimulation(version, Costs(), {"trim_threshold": 131072,
                                             "mmap_threshold": 33554432})
    every = 15 if name == "heap-delete" else 1  # its 64 MiB heaps: every 15th step
    for i, step in enumerate(script_lane(script, touch=3 * PAGESIZE)(lambda: 0.0)):
        sim.step(step)
        res = sim.p.resident
        if i % every and step.op != "join":
            continue
        runs = res.runs()
        assert sum(e - s for s, e in runs) == res.pages
        mapped = _mapped_runs(sim.p)
        assert all(_inside(run, mapped) for run in runs), (step, runs, mapped)
    assert res.refaults <= res.faults


def test_a_page_is_resident_once_written_and_not_after_madvise():
    res = ResidentPages()
    base = 0x7f00_0400_0000
    assert res.write(base + 100, 10) == 1 and res.write(base + 200, 4096) == 1
    assert res.resident_bytes == 2 * PAGESIZE
    assert res.drop("heap_madvise", base + PAGESIZE, 3 * PAGESIZE) == 1  # whole pages only
    assert res.drop("heap_new", base, PAGESIZE) == 0  # not a call that gives memory back
    assert res.write(base + PAGESIZE, 8) == 1 and res.refaults == 1
    assert res.write(base + 5 * PAGESIZE, 8) == 1 and res.refaults == 1  # never resident
    assert res.drop("chunk_munmap", base, 64 << 20) == 3 and res.pages == 0


# -- mutants that change cost ---------------------------------------------------------------------

def test_2_23_without_its_threshold_check_pays_2_21s_costs(bench):
    with applied(MUTANTS["glibc-2.23-no-threshold"]):
        broken = by_version(simulate_glibc("bench-free"))["2.23+"]
    good = bench["2.23+"]
    assert broken["heap_madvise"] >= 1000 > good["heap_madvise"]
    assert broken["refaults"] > 100 * max(1, good["refaults"])
    assert broken["rss_mean"] < good["rss_mean"]


def test_a_dynamic_threshold_that_leaves_trim_threshold_madvises_every_record(eb):
    with applied(MUTANTS["glibc-trim-not-doubled"]):
        broken = by_version(simulate_glibc("ebizzy", ["2.23+"], **SMALL_EBIZZY))["2.23+"]
    good = eb["2.23+"]
    assert broken["heap_madvise"] >= 0.99 * broken["allocations"] and good["heap_madvise"] == 0
    assert broken["records_per_s"] < good["records_per_s"] / 1.5
    assert broken["rss_mean"] < good["rss_mean"]


def test_the_rfc_ratio_compared_with_le_madvises_when_growths_and_shrinks_balance():
    """A record that grows each time: every shrink request sees M = L + 1, a ratio of exactly
    100, which the RFC refuses; `<=` takes it, so the heap is madvised and regrown."""
    good = by_version(simulate_glibc("ebizzy", ["rfc-2015"], **GROWING))["rfc-2015"]
    with applied(MUTANTS["rfc-ratio-le"]):
        broken = by_version(simulate_glibc("ebizzy", ["rfc-2015"], **GROWING))["rfc-2015"]
    assert good["heap_madvise"] <= 2
    assert broken["heap_madvise"] >= 0.2 * broken["allocations"]
    assert broken["refaults"] > 10 * good["refaults"]
    assert broken["rss_mean"] < good["rss_mean"]
    assert broken["records_per_s"] < good["records_per_s"]


# -- the claims --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def claims():
    return glibc_claims(scale=0.1)


def test_the_seed_001_claims_carry_the_seeds_figures_as_numbers(claims):
    assert len(claims) >= 7
    by_id = {c.id: c for c in claims}
    assert all(c.seed == "001" for c in claims)
    seed = {(c.id, f.name): (f.seed_lo, f.seed_hi) for c in claims for f in c.figures}
    assert seed["glibc-bench-free", "2.21 madvise"] == (1024, 1024)
    assert seed["glibc-ebizzy-madvise", "2.21 madvise/s"] == (9000, 9000)
    assert seed["glibc-ebizzy-records", "2.21 records/s"] == (10230, 10230)
    assert seed["glibc-ebizzy-records", "patch records/s"] == (43271, 43271)
    assert seed["glibc-ebizzy-sys", "2.21 kernel s in 30 s"] == (22.49, 22.49)
    # bench-free does not depend on the scale: the model's counts are the seed's, exactly
    bench = by_id["glibc-bench-free"]
    assert bench.figure("2.21 madvise").model == 1024
    assert bench.figure("patch madvise").model == 2 and bench.verdict == "holds"
    # the thread counts' ratio is the one thread's: the model has no contention
    assert by_id["glibc-ebizzy-threads"].by_construction


def test_the_claims_figures_are_computed_when_called(claims):
    """A mutant that changes a cost changes the figures (and the verdict) the claims give."""
    def figures(cs):
        return [f.model for c in cs for f in c.figures]
    with applied(MUTANTS["glibc-2.23-no-threshold"]):
        broken = glibc_claims(scale=0.1)
    assert figures(broken[:1]) != figures(claims[:1])
    with applied(MUTANTS["glibc-pad-ignored"]):
        padless = glibc_claims(scale=0.1)
    assert figures(padless) != figures(claims)


def test_claims_scale_is_checked():
    with pytest.raises(ValueError, match="scale"):
        glibc_claims(scale=0)


# -- the command -----------------------------------------------------------------------------

@pytest.mark.parametrize("argv,expected", [
    (["simulate", "ebizzy", "--version", "2.99"], "unknown glibc version"),
    (["simulate", "ebizzy", "--set", "threads=9"], "threads must be in"),
    (["simulate", "ebizzy", "--set", "colour=1"], "no parameter 'colour'"),
    (["simulate", "ebizzy", "--set", "record=1.5"], "record must be an integer"),
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
    assert runs[0]["counters"]["page_faults"] >= 400 * 256 * 1024 // PAGESIZE // 10


# -- the sample's live pages (issue 29, 4) -----------------------------------------------------

def live_resident_pages_simply(sim: GlibcSimulation) -> int:
    """The resident pages any live block touches, page by page."""
    pages = set()
    for c in sim.p.blocks.values():
        pages.update(range(c.addr // PAGESIZE, -(-c.end // PAGESIZE)))
    return sum(sim.p.resident.resident_in_pages(pg, pg + 1) for pg in pages)


def sampled_against_the_simple_count(monkeypatch) -> list[int]:
    seen: list[int] = []
    fast = GlibcSimulation.live_resident_bytes

    def checked(self):
        got = fast(self)
        assert got == live_resident_pages_simply(self) * PAGESIZE, f"sample {len(seen)}"
        seen.append(got)
        return got
    monkeypatch.setattr(GlibcSimulation, "live_resident_bytes", checked)
    return seen


def run_every_call():
    """tests/data/glibc_calls.ops (reallocs in place, to mmap, mremap up and down, memalign,
    trims on both arenas), one op a millisecond, a sample after each, on every version."""
    from pathlib import Path

    from purgecheck.formats.glibc_ops import expand, parse_script
    from purgecheck.simulate.glibc import simulate_ops
    ops = list(expand(parse_script((Path(__file__).parent / "data" / "glibc_calls.ops")
                                   .read_text())))
    simulate_ops("calls", lambda: ((float(n), op) for n, op in enumerate(ops)), idle_ms=0,
                 sample_ms=1.0)


def test_a_sample_counts_the_live_blocks_pages_as_a_page_by_page_count_does(monkeypatch):
    seen = sampled_against_the_simple_count(monkeypatch)
    run_every_call()
    simulate_glibc("bench-free", versions=["2.23+"])
    simulate_glibc("ebizzy", versions=["2.23+"], **SMALL_EBIZZY)
    assert len(seen) > 100 and len(set(seen)) > 10


def test_a_sample_that_merges_the_blocks_out_of_address_order_is_caught(monkeypatch):
    import operator

    import purgecheck.simulate.glibc as glibc_sim
    sampled_against_the_simple_count(monkeypatch)
    monkeypatch.setattr(glibc_sim, "_ADDR", operator.attrgetter("size"))
    with pytest.raises(AssertionError, match="sample"):
        run_every_call()
