"""Hole purging inside one page: the walk, unpurge, and the unformed tail (digest 3-4).

Seed 000, change (1): "a unit is discarded only when it lies wholly inside the block area
and every block that overlaps it is free (mi_page_purge_holes_walk), a block is purged
exactly when it overlaps a discarded unit, a purged block is off every free list until
_mi_page_unpurge_run brings its run back".
"""

from __future__ import annotations

from dataclasses import dataclass

from model.page import MI_PAGE_SWEPT_NONE, Page, encode_walked


@dataclass(frozen=True)
class WalkResult:
    complete: bool
    runs: tuple[tuple[int, int], ...]  # discarded runs of units [k0, k1)
    dropped_blocks: int


@dataclass(frozen=True)
class HolesWalkGhost:
    """Ghost record of a page's last holes walk: the free list (head first) and the bitmap
    before and after it, for the invariants that judge what the walk did (model.walk_invariants)
    without calling the rules they judge."""

    free_before: tuple[int, ...]
    purged_before: int
    free_after: tuple[int, ...]
    purged_after: int
    complete: bool
    capacity: int


def compute_runs(units: list[int]) -> list[tuple[int, int]]:
    """Maximal runs [k0, k1) of consecutive unit indices, lowest first."""
    runs: list[tuple[int, int]] = []
    for k in sorted(units):
        if runs and runs[-1][1] == k:
            runs[-1] = (runs[-1][0], k + 1)
        else:
            runs.append((k, k + 1))
    return runs


def is_unit_todo(page: Page, k: int, free_set: set[int]) -> bool:
    """Digest section 3, step 2: bit clear, wholly inside the formed blocks, and every
    overlapping block free (free-listed, or purged through a discarded neighbour unit)."""
    if page.is_unit_purged(k):
        return False
    if not page.units.is_unit_inside_blocks(k, page.capacity):
        return False
    return all(i in free_set or page.is_block_purged(i)
               for i in page.units.blocks_of_unit(k, page.capacity))


def rebuild_free_list(page: Page, todo: set[int]) -> list[int]:
    """Step 3: drop the blocks that overlap a todo unit; the rebuild pushes each kept block
    on a new head, which reverses their order. Clears free_is_zero. Returns the dropped."""
    kept: list[int] = []
    dropped: list[int] = []
    for i in page.free:
        if any(k in todo for k in page.units.units_of_block(i)):
            dropped.append(i)
        else:
            kept.insert(0, i)
    page.version += 1
    page.free = kept
    page.on_lists.difference_update(dropped)
    page.free_is_zero = False
    page.ever_purged = True
    return dropped


def count_discarded(page: Page, units: int, blocks: int) -> None:
    """The discard accounting: bytes (units * unit) and blocks off, up or down."""
    page.version += 1
    page.discarded_bytes += units * page.unit
    page.discarded_blocks += blocks
    page.mem.holes.count_discarded(units * page.unit, blocks)


def todo_units(page: Page, free_set: set[int]) -> set[int]:
    """Step 2 over the whole page: every unit is_unit_todo accepts.

    The rule is is_unit_todo, unit by unit; asked that way it cost a third of a simulated
    load (every unit of every page walked at every sweep). So while is_unit_todo is the
    model's own, the same set comes from the live blocks in one pass: a unit that is not
    purged and lies inside the formed blocks is todo exactly when no block overlapping it is
    live (neither free-listed nor purged). A replaced is_unit_todo (a mutant) is asked unit
    by unit. tests/test_walk_todo.py checks the two agree at every walk."""
    if is_unit_todo is not _MODEL_RULE[0]:
        return {k for k in range(page.units.bits) if is_unit_todo(page, k, free_set)}
    units, capacity = page.units, page.capacity
    kept = page.purged | live_units_mask(page, free_set)
    return {k for k in range(units.bits)
            if not kept >> k & 1 and units.is_unit_inside_blocks(k, capacity)}


