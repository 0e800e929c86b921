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
tests/test_live_pages.py checks the kept figure against `count_live_resident` after every op.

Blocks of a page do not overlap, so an OS page that lies wholly inside a block holds no other
block: only a block's first and last OS pages can be shared with its neighbours (blocks
smaller than an OS page, or straddling one). Those carry a count of the live blocks on them;
the pages between are live exactly while their one block is. Pages of the arena do not share
OS pages (they start at slice boundaries, 64 KiB apart at least, and an OS page is 4 KiB to
64 KiB), so an OS page belongs to one page's blocks, as the per-page definition assumes.
"""

from __future__ import annotations

from model.memory import Memory, PageMask


class LiveOsPages:
    """Per OS page, whether part of a live block lies there (`mask`), and how many such pages
    are resident (`resident`)."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem
        self.mask = PageMask()  # 1 where part of a live block lies
        self.edges: dict[int, int] = {}  # OS page -> live blocks that begin or end on it
        self.resident = 0  # OS pages live and resident: what a sample reads

    def block_live(self, addr: int, size: int) -> None:
        ps = self.mem.os_page_size
        first, last = addr // ps, (addr + size - 1) // ps
        self._edge_live(first)
        if last != first:
            self._edge_live(last)
            if last - first > 1:
                inner = range(first + 1, last)
                self.mask.set(inner)
                self.resident += self.mem.mask.count(inner)

    def block_dead(self, addr: int, size: int) -> None:
        ps = self.mem.os_page_size
        first, last = addr // ps, (addr + size - 1) // ps
        self._edge_dead(first)
        if last != first:
            self._edge_dead(last)
            if last - first > 1:
                inner = range(first + 1, last)
                self.mask.clear(inner)
                self.resident -= self.mem.mask.count(inner)

    def _edge_live(self, p: int) -> None:
        n = self.edges.get(p, 0)
        self.edges[p] = n + 1
        if not n:
            self.mask.put(p, 1)
            self.resident += p in self.mem.resident

    def _edge_dead(self, p: int) -> None:
        n = self.edges[p] - 1
        if n:
            self.edges[p] = n
            return
        del self.edges[p]
        self.mask.put(p, 0)
        self.resident -= p in self.mem.resident

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
