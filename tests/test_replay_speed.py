"""The replay's fast paths (issue 16): each gives what the plain rule gives.

ResidentPages answers most writes from what it knows is resident (the last range written,
the pages of recent small writes) without reading its bitmaps; a page-by-page reference
(a set of page numbers) must agree with it on every write and drop, and a cache that is not
emptied by a drop is caught. The model's shortcuts are checked after every op of a workload
against what they stand for: the next chunk (chunk_at_offset) against the address order,
have_fastchunks against the fastbins' chunks, and the tcache's size bound against csize2tidx;
each check fails on a broken variant.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bisect

from model.glibc import heap, malloc, resident
from model.glibc.constants import (MAX_FAST_CHUNK, MAX_TCACHE_CHUNK, MALLOC_ALIGNMENT,
                                   PAGESIZE, TCACHE_MAX_BINS, csize2tidx)
from model.glibc.resident import DROPPING_CALLS, ResidentPages
from model.glibc.versions import VERSIONS
from purgecheck.formats.glibc_ops import parse_script
from purgecheck.glibc.modelrun import run_model
from purgecheck.glibc.workloads import WORKLOADS

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


# -- the model's shortcuts --------------------------------------------------------------------

def neighbour_in_address_order(seg, c):
    """The chunk after `c` as the segment's sorted addresses give it (no shortcut)."""
    i = bisect.bisect_right(seg.addrs, c.addr)
    return seg.chunks[seg.addrs[i]] if i < len(seg.addrs) else None


def shortcuts_hold(op, p) -> None:
    for av in p.arenas:
        for seg in av.segments:
            for c in seg.in_order():
                assert seg.after(c) is neighbour_in_address_order(seg, c), op.render()
        assert av.have_fastchunks == any(av.fastbins.values()), op.render()


# a fastbin filled and emptied again (2.21 has no tcache in front of it)
FASTBIN_REUSE = "".join(f"0 malloc {i} 24\n" for i in range(3)) + "0 free 0\n0 free 1\n" + \
    "".join(f"0 malloc {i} 24\n" for i in range(3, 6))


def run_checked(version: str, script: str | None = None) -> None:
    """A script (default: the mixed workload at its quick scale: tcache, fastbin, small, large
    and mmapped chunks), the shortcuts checked after every op."""
    text = script or WORKLOADS["mixed"].script(quick=True)
    run_model(parse_script(text), VERSIONS[version], after_step=shortcuts_hold)


@pytest.mark.parametrize("version", ["2.21", "2.23+"])  # fastbins, and tcache in front of them
def test_the_models_shortcuts_give_what_they_stand_for(version):
    run_checked(version)
    run_checked(version, FASTBIN_REUSE)


def test_a_next_chunk_past_a_gap_is_caught(monkeypatch):
    """Broken variant: next_chunk skips a chunk header's worth of bytes."""
    monkeypatch.setattr(heap.Segment, "after",
                        lambda self, c: self.chunks.get(c.addr + c.size + MALLOC_ALIGNMENT))
    with pytest.raises(AssertionError):
        run_checked("2.23+")


def test_a_fastbin_left_empty_is_caught(monkeypatch):
    """Broken variant: a fastbin emptied by malloc keeps its (empty) list, so
    have_fastchunks says yes with no chunk in any fastbin."""
    kept = malloc.int_malloc

    def leaves_empty_lists(p, av, nb, t):
        had = nb <= MAX_FAST_CHUNK and nb in av.fastbins
        c = kept(p, av, nb, t)
        if had and nb not in av.fastbins:
            av.fastbins[nb] = []
        return c

    run_checked("2.21", FASTBIN_REUSE)
    monkeypatch.setattr(malloc, "int_malloc", leaves_empty_lists)
    with pytest.raises(AssertionError):
        run_checked("2.21", FASTBIN_REUSE)


def test_the_tcache_size_bound_is_the_last_tcache_bin():
    """MAX_TCACHE_CHUNK lets a caller skip tcache_has_room: it must be the largest chunk
    size whose csize2tidx is a bin (a bound 16 bytes off would send 1040-byte chunks past
    the tcache, or look up a 65th bin)."""
    assert csize2tidx(MAX_TCACHE_CHUNK) == TCACHE_MAX_BINS - 1
    assert csize2tidx(MAX_TCACHE_CHUNK + MALLOC_ALIGNMENT) == TCACHE_MAX_BINS
