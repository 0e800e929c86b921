"""Invariants of the process-wide counters: each equals the sum of its parts after every op.

The real code keeps the hole statistics process-wide (mi_purge_holes_stats_get) and each page
keeps its own accounting; the seed says the accounting "returns to where it was" when a page
goes back (mi_heap_destroy, mi_heap_delete, a page that becomes free). The per-page
invariants (PG-ACCOUNTING, PG-UNPURGE-ALL-RESETS) judge each page; these judge that the
process-wide figures move with them, so a path that resets a page but not the process (or the
other way round) is caught at the op that does it. (The resident OS pages are one set,
Memory.resident, that each page's residency is read from: there is no second count to agree.)
"""

from __future__ import annotations

from model.invariants import Invariant, register

CLAUSE = ("seed 000 (1): \"mi_heap_destroy, mi_heap_delete and a page that becomes free all go "
          "through _mi_page_unpurge_all, so the discarded-bytes accounting returns to where it "
          "was (tested)\"; digest 11: the stats (mi_purge_holes_stats_get)")


def _sum_of(name: str, counter, part):
    """A predicate: the process's `counter(world)` equals the sum of `part(page)`."""
    def predicate(world) -> str | None:
        total = sum(part(p) for p in world.pages.values())
        if counter(world) != total:
            return f"the process counts {counter(world)} {name}, its pages {total}"
        return None
    return predicate


TAIL_CLAUSE = ("digest 3: the unformed tail \"is discarded by its own OS-page-granular mechanism "
               "(mi_page_purge_unformed_tail), and brought back before mi_page_extend_free "
               "writes into it\"; ")

# (id, what the process counts, statement, clause, implementing function, counter, part)
SUMS = [
    ("PR-DISCARDED-BYTES-SUM", "bytes discarded",
     "The process-wide bytes discarded now (holes_stats.purged_bytes) equal the sum of every "
     "page's discarded bytes, after every op (heap destroy and delete included).", CLAUSE,
     "model.holes.count_discarded", lambda w: w.mem.holes.purged_bytes,
     lambda p: p.discarded_bytes),
    ("PR-PURGED-BLOCKS-SUM", "purged blocks",
     "The process-wide count of blocks held off the free lists (holes_stats.purged_blocks) "
     "equals the sum of every page's purged blocks, after every op.", CLAUSE,
     "model.holes.count_discarded", lambda w: w.mem.holes.purged_blocks,
     lambda p: p.discarded_blocks),
    ("PR-UNFORMED-BYTES-SUM", "unformed bytes discarded",
     "The process-wide bytes of unformed tails discarded now (holes_stats.unformed_bytes) "
     "equal the sum of every page's discarded tail, after every op.", TAIL_CLAUSE + CLAUSE,
     "model.holes.mi_page_purge_unformed_tail", lambda w: w.mem.holes.unformed_bytes,
     lambda p: max(0, p.unformed_purged_hi - p.unformed_purged_lo)),
]

for _id, _name, _statement, _clause, _implements, _counter, _part in SUMS:
    register(Invariant(_id, _statement, _clause, _implements, "world",
                       _sum_of(_name, _counter, _part)))
