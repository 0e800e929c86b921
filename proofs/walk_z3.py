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

import z3

from proofs.core import Claim, Outcome, Proof, Twin, run_claims, val
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


def run_walk_proof(quick: bool, broken: str = "") -> Outcome:
    return run_claims(walk_claims(broken), render_walk,
                      "any capacity, unit count, overlap relation, free, held and purged sets")


PROOF = Proof("walk", ("PG-DISCARD-INSIDE", "PG-DISCARD-ALL-FREE", "PG-PURGED-IFF-OVERLAP",
                       "PG-PURGED-OFF-LISTS"), "z3", run_walk_proof,
              "one holes walk keeps the page invariants, on any page")
TWINS = [
    Twin(NEXT_TO_LIVE, "walk", ("PG-DISCARD-ALL-FREE",), "z3",
         lambda quick: run_walk_proof(quick, NEXT_TO_LIVE),
         "todo looks only at blocks wholly inside the unit, not at one that straddles it"),
    Twin(OUTSIDE_AREA, "walk", ("PG-DISCARD-INSIDE",), "z3",
         lambda quick: run_walk_proof(quick, OUTSIDE_AREA),
         "todo does not require the unit to lie inside the formed blocks"),
]
