"""purgecheck simulate on the mimalloc model: the directions seed 000 claims, on small
instances; the cost accounting of model/memory.py; mutants that change cost move the figures
the expected way; the call-trace format and the command line."""

from __future__ import annotations

import io

import orjson
import pytest

from model.memory import Memory
from purgecheck.cli import main
from purgecheck.formats.calls import Call, CallTraceError, read_calls, write_calls
from purgecheck.mutants import MUTANTS, applied
from purgecheck.simulate.mimalloc import DESIGNS, simulate
from purgecheck.simulate.workloads import make_workload

SERVE = make_workload("bun-serve", requests=1500, idle_ms=600)
LOOP = make_workload("buffer-loop", seconds=0.6)
MiB = 1 << 20


@pytest.fixture(scope="module")
def serve():
    return {d: simulate(SERVE, d) for d in DESIGNS}


@pytest.fixture(scope="module")
def loop():
    return {d: simulate(LOOP, d) for d in ("epoch", "handoff-only", "no-hold")}


# -- the accounting of a discard's cost (model/memory.py) -----------------------------------

def test_a_page_discarded_while_resident_refaults_once_when_written_again():
    mem = Memory(4096)
    mem.touch(0, 3 * 4096)
    assert mem.discard(0, 2 * 4096)
    assert mem.discarded_bytes == 2 * 4096 and mem.resident == {2}
    mem.touch(100, 4096)  # the first two pages again
    assert mem.refaults == 2
    mem.touch(0, 4096)
    assert mem.refaults == 2  # once each: resident again


def test_a_page_never_written_is_not_a_refault_and_a_failed_discard_costs_nothing():
    mem = Memory(4096)
    mem.discard(0, 4096)
    mem.touch(0, 4096)
    assert mem.refaults == 0
    mem.fail_next_discards = 1
    assert not mem.discard(0, 4096)
    assert mem.discarded_bytes == 4096 and 0 in mem.resident


# -- seed 000's directions ---------------------------------------------------------------------

def test_without_the_hold_the_load_discards_and_refaults_the_epoch_does_not(serve):
    nohold, epoch, off = (serve[d].counters for d in ("no-hold", "epoch", "off"))
    assert nohold["discards_load"] >= 10 and nohold["refaults_per_request"] > 0.1
    assert epoch["discards_load"] == 0 and epoch["refaults"] == 0
    assert off["discards_load"] == off["discards_idle"] == 0


def test_at_idle_the_epoch_gives_back_what_the_clock_gives_back_and_off_keeps_it(serve):
    epoch, clock, off = (serve[d].counters for d in ("epoch", "clock", "off"))
    assert epoch["free_resident_load_end"] > MiB
    assert epoch["free_resident_end"] == clock["free_resident_end"] == 0
    assert off["free_resident_end"] == off["free_resident_load_end"] > MiB
    assert epoch["discarded_bytes_idle"] > 0


def test_free_memory_reaches_its_floor_between_one_and_two_intervals_after_the_load(serve):
    epoch = serve["epoch"].counters["ms_to_floor"]
    assert 100 <= epoch <= 215
    # nothing held: the first sweep of the idle, at most one interval of the park's cadence
    assert serve["no-hold"].counters["ms_to_floor"] <= min(epoch, 115)


def test_the_inline_loop_discards_only_where_the_hold_is_missing_inline(loop):
    assert loop["epoch"].counters["discards_load"] == 0
    for d in ("handoff-only", "no-hold"):
        assert loop[d].counters["discarded_bytes_load"] > 4 * MiB
        assert loop[d].counters["refaults_per_request"] > 1


def test_the_series_is_a_consistent_timeline(serve):
    for run in serve.values():
        times = [s.t_ms for s in run.samples]
        assert times == sorted(times) and times[-1] == pytest.approx(run.end_ms)
        assert all(0 <= s.free_resident <= s.resident for s in run.samples)
        discards = [s.discards for s in run.samples]
        assert discards == sorted(discards)
        assert run.end_ms - run.load_end_ms >= 600


# -- a mutant that changes cost changes the figures -------------------------------------------

