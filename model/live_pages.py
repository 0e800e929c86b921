"""The resident OS pages that hold part of a live block, kept as blocks live and die and as
pages gain and lose residency (issue 29, 4), so that a sample of `purgecheck simulate` reads
one number instead of visiting the live blocks.

The plain definition is `count_live_resident`: for each page not retired, the OS pages of
its blocks handed out (`Page.handed_out`, the program's blocks), counted where resident.
`LiveOsPages` keeps the same figure as events come:

- a block becomes live (`Page.hand_out`: mi_page_malloc) or dies (`Page.take_back`: the
  owner's free, a free from another thread, the retire of a page whose blocks go with it,
  mi_heap_destroy's);
- an OS page becomes resident (`Memory.touch`: a write, a refault) or stops being resident
  (`Memory.discard`: a hole purge; `Memory.release`: the arena's purge of a retired page).

Nothing else changes either side: an abandon, a reclaim, an unpurge, a collect or a retire
of an all-free page moves no block in or out of `handed_out` and writes through `touch`.
tests/test_live_pages.py checks the kept figure against the plain one (`recount_live_resident`)
after every op.

Blocks of a page do not overlap, so an OS page that lies wholly inside a block holds no other
block: only the OS pages where a block begins or ends part way can be shared with its
neighbours (blocks smaller than an OS page, or straddling one). Those carry a count of the
live blocks on them (`edges`); the pages wholly inside a block are live exactly while it is.
Pages of the arena do not share OS pages (they start at slice boundaries, 64 KiB apart at
least, and an OS page is 4 KiB to 64 KiB), so an OS page belongs to one page's blocks, as
the per-page definition assumes.
"""

from __future__ import annotations

from model.memory import _ONES, _ZEROS, REGION, REGION_BITS, Memory, PageMask


