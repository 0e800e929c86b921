"""The replay's fast paths (issue 16): each gives what the plain rule gives.

ResidentPages answers most writes from what it knows is resident (the last range written,
the pages of recent small writes) without reading its bitmaps; a page-by-page reference
(a set of page numbers) must agree with it on every write and drop, and a cache that is not
emptied by a drop is caught.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.glibc import resident
from model.glibc.constants import PAGESIZE
from model.glibc.resident import DROPPING_CALLS, ResidentPages

BASE = 0x7f00_0000_0000
SETTINGS = dict(derandomize=True, deadline=None, database=None)


class PageSet:
    """The reference: resident pages and discarded ones as sets of page numbers."""

    def __init__(self) -> None:
        self.pages: set[int] = set()
        self.back: set[int] = set()
        self.faults = self.refaults = self.dropped = 0

    def write(self, addr: int, length: int) -> int:
        if length <= 0:
            return 0
        new = set(range(addr // PAGESIZE, (addr + length + PAGESIZE - 1) // PAGESIZE))
        new -= self.pages
        self.pages |= new
        self.faults += len(new)
        self.refaults += len(new & self.back)
        self.back -= new
        return len(new)

    def drop(self, category: str, addr: int, length: int) -> int:
        if category not in DROPPING_CALLS:
            return 0
        span = set(range((addr + PAGESIZE - 1) // PAGESIZE, (addr + length) // PAGESIZE))
        gone = self.pages & span
        self.pages -= gone
        self.dropped += len(gone)
        if DROPPING_CALLS[category]:
            self.back |= gone
        else:
            self.back -= span
        return len(gone)


# a few pages of two 64 MiB regions, so writes cross pages and regions and repeat
where = st.integers(0, 40).map(lambda p: BASE + (p % 20) * PAGESIZE + (p // 20) * (64 << 20))
step = st.one_of(
    st.tuples(st.just("write"), where, st.integers(0, PAGESIZE), st.integers(1, 3 * PAGESIZE)),
    st.tuples(st.sampled_from(sorted(DROPPING_CALLS) + ["heap_new"]), where,
              st.integers(0, PAGESIZE), st.integers(1, 6 * PAGESIZE)))


def agree(steps) -> None:
    fast, ref = ResidentPages(), PageSet()
    for what, addr, offset, length in steps:
        if what == "write":
            assert fast.write(addr + offset, length) == ref.write(addr + offset, length)
        else:
            assert fast.drop(what, addr + offset, length) == ref.drop(what, addr + offset, length)
        assert (fast.pages, fast.faults, fast.refaults, fast.dropped) == \
               (len(ref.pages), ref.faults, ref.refaults, ref.dropped)


@settings(max_examples=150, **SETTINGS)
@given(st.lists(step, max_size=40))
def test_resident_pages_agree_with_a_page_by_page_reference(steps):
    agree(steps)


def test_a_cache_a_drop_does_not_empty_is_caught(monkeypatch):
    """Broken variant: the drop forgets the pages of recent writes, so a page written, dropped
    and written again is not counted as a fault."""
    kept = resident.ResidentPages.drop

    def drop_keeping_recent(self, category, addr, length):
        recent = set(self.recent)
        gone = kept(self, category, addr, length)
        self.recent |= recent
        return gone

    steps = [("write", BASE, 8, 8), ("write", BASE + PAGESIZE, 8, 8),  # two one-page writes
             ("heap_madvise", BASE, 0, 2 * PAGESIZE), ("write", BASE, 8, 8)]
    agree(steps)
    monkeypatch.setattr(resident.ResidentPages, "drop", drop_keeping_recent)
    with pytest.raises(AssertionError):
        agree(steps)
