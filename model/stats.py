"""The process-wide hole-purging counters (the real code's mi_purge_holes_stats_get).

The real tests read these to know that a case did something (digest section 11: "every test
that depends on a purge asserts one actually happened"): the discard and reuse calls, the bytes
and blocks discarded now and ever, how many blocks the walks counted, how many pages a sweep
skipped as unchanged or found ineligible, the bytes of unformed tails discarded now, and the
sweeps that walked every page anyway (full_sweeps). The model counts them where the rule acts
(model/holes.py, model/sweep.py, model/drivers.py); the C reference counts them in
reference_c/ the same way, and both write them in the trace's `holes_stats` event.

Beside them, the counters the fork keeps per subprocess that the sweeps and the park handoff
move (SubprocCounters): the threads in a park, the pages in the abandoned map.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass
class HoleStats:
    reuse_calls: int = 0  # memory brought back: an unpurged run or tail, a page's runs going back
    purged_bytes: int = 0  # bytes of discarded units now, over every page
    purged_bytes_total: int = 0  # bytes of units ever discarded
    purged_blocks: int = 0  # blocks held off the free lists now
    blocks_visited: int = 0  # free blocks the walks counted
    pages_skipped: int = 0  # sweeps of a page unchanged since its last walk (digest 6, step 4)
    ineligible_pages: int = 0  # sweeps of a page that cannot purge holes
    unformed_bytes: int = 0  # bytes of unformed tails discarded now
    full_sweeps: int = 0  # sweeps that walked every page anyway (purge_holes_full_every)

    def count_discarded(self, nbytes: int, blocks: int) -> None:
        """Units discarded (positive) or brought back (negative) in one page."""
        self.purged_bytes += nbytes
        self.purged_blocks += blocks
        if nbytes > 0:
            self.purged_bytes_total += nbytes

    def as_fields(self, discard_calls: int) -> dict:
        """The fields of the trace's `holes_stats` event."""
        return {"discard_calls": discard_calls, **asdict(self)}


@dataclass
class SubprocCounters:
    """What the fork counts per subprocess besides the hole statistics: `parked_count`, the
    threads between mi_on_thread_idle_start and their leaving the park (up at the park, down
    at mi_on_thread_idle_end or _mi_park_leave; the scavenger reads it to skip a pass with
    nobody parked), and mimalloc's `pages_abandoned` statistic, the pages in the abandoned
    map (up at a thread's abandon, down when a page leaves the map: reclaimed, or gone back
    to the arena). Neither is in the trace: the C reference does not keep them."""

    parked_count: int = 0
    pages_abandoned: int = 0
