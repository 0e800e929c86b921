"""The designs of seed 000: the one it chose (`epoch`) and the four it rejected.

Each variant is a named configuration that changes only what the allocating side stores and
when the sweep holds a page back. The seed's own words on each:
- `epoch`: "a large page whose epoch is the current one or the one before keeps its free
  blocks"; the stamp is a relaxed load of the epoch.
- `no-hold`: change (1) without (2): "discarded and refaulted 3 GB in 20 s".
- `clock`: "The first version of this PR had the allocating thread leave a reading of
  CLOCK_MONOTONIC_COARSE in the page"; the sweep keeps pages stamped less than the interval
  ago.
- `handoff-only`: "Deferring in the handoff only left the inline path purging 58 MB in 3 s".
- `two-untouched`: "Take them at the second sweep in a row that finds the page untouched".
"""

from __future__ import annotations

from dataclasses import dataclass

from model.epoch import EPOCH_MODULUS, is_epoch_young
from model.page import MI_PAGE_SWEPT_NONE, Page, is_stamp, stamp_epoch

EPOCH = "epoch"
NO_HOLD = "no-hold"
CLOCK = "clock"
HANDOFF_ONLY = "handoff-only"
TWO_UNTOUCHED = "two-untouched"
VARIANTS = (EPOCH, NO_HOLD, CLOCK, HANDOFF_ONLY, TWO_UNTOUCHED)


@dataclass(frozen=True)
class SweepContext:
    """What the sweep of one page knows: the time, the epoch (acquired), who sweeps."""

    now: int
    epoch: int
    interval: int
    in_handoff: bool  # the scavenger sweeping a parked thread's heap
    full: bool  # every purge_holes_full_every-th sweep walks unchanged pages too


def compute_stamp_value(variant: str, epoch_read: int, clock) -> int:
    """What the allocating side stores: an epoch, or (clock design) a coarse clock reading,
    which is a clock read on every allocation of a large page."""
    return clock.read() if variant == CLOCK else epoch_read


def is_held_by_epoch(page: Page, ctx: SweepContext) -> bool:
    """Digest 6, step 2: stamped and `age < 2` (modulo 2^32), with the interval on."""
    return ctx.interval > 0 and is_stamp(page.swept_state) and \
        is_epoch_young(ctx.epoch, stamp_epoch(page.swept_state))


def is_held_by_clock(page: Page, ctx: SweepContext) -> bool:
    """The first version: kept while the stamp (a clock reading) is less than the interval
    ago."""
    if ctx.interval <= 0 or not is_stamp(page.swept_state):
        return False
    return (ctx.now - stamp_epoch(page.swept_state)) % EPOCH_MODULUS < ctx.interval


def is_held_two_untouched(page: Page, ctx: SweepContext, untouched: dict[int, int]) -> bool:
    """Keep a page until the second sweep in a row that finds it untouched. An allocation's
    stamp is the touch; the sweep consumes it."""
    if ctx.interval <= 0:
        return False
    if is_stamp(page.swept_state):
        page.version += 1
        page.swept_state = MI_PAGE_SWEPT_NONE
        untouched[page.id] = 0
        return True
    untouched[page.id] = untouched.get(page.id, 0) + 1
    return untouched[page.id] < 2


def is_page_held(variant: str, page: Page, ctx: SweepContext,
                 untouched: dict[int, int]) -> bool:
    """Does the sweep keep this page's free blocks (and its unformed tail) for now?"""
    if variant == EPOCH:
        return is_held_by_epoch(page, ctx)
    if variant == NO_HOLD:
        return False
    if variant == CLOCK:
        return is_held_by_clock(page, ctx)
    if variant == HANDOFF_ONLY:
        return ctx.in_handoff and is_held_by_epoch(page, ctx)
    if variant == TWO_UNTOUCHED:
        return is_held_two_untouched(page, ctx, untouched)
    raise ValueError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
