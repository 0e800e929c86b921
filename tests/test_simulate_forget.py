"""The simulator forgets a retired page once its arena purge came (purgecheck/simulate/
mimalloc.py `Simulation._forget`: bounded memory on a long trace, issue 29, 4) and every
figure stays as tests/simulate_figures.py pins it (tests/test_simulate_figures.py, both
tiers). Here: that pages are forgotten at all, and that forgetting one that can still be
reached (its purge not yet made) shows in the figures."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import simulate_figures as figures  # noqa: E402

PINNED = orjson.loads(figures.MANIFEST.read_bytes())
CASE = "bun-serve/threads"  # every design, threads, idle time past the purge delay


def test_retired_pages_are_forgotten_after_their_purge(monkeypatch):
    """Broken variant caught: a _forget that keeps the pages (the figures alone would not
    see it), or one never called."""
    from purgecheck.simulate import mimalloc
    forgotten: list[int] = []
    kept: list[int] = []
    real = mimalloc.Simulation._forget

    def counted(self, pids):
        forgotten.extend(pids)
        real(self, pids)
        kept.extend(pid for pid in pids if pid in self.world.pages)
    monkeypatch.setattr(mimalloc.Simulation, "_forget", counted)
    assert figures.digest(figures.CASES[CASE]()) == PINNED[CASE]
    assert forgotten and not kept  # 12 pages on this case


def test_a_page_forgotten_before_its_purge_changes_the_figures(monkeypatch):
    """The broken variant: a retired page forgotten as soon as the simulator sees it retire,
    before the arena's purge (which reads its range): its memory is never purged, or the
    purge fails on it."""
    from purgecheck.simulate import mimalloc
    note = mimalloc.Simulation._note_retired

    def too_early(self, pid):
        note(self, pid)
        if pid in self.world.pages and self.world.pages[pid].retired:
            self._forget([pid])
    monkeypatch.setattr(mimalloc.Simulation, "_note_retired", too_early)
    try:
        got = figures.digest(figures.CASES[CASE]())
    except KeyError as e:  # the arena's purge of runs looked the page up
        got = f"KeyError {e}"
    assert got != PINNED[CASE]
