"""A byte-level shadow of the program's live blocks, kept beside the model by the page machine.

The model has no bytes, so each allocation writes a pattern that the shadow names by a token.
Seed 000 tests: "the survivors keep every byte; reuse after a purge (mi_malloc and mi_zalloc,
no block handed out twice, zero where asked ...); a double free of a purged block". The shadow
watches the model's memory (every write and every discard) and judges four things the page
invariants see only in part: no discard reaches a live block, a zalloc'd block is zero, no block
is handed out twice, and a double free is reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model.heap import Ptr
from model.invariants import Invariant, REGISTRY, register
from model.memory import Memory
from model.page import Page
from stateful_tests.failures import InvariantViolation

# The shadow's checks, in the registry with no predicate: only the fuzz machines judge them.
SURVIVORS = "FZ-SURVIVORS-NEVER-DISCARDED"
ZALLOC_ZERO = "FZ-ZALLOC-ZERO"
NO_BLOCK_TWICE = "FZ-NO-BLOCK-TWICE"
DOUBLE_FREE = "FZ-DOUBLE-FREE-REPORTED"

_CHECKS = (
    (SURVIVORS, "No discard ever reaches a byte of a live block: a block written with pattern P "
                "keeps P in every byte until the program frees it.",
     "seed 000 tests: \"the survivors keep every byte\"", "model.holes.mi_page_purge_holes_walk"),
    (ZALLOC_ZERO, "A zalloc'd block is zero: it is fresh memory whose link word the allocation "
                  "clears, or the allocation zeroes all of it.",
     "seed 000 (1): \"mi_zalloc of a block that was purged zeroes it like any reused block and "
     "never sees stale bytes\"", "model.alloc.mi_page_malloc"),
    (NO_BLOCK_TWICE, "No block is handed out while the program still holds it, nor is "
                     "on a free list meanwhile (so the program's free of it is never "
                     "refused as a double free).",
     "seed 000 tests: \"no block handed out twice\"", "model.alloc.mi_page_malloc"),
    (DOUBLE_FREE, "A free of a block the program does not hold raises DoubleFree and counts it "
                  "in page.double_frees; it is never absorbed.",
     "seed 000 tests: \"a double free of a purged block\"", "model.alloc.check_free"),
)
for _id, _statement, _clause, _impl in _CHECKS:
    if _id not in REGISTRY:
        register(Invariant(_id, _statement, _clause, _impl, scope="fuzz"))


@dataclass
class ShadowMemory(Memory):
    """The model's Memory, reporting each successful discard to the shadow and, while a
    zalloc is in progress, recording the writes it makes."""

    shadow: "Shadow | None" = None
    writes: list[tuple[int, int]] | None = None

    def touch(self, addr: int, size: int) -> None:
        super().touch(addr, size)
        if self.writes is not None:
            self.writes.append((addr, size))

    def discard(self, addr: int, size: int) -> bool:
        ok = super().discard(addr, size)
        if ok and self.shadow is not None:
            self.shadow.on_discard(addr, size)
        return ok


@dataclass
class LiveBlock:
    token: int  # the pattern the program wrote
    lo: int
    hi: int


@dataclass
class Shadow:
    """What the program holds (page id, block) -> pattern, and what it has let go."""

    live: dict[tuple[int, int], LiveBlock] = field(default_factory=dict)
    used: set[tuple[int, int]] = field(default_factory=set)  # ever handed out: not fresh
    dead: dict[tuple[int, int], Ptr] = field(default_factory=dict)  # freed, not handed out since
    next_token: int = 1

    def attach(self, mem: ShadowMemory) -> None:
        mem.shadow = self

    # -- what the program does -----------------------------------------------------------

    def handed_out(self, page: Page, i: int) -> int:
        """The allocator gave block i of `page`; the program writes a new pattern in it.
        Returns the pattern's token."""
        key = (page.id, i)
        if key in self.live:
            raise InvariantViolation(NO_BLOCK_TWICE, f"page {page.id}: block {i} handed out while "
                                                  f"the program holds it (pattern "
                                                  f"{self.live[key].token})")
        token = self.next_token
        self.next_token += 1
        lo = page.geom.block_addr(i)
        self.live[key] = LiveBlock(token, lo, lo + page.block_size)
        self.used.add(key)
        self.dead.pop(key, None)
        return token

    def moved(self, old: Ptr, new: Ptr, page: Page) -> None:
        """realloc moved the block: the new one holds the old pattern, the old one is freed."""
        token = self.live[(old.page, old.block)].token
        self.handed_out(page, new.block)
        self.live[(new.page, new.block)].token = token
        self.freed(old)

    def refused(self, ptr: Ptr, err: Exception) -> None:
        """The allocator refused the program's free of a block it holds: it had the block on
        a free list already (to hand it out a second time)."""
        raise InvariantViolation(NO_BLOCK_TWICE, f"page {ptr.page}: the free of block "
                                                 f"{ptr.block}, which the program holds, was "
                                                 f"refused ({err})")

    def freed(self, ptr: Ptr) -> None:
        del self.live[(ptr.page, ptr.block)]
        self.dead[(ptr.page, ptr.block)] = ptr

    def dropped_page(self, page_id: int) -> None:
        """The page went back to the arena with the program's blocks (mi_heap_destroy): the
        program's pointers into it are dangling from now on."""
        for key in [k for k in self.live if k[0] == page_id]:
            self.freed(Ptr(*key))

    # -- the checks ------------------------------------------------------------------------

    def on_discard(self, addr: int, size: int) -> None:
        hi = addr + size
        for (pid, i), b in self.live.items():
            if b.lo < hi and addr < b.hi:
                raise InvariantViolation(SURVIVORS, f"discard of [{addr:#x}, {hi:#x}) reaches live "
                                                 f"block {i} of page {pid} (pattern {b.token})")

    def check_zeroed(self, page: Page, i: int, writes: list[tuple[int, int]]) -> None:
        """Block i was just zalloc'd with `writes` made during the call. A block the program
        held before may hold its old pattern anywhere, so the call must zero all of it; a
        fresh block is zero but for its free-list link, which the call must clear."""
        lo = page.geom.block_addr(i)
        need = page.block_size if (page.id, i) in self.used else min(8, page.block_size)
        if not any(a <= lo and lo + need <= a + n for a, n in writes):
            what = "a reused block" if need == page.block_size else "the link word of a block"
            raise InvariantViolation(ZALLOC_ZERO, f"page {page.id}: zalloc returned {what} "
                                               f"(block {i}) without zeroing {need} bytes")