def live_units_mask(page: Page, free_set: set[int]) -> int:
    """A bit per unit that a live block overlaps: a formed block neither free-listed nor
    purged (through a discarded unit it overlaps)."""
    units, mask = page.units, 0
    for i in range(page.capacity):
        if i not in free_set and not page.is_block_purged(i):
            r = units.units_of_block(i)
            lo, hi = max(r.start, 0), min(r.stop, units.bits)
            if lo < hi:
                mask |= ((1 << (hi - lo)) - 1) << lo
    return mask


# The rule as the model states it, in a tuple: a mutant's patch (purgecheck.mutants.patching)
# rebinds every module name bound to the function it replaces, and this one must stay.
_MODEL_RULE = (is_unit_todo,)


def mi_page_purge_holes_walk(page: Page) -> WalkResult:
    """Discard every unit whose blocks are all free, one discard per run (digest 3).

    The caller has folded local_free and xthread_free into free (a collect that does not
    unpurge). A complete walk overwrites swept_state with (capacity, used), which replaces an
    allocation stamp (digest 9.1).
    """
    free_before, purged_before = tuple(page.free), page.purged
    free_set = set(page.free)
    page.mem.holes.blocks_visited += len(free_set)
    todo = todo_units(page, free_set)
    runs = compute_runs(list(todo))
    complete = True
    dropped_total = 0
    if todo:
        dropped = rebuild_free_list(page, todo)
        for k in todo:
            page.purged |= 1 << k
        count_discarded(page, len(todo), len(dropped))
        dropped_total = len(dropped)
        for k0, k1 in runs:
            lo, hi = page.run_of_units(k0, k1)
            ok = page.mem.discard(lo, hi - lo)
            page.emit("discard", k0=k0, k1=k1, addr=lo, size=hi - lo, ok=ok)
            if not ok:
                # Digest 3, step 4: the failed run is un-purged again, without reuse.
                complete = False
                dropped_total -= mi_page_unpurge_range(page, k0, k1, reuse=False)
    if complete:
        mark_walked(page)
    # `free`: the list as the walk leaves it, head first: the rebuild's order decides which
    # block the next malloc takes (which units come back first), so the trace carries it.
    page.emit("walk", complete=complete, runs=[list(r) for r in runs],
              dropped=dropped_total, free=list(page.free))
    page.version += 1  # the bits set above, and the ghost
    page.holes_walk = HolesWalkGhost(free_before, purged_before, tuple(page.free), page.purged,
                                     complete, page.capacity)
    return WalkResult(complete, tuple(runs), dropped_total)


def mark_walked(page: Page) -> None:
    """Digest 3, step 5: a complete walk sets swept_state = (capacity, used), replacing an
    allocation stamp (so a page only freed into after a walk has no hold, digest 9.1)."""
    page.version += 1
    page.swept_state = encode_walked(page.capacity, page.used)


def mi_page_unpurge_range(page: Page, k0: int, k1: int, reuse: bool = True) -> int:
    """Bring units k0..k1-1 back: clear the bits, set swept_state to NONE, push back (in
    descending index order) each block of the range that no longer overlaps a discarded
    unit, writing its link; clear free_is_zero. Returns the number of blocks pushed back."""
    mask = 0
    for k in range(k0, k1):
        mask |= 1 << k
    cleared = page.purged & mask
    if not cleared:
        return 0
    before = set()
    for k in range(k0, k1):
        if cleared >> k & 1:
            before.update(page.units.blocks_of_unit(k, page.capacity))
    page.version += 1
    page.purged &= ~mask
    page.swept_state = MI_PAGE_SWEPT_NONE
    back = sorted((i for i in before if not page.is_block_purged(i)), reverse=True)
    for i in back:
        page.free.insert(0, i)
        page.on_lists.add(i)
        page.mem.touch(page.geom.block_addr(i), 1)  # the link in the block's first word
    count_discarded(page, -bin(cleared).count("1"), -len(back))
    if reuse:
        page.mem.holes.reuse_calls += 1
    else:  # a failed discard undone: those bytes were never given back
        page.mem.holes.purged_bytes_total -= bin(cleared).count("1") * page.unit
    page.free_is_zero = False
    page.ever_purged = True
    page.emit("unpurge", k0=k0, k1=k1, reuse=reuse, blocks=len(back))
    return len(back)


