"""The clock the sweep reads: integer milliseconds, virtual, so every run is deterministic.

Seed 000, change (2): "only the sweep reads a clock". The real code reads CLOCK_MONOTONIC in
ms; a clock that goes backwards is possible there and makes the epoch advance (digest 7),
so the model can allow it when asked.
"""

from __future__ import annotations

from dataclasses import dataclass


class ClockError(ValueError):
    """A step the clock's configuration forbids (going backwards on a monotone clock)."""


@dataclass
class VirtualClock:
    now: int = 1_000  # ms; above any interval, so the first sweep of a process advances
    monotone: bool = True
    reads: int = 0  # how often the allocator read the clock (ghost code reads `now`)

    def read(self) -> int:
        self.reads += 1
        return self.now

    def advance(self, ms: int) -> int:
        if ms < 0 and self.monotone:
            raise ClockError(f"a monotone clock cannot go back {-ms} ms")
        self.now += ms
        return self.now

    def set(self, t: int) -> int:
        return self.advance(t - self.now)
