"""The floor of later versions, not in the seed (digest 6.3): recently used large pages stay.

Bun 1.4.4 ships the seed's epoch rule plus `purge_holes_large_floor` (4096 KiB there) and
`purge_holes_large_floor_epochs` (256). The facts, read from a later page.c of the fork: a
large page that the epoch hold does not keep any more (two or more epochs old) still keeps
its free-listed blocks while it was allocated from in the last `floor_epochs` epochs and
while the process-wide total kept that way stays within `floor` bytes; the pages of one
thread's sweep are decided together at the end of its pass, the most recently used first;
a thread's share of the total is given back when its next sweep begins. The unformed tail
is not what stays (it is purged as ever). A page all of whose blocks are free stays by the
same rule instead of going back to the arena, and a page that becomes all free at a free
stays until the next sweep, for up to `floor` bytes per thread between two sweeps.
With `floor` 0 (the default here, and the seed) nothing of this applies.
"""

from __future__ import annotations

from model.epoch import EPOCH_MODULUS
from model.geometry import PageKind
from model.page import Page, is_stamp, stamp_epoch


def compute_floor_age(page: Page, epoch: int, opts) -> int | None:
    """The page's age in epochs when it may stay under the floor: a large page (more than
    one block) stamped by an allocation since it was last walked, younger than
    `purge_holes_large_floor_epochs`; None otherwise."""
    if opts.purge_holes_large_floor <= 0 or page.geom.kind is not PageKind.LARGE:
        return None
    if page.reserved <= 1 or not is_stamp(page.swept_state):
        return None
    age = (epoch - stamp_epoch(page.swept_state)) % EPOCH_MODULUS
    return age if age < opts.purge_holes_large_floor_epochs else None


def compute_floor_bytes(page: Page) -> int:
    """What the floor is about: the blocks on the page's free lists (not its unformed tail,
    nor what is discarded already)."""
    return (len(page.free) + len(page.local_free)) * page.block_size


def mi_holes_floor_take(world, thread, nbytes: int) -> bool:
    """Take `nbytes` of the process-wide floor for `thread`; False when it does not fit."""
    floor = world.options.purge_holes_large_floor
    if nbytes <= 0 or world.floor_kept + nbytes > floor:
        return False
    world.floor_kept += nbytes
    thread.holes_floor_kept += nbytes
    return True


def mi_holes_floor_release(world, thread) -> None:
    """A thread's share of the floor goes back when its next sweep begins."""
    world.floor_kept -= thread.holes_floor_kept
    thread.holes_floor_kept = 0
    thread.holes_free_held = 0


def is_free_page_kept_at_free(world, page: Page, thread) -> bool:
    """The last block of a large page was freed: the page stays (is not retired) until the
    next sweep when the thread is swept at all, the page was allocated from since its last
    walk, and the thread keeps no more than `floor` bytes that way between two sweeps."""
    opts = world.options
    if opts.purge_holes_large_floor <= 0 or not opts.purge_holes or thread is None:
        return False
    if page.geom.kind is not PageKind.LARGE or page.reserved <= 1:
        return False
    if thread.holes_sweep_seq == 0 or not is_stamp(page.swept_state):
        return False
    nbytes = page.capacity * page.block_size
    if thread.holes_free_held + nbytes > opts.purge_holes_large_floor:
        return False
    thread.holes_free_held += nbytes
    return True


def resolve_floor(world, thread, candidates: list[tuple[int, Page]]) -> list[Page]:
    """The end of a thread's pass: the candidates (age, page), youngest first, stay while
    they fit the floor (their unformed tail is purged); returns the ones that did not fit,
    for the sweep to take now."""
    from model.holes import mi_page_purge_unformed_tail
    rest = []
    for _, page in sorted(candidates, key=lambda c: c[0]):
        if mi_holes_floor_take(world, thread, compute_floor_bytes(page)):
            mi_page_purge_unformed_tail(page)
            page.emit("sweep_page", outcome="floor")
        else:
            rest.append(page)
    return rest
