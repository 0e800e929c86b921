"""`simulate`'s memory does not grow with the trace (issue 29, 4: bounded memory on a 10 M-call
trace; docs/simulate-guide.md, fourteenth round). A page made, filled, emptied and retired
again and again, each on fresh addresses (model.heap.Arena without `arena_reuse`): what the
simulator keeps after 24 such pages must be what it keeps after 8, and the figures must be
those of a run that keeps everything."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from model.live_pages import LiveOsPages
from model.memory import REGION_BITS, Memory, PageMask
from model.world import Options
from purgecheck.simulate import mimalloc
from purgecheck.simulate.workloads import Call


def cycles(rounds: int, reuse: bool = False, size: int = 1000) -> mimalloc.Simulation:
    """`rounds` times: 64 blocks of 1,000 bytes (a page's worth) taken, all but one freed, a
    silence past the park (its sweep discards the holes, so Memory.dropped gets pages), the
    last one freed (the page retires, and its purge comes 100 ms later). With `reuse`, the
    arena hands the retired range to the next page (Options.arena_reuse), whose writes
    refault what the sweeps and the purges dropped."""
    sim = mimalloc.Simulation("no-hold", "park", Options(arena_reuse=reuse), sample_ms=10.0,
                              park_after_ms=10.0)
    t, name = 0.0, 0
    for _ in range(rounds):
        first = name + 1
        for _ in range(64):
            t, name = t + 0.5, name + 1
            sim.call(Call(t, 1, "malloc", name, size, False))
        for n in range(first, name):
            t += 0.1
            sim.call(Call(t, 1, "free", n, 0, False))
        t += 30
        sim.call(Call(t, 1, "free", name, 0, False))
    return sim


def kept(sim: mimalloc.Simulation) -> dict[str, int]:
    """The sizes of what could grow with the pages ever made."""
    mem = sim.world.mem
    return {"pages": len(sim.world.pages), "resident mask": len(mem.mask.regions),
            "live mask": len(sim.live.mask.regions), "retired_seen": len(sim.retired_seen),
            "dropped": len(mem.dropped)}


def figures(sim: mimalloc.Simulation) -> tuple:
    sim.end_load()
    sim.advance_to(sim.t + 500)
    return sim.counters(), [asdict(s) for s in sim.samples]


def keep_everything(monkeypatch) -> None:
    """The tree before the fourteenth round: no region dropped, a forgotten page's id and
    dropped OS pages kept."""
    monkeypatch.setattr(PageMask, "drop_empty", lambda self, pages: None)

    def forget(self, pids):
        for pid in pids:
            del self.world.pages[pid]
    monkeypatch.setattr(mimalloc.Simulation, "_forget", forget)


def test_what_the_simulator_keeps_does_not_grow_with_the_trace():
    """Broken variants caught (test_the_check_fails_where_something_grows): the resident
    mask's regions kept at the arena's purge, the live mask's at a flush, a _forget that keeps the id in `retired_seen` or the
    page's OS pages in `Memory.dropped`."""
    short, long = kept(cycles(8)), kept(cycles(24))
    assert long["dropped"] > 0  # the sweeps discarded: `dropped` had something to keep
    assert long == short


def without_drops(monkeypatch, cls, name: str) -> None:
    """`cls.name` run with PageMask.drop_empty a no-op: that caller's regions are kept."""
    real = getattr(cls, name)

    def keeping(self, *args):
        with monkeypatch.context() as m:
            m.setattr(PageMask, "drop_empty", lambda mask, pages: None)
            return real(self, *args)
    monkeypatch.setattr(cls, name, keeping)


@pytest.mark.parametrize("broken", ["resident mask kept", "live mask kept", "ids kept",
                                    "dropped kept"])
def test_the_check_fails_where_something_grows(monkeypatch, broken):
    if broken == "resident mask kept":
        without_drops(monkeypatch, Memory, "release")
    elif broken == "live mask kept":
        without_drops(monkeypatch, LiveOsPages, "flush")
    else:
        real = mimalloc.Simulation._forget
        field = "retired_seen" if broken == "ids kept" else None

        def leaky(self, pids):
            ids, dropped = set(self.retired_seen), set(self.world.mem.dropped)
            real(self, pids)
            if field:
                self.retired_seen |= ids
            else:
                self.world.mem.dropped |= dropped
        monkeypatch.setattr(mimalloc.Simulation, "_forget", leaky)
    short, long = kept(cycles(8)), kept(cycles(24))
    assert long != short


def drop_every_region(self, pages: range) -> None:
    """A broken PageMask.drop_empty: drops the regions it looks at, set pages and all."""
    for r in range(pages.start >> REGION_BITS, ((pages.stop - 1) >> REGION_BITS) + 1):
        self.regions.pop(r, None)


def forget_dropped_always(self, pids: list[int]) -> None:
    """A broken Simulation._forget: drops the page's OS pages from `Memory.dropped` with
    `arena_reuse` too, where the next page on the range may write them."""
    mem = self.world.mem
    for pid in pids:
        g = self.world.pages.pop(pid).geom
        self.retired_seen.discard(pid)
        mem.dropped.difference_update(mem.os_pages(g.slice_start, g.area_size))


@pytest.mark.parametrize("reuse", [False, True])
def test_the_figures_are_those_of_a_run_that_keeps_everything(monkeypatch, reuse):
    """What is dropped no figure needs: counters and samples equal to the unbounded run's,
    with and without `arena_reuse` (blocks of 20,000 bytes: medium pages, whose blocks span
    OS pages, so the live count reads the resident mask). Broken variants caught, with
    reuse: a drop_empty that drops regions with pages set (the live count misses resident
    pages), a _forget that drops `dropped` pages where the next page refaults them."""
    bounded = figures(cycles(16, reuse, 20_000))
    assert (bounded[0]["refaults"] > 0) == reuse
    with monkeypatch.context() as m:
        keep_everything(m)
        assert figures(cycles(16, reuse, 20_000)) == bounded
    if reuse:
        for cls, name, broken in ((PageMask, "drop_empty", drop_every_region),
                                  (mimalloc.Simulation, "_forget", forget_dropped_always)):
            with monkeypatch.context() as m:
                m.setattr(cls, name, broken)
                assert figures(cycles(16, reuse, 20_000)) != bounded