def test_a_stamp_never_written_costs_discards_and_refaults_under_load(serve):
    with applied(MUTANTS["stamp-never-written"]):
        broken = simulate(SERVE, "epoch").counters
    assert broken["discards_load"] > serve["epoch"].counters["discards_load"]
    assert broken["refaults"] > serve["epoch"].counters["refaults"]


def test_a_park_done_after_its_first_sweep_keeps_free_memory_resident_at_idle(serve):
    with applied(MUTANTS["park-done-first"]):
        broken = simulate(SERVE, "epoch").counters
    assert broken["free_resident_end"] > serve["epoch"].counters["free_resident_end"] + MiB


def test_no_hold_inline_discards_in_the_inline_loop(loop):
    with applied(MUTANTS["no-hold-inline"]):
        broken = simulate(LOOP, "epoch").counters
    assert broken["discarded_bytes_load"] > loop["epoch"].counters["discarded_bytes_load"]


# -- the call trace and the command -------------------------------------------------------------

def test_a_trace_reads_back_what_was_written():
    calls = list(make_workload("buffer-loop", seconds=0.01).calls())
    out = io.StringIO()
    write_calls(calls, out)
    back = list(read_calls(io.StringIO(out.getvalue())))
    assert [(c.thread, c.op, c.name, c.size) for c in back] == \
        [(c.thread, c.op, c.name, c.size) for c in calls]


@pytest.mark.parametrize("line,expected", [
    ("0 1 malloc 1", "malloc takes 2 argument"),
    ("x 1 malloc 1 10", "T_MS"),
    ("nan 1 loop", "T_MS"),
    ("0 1 free 3", "no live allocation named 3"),
    ("0 1 malloc 1 99999999999999", "SIZE"),
    ("0 1 malloc 1 0", "SIZE"),
    ("0 99999999999999999999 loop", "THREAD"),
    ("0 1 mmap 1 10", "OP"),
    ("0 1", "expected `T_MS THREAD OP"),
])
def test_a_bad_trace_line_names_the_line_and_what_was_expected(line, expected):
    with pytest.raises(CallTraceError, match=expected) as e:
        list(read_calls(io.StringIO("0 1 malloc 7 100\n" + line + "\n"), "t.calls"))
    assert str(e.value).startswith("t.calls:2:")


def test_a_trace_whose_clock_goes_back_is_refused():
    with pytest.raises(CallTraceError, match="goes back"):
        list(read_calls(io.StringIO("5 1 malloc 1 100\n4 1 free 1\n")))


