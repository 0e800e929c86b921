"""The replay's fast paths (issue 16): each gives what the plain rule gives.

ResidentPages keeps a state byte per page and counts a long write or a drop on a slice of
them; a page-by-page reference (sets of page numbers) must agree with it on every write and
drop, and a drop that marks pages never written as given back is caught. The model's shortcuts are checked after every op of a workload
against what they stand for: the next chunk (chunk_at_offset) against the address order,
have_fastchunks against the fastbins' chunks, and the tcache's size bound against csize2tidx;
each check fails on a broken variant. Issue 29's sixth round: the inline request2size
and csize2tidx give the functions' values on every tcache size, and split_top's skipped
head write leaves the resident pages of the plain rule after every op.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bisect

from model.glibc import arena, heap, malloc, resident
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


def test_a_drop_that_discards_pages_never_written_is_caught(monkeypatch):
    """Broken variant: a madvise marks every page of its range given back, resident or not,
    so a page never written before counts as a refault when it is first written."""
    kept = resident.ResidentPages.drop

    def drop_marking_all(self, category, addr, length):
        gone = kept(self, category, addr, length)
        if DROPPING_CALLS.get(category):
            lo, hi = resident.pages_within(addr, length)
            for region, first, end in resident.region_spans(lo, hi):
                states = self.regions.setdefault(region, bytearray(resident.REGION_PAGES))
                states[first:end] = bytes([resident.GIVEN_BACK]) * (end - first)
        return gone

    steps = [("write", BASE, 8, 8), ("heap_madvise", BASE, 0, 2 * PAGESIZE),
             ("write", BASE + PAGESIZE, 8, 8)]
    agree(steps)
    monkeypatch.setattr(resident.ResidentPages, "drop", drop_marking_all)
    with pytest.raises(AssertionError):
        agree(steps)


# -- the model's shortcuts --------------------------------------------------------------------

def neighbours_in_address_order(seg, c):
    """The chunks before and after `c` as the segment's sorted addresses give them (no
    shortcut)."""
    addrs = sorted(seg.chunks)
    i = bisect.bisect_left(addrs, c.addr)
    return (seg.chunks[addrs[i - 1]] if i else None,
            seg.chunks[addrs[i + 1]] if i + 1 < len(addrs) else None)


def shortcuts_hold(op, p) -> None:
    """next_chunk by the chunk's end, the free chunk below by its footer (the chunk below in
    address order when that one is binned, else none), have_fastchunks, and the bins' count
    (int_malloc skips the scan and the search of bins that count no chunk)."""
    for av in p.arenas:
        for seg in av.segments:
            for c in seg.in_order():
                lower, upper = neighbours_in_address_order(seg, c)
                assert seg.after(c) is upper, op.render()
                binned = lower if lower is not None and lower.bin is not None else None
                assert av.bins.ending_at(c.addr) is binned, op.render()
        assert av.have_fastchunks == any(av.fastbins.values()), op.render()
        assert len(av.bins) == len(av.bins.chunks()), op.render()


# a fastbin filled and emptied again (2.21 has no tcache in front of it)
FASTBIN_REUSE = "".join(f"0 malloc {i} 24\n" for i in range(3)) + "0 free 0\n0 free 1\n" + \
    "".join(f"0 malloc {i} 24\n" for i in range(3, 6))


def run_checked(version: str, script: str | None = None) -> None:
    """A script (default: the mixed workload at its quick scale: tcache, fastbin, small, large
    and mmapped chunks), the shortcuts checked after every op."""
    text = script or WORKLOADS["mixed"].script(quick=True)
    run_model(parse_script(text), VERSIONS[version], after_step=shortcuts_hold)


# the unsorted scan's two ways out with the chunk it unlinked: an exact fit returned (a large
# size: no tcache), and a small request split from the last remainder, the only unsorted chunk
UNSORTED_EXITS = "0 malloc 0 2000\n0 malloc 1 24\n0 free 0\n0 malloc 2 2000\n0 free 2\n" \
    "0 malloc 3 100\n0 malloc 4 100\n"


@pytest.mark.parametrize("version", ["2.21", "2.23+"])  # fastbins, and tcache in front of them
def test_the_models_shortcuts_give_what_they_stand_for(version):
    run_checked(version)
    run_checked(version, FASTBIN_REUSE)
    run_checked(version, UNSORTED_EXITS)


def test_a_next_chunk_past_a_gap_is_caught(monkeypatch):
    """Broken variant: next_chunk skips a chunk header's worth of bytes."""
    monkeypatch.setattr(heap.Segment, "after",
                        lambda self, c: self.chunks.get(c.addr + c.size + MALLOC_ALIGNMENT))
    with pytest.raises(AssertionError):
        run_checked("2.23+")