class LiveOsPages:
    """Per OS page, whether part of a live block lies there (`mask`), and how many such pages
    are resident (`resident`)."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem
        self.os_page_size = mem.os_page_size
        # an address's region of the mask: address >> region_shift (OS pages are 2^k bytes)
        self.region_shift = REGION_BITS + mem.os_page_size.bit_length() - 1
        self.mask = PageMask()  # 1 where part of a live block lies
        self.edges: dict[int, int] = {}  # OS page -> live blocks that begin or end on it
        # OS pages set in `mask` and resident: every change below keeps it so, whether it
        # changes the mask (a block applied) or residency (told by Memory)
        self.resident = 0
        # address -> size of the blocks that became live (size) or died (-size) since the
        # last flush, applied when the count is read (`count`): a block that lives and dies
        # between two samples (a request's body) costs two dict updates, not two updates of
        # the mask (applied at once, `bun-serve` took 16 % more instructions a request).
        # Residency may change meanwhile: a block is applied against the residency of then.
        self.pending: dict[int, int] = {}

    def block_live(self, addr: int, size: int) -> None:
        """Block [addr, addr+size) becomes live: noted, applied at the next flush."""
        noted = self.pending.get(addr)
        if noted is None:
            self.pending[addr] = size
        elif noted == -size:
            del self.pending[addr]  # it died and lives again since the last flush: no change
        else:  # another block died here (a page's range taken again): apply that one first
            self.flush()
            self.pending[addr] = size

    def block_dead(self, addr: int, size: int) -> None:
        noted = self.pending.get(addr)
        if noted is None:
            self.pending[addr] = -size
        elif noted == size:
            del self.pending[addr]  # it lived and died since the last flush: no change
        else:
            self.flush()
            self.pending[addr] = -size

    def flush(self) -> None:
        """Apply the blocks noted since the last flush, in the order noted; then forget the
        mask's regions where blocks died and no live block is left (PageMask.drop_empty:
        kept, one for every four pages a long trace ever made)."""
        pending, self.pending = self.pending, {}
        shift = self.region_shift
        dead: set[int] = set()  # the mask's regions where a block died
        for addr, size in pending.items():
            if size > 0:
                self._apply_live(addr, size)
            else:
                self._apply_dead(addr, -size)
                r, last = addr >> shift, (addr - size - 1) >> shift
                dead.add(r)
                if last != r:  # a block across regions (16 MiB each with 4 KiB OS pages)
                    dead.update(range(r + 1, last + 1))
        for r in dead:
            self.mask.drop_empty(range(r << REGION_BITS, (r + 1) << REGION_BITS))

    def count(self) -> int:
        """The resident OS pages that hold part of a live block."""
        if self.pending:
            self.flush()
        return self.resident

    def _apply_live(self, addr: int, size: int) -> None:
        ps = self.os_page_size
        first = addr // ps
        if not (addr % ps or size % ps):  # whole OS pages, the block's alone: a large body
            self.resident += self._own(first, first + size // ps, _ONES)
        elif size < ps and (addr + size - 1) // ps == first:  # a small block in one page
            self._share(first)
        else:
            shared, lo, hi = self._split(addr, size)
            for p in shared:
                self._share(p)
            if lo < hi:
                self.resident += self._own(lo, hi, _ONES)

    def _apply_dead(self, addr: int, size: int) -> None:
        ps = self.os_page_size
        first = addr // ps
        if not (addr % ps or size % ps):
            self.resident -= self._own(first, first + size // ps, _ZEROS)
        elif size < ps and (addr + size - 1) // ps == first:
            self._unshare(first)
        else:
            shared, lo, hi = self._split(addr, size)
            for p in shared:
                self._unshare(p)
            if lo < hi:
                self.resident -= self._own(lo, hi, _ZEROS)

    def _split(self, addr: int, size: int) -> tuple[tuple[int, ...], int, int]:
        """A block's OS pages: those it may share with its neighbours (the first and the
        last where it begins or ends part way), and the run [lo, hi) of those wholly inside
        it, which no other block touches."""
        ps = self.os_page_size
        end = addr + size
        first, last = addr // ps, (end - 1) // ps
        lo, hi = -(-addr // ps), end // ps
        if not addr % ps:
            return ((last,) if end % ps else ()), lo, hi
        if end % ps and last != first:
            return (first, last), lo, hi
        return (first,), lo, hi

    def _share(self, p: int) -> None:
        """One more live block on OS page `p`, which others may share."""
        n = self.edges.get(p, 0)
        self.edges[p] = n + 1
        if not n:
            self.mask.put(p, 1)
            self.resident += p in self.mem.resident

    def _unshare(self, p: int) -> None:
        n = self.edges[p] - 1
        if n:
            self.edges[p] = n
            return
        del self.edges[p]
        self.mask.put(p, 0)
        self.resident -= p in self.mem.resident

    def _own(self, lo: int, hi: int, fill: memoryview) -> int:
        """Set (`fill` ones) or clear (zeros) OS pages [lo, hi), wholly inside a block, in
        the mask; returns how many are resident. One region, the usual case, inline (a
        256 KiB block has 64 such pages, at each malloc and free)."""
        r = lo >> REGION_BITS
        live = self.mask.regions.get(r)
        if (hi - 1) >> REGION_BITS == r and live is not None:  # else made by mask.set
            o, n = lo & (REGION - 1), hi - lo
            live[o:o + n] = fill[:n]
            res = self.mem.mask.regions.get(r)
            return 0 if res is None else res.count(1, o, o + n)
        if fill is _ONES:
            self.mask.set(range(lo, hi))
        else:
            self.mask.clear(range(lo, hi))
        return self.mem.mask.count(range(lo, hi))

    def gain_residency(self, pages: range) -> None:
        """`pages` are about to become resident (Memory.touch, before it sets them)."""
        if len(pages) == 1:
            p = pages.start
            if p not in self.mem.resident and self.mask.is_set(p):
                self.resident += 1
            return
        live = self.mask.count(pages)
        if live:
            self.resident += live - self.mask.count_both(self.mem.mask, pages)

    def lose_residency(self, pages: range) -> None:
        """`pages` are about to stop being resident (a discard, the arena's purge)."""
        if self.mask.count(pages):
            self.resident -= self.mask.count_both(self.mem.mask, pages)


def count_live_resident(mem: Memory, page) -> int:
    """The plain definition, for one page: the resident OS pages of its live blocks, the
    blocks' OS pages in runs (neighbours share an OS page where the block size is not a
    multiple of it), each run counted at once."""
    g = page.geom
    count, lo, hi = 0, 0, -1
    for i in sorted(page.handed_out):
        run = mem.os_pages(g.block_addr(i), g.block_size)
        if run.start <= hi:
            hi = max(hi, run.stop)
            continue
        if hi > lo:
            count += mem.count_resident(range(lo, hi))
        lo, hi = run.start, run.stop
    if hi > lo:
        count += mem.count_resident(range(lo, hi))
    return count


def recount_live_resident(world) -> int:
    """The plain definition over the process: every page not retired, recounted."""
    return sum(count_live_resident(world.mem, page) for page in world.pages.values()
               if not page.retired and page.handed_out)


def track_live_pages(world) -> LiveOsPages:
    """Keep the count from now on; the world must have no live block yet."""
    if any(page.handed_out for page in world.pages.values()):
        raise ValueError("the live pages are kept from the first block on")
    world.mem.live = LiveOsPages(world.mem)
    return world.mem.live
