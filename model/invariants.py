"""The invariant registry: every property the checkers hold the model to, stated once.

Each invariant has an id, a one-line statement, the seed clause it comes from, the model
function that implements the rule, and a predicate that returns None when the property holds
and a one-line reason when it does not. Engines (scenarios, proofs, fuzzing, conformance)
cite invariants by id; they never restate them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from itertools import filterfalse
from typing import Any, Callable

from model.geometry import MI_PAGE_PURGE_BITS
from model.page import Page

Predicate = Callable[[Any], "str | None"]


@dataclass(frozen=True)
class Invariant:
    id: str
    statement: str
    clause: str  # the seed's words (or the digest's section) the rule comes from
    implements: str  # the model function that implements the rule
    scope: str  # what the predicate takes: "page", "world", ...
    predicate: Predicate | None = None  # None: checked only by an engine (proof, explorer)


REGISTRY: dict[str, Invariant] = {}

# Modules that register invariants besides the page ones below; load_registry imports them.
INVARIANT_MODULES = [
    "model.epoch_invariants",
    "model.glibc.invariants",
    "model.hold_invariants",
    "model.process_invariants",
    "model.walk_invariants",
]


def load_registry() -> dict[str, Invariant]:
    """The whole registry (importing every module that adds to it)."""
    import importlib
    import sys

    for mod in INVARIANT_MODULES:
        if mod not in sys.modules:  # checked after every step of a machine: keep it cheap
            importlib.import_module(mod)
    return REGISTRY


def invariant(id: str, statement: str, clause: str, implements: str, scope: str = "page"):
    """Register the decorated predicate as invariant `id`."""
    def wrap(fn: Predicate) -> Predicate:
        register(Invariant(id, statement, clause, implements, scope, fn))
        return fn
    return wrap


def register(inv: Invariant) -> Invariant:
    if inv.id in REGISTRY:
        raise ValueError(f"invariant {inv.id} is registered twice")
    REGISTRY[inv.id] = inv
    return inv


def check_world(world, held: "HeldPages | None" = None) -> list[tuple[str, str]]:
    """Every invariant with a predicate over the world, its pages and its epoch: [(id, reason)]
    of those that fail, each with the first subject it fails on.

    With `held` (one per run of a script: the engines check after every op), a page whose
    state is the one every page invariant last held on is not judged again: only the pages
    the op changed are (issue 30, 6). The answer is the full check's (tests/
    test_incremental_check.py runs both after every op of every scenario)."""
    from model.epoch_invariants import EpochView

    view = EpochView(world.epoch, world.options.purge_holes_min_interval,
                     world.options.clock_monotone,
                     [t.last_advance for t in world.threads.values() if t.last_advance],
                     world.fork_children)
    checked = _checked_in_world()
    every_page = list(world.pages.values())
    pages = every_page
    if held is not None:
        pages = held.changed(every_page, checked)
        checked = held.with_kept_sums(checked, every_page, pages)
    subjects = {"page": pages, "world": (world,), "epoch": (view,)}
    out = []
    failed_pages: set[int] = set()  # with `held`: each page is judged by every invariant
    for scope, id, predicate in checked:
        first = None
        for subject in subjects[scope]:
            reason = predicate(subject)
            if reason:
                first = first or reason
                if held is None or scope != "page":
                    break
                failed_pages.add(subject.id)
        if first:
            out.append((id, first))
    if held is not None:
        held.remember([p for p in pages if p.id not in failed_pages])
    return out


class HeldPages:
    """The pages of one world on which every page invariant held when last judged, each with
    its `Page.version` then and the OS pages its written blocks need resident.

    A page invariant is a function of its page's fields and of the residency of those OS
    pages (PG-SURVIVORS-KEEP-BYTES, the only page invariant that reads the memory), so a
    page found again at that version, with those OS pages still resident, holds them all: it
    is not judged again. The version is bumped by every writer of a page field, so "has this
    page changed" is one read; `HeldStates` asks it of every field's value instead, the
    reference tests/test_incremental_check.py holds it to. A page invariant that reads more
    of the memory than that must be added here. Held for one run (the invariants and the
    patched rules do not change in it); a new list of checked invariants starts it again.
    It also keeps the process-wide sums over the pages (`PageSum`) from the pages each op
    changed (`with_kept_sums`); tests/test_incremental_check.py holds each total to its sum
    over every page after every op."""

    def __init__(self) -> None:
        self.checked: list | None = None
        self.marks: dict[int, tuple] = {}  # page id -> (the page, its mark when all held)
        # page id -> written_os_pages in that state; computed when the state is first met
        # again (a page an op changes each time, as a malloc does, never needs it)
        self.needed: dict[int, set[int] | None] = {}
        # The process-wide sums over the pages (PageSum), kept from the pages an op changed
        # rather than summed over every page at every op: the checked list they were started
        # for, that list with each sum judged by its kept total, each page's figures when
        # last counted (page id -> (the page, a figure per sum)), and the totals.
        self.summed: list | None = None
        self.judged: list = []
        self.figures: dict[int, tuple] = {}
        self.totals: list = []
        self.sums: list[PageSum] = []

    @staticmethod
    def mark(page: Page):
        """What tells a page's state from its state when last held."""
        return page.version

    def changed(self, pages: list[Page], checked: list) -> list[Page]:
        """The pages to judge: those not in a state every page invariant held on."""
        if checked is not self.checked:
            self.checked, self.marks, self.needed = checked, {}, {}
        out = []
        mark, marks = self.mark, self.marks
        for page in pages:
            held = marks.get(page.id)
            if held is not None and held[0] is page and held[1] == mark(page):
                needed = self.needed[page.id]
                if needed is None:
                    needed = self.needed[page.id] = written_os_pages(page)
                if needed <= page.mem.resident:
                    continue
            out.append(page)
        return out

    def remember(self, pages: list[Page]) -> None:
        """Every page invariant held on `pages` (all judged, and unchanged since `changed`)."""
        for page in pages:
            self.marks[page.id] = (page, self.mark(page))
            self.needed[page.id] = None

    def with_kept_sums(self, checked: list, every_page: list[Page], changed: list[Page]) -> list:
        """`checked`, each PageSum in it judged by the total kept here. `changed` are the
        pages `changed` returned: any other is at the mark it had when every page invariant
        last held on it, so at the figures it was counted with then (a figure is a function
        of the page's fields, which its writers bump the version for)."""
        if checked is not self.summed:
            sums = [p for _, _, p in checked if isinstance(p, PageSum)]
            kept = {s: k for k, s in enumerate(sums)}
            self.judged = [(scope, id, self._judge_kept(kept[p], p) if p in kept else p)
                           for scope, id, p in checked]
            self.summed, self.sums, self.figures = checked, sums, {}
            self.totals = [0] * len(sums)
            changed = every_page
        figures, totals, parts = self.figures, self.totals, [s.part for s in self.sums]
        for page in changed:
            now = [part(page) for part in parts]
            before = figures.get(page.id)  # when last counted (or another page of its id)
            figures[page.id] = (page, now)
            for k, figure in enumerate(now):
                totals[k] += figure - (before[1][k] if before else 0)
        if len(figures) != len(every_page):  # a page left the world (World.new_page only
            # adds one; should one leave, the totals are counted again)
            self.summed = None
            return self.with_kept_sums(checked, every_page, every_page)
        return self.judged

    def _judge_kept(self, k: int, page_sum: "PageSum") -> Predicate:
        return lambda world: page_sum.judge(world, self.totals[k])