def test_a_footer_left_behind_is_caught(monkeypatch):
    """Broken variant: unlinking a chunk from its bin leaves its footer, so the chunk above
    a chunk taken from the bins still sees a free chunk below it (a merge with a chunk in
    use)."""
    kept = arena.Bins.remove

    def keeps_footer(self, c):
        footers = dict(self.footers)
        kept(self, c)
        self.footers = footers
    monkeypatch.setattr(arena.Bins, "remove", keeps_footer)
    with pytest.raises(AssertionError):
        run_checked("2.23+")


def test_a_footer_left_by_the_unsorted_scan_is_caught(monkeypatch):
    """Broken variant: the scan's unlink of the oldest unsorted chunk leaves its footer."""
    def keeps_footer(self):
        _, c = self.unsorted.popitem(last=False)
        c.bin = None
        self.count -= 1
        return c
    run_checked("2.23+", UNSORTED_EXITS)
    monkeypatch.setattr(arena.Bins, "pop_oldest_unsorted", keeps_footer)
    with pytest.raises(AssertionError):
        run_checked("2.23+", UNSORTED_EXITS)


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


def test_bins_that_miscount_are_caught(monkeypatch):
    """Broken variant: a chunk sorted into its bin from the unsorted bin is not counted, so
    bins holding chunks can count none and int_malloc would skip them for the top."""
    kept = arena.Bins.place

    def uncounted(self, c):
        kept(self, c)
        self.count -= 1
    monkeypatch.setattr(arena.Bins, "place", uncounted)
    with pytest.raises(AssertionError):
        run_checked("2.23+")


def test_the_tcache_size_bound_is_the_last_tcache_bin():
    """MAX_TCACHE_CHUNK lets a caller skip tcache_has_room: it must be the largest chunk
    size whose csize2tidx is a bin (a bound 16 bytes off would send 1040-byte chunks past
    the tcache, or look up a 65th bin)."""
    assert csize2tidx(MAX_TCACHE_CHUNK) == TCACHE_MAX_BINS - 1
    assert csize2tidx(MAX_TCACHE_CHUNK + MALLOC_ALIGNMENT) == TCACHE_MAX_BINS


# -- the structures that replaced lists (issue 29) ----------------------------------------------

from model.glibc import process as process_module, system  # noqa: E402
from model.glibc.arena import Bins, bin_index  # noqa: E402
from model.glibc.constants import MIN_LARGE_SIZE  # noqa: E402


class ListBins:
    """The reference: the bins as plain lists in glibc's order (the model before issue 29):
    the unsorted bin oldest first, a small group oldest first, a large group [first, newest,
    ..., oldest]."""

    def __init__(self) -> None:
        self.unsorted: list = []
        self.bins: dict[int, dict[int, list]] = {}

    def add(self, c) -> None:
        self.unsorted.append(c)

    def oldest_unsorted(self):
        return self.unsorted[0]

    def place(self, c) -> None:
        group = self.bins.setdefault(bin_index(c.size), {}).setdefault(c.size, [])
        if c.size < MIN_LARGE_SIZE or not group:
            group.append(c)
        else:
            group.insert(1, c)

    def remove(self, c) -> None:
        if any(u is c for u in self.unsorted):
            self.unsorted = [u for u in self.unsorted if u is not c]
            return
        groups = self.bins[bin_index(c.size)]
        groups[c.size] = [g for g in groups[c.size] if g is not c]
        if not groups[c.size]:
            del groups[c.size]
            if not groups:
                del self.bins[bin_index(c.size)]

    def oldest_small(self, size: int):
        group = self.bins.get(bin_index(size), {}).get(size)
        return group[0] if group else None

    def best_in_large_bin(self, nb: int):
        groups = self.bins.get(bin_index(nb), {})
        fits = sorted(s for s in groups if s >= nb)
        if not fits:
            return None
        group = groups[fits[0]]
        return group[1] if len(group) > 1 else group[0]

    def next_nonempty_after(self, idx: int):
        later = sorted(i for i in self.bins if i > idx)
        if not later:
            return None
        group = self.bins[later[0]][min(self.bins[later[0]])]
        return group[0] if later[0] < 64 else group[-1]

    def order(self) -> tuple:
        return ([id(c) for c in self.unsorted],
                {i: {s: [id(c) for c in g] for s, g in b.items()} for i, b in self.bins.items()})