def mi_page_unpurge_run(page: Page) -> int:
    """_mi_page_unpurge_run: the lowest maximal run of set bits. Only the allocation path
    calls it, when the free list is empty and no sweep has the page (digest 4)."""
    runs = compute_runs(page.purged_units())
    if not runs:
        return 0
    return mi_page_unpurge_range(page, *runs[0])


def mi_page_unpurge_all(page: Page) -> None:
    """_mi_page_unpurge_all: the page goes back to the arena. Reuse every run and the tail,
    reset the bitmap and the accounting, rebuild nothing (digest 4)."""
    runs = compute_runs(page.purged_units())
    holes = page.mem.holes
    holes.count_discarded(-page.discarded_bytes, -page.discarded_blocks)
    tail = page.unformed_purged_hi - page.unformed_purged_lo
    holes.unformed_bytes -= max(0, tail)
    holes.reuse_calls += len(runs) + (tail > 0)
    page.version += 1
    page.purged = 0
    page.discarded_bytes = 0
    page.discarded_blocks = 0
    page.unformed_purged_lo = page.unformed_purged_hi = 0
    page.swept_state = MI_PAGE_SWEPT_NONE
    page.free_is_zero = False
    page.emit("unpurge_all", runs=[list(r) for r in runs])


def compute_unformed_tail(page: Page) -> tuple[int, int]:
    """OS-page-aligned byte range wholly inside the unformed tail [capacity, reserved)."""
    lo = page.geom.block_addr(page.capacity)
    hi = page.geom.area_end
    pages = page.mem.os_pages_inside(lo, hi - lo)
    if not pages:
        return 0, 0
    return pages.start * page.mem.os_page_size, pages.stop * page.mem.os_page_size


def mi_page_purge_unformed_tail(page: Page) -> bool:
    """Discard the unformed tail by its own OS-page-granular mechanism (digest 3).
    Returns True when something was discarded now."""
    lo, hi = compute_unformed_tail(page)
    if hi <= lo or (page.unformed_purged_lo, page.unformed_purged_hi) == (lo, hi):
        return False
    ok = page.mem.discard(lo, hi - lo)
    page.emit("discard_tail", addr=lo, size=hi - lo, ok=ok)
    if ok:
        old = max(0, page.unformed_purged_hi - page.unformed_purged_lo)
        page.mem.holes.unformed_bytes += (hi - lo) - old
        page.version += 1
        page.unformed_purged_lo, page.unformed_purged_hi = lo, hi
    return ok


def mi_page_reuse_unformed_tail(page: Page, upto: int | None = None) -> None:
    """Bring the tail back before mi_page_extend_free writes into it: all of it, or with
    `upto` (an address) only the OS pages below it, the rest staying discarded (the v3 fork's
    _mi_page_unpurge_unformed_upto, called on exactly the range the extend formats)."""
    lo, hi = page.unformed_purged_lo, page.unformed_purged_hi
    if upto is not None and hi > lo:
        ps = page.mem.os_page_size
        end = min(hi, -(-upto // ps) * ps)
        if end <= lo:
            return  # nothing of the discarded tail is formed yet
        if end < hi:
            page.mem.holes.reuse_calls += 1
            page.mem.holes.unformed_bytes -= end - lo
            page.emit("reuse_tail", addr=lo, size=end - lo)
            page.version += 1
            page.unformed_purged_lo = end
            return
    if page.unformed_purged_hi > page.unformed_purged_lo:
        page.mem.holes.reuse_calls += 1
        page.mem.holes.unformed_bytes -= page.unformed_purged_hi - page.unformed_purged_lo
        page.emit("reuse_tail", addr=page.unformed_purged_lo,
                  size=page.unformed_purged_hi - page.unformed_purged_lo)
    if page.unformed_purged_lo or page.unformed_purged_hi:
        page.version += 1
        page.unformed_purged_lo = page.unformed_purged_hi = 0
