"""Invariants of what one holes walk does to a page's free list and bitmap (digest 3).

Their predicates judge the ghost record of the page's last walk (`page.holes_walk`, a
model.holes.HolesWalkGhost: the free list and the bitmap before and after it) from the
digest's words, never by calling the rules they judge (is_unit_todo, rebuild_free_list).
A walk a discard failed in (digest 3, step 4: the run is un-purged and its blocks pushed
back) is not judged here; PG-PURGED-IFF-OVERLAP and PG-PURGED-OFF-LISTS judge what it left.
"""

from __future__ import annotations

from model.invariants import invariant
from model.page import Page


# A walk's record never changes once made and is judged after every later step until the
# next walk replaces it: each verdict is kept by the record's identity (the record itself is
# kept with it, so that the id is not reused while the entry lives).
_VERDICTS: dict[tuple[str, int], tuple[object, str | None]] = {}


def _judged(name: str, page: Page, judge) -> str | None:
    g = page.holes_walk
    if g is None or not g.complete:
        return None
    hit = _VERDICTS.get((name, id(g)))
    if hit is not None and hit[0] is g:
        return hit[1]
    if len(_VERDICTS) > 4096:
        _VERDICTS.clear()
    reason = judge(page, g)
    _VERDICTS[(name, id(g))] = (g, reason)
    return reason


def _overlaps(page: Page, i: int, bitmap: int) -> bool:
    """Block i overlaps a unit whose bit is set in `bitmap`."""
    return any(bitmap >> k & 1 for k in page.units.units_of_block(i))


@invariant("PG-WALK-REVERSES",
           "A walk that discards units rebuilds the free list from the blocks it keeps, each "
           "pushed on a new head, so they come out in the reverse of their order before the "
           "walk; a walk that discards nothing leaves the list as it was.",
           "digest 3, step 3: \"rebuild the free list from the kept blocks, pushing each on "
           "the head\" (the order decides which block the next malloc takes, which units come "
           "back first and which stay discarded)",
           "model.holes.rebuild_free_list")
def walk_reverses(page: Page) -> str | None:
    return _judged("reverses", page, _reverses)


def _reverses(page: Page, g) -> str | None:
    new = g.purged_after & ~g.purged_before
    if new:
        want = tuple(reversed([i for i in g.free_before if not _overlaps(page, i, new)]))
    else:
        want = g.free_before
    if g.free_after != want:
        return f"page {page.id}: the walk left the free list {list(g.free_after)[:8]}, " \
               f"expected {list(want)[:8]} (the kept blocks of {list(g.free_before)[:8]}" \
               f"{' reversed' if new else ' unchanged'})"
    return None


@invariant("PG-WALK-TAKES-EVERY-FREE-UNIT",
           "A complete walk discards every unit that lies wholly inside the formed blocks and "
           "whose every overlapping block was free before it: on the free list, or already "
           "purged through a unit discarded before (a block straddling two units).",
           "digest 3, step 2: a unit is to do when its bit is clear, it lies wholly inside "
           "the formed blocks and every block overlapping it is free-listed or purged",
           "model.holes.is_unit_todo")
def walk_takes_every_free_unit(page: Page) -> str | None:
    return _judged("takes", page, _takes_every_free_unit)


def _takes_every_free_unit(page: Page, g) -> str | None:
    free = set(g.free_before)
    for k in range(page.units.bits):
        if g.purged_after >> k & 1 or not page.units.is_unit_inside_blocks(k, g.capacity):
            continue
        blocks = page.units.blocks_of_unit(k, g.capacity)
        if all(i in free or _overlaps(page, i, g.purged_before) for i in blocks):
            return f"page {page.id}: unit {k} (blocks {blocks.start}..{blocks.stop - 1}, all " \
                   f"free or purged) was left by a complete walk"
    return None
