"""Invariants of the process-wide counters: each equals the sum of its parts after every op.

The real code keeps the hole statistics process-wide (mi_purge_holes_stats_get) and each page
keeps its own accounting; the seed says the accounting "returns to where it was" when a page
goes back (mi_heap_destroy, mi_heap_delete, a page that becomes free). The per-page
invariants (PG-ACCOUNTING, PG-UNPURGE-ALL-RESETS) judge each page; these judge that the
process-wide figures move with them, so a path that resets a page but not the process (or the
other way round) is caught at the op that does it. The same holds for what the fork counts
process-wide and each thread or page knows for itself: the sweeps that walked every page, the
threads in a park, the pages in the abandoned map (model.stats.SubprocCounters).

The resident OS pages have no such counter in the real code: a discard is madvise and never a
decommit, so the committed statistic does not move with it (seed 000 (1): "The committed
statistic is not involved"), and residency is what mincore and /proc say. The model keeps it
as one set, Memory.resident, that each page's residency is read from: there is no second
count to agree; what the fork does count of it, the bytes discarded now, is summed below.
"""

from __future__ import annotations

from model.invariants import CountedSum, Invariant, PageSum, register
from model.thread import RUNNING

CLAUSE = ("seed 000 (1): \"mi_heap_destroy, mi_heap_delete and a page that becomes free all go "
          "through _mi_page_unpurge_all, so the discarded-bytes accounting returns to where it "
          "was (tested)\"; digest 11: the stats (mi_purge_holes_stats_get)")
TAIL_CLAUSE = ("digest 3: the unformed tail \"is discarded by its own OS-page-granular mechanism "
               "(mi_page_purge_unformed_tail), and brought back before mi_page_extend_free "
               "writes into it\"; ")
FULL_CLAUSE = ("digest 6, step 4: \"Every purge_holes_full_every (64)-th sweep is a full sweep "
               "that walks every page anyway\"; mi_purge_holes_stats_t.full_sweeps counts them "
               "where the sweep begins (_mi_page_purge_holes_sweep_begin)")
PARK_CLAUSE = ("digest 8: mi_on_thread_idle_start takes a thread RUNNING -> PARKED, "
               "mi_on_thread_idle_end (or _mi_park_leave) takes it back to RUNNING; the fork "
               "counts the threads in between in subproc->parked_count, which the scavenger's "
               "_mi_theap_sweep_parked reads to skip a pass with nobody parked")
ABANDON_CLAUSE = ("seed 000 (1): \"Abandoned large pages in the abandoned map are swept like "
                  "the others\"; mimalloc's pages_abandoned statistic counts the pages in the "
                  "map: up at a thread's abandon, down at a reclaim or when the page goes back "
                  "to the arena")


def _of_pages(part):
    return lambda name, counter: PageSum(name, counter, part)


def _of_threads(part):
    return lambda name, counter: CountedSum(
        name, counter, "threads", lambda w: (part(w, t) for t in w.threads.values()))


# (id, what the process counts, statement, clause, implementing function, counter, the
# predicate's kind: each page's or each thread's figure)
SUMS = [
    ("PR-DISCARDED-BYTES-SUM", "bytes discarded",
     "The process-wide bytes discarded now (holes_stats.purged_bytes) equal the sum of every "
     "page's discarded bytes, after every op (heap destroy and delete included).", CLAUSE,
     "model.holes.count_discarded", lambda w: w.mem.holes.purged_bytes,
     _of_pages(lambda p: p.discarded_bytes)),
    ("PR-PURGED-BLOCKS-SUM", "purged blocks",
     "The process-wide count of blocks held off the free lists (holes_stats.purged_blocks) "
     "equals the sum of every page's purged blocks, after every op.", CLAUSE,
     "model.holes.count_discarded", lambda w: w.mem.holes.purged_blocks,
     _of_pages(lambda p: p.discarded_blocks)),
    ("PR-UNFORMED-BYTES-SUM", "unformed bytes discarded",
     "The process-wide bytes of unformed tails discarded now (holes_stats.unformed_bytes) "
     "equal the sum of every page's discarded tail, after every op.", TAIL_CLAUSE + CLAUSE,
     "model.holes.mi_page_purge_unformed_tail", lambda w: w.mem.holes.unformed_bytes,
     _of_pages(lambda p: max(0, p.unformed_purged_hi - p.unformed_purged_lo))),
    ("PR-FULL-SWEEPS-SUM", "full sweeps",
     "The process-wide count of full sweeps (holes_stats.full_sweeps) equals the sum over the "
     "threads of the full sweeps each has begun (every purge_holes_full_every-th of its "
     "holes_sweep_seq), after every op.", FULL_CLAUSE, "model.drivers.count_full_sweep",
     lambda w: w.mem.holes.full_sweeps,
     _of_threads(lambda w, t: t.holes_sweep_seq // w.options.purge_holes_full_every)),
    ("PR-PARKED-COUNT-SUM", "threads in a park",
     "The process-wide count of parked threads (parked_count) equals the number of threads "
     "whose park_state is PARKED or SWEEPING, after every op (parks, unparks, the scavenger's "
     "claims and releases, a thread's abandon).", PARK_CLAUSE,
     "model.park.mi_on_thread_idle_end", lambda w: w.subproc.parked_count,
     _of_threads(lambda w, t: t.park_state != RUNNING)),
    ("PR-ABANDONED-PAGES-SUM", "pages in the abandoned map",
     "The process-wide count of abandoned pages (pages_abandoned) equals the number of pages "
     "that are abandoned and not gone back to the arena, after every op (abandon, reclaim, a "
     "sweep that gives an abandoned page back, heap destroy and delete).", ABANDON_CLAUSE,
     "model.heap.mi_page_reclaim", lambda w: w.subproc.pages_abandoned,
     _of_pages(lambda p: p.abandoned and not p.retired)),
]

for _id, _name, _statement, _clause, _implements, _counter, _sum in SUMS:
    register(Invariant(_id, _statement, _clause, _implements, "world", _sum(_name, _counter)))
