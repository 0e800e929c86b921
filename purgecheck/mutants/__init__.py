"""Named mutants: small broken copies of one rule each, applied without editing any file.

A mutant replaces one function of the model (or one entry of a dispatch table) for the
duration of a `with applied(mutant):` block. The replacement is bound in every module that
imported the original, except the invariant modules: the judges are never mutated. Each
mutant names the invariants expected to catch it, and the suite shows that they do.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from model import alloc, holes


@dataclass(frozen=True)
class Patch:
    module: str  # e.g. "model.holes"
    attr: str  # attribute, or dict name when `key` is set
    replacement: Any
    key: Any = None  # patch `module.attr[key]` instead of `module.attr`


@dataclass(frozen=True)
class Mutant:
    name: str
    description: str
    catches: tuple[str, ...]  # invariant ids expected to report it
    patches: tuple[Patch, ...]
    c_switch: str | None = None  # the C reference's run-time switch for the same mutant
    # True when the broken rule only shows under preemption between atomic steps: the
    # sequential engines (scenarios, virtual-clock conformance) cannot see it; the
    # interleaving explorer and the validation of concurrent C runs do.
    needs_concurrency: bool = False


MUTANTS: dict[str, Mutant] = {}


def mutant(name: str, description: str, catches: tuple[str, ...], *patches: Patch,
           c_switch: str | None = None, needs_concurrency: bool = False) -> Mutant:
    if name in MUTANTS:
        raise ValueError(f"mutant {name} defined twice")
    m = Mutant(name, description, catches, tuple(patches), c_switch, needs_concurrency)
    MUTANTS[name] = m
    return m


TRACE_INVARIANT = "CF-TRACE-EQUAL"  # what the conformance engine reports a C mutant under


def is_c_trace_mutant(m: Mutant) -> bool:
    """A mutant with a run-time switch in the C reference that shows without preemption: its
    C trace must differ from the clean model's on some scenario (a race cannot, on the
    virtual clock: the validate and sanitizers engines judge those)."""
    return m.c_switch is not None and not m.needs_concurrency


def _is_judge(modname: str) -> bool:
    """Invariant modules judge the mutant; this module keeps the originals it wraps."""
    return modname.endswith("invariants") or modname == __name__


@contextlib.contextmanager
def applied(m: Mutant | None) -> Iterator[None]:
    """Apply mutant `m` (None: nothing) and undo it on exit, even after an exception."""
    undo: list[Callable[[], None]] = []
    # (original, replacement, where the replacement was bound already) per function patch
    swapped: list[tuple[Any, Any, set[tuple[str, str]]]] = []
    try:
        for p in (m.patches if m else ()):
            mod = importlib.import_module(p.module)
            if p.key is not None:
                table = getattr(mod, p.attr)
                old = table[p.key]
                table[p.key] = p.replacement
                undo.append(lambda t=table, k=p.key, o=old: t.__setitem__(k, o))
                continue
            original = getattr(mod, p.attr)
            swapped.append((original, p.replacement, _bindings(p.replacement)))
            for other in _patchable_modules():
                for attr, val in list(vars(other).items()):
                    if val is original:
                        setattr(other, attr, p.replacement)
                        undo.append(lambda o=other, a=attr, v=val: setattr(o, a, v))
        yield
    finally:
        for u in reversed(undo):
            u()
        # A module first imported inside the block bound the replacement with its own
        # `from ... import`; nothing above recorded that, so put the original back there too.
        for original, replacement, before in reversed(swapped):
            for name, attr in _bindings(replacement) - before:
                setattr(sys.modules[name], attr, original)


def _project_modules() -> list:
    """The loaded modules of this project."""
    return [other for name, other in list(sys.modules.items()) if other is not None
            and name.split(".")[0] in ("model", "purgecheck", "proofs", "stateful_tests")]


def _patchable_modules() -> list:
    """The modules whose names a mutant rebinds: all but the judges."""
    return [other for other in _project_modules() if not _is_judge(other.__name__)]


def _bindings(obj: Any) -> set[tuple[str, str]]:
    """(module, attribute) of every module attribute of this project bound to `obj`."""
    return {(other.__name__, attr) for other in _project_modules()
            for attr, val in list(vars(other).items()) if val is obj}


# -- page mutants (seed 000, change (1)) ------------------------------------------------

def _rebuild_keeps_purged(page, todo):
    """Broken: the purged blocks stay on the free list."""
    page.free_is_zero = False
    page.ever_purged = True
    return [i for i in page.free if any(k in todo for k in page.units.units_of_block(i))]


def _rebuild_keeps_free_is_zero(page, todo):
    """Broken: free_is_zero is not cleared by a purge."""
    zero = page.free_is_zero
    dropped = _original_rebuild_free_list(page, todo)
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

# Mutants of other parts of the model register themselves from their own modules.
import purgecheck.mutants.catalogue.hold  # noqa: E402,F401


# -- page mutants added with the page test suite ------------------------------------------

_original_mi_page_malloc = alloc.mi_page_malloc


def _malloc_head_kept(page, zero=False):
    """Broken: the head of the free list is handed out but the list is not advanced, so the
    block is live and free at once (and is handed out again by the next malloc)."""
    i = _original_mi_page_malloc(page, zero)
    if i is not None:
        page.free.insert(0, i)
    return i


mutant("malloc-head-kept", "malloc hands out the head of the free list without popping it",
       ("PG-LIVE-NOT-FREE", "PG-COUNT"),
       Patch("model.alloc", "mi_page_malloc", _malloc_head_kept))

import purgecheck.mutants.catalogue.glibc  # noqa: E402,F401  the glibc model's mutants (seed 001)
import purgecheck.mutants.catalogue.shadow  # noqa: E402,F401  mutants that only the fuzz machines catch
import purgecheck.mutants.catalogue.epoch  # noqa: E402,F401  the advance mutants the explorer finds
import purgecheck.mutants.catalogue.sanitizers  # noqa: E402,F401  C mutants only a sanitizer build reports
import purgecheck.mutants.catalogue.strace  # noqa: E402,F401  glibc mutants only strace conformance sees