class CountedSum:
    """The predicate of a process-wide counter that equals the sum of its parts' figures
    (model/process_invariants.py): `figures(world)`, the figure of each of its `whose`."""

    def __init__(self, name: str, counter: Callable[[Any], int], whose: str,
                 figures: Callable[[Any], Any]) -> None:
        self.name, self.counter, self.whose, self.figures = name, counter, whose, figures

    def __call__(self, world) -> str | None:
        return self.judge(world, sum(self.figures(world)))

    def judge(self, world, total: int) -> str | None:
        counted = self.counter(world)
        if counted != total:
            return f"the process counts {counted} {self.name}, its {self.whose} {total}"
        return None


class PageSum(CountedSum):
    """A counter that sums one figure of each page, `part(page)`. Called on the world it
    sums every page (the reference, and the full check); check_world with a HeldPages judges
    it by the total the HeldPages keeps from the pages each op changed: summing every page at
    every op costs in proportion to the world's pages (a scenario's few pages cost as little
    as keeping the total; a script's 207 pages a fifth of the check: docs/guide.md section 8,
    the twelfth round)."""

    def __init__(self, name: str, counter: Callable[[Any], int],
                 part: Callable[[Page], int]) -> None:
        super().__init__(name, counter, "pages", lambda w: map(part, w.pages.values()))
        self.part = part


class HeldStates(HeldPages):
    """The reference: a page's state rebuilt from every field's value (`page_state`) at each
    check, as the incremental check did before `Page.version` (a fifth of a quick scenarios
    run). It sees a change whichever writer made it."""

    mark = staticmethod(lambda page: page_state(page))


