"""The OS side of a purge: which OS pages are resident, and discards that may fail.

Seed 000: "_mi_os_discard never touches commit state" (Linux: madvise(MADV_DONTNEED)). The
model predicts residency exactly as mincore reports it for private anonymous memory: a page
becomes resident when it is written and stops being resident when it is discarded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model.stats import HoleStats


@dataclass
class Memory:
    os_page_size: int
    resident: set[int] = field(default_factory=set)  # OS page numbers (addr // os_page_size)
    fail_next_discards: int = 0  # injected failures: the next N discards fail
    discard_calls: int = 0
    # The cost of a discard (seed 000 (2): "discarded and refaulted 3 GB in 20 s"): the bytes
    # it dropped, and the OS pages dropped while resident that a write brings back (each a
    # page fault and a page of kernel zeroing).
    discarded_bytes: int = 0
    refaults: int = 0
    dropped: set[int] = field(default_factory=set)  # discarded while resident, not written since
    holes: HoleStats = field(default_factory=HoleStats)  # the process-wide counters

    def os_pages(self, addr: int, size: int) -> range:
        """OS pages touched by the byte range [addr, addr+size)."""
        if size <= 0:
            return range(0)
        return range(addr // self.os_page_size, (addr + size - 1) // self.os_page_size + 1)

    def os_pages_inside(self, addr: int, size: int) -> range:
        """OS pages wholly inside [addr, addr+size)."""
        lo = -(-addr // self.os_page_size)
        hi = (addr + size) // self.os_page_size
        return range(lo, max(lo, hi))

    def touch(self, addr: int, size: int) -> None:
        """A write: every OS page the range touches becomes resident; one that a discard
        dropped faults back in (a refault)."""
        pages = self.os_pages(addr, size)
        if self.dropped:
            back = self.dropped.intersection(pages)
            if back:
                self.refaults += len(back)
                self.dropped.difference_update(back)
        self.resident.update(pages)

    def discard(self, addr: int, size: int) -> bool:
        """_mi_os_discard: drop the pages' contents; False when the call fails."""
        self.discard_calls += 1
        if self.fail_next_discards > 0:
            self.fail_next_discards -= 1
            return False
        pages = self.os_pages(addr, size)
        self.dropped.update(self.resident.intersection(pages))
        self.resident.difference_update(pages)
        self.discarded_bytes += size
        return True

    def is_resident(self, addr: int, size: int) -> bool:
        return any(p in self.resident for p in self.os_pages(addr, size))