class MirroredBins(Bins):
    """The model's bins, each call also made on ListBins: the same chunk comes back and the
    orders are the same after every call."""

    def __init__(self) -> None:
        super().__init__()
        self.ref = ListBins()

    def order(self) -> tuple:
        return ([id(c) for c in self.unsorted.values()],
                {i: {s: [id(c) for c in g.values()] for s, g in b.items()}
                 for i, b in self.bins.items()})

    def _agree(self) -> None:
        assert self.order() == self.ref.order()

    def add(self, c):
        super().add(c)
        self.ref.add(c)
        self._agree()

    def place(self, c):
        super().place(c)
        self.ref.place(c)
        self._agree()

    def remove(self, c):
        super().remove(c)
        self.ref.remove(c)
        self._agree()

    def pop_oldest_unsorted(self):
        got = super().pop_oldest_unsorted()
        assert got is self.ref.oldest_unsorted()
        self.ref.remove(got)
        self._agree()
        return got

    def oldest_small(self, size):
        got = super().oldest_small(size)
        assert got is self.ref.oldest_small(size)
        return got

    def best_in_large_bin(self, nb):
        got = super().best_in_large_bin(nb)
        assert got is self.ref.best_in_large_bin(nb)
        return got

    def next_nonempty_after(self, idx):
        got = super().next_nonempty_after(idx)
        assert got is self.ref.next_nonempty_after(idx)
        return got


# many free chunks of one large size and of one small size, sorted into their bins, then
# taken back in glibc's order: the large groups' "second position" and the small bins' FIFO
SAME_SIZES = "".join(f"0 malloc {i} {2000 if i % 4 == 0 else 600 if i % 4 == 2 else 24}\n"
                     for i in range(200)) + \
    "".join(f"0 free {i}\n" for i in range(0, 200, 2)) + "0 malloc 1000 100000\n" + \
    "".join(f"0 malloc {300 + i} {2000 if i % 2 else 600}\n" for i in range(60))


def mirrored(monkeypatch) -> None:
    """Every arena made from now on has MirroredBins (the process and system make arenas)."""
    made = arena.Arena

    def with_mirrored_bins(*args, **kw):
        return made(*args, bins=MirroredBins(), **kw)
    monkeypatch.setattr(process_module, "Arena", with_mirrored_bins)
    monkeypatch.setattr(system, "Arena", with_mirrored_bins)


def addresses_in_order(op, p) -> None:
    for av in p.arenas:
        assert isinstance(av.bins, MirroredBins)
        for seg in av.segments:
            assert all(a == c.addr and c.segment is seg for a, c in seg.chunks.items()), \
                op.render()


@pytest.mark.parametrize("version", ["2.21", "2.23+"])
def test_the_bins_and_addresses_agree_with_lists_after_every_op(monkeypatch, version):
    mirrored(monkeypatch)
    for script in (WORKLOADS["mixed"].script(quick=True), SAME_SIZES):
        run_model(parse_script(script), VERSIONS[version], after_step=addresses_in_order)


def test_a_large_group_that_takes_a_new_chunk_first_is_caught(monkeypatch):
    """Broken variant: a chunk of a size already in its large bin goes in front of the
    group's first chunk, not in the second position."""
    kept = Bins.place

    def in_front(self, c):
        kept(self, c)
        group = self.bins[c.bin][c.size]
        if c.size >= MIN_LARGE_SIZE and len(group) > 1:
            group.move_to_end(c.addr, last=False)
    mirrored(monkeypatch)
    monkeypatch.setattr(Bins, "place", in_front)
    with pytest.raises(AssertionError):
        run_model(parse_script(SAME_SIZES), VERSIONS["2.23+"], after_step=addresses_in_order)


# -- the prediction hashes (purgecheck/bench/predictions.py) ---------------------------------

def test_the_prediction_hash_is_stable_and_sees_a_changed_rule(monkeypatch):
    """The hash a speed change is judged by: the same run gives the same hash, and a rule
    changed (a tcache bin holding 6 chunks, not 7) gives another."""
    from purgecheck.bench.predictions import prediction_hash
    from purgecheck.formats.glibc_ops import expand

    ops = list(expand(parse_script(SAME_SIZES)))  # 50 frees of one tcache size
    first = prediction_hash(ops, "2.23+")
    assert prediction_hash(ops, "2.23+") == first
    assert prediction_hash(ops, "2.21") != first
    monkeypatch.setattr(malloc, "TCACHE_FILL_COUNT", 6)
    assert prediction_hash(ops, "2.23+") != first