def test_simulate_a_trace_file_from_the_command_line(tmp_path, capsys):
    trace = tmp_path / "prog.calls"
    with open(trace, "w") as f:
        write_calls([Call(0.0, 1, "malloc", 1, 300_000), Call(0.0, 1, "malloc", 2, 300_000),
                     Call(1.0, 1, "free", 1), Call(1.0, 1, "loop", request=True)], f)
    assert main(["simulate", str(trace), "--design", "epoch", "--design", "off", "--json",
                 "--idle-ms", "400"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    runs = {r["design"]: r["counters"] for r in doc["runs"]}
    assert set(runs) == {"epoch", "off"}
    assert runs["epoch"]["free_resident_end"] < runs["off"]["free_resident_end"]


@pytest.mark.parametrize("argv,expected", [
    (["simulate"], "name a workload"),
    (["simulate", "no-such-thing"], "neither a named workload"),
    (["simulate", "bun-serve", "--design", "nope"], "unknown design"),
    (["simulate", "bun-serve", "--set", "requests"], "NAME=VALUE"),
    (["simulate", "bun-serve", "--set", "colour=3"], "no parameter 'colour'"),
    (["simulate", "bun-serve", "--idle-ms", "-1"], "--idle-ms"),
    (["simulate", "bun-serve", "--idle", "sleep"], "--idle"),
    (["simulate", "--seeds", "--scale", "0"], "--scale"),
    (["simulate", "bun-serve", "--seeds"], "--seeds"),
    (["simulate", "bun-serve", "--set", "requests=-5"], "requests must be in"),
    (["simulate", "bun-serve", "--set", "body=1099511627776"], "body must be in"),
    (["simulate", "bun-serve", "--set", "threads=1.5"], "threads must be an integer"),
    (["simulate", "typed-arrays", "--set", "lo=600000"], "must not be above hi"),
    (["simulate", "bun-serve", "--set", "idle_ms=5", "--idle-ms", "5"], "not both"),
    (["simulate", "bun-serve", "--version", "2.99"], "unknown glibc version"),
])
def test_bad_usage_is_one_line_and_exit_2(argv, expected, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and len(err.splitlines()) == 1


def test_the_table_and_the_picture(tmp_path, capsys):
    assert main(["simulate", "buffer-loop", "--set", "seconds=0.2", "--design", "epoch",
                 "--design", "handoff-only", "--plot", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "handoff-only" in out and "discards load" in out
    svg = (tmp_path / "buffer-loop.svg").read_text()
    assert svg.startswith("<?xml") and "idle" in svg
    assert (tmp_path / "buffer-loop.png").read_bytes()[:4] == b"\x89PNG"


def test_a_pool_that_sweeps_once_keeps_its_pages_under_the_epoch_rule():
    """Seed 000: the thread pool's one call gave the pages back under the clock rule; now it
    never does, and the second untouched sweep never takes them either."""
    from purgecheck.simulate.workloads import Workload
    w = make_workload("typed-arrays", allocations=300, idle_ms=800)
    pool = Workload(w.name, w.description, w.calls, "pool", w.idle_ms, w.params)
    got = {d: simulate(pool, d).counters for d in ("clock", "epoch", "two-untouched")}
    assert got["clock"]["free_resident_end"] == 0 and got["clock"]["discards_idle"] > 0
    for d in ("epoch", "two-untouched"):
        assert got[d]["free_resident_end"] > MiB and got[d]["discards_idle"] == 0


def test_park_after_parks_a_silent_thread_of_a_trace(tmp_path, capsys):
    """A trace without loop calls: only --park-after gives the scavenger a parked thread."""
    trace = tmp_path / "silent.calls"
    calls = [Call(0.0, 1, "malloc", 1, 300_000), Call(0.0, 1, "malloc", 2, 300_000),
             Call(0.5, 1, "free", 1), Call(600.0, 1, "malloc", 3, 300_000)]
    with open(trace, "w") as f:
        write_calls(calls, f)
    got = {}
    for extra in ([], ["--park-after", "20"]):
        assert main(["simulate", str(trace), "--design", "epoch", "--idle-ms", "500",
                     "--json", *extra]) == 0
        got[bool(extra)] = orjson.loads(capsys.readouterr().out)["runs"][0]["counters"]
    # silent for 600 ms under load: swept only when a silence parks the thread
    assert got[False]["discards_load"] == 0
    assert got[True]["discards_load"] > 0 and got[True]["refaults"] > 0


def test_a_loop_turn_that_serves_several_requests_counts_them_all_and_parks_once():
    """per_turn: the real server's loop turns once per ~16 requests under load (strace of
    epoll_pwait2); the requests are counted the same, the parks are fewer."""
    one = make_workload("bun-serve", requests=400, idle_ms=100)
    sixteen = make_workload("bun-serve", requests=400, idle_ms=100, per_turn=16)
    loops = lambda w: sum(1 for c in w.calls() if c.op == "loop")  # noqa: E731
    assert loops(sixteen) * 8 < loops(one)
    a, b = simulate(one, "no-hold"), simulate(sixteen, "no-hold")
    assert a.counters["requests"] == b.counters["requests"] == 400
    assert b.counters["discards_load"] < a.counters["discards_load"]


def test_a_fraction_of_requests_per_turn_spreads_the_parks_evenly():
    """purgecheck measure counts the real turns: 2.5 requests per turn is 2 parks in 5."""
    w = make_workload("bun-serve", requests=416, idle_ms=100, per_turn=2.5)
    loops = [c for c in w.calls() if c.op == "loop"]
    assert sum(int(c.request) for c in loops) == 416
    assert 400 // 2.5 <= len(loops) <= 400 // 2.5 + 17  # the turns, and one per body at the end


def test_sweeps_off_the_epoch_grid_are_where_the_epoch_rule_keeps_more_than_the_clock():
    """Seed 000: the epoch rule keeps a page "for one to two intervals after it was last
    allocated from and not for exactly one". With one sweeper on time every sweep of the loop
    ends an epoch, so both rules free the stalls' pages at the same sweep; with a scavenger
    60 ms late and another thread sweeping every 50 ms (a machine as busy as the seed's) the
    epoch rule discards less (2026-12-03: 0 and 7 MB against 40 and 50.5, on the grid 25.5
    for both)."""
    w = make_workload("bun-serve", requests=6000, idle_ms=300, pause_every=500, pause_ms=150,
                      gc_every=25, per_turn=4)
    for seed in (0, 1):
        on = [simulate(w, d, sample_ms=20, seed=seed).counters["discarded_bytes_load"]
              for d in ("epoch", "clock")]
        off = [simulate(w, d, sample_ms=20, scavenger_late_ms=60.0, sweeper_every_ms=50.0,
                        seed=seed).counters["discarded_bytes_load"] for d in ("epoch", "clock")]
        assert on[0] == on[1] > 0
        assert off[0] < off[1] / 2


# -- sampling kept as the program goes (issue 29) ---------------------------------------------

def live_pages_rebuilt(sim) -> int:
    """The reference: the live allocations' OS pages worked out again from every page's
    blocks handed out (what the simulator did at each sample before issue 29)."""
    mem = sim.world.mem
    live: set[int] = set()
    for page in sim.world.pages.values():
        if page.retired:
            continue
        for i in page.handed_out:
            live.update(mem.os_pages(page.geom.block_addr(i), page.geom.block_size))
    return len(live & mem.resident)


def sampled_against_the_rebuild(monkeypatch) -> list[int]:
    from purgecheck.simulate import mimalloc
    kept = mimalloc.Simulation.live_resident_pages
    seen = []

    def checked(self):
        got = kept(self)
        assert got == live_pages_rebuilt(self), f"at {self.t - self.t0:.2f} ms"
        seen.append(got)
        return got
    monkeypatch.setattr(mimalloc.Simulation, "live_resident_pages", checked)
    sample = mimalloc.Simulation._sample

    def every_sample_computed(self):  # not a copy of the one before when nothing ran
        self.sampled_after = -1
        sample(self)
    monkeypatch.setattr(mimalloc.Simulation, "_sample", every_sample_computed)
    return seen


@pytest.mark.parametrize("design", ["epoch", "no-hold"])
def test_the_live_pages_kept_as_calls_come_agree_with_a_rebuild_at_every_sample(monkeypatch,
                                                                                design):
    seen = sampled_against_the_rebuild(monkeypatch)
    # several threads, frees in batches, small blocks that share OS pages, reallocs
    w = make_workload("bun-serve", requests=300, threads=3, gc_every=4, idle_ms=200)
    calls = [Call(0.0, 1, "malloc", 1, 100), Call(0.0, 1, "malloc", 2, 3000),
             Call(0.1, 1, "realloc", 1, 9000), Call(0.2, 2, "free", 2),
             Call(0.3, 1, "realloc", 1, 8000), Call(0.4, 1, "free", 1)]
    simulate(w, design, sample_ms=5)
    simulate(w, design, sample_ms=0.1, calls=calls)
    assert len(seen) > 100 and max(seen) > 0


def test_a_free_left_out_of_the_live_pages_is_caught(monkeypatch):
    """Broken variant: a free takes its block out of `handed_out` without telling the kept
    count (model.live_pages), which keeps the block's OS pages live (the kept count's
    `block_dead` ignored: the owner's free calls it inline, not through Page.take_back)."""
    from model.live_pages import LiveOsPages
    monkeypatch.setattr(LiveOsPages, "block_dead", lambda self, addr, size: None)
    sampled_against_the_rebuild(monkeypatch)
    with pytest.raises(AssertionError):
        simulate(make_workload("bun-serve", requests=200, idle_ms=100), "epoch", sample_ms=5)


def live_pages_under_a_mutant_that_discards_live_memory(monkeypatch) -> list[int]:
    """bun-serve with 5,000-byte bodies (blocks that straddle OS pages) under the mutant
    runs-one-unit-long, whose sweeps discard the OS page past each run, live or not: each
    sample checked against the rebuild."""
    seen = sampled_against_the_rebuild(monkeypatch)
    w = make_workload("bun-serve", requests=400, body=5000, kept=30, idle_ms=300)
    with applied(MUTANTS["runs-one-unit-long"]):
        run = simulate(w, "no-hold", sample_ms=2)
    assert run.counters["discards"] > 0
    return seen


def test_the_live_pages_are_counted_again_where_a_sweep_discarded(monkeypatch):
    """The resident count of the live OS pages is kept as the model goes
    (model.live_pages); a discard changes it where it drops live pages (here, under a
    mutant whose discards reach into live blocks): it agrees with the rebuild at every
    sample."""
    seen = live_pages_under_a_mutant_that_discards_live_memory(monkeypatch)
    assert len(seen) > 100


def test_a_discard_left_out_of_the_recount_is_caught(monkeypatch):
    """Broken variant: a discard drops resident pages without telling the kept count (the
    blocks noted so far applied first, so that the live blocks it drops are counted)."""
    from model.live_pages import LiveOsPages
    monkeypatch.setattr(LiveOsPages, "lose_residency",
                        lambda self, pages: self.pending and self.flush())
    with pytest.raises(AssertionError):
        live_pages_under_a_mutant_that_discards_live_memory(monkeypatch)


# -- the resident mask beside Memory.resident (issue 29) ---------------------------------------

def mask_pages(mem) -> set[int]:
    """The OS pages the mask has set."""
    from model.memory import REGION_BITS
    return {(r << REGION_BITS) + i for r, b in mem.mask.regions.items()
            for i, v in enumerate(b) if v}


def run_with_the_mask_checked(monkeypatch, design: str, **kw) -> int:
    """A small run whose mask is compared with the resident set after every call and at
    every sample; returns the number of checks."""
    from purgecheck.simulate import mimalloc
    kept_call, kept_sample = mimalloc.Simulation.call, mimalloc.Simulation._sample
    checks = [0]

    def agree(self):
        assert mask_pages(self.world.mem) == self.world.mem.resident, f"at {self.t:.2f} ms"
        checks[0] += 1

    monkeypatch.setattr(mimalloc.Simulation, "call", lambda self, c: (kept_call(self, c),
                                                                     agree(self)))
    monkeypatch.setattr(mimalloc.Simulation, "_sample", lambda self: (kept_sample(self),
                                                                      agree(self)))
    # bodies that straddle OS pages, a page that retires (the arena's purge), several threads
    w = make_workload("bun-serve", requests=120, body=70_000, kept=3, threads=2, idle_ms=300)
    run = simulate(w, design, **kw)
    assert run.counters["discards"] > 0
    return checks[0]


@pytest.mark.parametrize("design", ["no-hold", "epoch"])
def test_the_resident_mask_agrees_with_the_resident_set_after_every_op(monkeypatch, design):
    from model.world import Options
    assert run_with_the_mask_checked(monkeypatch, design, sample_ms=5,
                                     options=Options(arena_reuse=True)) > 300


def test_a_discard_that_leaves_the_mask_set_is_caught(monkeypatch):
    """Broken variant: a discard drops the pages from the set but not from the mask, so a
    later write to them is taken for a write to resident pages."""
    from model.memory import Memory
    monkeypatch.setattr(Memory, "discard", _discard_keeping_the_mask)
    with pytest.raises(AssertionError):
        run_with_the_mask_checked(monkeypatch, "no-hold", sample_ms=5)


def _discard_keeping_the_mask(self, addr, size):
    self.discard_calls += 1
    pages = self.os_pages(addr, size)
    self.dropped.update(self.resident.intersection(pages))
    self.resident.difference_update(pages)
    self.discarded_bytes += size
    return True
