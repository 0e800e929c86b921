"""Z3: the holes walk is sound (seed 000, (1); digest section 3).

The walk is stated over any page: any capacity, any number of units, any overlap relation
between blocks and units (PF-UNIT-MAP proves that the model's ranges are exactly the
overlapping blocks, so the walk's loops over `blocks_of_unit` / `units_of_block` are loops
over this relation), any free set, any held set and any bits already set. From a page where
the page invariants hold, one walk (step 2: todo units; step 3: drop the blocks over them;
step 4: set the bits) leaves a page where they hold again:
  PG-DISCARD-INSIDE     a discarded unit lies inside the formed blocks;
  PG-DISCARD-ALL-FREE   no held block overlaps a discarded unit;
  PG-PURGED-IFF-OVERLAP every formed block is exactly one of held, listed, purged, and the
                        blocks dropped from the list are exactly the newly purged ones;
  PG-PURGED-OFF-LISTS   no purged block is listed.
"""

from __future__ import annotations

import time

import z3

from proofs import agreement
from proofs.core import DIFFERS, Claim, Outcome, Proof, Twin, run_claims, val
from proofs.steptable import render_facts

NEXT_TO_LIVE = "unit-next-to-live"  # purgecheck.mutants: only blocks wholly inside are looked at
OUTSIDE_AREA = "unit-outside-area"  # purgecheck.mutants: the unit need not be inside


class Z3Logic:
    """The connectives of the walk's steps over Z3 terms, blocks and units unbounded."""

    And, Or, Not, Implies = staticmethod(z3.And), staticmethod(z3.Or), \
        staticmethod(z3.Not), staticmethod(z3.Implies)

    def __init__(self, capacity, bits) -> None:
        self.capacity, self.bits = capacity, bits

    def formed(self, i):
        return z3.And(i >= 0, i < self.capacity)

    def unit(self, k):
        return z3.And(k >= 0, k < self.bits)

    def every_formed(self, body):
        j = z3.Int("j")
        return z3.ForAll([j], z3.Implies(self.formed(j), body(j)))

    def some_unit(self, body):
        k = z3.Int("k")
        return z3.Exists([k], z3.And(self.unit(k), body(k)))


class PyLogic:
    """The same connectives over Python values, for one concrete page (the agreement)."""

    def __init__(self, capacity: int, bits: int) -> None:
        self.capacity, self.bits = capacity, bits

    And = staticmethod(lambda *xs: all(xs))
    Or = staticmethod(lambda *xs: any(xs))
    Not = staticmethod(lambda x: not x)
    Implies = staticmethod(lambda a, b: (not a) or b)

    def formed(self, i):
        return 0 <= i < self.capacity

    def unit(self, k):
        return 0 <= k < self.bits

    def every_formed(self, body):
        return all(body(j) for j in range(self.capacity))

    def some_unit(self, body):
        return any(body(k) for k in range(self.bits))


def step_todo(L, k, bit, in_area, looked_at, listed, purged):
    """Digest 3, step 2: unit k is to do when its bit is clear, it lies inside the formed
    blocks, and every formed block looked at (overlapping it) is listed or already purged."""
    return L.And(L.unit(k), L.Not(bit(k)), in_area(k),
                 L.every_formed(lambda j: L.Implies(looked_at(j, k),
                                                    L.Or(listed(j), purged(j)))))


def step_listed_after(L, i, listed, ov, todo):
    """Step 3: a listed block stays listed unless it overlaps a unit to do."""
    return L.And(listed(i), L.Not(L.some_unit(lambda k: L.And(ov(i, k), todo(k)))))


def step_bit_after(L, k, bit, todo):
    """Step 4: the bits of the units to do are set."""
    return L.Or(bit(k), todo(k))