def test_a_replay_pauses_the_collector_and_restores_it():
    """run_model turns Python's cyclic collector off while it replays (its full passes walk
    every live chunk) and leaves it as it found it, on, or off, and after an error."""
    import gc
    from pathlib import Path

    from purgecheck.glibc import replay

    img, _ = replay.load_stream(Path(__file__).parent / "data" / "xz-T2.rec")
    seen = []

    def during(i, op, p):
        seen.append(gc.isenabled())
        return False

    assert gc.isenabled()
    replay.run_model(img, VERSIONS["2.23+"], {}, False, after_op=during)
    assert seen and not any(seen) and gc.isenabled()
    gc.disable()
    try:
        replay.run_model(img, VERSIONS["2.23+"], {}, False)
        assert not gc.isenabled()
    finally:
        gc.enable()

    def fails(i, op, p):
        raise replay.ScriptError("a broken op")
    with pytest.raises(replay.ReplayError):
        replay.run_model(img, VERSIONS["2.23+"], {}, False, after_op=fails)
    assert gc.isenabled()


# -- the sixth round's shortcuts (issue 29) -----------------------------------------------------

from model.glibc.constants import SIZE_SZ, request2size  # noqa: E402
from model.glibc.process import Process  # noqa: E402


def tcache_round_trip(size: int) -> None:
    """malloc(size) from a fresh heap's top, free, malloc again: the chunk is request2size's
    (Process.malloc's request2size, inline), the free puts it in the bin csize2tidx names
    (int_free's and tcache_put's csize2tidx, inline), and the next malloc of that size takes
    it back from there (Process.malloc's csize2tidx, inline)."""
    p = Process(VERSIONS["2.23+"], {}, False)
    c = p.malloc(0, 0, size)
    assert c.size == request2size(size), size
    p.free(0, 0)
    bins = [i for i, b in enumerate(p.threads[0].tcache) if c in b]
    assert bins == [csize2tidx(c.size)], size
    assert p.malloc(0, 1, size) is c, size


def test_the_inline_size_and_bin_rules_are_the_functions():
    """Every request whose chunk is of a tcache size (0 to 1,032 bytes)."""
    for size in range(0, MAX_TCACHE_CHUNK - SIZE_SZ + 1):
        tcache_round_trip(size)


@pytest.mark.parametrize("where, name, broken", [
    (process_module, "MALLOC_ALIGN_MASK", 31),  # Process.malloc rounds to 32 bytes
    (malloc, "MALLOC_ALIGNMENT", 32),  # int_free / tcache_put index by 32-byte steps
])
def test_an_inline_rule_that_differs_is_caught(monkeypatch, where, name, broken):
    """Broken variants: the inline request2size or csize2tidx with another alignment."""
    monkeypatch.setattr(where, name, broken)
    with pytest.raises(AssertionError):
        for size in range(0, MAX_TCACHE_CHUNK - SIZE_SZ + 1, 8):
            tcache_round_trip(size)


def resident_counters_after_every_op(script: str) -> list[tuple]:
    out = []
    run_model(parse_script(script), VERSIONS["2.23+"],
              after_step=lambda op, p: out.append((p.resident.pages, p.resident.faults,
                                                   p.resident.refaults, p.resident.runs())))
    return out


def writes_both_heads(monkeypatch) -> None:
    """The plain use_top: the new top's head written after every split, whatever its page."""
    kept = arena.split_top

    def plain(av, nb):
        victim = kept(av, nb)
        av.write(av.top.addr + SIZE_SZ, SIZE_SZ)
        return victim
    monkeypatch.setattr(arena, "split_top", plain)
    monkeypatch.setattr(malloc, "split_top", plain)


# requests that leave the top's head on the victim's page and on the next one
GROWING = "".join(f"0 malloc {i} {24 + 40 * (i % 7) + 4000 * (i % 5 == 0)}\n" for i in range(300))


@pytest.mark.parametrize("script", [GROWING, WORKLOADS["mixed"].script(quick=True)])
def test_split_top_skips_only_writes_that_change_nothing(monkeypatch, script):
    """split_top leaves out the new top's head write when it is on the page the victim's head
    was just written to: the resident pages after every op are the plain rule's."""
    fast = resident_counters_after_every_op(script)
    writes_both_heads(monkeypatch)
    assert resident_counters_after_every_op(script) == fast


def test_a_split_top_that_skips_a_head_on_another_page_is_caught(monkeypatch):
    """Broken variant: split_top judging pages of 2**40 bytes leaves out heads on pages not
    yet written."""
    monkeypatch.setattr(arena, "PAGE_SHIFT", 40)
    fast = resident_counters_after_every_op(GROWING)
    writes_both_heads(monkeypatch)
    assert resident_counters_after_every_op(GROWING) != fast
