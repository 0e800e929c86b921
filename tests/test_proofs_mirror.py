"""The Z3 mirror of the page arithmetic computes what model/geometry.py computes, on a grid
and on random geometries; under a mutant of the model it no longer does (so the comparison
can fail). The advance transition of the Z3 proof admits every edge of the explorer's graph,
which runs the model's own steps."""

from __future__ import annotations

import random

import pytest
import z3

from model import geometry as g
from proofs import advance_z3 as az
from proofs import mirror
from proofs import explorer as X
from purgecheck.mutants import MUTANTS, applied


def geometries(n: int, seed: int = 7):
    rnd = random.Random(seed)
    for _ in range(n):
        arch = rnd.choice([g.ARCH64, g.ARCH32])
        os_page = rnd.choice(g.OS_PAGE_SIZES)
        size = arch.arena_slice_size * rnd.randint(1, arch.large_page_size // arch.arena_slice_size)
        offset = rnd.choice([0, 192, 4096, rnd.randint(0, size // 4)])
        bs = rnd.randint(8, max(8, (size - offset) // rnd.choice([1, 2, 7, 40, 300])))
        start = arch.arena_slice_size * rnd.randint(0, 1 << 20)
        yield g.PageGeometry(g.PageKind.LARGE, bs, os_page, arch, offset, start, size)


def sym(geom: g.PageGeometry, cap: int) -> mirror.SymGeometry:
    iv = z3.IntVal
    return mirror.SymGeometry(geom.arch, geom.os_page_size, iv(geom.slice_start),
                              iv(geom.area_size), iv(geom.first_block_offset),
                              iv(geom.block_size), iv(cap))


def mismatches(count: int) -> list:
    out = []
    for geom in geometries(count):
        if geom.reserved < 1:
            continue
        cap = geom.reserved
        s = sym(geom, cap)
        um = g.UnitMap.of(geom)
        u = mirror.concrete(mirror.purge_unit(s))
        if (u, mirror.concrete(mirror.unit_base(s, u)),
                mirror.concrete(mirror.purge_bits(s, u))) != (um.unit, um.base, um.bits):
            out.append(geom)
            continue
        for k in {0, um.bits // 2, um.bits - 1}:
            ne, first, last = mirror.blocks_of_unit(s.page_start, s.block_size,
                                                    z3.IntVal(um.base), z3.IntVal(um.unit),
                                                    z3.IntVal(k), z3.IntVal(cap))
            r = um.blocks_of_unit(k, cap)
            got = range(mirror.concrete(first), mirror.concrete(last) + 1) \
                if mirror.concrete(ne) else range(0)
            if list(got) != list(r):
                out.append((geom, k))
        for i in {0, cap // 2, cap - 1}:
            lo, hi = mirror.units_of_block(s.page_start, s.block_size, z3.IntVal(um.base),
                                           z3.IntVal(um.unit), z3.IntVal(i))
            if range(mirror.concrete(lo), mirror.concrete(hi)) != um.units_of_block(i):
                out.append((geom, i))
    return out


def test_mirror_computes_what_the_model_computes():
    assert mismatches(300) == []


def test_mirror_comparison_catches_a_broken_model():
    with applied(MUTANTS["unit-os-page"]):
        assert mismatches(300), "the mirror agreed with a model whose unit never doubles"


def edge_admitted(s: tuple, ns: tuple, sw: tuple, sw2: tuple, broken: str = "") -> bool:
    step = az.encoded_step(s[:5], sw, 3, X.Config("x", 1).spin_max, broken)
    return az.admits(step, s, ns, sw2)


@pytest.mark.parametrize("mutant,broken", [(None, ""), ("no-cas-exclusion", az.NO_CAS),
                                           ("start-before-increment", az.START_BEFORE)])
def test_z3_advance_transition_admits_every_step_the_model_takes(mutant, broken):
    """Every sweeper step of the explorer (the model's advance_step, without reductions)
    from a sample of reachable states is a step of the Z3 encoding, for the real advance
    and for each broken one with its mutant applied."""
    from dataclasses import replace
    cfg = replace(X.Config("bare-2", 2), reduce_dead=False, clock_bound=7)
    rnd = random.Random(1)
    checked = 0
    with applied(MUTANTS[mutant] if mutant else None):
        X.ep.spin_max, old = cfg.spin_max, X.ep.spin_max
        try:
            seen, frontier = {X.initial_state(cfg)}, [X.initial_state(cfg)]
            while frontier and checked < 400:
                s = frontier.pop(rnd.randrange(len(frontier)))
                for n, sw in enumerate(s[5]):
                    if sw == X.IDLE:
                        continue
                    sw2, st, _ = X.step_sweeper(cfg, s, sw)
                    ns = X.with_epoch(s, st)
                    assert edge_admitted(s, ns, sw, sw2, broken), (s, sw, sw2)
                    checked += 1
                for _, ns, _ in X.successors(cfg, s):
                    if ns not in seen and len(seen) < 5000:
                        seen.add(ns)
                        frontier.append(ns)
        finally:
            X.ep.spin_max = old
    assert checked >= 200


def test_the_advance_proof_compares_its_transition_with_the_model_first():
    """The proof's own first step (every step of a small configuration, exhaustively) fails
    under a mutant of the model's advance."""
    assert az.transition_agrees() is None
    for mutant in ("no-cas-exclusion", "start-before-increment"):
        with applied(MUTANTS[mutant]):
            out = az.transition_agrees()
        assert out is not None and out.status == "differs", mutant
