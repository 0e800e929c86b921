"""The process-wide hole-purging counters (the real code's mi_purge_holes_stats_get).

The real tests read these to know that a case did something (digest section 11: "every test
that depends on a purge asserts one actually happened"): the discard and reuse calls, the bytes
and blocks discarded now and ever, how many blocks the walks counted, how many pages a sweep
skipped as unchanged or found ineligible, and the bytes of unformed tails discarded now. The
model counts them where the rule acts (model/holes.py, model/sweep.py); the C reference counts
them in reference_c/ the same way, and both write them in the trace's `holes_stats` event.
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

    def count_discarded(self, nbytes: int, blocks: int) -> None:
        """Units discarded (positive) or brought back (negative) in one page."""
        self.purged_bytes += nbytes
        self.purged_blocks += blocks
        if nbytes > 0:
            self.purged_bytes_total += nbytes

    def as_fields(self, discard_calls: int) -> dict:
        """The fields of the trace's `holes_stats` event."""
        return {"discard_calls": discard_calls, **asdict(self)}
