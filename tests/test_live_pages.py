"""model.live_pages: the resident OS pages that hold part of a live block, kept as blocks live
and die and as pages gain and lose residency (issue 29, 4), against the plain recount
(`recount_live_resident`: each page's live blocks visited) after every op: every page
scenario; seeded scripts of two threads whose blocks straddle OS pages, with frees by the
owner and by the other thread, walks that discard, collects, abandon and reclaim, and
heap_destroy of live blocks; seeded simulations with the arena's purges (with reuse, and in
runs) and kept pages. Broken variants caught: a free from another thread that leaves its
block live in the index; a write whose pages become resident unseen by the index (and in
tests/test_simulate.py, against a rebuild at every sample: an owner's free, and a discard
that drops live pages under a mutant, unseen by the index)."""

from __future__ import annotations

import pytest

import model.heap
import purgecheck.runner
from model.live_pages import LiveOsPages, recount_live_resident, track_live_pages
from model.world import Options, World
from purgecheck.formats.calls import Call
from purgecheck.formats.ops import parse_script
from purgecheck.runner import run_ops
from purgecheck.scenarios import SCENARIOS
from purgecheck.simulate import mimalloc
from purgecheck.simulate.mimalloc import simulate
from purgecheck.simulate.workloads import make_workload
from two_thread_scripts import two_thread_script


class TrackedWorld(World):
    """A world that keeps the index from its first op."""

    def __post_init__(self) -> None:
        super().__post_init__()
        track_live_pages(self)


def disagreement(world: World) -> str | None:
    kept, plain = world.mem.live.count(), recount_live_resident(world)
    return None if kept == plain else f"kept {kept}, recounted {plain}"


def run_checked(scripts, monkeypatch) -> tuple[list[str], int]:
    """Run (name, script, options) with the index, comparing after every op; returns the
    disagreements and the number of checks."""
    monkeypatch.setattr(purgecheck.runner, "World", TrackedWorld)
    out: list[str] = []
    checks = [0]
    for name, script, options in scripts:
        def after(op, world, name=name):
            checks[0] += 1
            why = disagreement(world)
            if why:
                out.append(f"{name} line {op.line} ({op.render()}): {why}")
        run_ops(parse_script(script), options, after_step=after)
    return out, checks[0]


def random_script(seed: int, ops: int = 1200) -> str:
    """Two threads taking blocks of 24 bytes to 70 KB (small ones that share an OS page,
    ones that straddle two or more), frees from either thread, walks, collects, and now and
    then thread 2 abandons its heap (thread 1 reclaims a page of it) or destroys it with its
    blocks live."""
    return two_thread_script(seed, ops, (24, 1000, 3000, 5000, 70_000),
                             ((0.5, "malloc"), (0.88, "free"), (0.93, "clock-walk"),
                              (0.97, "collect"), (0.99, "abandon"), (1.0, "destroy")))


SCRIPTS = [(f"seed {s}", random_script(s), Options()) for s in range(3)]


# the recount after each of its 3,604 ops visits thousands of live blocks: 3 s of CPU
SLOW_SCENARIOS = ("survivors-sizes",)


def test_the_kept_count_is_the_recount_after_every_op_of_every_scenario(monkeypatch):
    out, checks = run_checked([(n, sc.build(), sc.options) for n, sc in SCENARIOS.items()
                               if n not in SLOW_SCENARIOS], monkeypatch)
    assert out == [] and checks > 1000


@pytest.mark.slow
def test_the_kept_count_is_the_recount_after_every_op_of_the_costliest_scenarios(monkeypatch):
    out, checks = run_checked([(n, SCENARIOS[n].build(), SCENARIOS[n].options)
                               for n in SLOW_SCENARIOS], monkeypatch)
    assert out == [] and checks > 1000


def test_the_kept_count_is_the_recount_after_every_op_of_random_two_thread_scripts(
        monkeypatch):
    seen = {"xthread": 0, "discards": 0, "destroyed": 0}
    free_xthread, destroy = model.heap.mi_free_xthread, model.heap.mi_heap_destroy

    def counting_free(page, i):
        seen["xthread"] += 1
        free_xthread(page, i)

    def counting_destroy(world, heap):
        seen["destroyed"] += sum(len(world.pages[pid].handed_out)
                                 for q in heap.queues.values() for pid in q)
        destroy(world, heap)
    monkeypatch.setattr(model.heap, "mi_free_xthread", counting_free)
    monkeypatch.setattr(purgecheck.runner, "mi_heap_destroy", counting_destroy)

    def discards(self, pages, kept=LiveOsPages.lose_residency):
        seen["discards"] += 1
        kept(self, pages)
    monkeypatch.setattr(LiveOsPages, "lose_residency", discards)
    out, checks = run_checked(SCRIPTS, monkeypatch)
    assert out == [] and checks == sum(len(s.splitlines()) for _, s, _ in SCRIPTS)
    assert seen["xthread"] > 100 and seen["discards"] > 20 and seen["destroyed"] > 5