def walk_claims(broken: str = "") -> list[Claim]:
    Z, B = z3.IntSort(), z3.BoolSort()
    cap, nbits = z3.Ints("capacity bits")
    ov = z3.Function("overlaps", Z, Z, B)  # block i meets unit k
    wholly = z3.Function("wholly_inside", Z, Z, B)  # block i lies inside unit k
    inside = z3.Function("unit_inside_formed_blocks", Z, B)
    free = z3.Function("listed", Z, B)  # on free (the caller folded local/xthread in)
    held = z3.Function("held", Z, B)  # the program holds it (ghost)
    bit = z3.Function("bit_before", Z, B)
    pb = z3.Function("purged_before", Z, B)
    todo = z3.Function("todo", Z, B)
    bit2 = z3.Function("bit_after", Z, B)
    pb2 = z3.Function("purged_after", Z, B)
    free2 = z3.Function("listed_after", Z, B)
    i, k, j = z3.Ints("i k j")
    L = Z3Logic(cap, nbits)
    formed, unit = L.formed, L.unit

    # The unit a block straddles is looked at by the real walk; the broken one looks only at
    # blocks wholly inside the unit (wholly-inside blocks overlap, not conversely).
    looked_at = wholly if broken == NEXT_TO_LIVE else ov
    in_area = (lambda x: True) if broken == OUTSIDE_AREA else inside  # noqa: E731
    defs = [
        cap >= 1, nbits >= 1,
        z3.ForAll([i, k], z3.Implies(wholly(i, k), ov(i, k))),
        # a block is purged exactly when it overlaps a discarded unit (the model's definition)
        z3.ForAll([i], pb(i) == z3.Exists([k], z3.And(unit(k), ov(i, k), bit(k)))),
        z3.ForAll([i], pb2(i) == z3.Exists([k], z3.And(unit(k), ov(i, k), bit2(k)))),
        # steps 2, 3 and 4 (the same functions the agreement runs on the model's pages)
        z3.ForAll([k], todo(k) == step_todo(L, k, bit, in_area, looked_at, free, pb)),
        z3.ForAll([i], free2(i) == step_listed_after(L, i, free, ov, todo)),
        z3.ForAll([k], bit2(k) == step_bit_after(L, k, bit, todo)),
    ]
    pre = [
        z3.ForAll([k], z3.Implies(bit(k), z3.And(unit(k), inside(k)))),
        z3.ForAll([i, k], z3.Implies(z3.And(formed(i), unit(k), bit(k), ov(i, k)),
                                     z3.Not(held(i)))),
        z3.ForAll([i], z3.Implies(formed(i), z3.And(
            z3.Or(held(i), free(i), pb(i)), z3.Not(z3.And(held(i), free(i))),
            z3.Not(z3.And(held(i), pb(i))), z3.Not(z3.And(free(i), pb(i)))))),
    ]
    hyps = defs + pre + [formed(i), unit(k)]
    return [
        Claim("PG-DISCARD-INSIDE: a discarded unit lies inside the formed blocks", hyps,
              z3.Implies(bit2(k), inside(k))),
        Claim("PG-DISCARD-ALL-FREE: no held block overlaps a discarded unit", hyps,
              z3.Implies(z3.And(bit2(k), ov(i, k)), z3.Not(held(i)))),
        Claim("PG-PURGED-OFF-LISTS: no purged block is listed", hyps,
              z3.Not(z3.And(free2(i), pb2(i)))),
        Claim("PG-PURGED-IFF-OVERLAP: each formed block is held, listed or purged, and the "
              "dropped blocks are exactly the newly purged ones", hyps,
              z3.And(z3.Or(held(i), free2(i), pb2(i)),
                     (z3.And(free(i), z3.Not(free2(i)))) == z3.And(pb2(i), z3.Not(pb(i))))),
    ]


def yn(b: bool) -> str:
    return "yes" if b else "no"


def render_walk(claim: Claim, model: z3.ModelRef) -> str:
    i, k = z3.Int("i"), z3.Int("k")
    f = lambda name, *args: val(model, z3.Function(  # noqa: E731
        name, *([z3.IntSort()] * len(args)), z3.BoolSort())(*args))
    facts = [("capacity", val(model, z3.Int("capacity"))), ("units", val(model, z3.Int("bits"))),
             ("block i", val(model, i)), ("unit k", val(model, k)),
             ("block i overlaps unit k", f("overlaps", i, k)),
             ("block i wholly inside unit k", f("wholly_inside", i, k)),
             ("block i held by the program", f("held", i)),
             ("block i listed before / after", f"{yn(f('listed', i))} / {yn(f('listed_after', i))}"),
             ("unit k inside the formed blocks", f("unit_inside_formed_blocks", k)),
             ("unit k bit before / todo / after",
              f"{yn(f('bit_before', k))} / {yn(f('todo', k))} / {yn(f('bit_after', k))}")]
    return render_facts(facts, "counterexample page (one walk):")


# The pages on which the walk's steps are compared with the model's walk before Z3 proves
# them: small pages on 4 KiB units, blocks smaller than, equal to, straddling and larger than
# the unit, block 0 at the page start or 192 bytes in, the first WALK_CAPACITY blocks formed;
# every set of blocks held at a first walk and every subset of it still held at a second one.
WALK_BLOCK_SIZES = (1024, 3000, 4096, 5120, 6144, 12288)
WALK_OFFSETS = (0, 192)
WALK_CAPACITY = 5


def _page(block_size: int, offset: int):
    from model.geometry import PageGeometry, PageKind
    from model.memory import Memory
    from model.page import Page

    geom = PageGeometry(PageKind.SMALL, block_size, first_block_offset=offset,
                        slice_start=1 << 22)
    return Page(id=1, geom=geom, mem=Memory(4096))


