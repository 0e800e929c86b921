"""A thread's own sweep and park state (the `tld` fields of digest section 8).

Seed 000, change (2): the sweep owns the time; each thread remembers when it swept last, in
which epoch, and how far a park handoff has got.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# park state (the handoff's CAS target) and park_swept encodings
RUNNING = "running"
PARKED = "parked"
SWEEPING = "sweeping"
PARK_SWEPT_NONE = 0
PARK_SWEPT_DONE = 1
PARK_SWEPT_SMALL = 2  # SMALL + k: k + 1 sweeps of this park left something behind
MI_PARK_SWEEPS_MAX = 6


@dataclass
class ParkSweep:
    """Ghost record of one sweep of a park: when it began and ended, in which epoch."""

    start_ms: int
    end_ms: int
    epoch: int
    deferred: bool
    next_state: int


@dataclass
class ThreadState:
    id: int
    holes_sweep_deferred: bool = False
    holes_sweep_seq: int = 0
    holes_sweep_full: bool = False
    holes_sweep_epoch: int = 0
    holes_sweep_last: int = 0  # ms, taken after the work of a handoff sweep
    holes_park_epoch: int = 0
    park_state: str = RUNNING
    park_swept: int = PARK_SWEPT_NONE
    park_reclaim: bool = False
    holes_floor_kept: int = 0  # bytes of the floor this thread's last sweep left (model.floor)
    holes_free_held: int = 0  # bytes of all-free pages kept at a free since the last sweep
    epoch_seen: int = 0  # the newest epoch this thread has read (its reads are monotone)
    # Ghost: the sweeps of the current park, and this thread's last advance call, so that
    # invariants can speak of them.
    park_sweeps: list[ParkSweep] = field(default_factory=list)
    last_advance: object | None = None  # model.epoch.AdvanceFrame