def test_a_cross_thread_free_left_live_in_the_index_is_caught(monkeypatch):
    """Broken variant: a free from another thread takes the block out of `handed_out` but
    the index keeps it live."""
    free_xthread = model.heap.mi_free_xthread

    def broken(page, i):
        free_xthread(page, i)
        page.mem.live.block_live(page.geom.block_addr(i), page.block_size)
    monkeypatch.setattr(model.heap, "mi_free_xthread", broken)
    out, _ = run_checked(SCRIPTS[:1], monkeypatch)
    assert out


def test_a_write_unseen_by_the_index_is_caught(monkeypatch):
    """Broken variant: pages that a write makes resident are not counted: the write of a
    block just taken, on fresh memory (the variant applies the blocks noted so far first, so
    that the block is counted before its write, not after it as a later flush would)."""
    monkeypatch.setattr(LiveOsPages, "gain_residency",
                        lambda self, pages: self.pending and self.flush())
    out, _ = run_checked(SCRIPTS[:1], monkeypatch)
    assert out


# -- in the simulator: the arena's purges, kept pages, timers --------------------------------

def simulated_disagreements(monkeypatch, runs, every_call: bool = True) -> tuple[list[str], int]:
    """Each (workload, design, options, calls) simulated with the kept count compared with the
    recount at every sample (after the background's timers) and, with `every_call`, after
    every call (which applies the blocks noted at each call: without it the notes of the
    calls between two samples wait, as they do in a plain run)."""
    kept_call, kept_sample = mimalloc.Simulation.call, mimalloc.Simulation._sample
    out: list[str] = []
    checks = [0]

    def check(self, where):
        checks[0] += 1
        why = disagreement(self.world)
        if why:
            out.append(f"{self.design} at {self.t - self.t0:.2f} ms ({where}): {why}")

    if every_call:
        monkeypatch.setattr(mimalloc.Simulation, "call",
                            lambda self, c: (kept_call(self, c), check(self, c.op)))
    monkeypatch.setattr(mimalloc.Simulation, "_sample",
                        lambda self: (kept_sample(self), check(self, "sample")))
    for w, design, options, calls in runs:
        run = simulate(w, design, options=options, sample_ms=5, calls=calls)
        assert run.counters["discards"] > 0
    return out, checks[0]


# bodies that straddle OS pages, two threads, small objects, pages retired and purged by the
# arena (with reuse, in runs, kept pages), a call list with reallocs and a cross-thread free
SERVE = make_workload("bun-serve", requests=150, body=70_000, kept=3, threads=2, gc_every=3,
                      small=200, small_per_request=2, idle_ms=300)
CALLS = [Call(0.0, 1, "malloc", 1, 100), Call(0.0, 1, "malloc", 2, 3000),
         Call(0.1, 1, "realloc", 1, 9000), Call(0.2, 2, "free", 2),
         Call(0.3, 1, "realloc", 1, 8000), Call(0.4, 1, "free", 1)]
RUNS = [(SERVE, "epoch", Options(arena_reuse=True), None),
        (SERVE, "no-hold", Options(arena_purge_runs=True, retire_cycles=True,
                                   abandon_full_pages=True), None),
        (SERVE, "off", None, None), (SERVE, "epoch", None, CALLS)]


def test_the_kept_count_is_the_recount_in_simulations(monkeypatch):
    purges = []
    release = mimalloc.Simulation._on_purge
    monkeypatch.setattr(mimalloc.Simulation, "_on_purge",
                        lambda self, pid: (release(self, pid), purges.append(pid)))
    out, checks = simulated_disagreements(monkeypatch, RUNS)
    assert out == [] and checks > 1000 and len(purges) > 10


def test_the_blocks_noted_between_samples_are_applied_right(monkeypatch):
    """Checked at the samples only, the notes of many calls wait for a flush, while writes
    and discards change residency: blocks that live and die between two samples cancel out
    (counted here), the others are applied in order at the sample."""
    cancelled = [0]
    dead = LiveOsPages.block_dead

    def counting(self, addr, size):
        cancelled[0] += self.pending.get(addr) == size
        dead(self, addr, size)
    monkeypatch.setattr(LiveOsPages, "block_dead", counting)
    out, checks = simulated_disagreements(monkeypatch, RUNS, every_call=False)
    assert out == [] and checks > 250 and cancelled[0] > 20


def test_a_block_that_lived_and_died_between_samples_applied_as_a_free_is_caught(monkeypatch):
    """Broken variant: a free noted after its block's malloc, both since the last flush,
    replaces the malloc's note instead of cancelling it, so the flush takes off a block that
    was never counted."""
    monkeypatch.setattr(LiveOsPages, "block_dead",
                        lambda self, addr, size: self.pending.__setitem__(addr, -size))
    try:
        out, _ = simulated_disagreements(monkeypatch, RUNS[:1], every_call=False)
    except KeyError as e:  # a shared OS page's count taken below zero
        out = [f"KeyError {e}"]
    assert out