def _steps_on(page) -> tuple[set, set, int]:
    """The proof's steps 2-4 on the page as it is: (units to do, blocks listed after, bits
    after). The relations are the model's (PF-UNIT-MAP proves them the overlap)."""
    L = PyLogic(page.capacity, page.units.bits)
    listed = set(page.free)
    ov = lambda i, k: k in page.units.units_of_block(i)  # noqa: E731
    bit = page.is_unit_purged
    in_area = lambda k: page.units.is_unit_inside_blocks(k, page.capacity)  # noqa: E731
    todo = {k for k in range(L.bits) if step_todo(L, k, bit, in_area, ov, listed.__contains__,
                                                   page.is_block_purged)}
    after = {i for i in range(L.capacity) if step_listed_after(L, i, listed.__contains__, ov,
                                                               todo.__contains__)}
    bits = sum(1 << k for k in range(L.bits) if step_bit_after(L, k, bit, todo.__contains__))
    return todo, after, bits


def walk_agrees() -> Outcome | None:
    """The steps against model.holes.mi_page_purge_holes_walk (looked up now) on every page
    of the domain: the same units discarded, the same blocks left listed, the same bits."""
    import itertools

    from model import holes

    t0 = time.perf_counter()
    n = 0
    for bs, off in itertools.product(WALK_BLOCK_SIZES, WALK_OFFSETS):
        for held1 in range(1 << WALK_CAPACITY):
            for held2 in (h for h in range(1 << WALK_CAPACITY) if h & ~held1 == 0):
                page = _page(bs, off)
                page.capacity = WALK_CAPACITY
                for held in (held1, held2):
                    page.free += [i for i in range(WALK_CAPACITY) if not held >> i & 1
                                  and i not in page.free and not page.is_block_purged(i)]
                    page.relist()
                    page.handed_out = {i for i in range(WALK_CAPACITY) if held >> i & 1}
                    page.used = len(page.handed_out)
                    want = _steps_on(page)
                    before = page.purged
                    holes.mi_page_purge_holes_walk(page)
                    n += 1
                    got = (set(range(page.units.bits)) & {k for k in range(page.units.bits)
                                                          if (page.purged & ~before) >> k & 1},
                           set(page.free), page.purged)
                    if got != want:
                        return Outcome(DIFFERS, f"{n:,} walks compared",
                                       f"the walk of a page of {bs}-byte blocks at offset "
                                       f"{off}, blocks held {sorted(page.handed_out)}: the model "
                                       f"discards units {sorted(got[0])} and leaves {sorted(got[1])} "
                                       f"listed, the proof's steps {sorted(want[0])} and "
                                       f"{sorted(want[1])}", time.perf_counter() - t0)
    return None


def _walks() -> int:
    return len(WALK_BLOCK_SIZES) * len(WALK_OFFSETS) * 3 ** WALK_CAPACITY * 2


def run_walk_proof(quick: bool, broken: str = "") -> Outcome:
    def prove() -> Outcome:
        return run_claims(walk_claims(broken), render_walk,
                          "any capacity, unit count, overlap relation, free, held and purged "
                          "sets")
    if broken:  # the broken steps are not the model's: Z3 must refute them by itself
        return prove()
    return agreement.then_prove(walk_agrees, f"{_walks():,} walks of small pages", prove)


PROOF = Proof("walk", ("PG-DISCARD-INSIDE", "PG-DISCARD-ALL-FREE", "PG-PURGED-IFF-OVERLAP",
                       "PG-PURGED-OFF-LISTS"), "z3", run_walk_proof,
              "one holes walk keeps the page invariants, on any page")
TWINS = [
    # the model's own walk broken: its steps no longer equal the proof's, the proof fails
    Twin("walk-model-next-to-live", "walk", ("PG-DISCARD-ALL-FREE",), "z3", run_walk_proof,
         "mutant unit-next-to-live: the model's todo looks only at blocks wholly inside",
         mutant="unit-next-to-live"),
    Twin("walk-model-outside-area", "walk", ("PG-DISCARD-INSIDE",), "z3", run_walk_proof,
         "mutant unit-outside-area: the model's todo takes units outside the formed blocks",
         mutant="unit-outside-area"),
    Twin(NEXT_TO_LIVE, "walk", ("PG-DISCARD-ALL-FREE",), "z3",
         lambda quick: run_walk_proof(quick, NEXT_TO_LIVE),
         "todo looks only at blocks wholly inside the unit, not at one that straddles it"),
    Twin(OUTSIDE_AREA, "walk", ("PG-DISCARD-INSIDE",), "z3",
         lambda quick: run_walk_proof(quick, OUTSIDE_AREA),
         "todo does not require the unit to lie inside the formed blocks"),
]
