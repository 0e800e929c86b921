"""Mutants of the page rules (seed 000, change (1)): the unit, the holes walk, unpurge, the
free lists and the accounting; most have a twin in the C reference (`c_switch`).
"""

from __future__ import annotations

from model import alloc, holes
from purgecheck.mutants.patching import Patch, mutant

# -- page mutants (seed 000, change (1)) ------------------------------------------------

def _rebuild_keeps_purged(page, todo):
    """Broken: the purged blocks stay on the free list."""
    page.version += 1  # a mutant breaks the rule, not the incremental check
    page.free_is_zero = False
    page.ever_purged = True
    return [i for i in page.free if any(k in todo for k in page.units.units_of_block(i))]


def _rebuild_keeps_free_is_zero(page, todo):
    """Broken: free_is_zero is not cleared by a purge."""
    zero = page.free_is_zero
    dropped = _original_rebuild_free_list(page, todo)
    page.version += 1
    page.free_is_zero = zero
    return dropped


_original_rebuild_free_list = holes.rebuild_free_list


def _todo_ignores_neighbours(page, k, free_set):
    """Broken: only blocks wholly inside the unit must be free; a block that straddles the
    unit's edge is not looked at (a unit next to a live block goes)."""
    if page.is_unit_purged(k) or not page.units.is_unit_inside_blocks(k, page.capacity):
        return False
    lo, hi = page.units.unit_range(k)
    inside = [i for i in page.units.blocks_of_unit(k, page.capacity)
              if page.geom.block_addr(i) >= lo and page.geom.block_addr(i + 1) <= hi]
    return all(i in free_set or page.is_block_purged(i) for i in inside)


def _todo_outside_area(page, k, free_set):
    """Broken: the unit need not lie inside the formed blocks."""
    if page.is_unit_purged(k):
        return False
    return all(i in free_set or page.is_block_purged(i)
               for i in page.units.blocks_of_unit(k, page.capacity))


def _unpurge_all_skipped(page):
    """Broken: the page goes back to the arena with its bits and accounting."""


def _unit_at_os_page(geom):
    """Broken: the large-page unit is left at the OS page (the seed's starting point)."""
    return geom.os_page_size


def _base_not_aligned(geom, unit):
    """Broken: units counted from page_start itself, not align_down(page_start, unit)."""
    return geom.page_start


def _double_free_absorbed(page, i):
    """Broken: a free of a block that is not live is taken as a free."""


def _accounting_skipped(page, units, blocks):
    """Broken: discards and unpurges are not counted."""


def _can_purge_huge(geom):
    """Broken: huge pages (one block) qualify."""
    return not geom.pinned and not geom.custom_commit


mutant("purged-left-on-list", "a purged block is left on the free list",
       ("PG-PURGED-OFF-LISTS", "PG-COUNT"),
       Patch("model.holes", "rebuild_free_list", _rebuild_keeps_purged),
       c_switch="purged_left_on_list")
mutant("free-is-zero-kept", "free_is_zero is not cleared on purge",
       ("PG-FREE-IS-ZERO-CLEARED",),
       Patch("model.holes", "rebuild_free_list", _rebuild_keeps_free_is_zero),
       c_switch="free_is_zero_kept")
mutant("unit-next-to-live", "a unit is discarded next to a live block that straddles it",
       ("PG-DISCARD-ALL-FREE", "PG-SURVIVORS-KEEP-BYTES"),
       Patch("model.holes", "is_unit_todo", _todo_ignores_neighbours),
       c_switch="unit_next_to_live")
mutant("unit-outside-area", "a unit not wholly inside the formed blocks is discarded",
       ("PG-DISCARD-INSIDE",),
       Patch("model.holes", "is_unit_todo", _todo_outside_area),
       c_switch="unit_outside_area")
mutant("unpurge-all-skipped", "unpurge-all is skipped when a page goes back to the arena",
       ("PG-UNPURGE-ALL-RESETS",),
       Patch("model.holes", "mi_page_unpurge_all", _unpurge_all_skipped),
       c_switch="unpurge_all_skipped")
mutant("unit-os-page", "the large-page unit is left at the OS page",
       ("PG-UNIT",),
       Patch("model.geometry", "compute_purge_unit", _unit_at_os_page),
       c_switch="unit_os_page")
mutant("unit-base-unaligned", "the unit base is page_start, not aligned down",
       ("PG-UNIT",),
       Patch("model.geometry", "compute_unit_base", _base_not_aligned),
       c_switch="unit_base_unaligned")
mutant("double-free-absorbed", "a double free is absorbed instead of reported",
       ("PG-PURGED-OFF-LISTS",),
       Patch("model.alloc", "check_free", _double_free_absorbed),
       c_switch="double_free_absorbed")
mutant("huge-purges", "huge pages (one block) are allowed to purge holes",
       ("PG-HUGE-NEVER-PURGE",),
       Patch("model.geometry", "mi_page_can_purge_holes", _can_purge_huge),
       c_switch="huge_purges")
mutant("accounting-skipped", "the discard accounting is not updated",
       ("PG-ACCOUNTING", "PG-PURGED-IFF-OVERLAP"),
       Patch("model.holes", "count_discarded", _accounting_skipped),
       c_switch="accounting_skipped")

# -- page mutants added with the page test suite ------------------------------------------

_original_mi_page_malloc = alloc.mi_page_malloc


def _malloc_head_kept(page, zero=False):
    """Broken: the head of the free list is handed out but the list is not advanced, so the
    block is live and free at once (and is handed out again by the next malloc)."""
    i = _original_mi_page_malloc(page, zero)
    if i is not None:
        page.version += 1
        page.free.insert(0, i)
        page.on_lists.add(i)
    return i


mutant("malloc-head-kept", "malloc hands out the head of the free list without popping it",
       ("PG-LIVE-NOT-FREE", "PG-COUNT"),
       Patch("model.alloc", "mi_page_malloc", _malloc_head_kept))

# -- the order of the free list (issue 20: the traces and the comparison see order) -------------


def _rebuild_keeps_order(page, todo):
    """Broken: the walk's rebuild keeps the kept blocks in their order (appends each one)
    instead of pushing each on a new head, which reverses them (digest 3, step 3). Which
    block is handed out next changes: which units come back first and which stay discarded."""
    dropped = _original_rebuild_free_list(page, todo)
    page.version += 1
    page.free.reverse()
    return dropped


mutant("rebuild-keeps-order", "the holes walk rebuilds the free list in its old order, "
                              "not reversed",
       ("PG-WALK-REVERSES",),
       Patch("model.holes", "rebuild_free_list", _rebuild_keeps_order),
       c_switch="rebuild_keeps_order")


_original_is_unit_todo = holes.is_unit_todo


def _purged_straddler_live(page, k, free_set):
    """Broken: a block that straddles the unit's edge and is already purged (through its
    other unit) counts as live, so the unit next to it never goes although every block
    overlapping it is free."""
    lo, hi = page.units.unit_range(k)
    for i in page.units.blocks_of_unit(k, page.capacity):
        inside = page.geom.block_addr(i) >= lo and page.geom.block_addr(i + 1) <= hi
        if i not in free_set and not inside:
            return False
    return _original_is_unit_todo(page, k, free_set)


mutant("purged-straddler-live", "the walk counts an already-purged block that straddles the "
       "unit as live", ("PG-WALK-TAKES-EVERY-FREE-UNIT",),
       Patch("model.holes", "is_unit_todo", _purged_straddler_live),
       c_switch="purged_straddler_live")