# What a page's state is made of, field by field: the memory is the world's (its residency is
# judged through written_os_pages), the log is the world's event list and the version says
# that the others changed; lists and sets are taken as values; any other field must be of a
# type whose values do not change in place.
_PAGE_SKIPPED = ("mem", "log", "version")
_AS_VALUE = {list: tuple, set: frozenset, dict: lambda d: tuple(d.items())}
_IMMUTABLE: set = {int, float, bool, str, type(None), tuple, frozenset}


def page_state(page: Page) -> tuple:
    """Every field of the page a page invariant may read, as values (a TypeError names a
    field of a type that may change in place: say here how it is taken)."""
    out = []
    for name, value in vars(page).items():
        if name in _PAGE_SKIPPED:
            continue
        kind = type(value)
        as_value = _AS_VALUE.get(kind)
        if as_value is not None:
            value = as_value(value)
        elif kind not in _IMMUTABLE:
            params = getattr(kind, "__dataclass_params__", None)
            if not (params and params.frozen or issubclass(kind, Enum)):
                raise TypeError(f"page field {name!r} is a {kind.__name__}, which may change "
                                f"in place: model.invariants.page_state cannot tell")
            _IMMUTABLE.add(kind)
        out.append(value)
    return tuple(out)


def _checked_in_world() -> list[tuple[str, str, Predicate]]:
    """(scope, id, predicate) of the invariants check_world runs, in registry order; rebuilt
    when the registry grows (it is checked after every step of a machine: the filter is not
    redone each time)."""
    registry = load_registry()
    if _CHECKED[0] != len(registry):
        _CHECKED[1] = [(inv.scope, inv.id, inv.predicate) for inv in registry.values()
                       if inv.predicate is not None and inv.scope in WORLD_SCOPES]
        _CHECKED[0] = len(registry)
    return _CHECKED[1]


WORLD_SCOPES = ("page", "world", "epoch")  # the subjects check_world builds
_CHECKED: list = [-1, []]  # (registry size when built, what check_world runs)


def check_page(page: Page) -> list[tuple[str, str]]:
    """Every page invariant on one page: [(id, reason)] of those that fail."""
    out = []
    for inv in REGISTRY.values():
        if inv.scope == "page" and inv.predicate is not None:
            reason = inv.predicate(page)
            if reason:
                out.append((inv.id, reason))
    return out


# -- page invariants (seed 000, change (1); digest sections 1-4) ---------------------------

@invariant("PG-UNIT",
           "The purge unit is the smallest power-of-two multiple of the OS page for which the "
           "block area needs at most 256 bits; bit k names unit k from align_down(page_start, "
           "unit).",
           "seed 000 (1): \"mi_page_purge_unit(page) is the OS page where the block area of "
           "the page then needs at most MI_PAGE_PURGE_BITS bits, and else the smallest "
           "power-of-two multiple of the OS page for which it does\"",
           "model.geometry.compute_purge_unit")
def unit_rule(page: Page) -> str | None:
    # Computed here from the seed's words, never with the functions under test.
    g, u = page.geom, page.units
    if u.unit % g.os_page_size or (u.unit & (u.unit - 1)):
        return f"unit {u.unit} is not a power-of-two multiple of the OS page {g.os_page_size}"
    if u.base % u.unit or not 0 <= g.page_start - u.base < u.unit:
        return f"unit base {u.base:#x} is not align_down(page_start {g.page_start:#x}, {u.unit})"

    def bits(unit: int) -> int:
        base = g.page_start - g.page_start % unit
        return -(-(g.area_end - base) // unit)

    if u.bits != bits(u.unit):
        return f"the bitmap spans {u.bits} units, the block area {bits(u.unit)}"
    if g.reserved > 1 and bits(u.unit) > MI_PAGE_PURGE_BITS:
        return f"the block area needs {bits(u.unit)} units of {u.unit} > {MI_PAGE_PURGE_BITS}"
    if u.unit > g.os_page_size and bits(u.unit // 2) <= MI_PAGE_PURGE_BITS:
        return f"unit {u.unit} is not the smallest: {u.unit // 2} needs at most 256 bits"
    return None


@invariant("PG-DISCARD-INSIDE",
           "A unit is discarded only if it lies wholly inside [page_start, page_start + "
           "capacity*block_size).",
           "seed 000 (1): \"A unit that is not wholly inside [page_start, page_start + "
           "capacity*block_size) is never discarded\"",
           "model.holes.is_unit_todo")
def discard_inside(page: Page) -> str | None:
    for k in page.purged_units():
        if not page.units.is_unit_inside_blocks(k, page.capacity):
            lo, hi = page.units.unit_range(k)
            return f"unit {k} [{lo:#x},{hi:#x}) is discarded but not inside the formed blocks"
    return None


@invariant("PG-DISCARD-ALL-FREE",
           "A unit is discarded only when every block that overlaps it is free: no block the "
           "program holds overlaps a discarded unit.",
           "seed 000 (1): \"a unit is discarded only when it lies wholly inside the block area "
           "and every block that overlaps it is free (mi_page_purge_holes_walk)\"",
           "model.holes.is_unit_todo")
def discard_all_free(page: Page) -> str | None:
    for k in page.purged_units():
        for i in page.units.blocks_of_unit(k, page.capacity):
            if i in page.handed_out:
                return f"unit {k} is discarded while block {i} overlapping it is live"
    return None


@invariant("PG-PURGED-IFF-OVERLAP",
           "A block is purged exactly when it overlaps a discarded unit: every formed block is "
           "live, listed, or overlaps a discarded unit, and the blocks-off count says how many "
           "overlap one.",
           "seed 000 (1): \"a block is purged exactly when it overlaps a discarded unit\"",
           "model.holes.mi_page_purge_holes_walk")
def purged_iff_overlap(page: Page) -> str | None:
    purged = page.purged_blocks()
    if page.discarded_blocks != len(purged):
        return f"blocks-off count {page.discarded_blocks} != {len(purged)} blocks overlapping " \
               f"discarded units"
    # checked after every op: the lists are read into one set, compared without a set of all
    known = page.handed_out.union(page.free, page.local_free, page.xthread_free, purged)
    if not known.issuperset(range(page.capacity)):
        lost = set(range(page.capacity)) - known
        return f"blocks {sorted(lost)[:8]} are neither live, listed nor purged"
    return None


@invariant("PG-PURGED-OFF-LISTS",
           "A purged block is on no free list (free, local_free, xthread_free).",
           "seed 000 (1): \"a purged block is off every free list until _mi_page_unpurge_run "
           "brings its run back\"",
           "model.holes.rebuild_free_list")
def purged_off_lists(page: Page) -> str | None:
    if not page.purged:  # no unit discarded: no block is purged (the common case, cheaply)
        return None
    for name in ("free", "local_free", "xthread_free"):
        for i in getattr(page, name):
            if page.is_block_purged(i):
                return f"purged block {i} is on {name}"
    return None


@invariant("PG-COUNT",
           "used + (blocks on free and local_free) + (purged blocks) == capacity.",
           "digest 1: \"Counting invariant (asserted in debug builds): used + (blocks on free "
           "lists) + (purged blocks) == capacity\"",
           "model.alloc.mi_page_free_collect")
def counting(page: Page) -> str | None:
    # Blocks on xthread_free still count in `used` until a collect (as in the real code).
    total = page.used + len(page.free) + len(page.local_free) + len(page.purged_blocks())
    if total != page.capacity:
        return f"used {page.used} + free {len(page.free)} + local_free " \
               f"{len(page.local_free)} + purged {len(page.purged_blocks())} != capacity " \
               f"{page.capacity}"
    return None


@invariant("PG-LIVE-NOT-FREE",
           "No block is both live and free, and no block is on the free lists twice.",
           "seed 000 (1) tests: \"no block handed out twice\"",
           "model.alloc.mi_page_malloc")
def live_not_free(page: Page) -> str | None:
    listed = page.listed_blocks()
    if len(listed) != len(set(listed)):
        return "a block is on the free lists twice"
    both = page.handed_out & set(listed)
    if both:
        return f"blocks {sorted(both)[:8]} are live and on a free list"
    return None


@invariant("PG-SURVIVORS-KEEP-BYTES",
           "A live block the program wrote keeps every byte: all of its OS pages stay "
           "resident (no discard ever reaches a survivor).",
           "seed 000 tests: \"the survivors keep every byte\"",
           "model.holes.mi_page_purge_holes_walk")
def survivors_keep_bytes(page: Page) -> str | None:
    # Checked after every op of every scenario: the block is named only on failure.
    if is_every_written_os_page_resident(page):
        return None
    for i in page.written:
        for p in page.mem.os_pages(page.geom.block_addr(i), page.block_size):
            if p not in page.mem.resident:
                return f"live block {i} lost OS page {p:#x} to a discard"
    raise AssertionError("unreachable: an OS page of a written block is not resident")


def is_every_written_os_page_resident(page: Page) -> bool:
    """`written_os_pages(page) <= resident`, asked the cheaper way round where the formed
    blocks span fewer OS pages than the program wrote blocks (small blocks): a written block
    lies among the formed ones, so only the formed area's OS pages that are not resident can
    have lost its bytes, and only the blocks on those are looked up."""
    written, resident = page.written, page.mem.resident
    if not written:
        return True
    start, size, os_page = page.geom.page_start, page.block_size, page.mem.os_page_size
    area = range(start // os_page, (start + page.capacity * size - 1) // os_page + 1)
    if not (len(area) < len(written) and min(written) >= 0 and max(written) < page.capacity):
        return written_os_pages(page) <= resident
    if resident.issuperset(area):
        return True
    for p in filterfalse(resident.__contains__, area):
        # the blocks on OS page p: from the one holding its first byte to its last byte's
        if not written.isdisjoint(range((p * os_page - start) // size,
                                        ((p + 1) * os_page - 1 - start) // size + 1)):
            return False
    return True


def written_os_pages(page: Page) -> set[int]:
    """The OS pages the blocks the program wrote lie on."""
    start, size, os_page = page.geom.page_start, page.block_size, page.mem.os_page_size
    if size <= os_page:  # a block touches at most two OS pages: its first and its last
        needed = {(start + i * size) // os_page for i in page.written}
        if os_page % size or start % size:  # else no block crosses an OS page's end
            needed.update((start + i * size + size - 1) // os_page for i in page.written)
    else:
        needed = set()
        for i in page.written:
            addr = start + i * size
            needed.update(range(addr // os_page, (addr + size - 1) // os_page + 1))
    return needed


@invariant("PG-FREE-IS-ZERO-CLEARED",
           "free_is_zero is false after every purge and unpurge.",
           "seed 000 (1): \"page->free_is_zero is cleared on every purge and un-purge\"",
           "model.holes.rebuild_free_list")
def free_is_zero_cleared(page: Page) -> str | None:
    if page.ever_purged and page.free_is_zero:
        return "free_is_zero is true after a purge or unpurge"
    return None


@invariant("PG-ACCOUNTING",
           "The discarded-bytes accounting equals the discarded units times the unit.",
           "seed 000 (1): \"the discarded-bytes accounting returns to where it was\"",
           "model.holes.mi_page_purge_holes_walk")
def accounting(page: Page) -> str | None:
    expect = len(page.purged_units()) * page.unit
    if page.discarded_bytes != expect:
        return f"discarded bytes {page.discarded_bytes} != {expect}"
    return None


@invariant("PG-UNPURGE-ALL-RESETS",
           "After unpurge-all (the page went back to the arena) nothing is counted as "
           "discarded and no bit is set.",
           "seed 000 (1): \"mi_heap_destroy, mi_heap_delete and a page that becomes free all "
           "go through _mi_page_unpurge_all, so the discarded-bytes accounting returns to "
           "where it was\"",
           "model.holes.mi_page_unpurge_all")
def unpurge_all_resets(page: Page) -> str | None:
    if page.retired and (page.purged or page.discarded_bytes or page.discarded_blocks
                         or page.unformed_purged_hi > page.unformed_purged_lo):
        return f"retired page still counts {page.discarded_bytes} bytes discarded"
    return None


@invariant("PG-HUGE-NEVER-PURGE",
           "A page that cannot purge holes (huge: one block, pinned, bits > 256) never has a "
           "unit discarded.",
           "seed 000 (1): \"Huge pages are singletons and stay out\"",
           "model.geometry.mi_page_can_purge_holes")
def huge_never_purge(page: Page) -> str | None:
    g = page.geom
    ineligible = g.reserved <= 1 or g.pinned or g.custom_commit or page.units.bits > MI_PAGE_PURGE_BITS
    if ineligible and (page.purged or page.discarded_bytes):
        return f"page of kind {page.geom.kind.value} (reserved {page.reserved}) has " \
               f"discarded units"
    return None


@invariant("AL-REALLOC-MOVES",
           "A realloc keeps the block in place exactly when the new size fits the block and is "
           "at least half of it, and moves it otherwise (a shrink below half moves to a smaller "
           "class: keeping it would be memory-safe and would keep the large block's bytes).",
           "seed 000 tests: \"mi_realloc shrinking in place and moving between classes next "
           "to holes\"; digest 11: realloc shrink in place and moves next to holes",
           "model.heap.is_realloc_in_place", scope="world")
def realloc_moves(world) -> str | None:
    if world.last_realloc is None:
        return None
    size, block_size, in_place = world.last_realloc
    want = block_size // 2 <= size <= block_size  # the seed's rule, not the model's function
    if in_place != want:
        return f"a realloc to {size} bytes of a {block_size}-byte block " \
               f"{'stayed in place' if in_place else 'moved'}"
    return None
