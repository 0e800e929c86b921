"""Proofs about glibc's trim rules (seed 001): the RFC's counters and condition, the 2.23+ rule.

Z3 proves the C-level facts over the real bit widths (uint16 counters, int arithmetic of the
ratio, 64-bit size_t of heap_trim); an exhaustive walk of the counters' whole reachable
domain ties the model's functions (model.glibc.trim) to the same closed forms; CrossHair
checks the model's 2.23+ rule against its contract. Each has a broken twin that must be
refuted: the ratio compared with `<=`, the counters not halved, the threshold check dropped.
`purgecheck prove` calls `run_proofs(quick)` and `run_mutant_proofs(quick, apply_mutant=...)`.
"""

from __future__ import annotations

import time
from typing import Callable, ContextManager

import z3

from model.glibc import trim
from proofs import agreement
from proofs.core import (PROVED, REFUTED, Claim, Outcome, Proof, Twin, proof_result,
                         run_claims, val)
from proofs.results import Result

DECAY = 100
PAGE = 4096
MINSIZE = 32


# -- the RFC's counters in C: uint16, halved at 100 -----------------------------------------

M, L = z3.BitVecs("event_madvise event_large_malloc", 16)


def counter_steps(halve: bool = True) -> dict[str, tuple]:
    """The counters after a shrink request and after a heap growth, in C's uint16."""
    m, l = M, L

    def decay(cond, m1, l1):
        if not halve:
            return m1, l1
        return z3.If(cond, z3.LShR(m1, 1), m1), z3.If(cond, z3.LShR(l1, 1), l1)

    m1 = m + 1  # ++h->mt.event_madvise
    l1 = z3.If(m != 0, l + 1, l)  # ++old_heap->mt.event_large_malloc while M != 0
    return {"shrink": decay(z3.UGE(m1, DECAY), m1, l),
            "growth": decay(z3.And(m != 0, z3.UGE(l1, DECAY)), m, l1)}


def _counter_claims(halve: bool) -> list[Claim]:
    """M, L < 100 is inductive over a shrink request and a growth (and trivially a reset)."""
    m, l = M, L
    hyps = [z3.ULT(m, DECAY), z3.ULT(l, DECAY)]
    steps = counter_steps(halve)
    m1, (ms, ls), (mg, lg) = m + 1, steps["shrink"], steps["growth"]
    l1 = z3.If(m != 0, l + 1, l)
    shrink = z3.And(z3.UGT(m1, m), z3.ULT(ms, DECAY), z3.ULT(ls, DECAY), ms != 0)
    grow = z3.And(z3.UGE(l1, l), z3.ULT(mg, DECAY), z3.ULT(lg, DECAY))
    small = [m == DECAY - 1, l == 0]
    return [Claim("a shrink request keeps both counters in 0..99 (no wrap, divisor != 0)",
                  hyps, shrink, small),
            Claim("a heap growth keeps both counters in 0..99 (no wrap)", hyps, grow,
                  [m == 1, l == DECAY - 1])]


def _render_counters(c: Claim, model: z3.ModelRef) -> str:
    values = {d.name(): model[d].as_long() for d in model.decls()}
    return f"from {values}: the counter reaches {DECAY} and is not halved; it counts on to " \
           f"65535 and wraps to 0, and then `/ h->mt.event_madvise` divides by zero"


COUNTER_DOMAIN = [(m, l) for m in range(DECAY) for l in range(DECAY)]  # every (M, L) < 100


def counters_agree() -> Outcome | None:
    """The encoded steps against model.glibc.trim's rfc_count_shrink / rfc_count_growth
    (looked up now) from every (M, L) in 0..99 x 0..99."""
    steps = counter_steps()
    # the four 16-bit results as one 64-bit term: one evaluation per point
    packed = z3.Concat(*steps["shrink"], *steps["growth"])

    def encoded(p):
        v = agreement.substituted(packed, [(M, p[0]), (L, p[1])])
        ms, ls, mg, lg = (v >> (48 - 16 * n) & 0xFFFF for n in range(4))
        return (ms, ls), (mg, lg)

    def modelled(p):
        out = []
        for count in (trim.rfc_count_shrink, trim.rfc_count_growth):
            mt = trim.MadviseThrottle(*p)
            count(mt)
            out.append((mt.event_madvise, mt.event_large_malloc))
        return tuple(out)
    return agreement.compare("the counters after a shrink and a growth", COUNTER_DOMAIN,
                             encoded, modelled)


def rfc_counters(halve: bool):
    def run(quick: bool) -> Outcome:
        def prove() -> Outcome:
            return run_claims(_counter_claims(halve), _render_counters, "uint16, inductive")
        if not halve:  # the broken encoding is not the model's: Z3 must refute it alone
            return prove()
        return agreement.then_prove(counters_agree, "every (M, L) < 100", prove)
    return run


# -- the RFC's ratio test in C: int arithmetic, exactly the seed's intent ------------------

def ratio_test(strict: bool = True):
    """`ratio = (L + 1) * 100 / M; ratio < 100 && L > 1` in C's int arithmetic."""
    m32, l32 = z3.ZeroExt(16, M), z3.ZeroExt(16, L)
    ratio = z3.UDiv((l32 + 1) * 100, m32)  # (L + 1) * 100 / M, values >= 0
    return z3.And(z3.ULT(ratio, 100) if strict else z3.ULE(ratio, 100), z3.UGT(L, 1))


def _ratio_claims(strict: bool) -> list[Claim]:
    m, l = M, L
    test = ratio_test(strict)
    closed = z3.And(z3.UGE(l, 2), z3.UGE(m, l + 2))
    # after `++event_madvise` (and the halving) M is 1..99 and L 0..99: GL-RFC-UINT16
    hyps = [z3.UGE(m, 1), z3.ULT(m, DECAY), z3.ULT(l, DECAY)]
    return [Claim("ratio < 100 && L > 1  <=>  L >= 2 && M >= L + 2", hyps, test == closed,
                  [m == 3, l == 2])]


def _render_ratio(c: Claim, model: z3.ModelRef) -> str:
    values = {d.name(): model[d].as_long() for d in model.decls()}
    m, l = values.get("event_madvise", 0), values.get("event_large_malloc", 0)
    return f"M={m}, L={l}: ratio = {(l + 1) * 100 // max(m, 1)}; the test madvises although " \
           f"growths and shrinks balance (M = L + 1): a static heap is not deferred"


RATIO_DOMAIN = [(m, l) for m in range(1, DECAY) for l in range(DECAY)]  # after ++M


def ratio_agrees() -> Outcome | None:
    """The encoded test against model.glibc.trim.rfc_ratio_allows (looked up now) at every
    (M, L) the shrink path can see: M in 1..99, L in 0..99."""
    test = ratio_test()
    return agreement.compare(
        "the ratio test", RATIO_DOMAIN,
        lambda p: agreement.substituted(test, [(M, p[0]), (L, p[1])]),
        lambda p: trim.rfc_ratio_allows(trim.MadviseThrottle(*p)))


def rfc_condition(strict: bool):
    def run(quick: bool) -> Outcome:
        def prove() -> Outcome:
            return run_claims(_ratio_claims(strict), _render_ratio, "32-bit int arithmetic")
        if not strict:
            return prove()
        return agreement.then_prove(ratio_agrees, "every M in 1..99, L in 0..99", prove)
    return run


# -- the model's functions over the counters' whole reachable domain -----------------------

def rfc_model_exhaustive(quick: bool) -> Outcome:
    """Every (M, L) in 0..99 x 0..99 through the model's rfc_count_shrink, rfc_count_growth
    and rfc_ratio_allows (looked up at call time, so a mutant is what runs)."""
    t0 = time.perf_counter()
    cases = 0
    for m in range(DECAY):
        for l in range(DECAY):
            for event in ("shrink", "growth"):
                cases += 1
                mt = trim.MadviseThrottle(m, l)
                (trim.rfc_count_shrink if event == "shrink" else trim.rfc_count_growth)(mt)
                m1, l1 = mt.event_madvise, mt.event_large_malloc
                if not (0 <= m1 < DECAY and 0 <= l1 < DECAY):
                    return Outcome(REFUTED, f"{cases} states", f"from M={m}, L={l} a {event} "
                                   f"gives M={m1}, L={l1}: outside 0..99 (GL-RFC-UINT16)",
                                   time.perf_counter() - t0)
                if event == "shrink":
                    closed = l1 >= 2 and m1 >= l1 + 2
                    if trim.rfc_ratio_allows(mt) != closed:
                        return Outcome(REFUTED, f"{cases} states",
                                       f"M={m1}, L={l1}: rfc_ratio_allows says "
                                       f"{not closed}, the seed's condition {closed} "
                                       f"(GL-RFC-CONDITION)", time.perf_counter() - t0)
    return Outcome(PROVED, f"all {cases} reachable states", "", time.perf_counter() - t0)


# -- the 2.23+ rule: C over 64-bit size_t, and the model's function with CrossHair ---------

TOP, PAD, THR = z3.BitVecs("top_size pad trim_threshold", 64)


def heap_trim_terms(threshold_check: bool = True) -> tuple:
    """(shrinks, extra) of heap_trim in C over 64-bit size_t."""
    top, pad, thr = TOP, PAD, THR
    top_area = top - (MINSIZE + 1)  # long top_area = top_size - MINSIZE - 1
    stop = z3.Or(top_area < 0, z3.ULE(top_area, pad))  # top_area < 0 || top_area <= pad
    if threshold_check:
        stop = z3.Or(z3.ULT(top, thr), stop)
    extra = (top_area - pad) & ~z3.BitVecVal(PAGE - 1, 64)  # ALIGN_DOWN(top_area - pad, page)
    return z3.And(z3.Not(stop), extra != 0), extra


def _trim_claims(threshold_check: bool) -> list[Claim]:
    top, pad, thr = TOP, PAD, THR
    shrinks, extra = heap_trim_terms(threshold_check)

    def wide(x):
        return z3.ZeroExt(2, x)

    goal = z3.Implies(shrinks, z3.And(
        z3.UGE(top, thr),
        z3.URem(extra, PAGE) == 0,
        z3.ULE(extra, top),
        z3.UGE(wide(top) - wide(extra), wide(pad) + MINSIZE + 1)))
    hyps = [z3.URem(top, 16) == 0]  # a chunk size
    return [Claim("2.23+: a shrink implies top >= trim_threshold, whole pages, pad kept",
                  hyps, goal, [pad == 0, z3.ULT(top, 1 << 20), z3.ULT(thr, 1 << 20)])]


def _render_trim(c: Claim, model: z3.ModelRef) -> str:
    values = {d.name(): model[d].as_long() for d in model.decls()}
    return f"{values}: the heap is shrunk although its top chunk is below trim_threshold"


# every top chunk size (a multiple of 16) up to three pages and a bit, with pads and
# thresholds around a page
TRIM_DOMAIN = [(top, pad, thr) for top in range(0, 3 * PAGE + 64, 16)
               for pad in (0, 16, PAGE) for thr in (0, PAGE, 2 * PAGE)]


def trim_agrees() -> Outcome | None:
    """The encoded heap_trim against model.glibc.trim.heap_trim_extra_2_23 (looked up now):
    the bytes given back (0: none) at every point of TRIM_DOMAIN."""
    shrinks, extra = heap_trim_terms()
    term = z3.If(shrinks, extra, z3.BitVecVal(0, 64))
    return agreement.compare(
        "heap_trim's extra", TRIM_DOMAIN,
        lambda p: agreement.substituted(term, list(zip((TOP, PAD, THR), p))),
        lambda p: trim.heap_trim_extra_2_23(*p))


def trim_floor(threshold_check: bool):
    def run(quick: bool) -> Outcome:
        def prove() -> Outcome:
            return run_claims(_trim_claims(threshold_check), _render_trim, "64-bit size_t")
        if not threshold_check:
            return prove()
        return agreement.then_prove(trim_agrees, f"{len(TRIM_DOMAIN):,} (top, pad, threshold)",
                                    prove)
    return run


def heap_trim_2_23_contract(top_size: int, pad: int, trim_threshold: int) -> int:
    """The model's 2.23+ rule (looked up at call time, so a mutant is what is checked).

    pre: 0 <= top_size < 2**48 and top_size % 16 == 0
    pre: 0 <= pad < 2**40 and 0 <= trim_threshold < 2**48
    post: __return__ == 0 or top_size >= trim_threshold
    post: __return__ % 4096 == 0 and 0 <= __return__ <= top_size
    post: __return__ == 0 or top_size - __return__ >= pad + 33
    """
    return trim.heap_trim_extra_2_23(top_size, pad, trim_threshold)


def trim_crosshair(quick: bool) -> Outcome:
    """CrossHair on the contract, bounded by a count of paths (proofs/crosshair_run.py)."""
    from proofs.crosshair_run import check_functions
    return check_functions([heap_trim_2_23_contract], 60 if quick else 600)


PROOFS = [
    Proof("glibc-rfc-counters", ("GL-RFC-UINT16",), "z3", rfc_counters(True),
          "the RFC's uint16 counters stay in 0..99: they never wrap"),
    Proof("glibc-rfc-condition", ("GL-RFC-CONDITION",), "z3", rfc_condition(True),
          "the RFC's ratio test is exactly 'more shrinks than growths + 1'"),
    Proof("glibc-rfc-model", ("GL-RFC-UINT16", "GL-RFC-CONDITION"), "exhaustive",
          rfc_model_exhaustive, "the model's RFC functions over every reachable (M, L)"),
    Proof("glibc-trim-floor", ("GL-TRIM-FLOOR",), "z3", trim_floor(True),
          "2.23+ never shrinks a heap whose top is below trim_threshold (C, 64-bit)"),
    Proof("glibc-trim-floor-model", ("GL-TRIM-FLOOR",), "crosshair", trim_crosshair,
          "the model's 2.23+ rule against its contract"),
]


TWINS = [
    # the model's own functions broken: the encodings no longer equal them, the proofs fail
    Twin("glibc-rfc-counters-model-no-halving", "glibc-rfc-counters", ("GL-RFC-UINT16",), "z3",
         rfc_counters(True), "mutant rfc-no-halving", mutant="rfc-no-halving"),
    Twin("glibc-rfc-condition-model-le", "glibc-rfc-condition", ("GL-RFC-CONDITION",), "z3",
         rfc_condition(True), "mutant rfc-ratio-le", mutant="rfc-ratio-le"),
    Twin("glibc-trim-floor-model-no-threshold", "glibc-trim-floor", ("GL-TRIM-FLOOR",), "z3",
         trim_floor(True), "mutant glibc-2.23-no-threshold", mutant="glibc-2.23-no-threshold"),
    Twin("glibc-rfc-counters-not-halved", "glibc-rfc-counters", ("GL-RFC-UINT16",), "z3",
         rfc_counters(False), "the counters not halved at 100"),
    Twin("glibc-rfc-ratio-le", "glibc-rfc-condition", ("GL-RFC-CONDITION",), "z3",
         rfc_condition(False), "the ratio compared with <="),
    Twin("glibc-trim-no-threshold", "glibc-trim-floor", ("GL-TRIM-FLOOR",), "z3",
         trim_floor(False), "2.23+ without its trim_threshold check (2.21's rule)"),
    Twin("rfc-ratio-le", "glibc-rfc-model", ("GL-RFC-CONDITION",), "exhaustive",
         rfc_model_exhaustive, "mutant rfc-ratio-le", mutant="rfc-ratio-le"),
    Twin("rfc-no-halving", "glibc-rfc-model", ("GL-RFC-UINT16",), "exhaustive",
         rfc_model_exhaustive, "mutant rfc-no-halving", mutant="rfc-no-halving"),
    Twin("glibc-2.23-no-threshold", "glibc-trim-floor-model", ("GL-TRIM-FLOOR",), "crosshair",
         trim_crosshair, "mutant glibc-2.23-no-threshold", mutant="glibc-2.23-no-threshold"),
]


def _results(items, quick: bool, twin: bool, only: str | None,
             apply_mutant: Callable[[str], ContextManager] | None = None) -> list[Result]:
    out = []
    for p in items:
        if only and p.name != only:
            continue
        if getattr(p, "mutant", None):
            if apply_mutant is None:
                raise ValueError(f"twin {p.name} runs the model under mutant {p.mutant}: "
                                 "pass apply_mutant (purgecheck applies its mutants)")
            with apply_mutant(p.mutant):
                outcome = p.run(quick)
        else:
            outcome = p.run(quick)
        for inv in p.invariants:
            out.append(proof_result(inv, p, outcome, twin))
    return out


def run_proofs(quick: bool, only: str | None = None) -> list[Result]:
    """One Result per proof and invariant it establishes: proved, bounded, or why not."""
    return _results(PROOFS, quick, False, only)


def run_mutant_proofs(quick: bool, only: str | None = None,
                      apply_mutant: Callable[[str], ContextManager] | None = None) -> list[Result]:
    """The broken twins: each passes only when refuted, with its counterexample. A twin that
    names a mutant (Twin.mutant) runs inside `apply_mutant(name)`: the mutants are the tool's
    (purgecheck.mutants), and proofs/ does not import the tool."""
    return _results(TWINS, quick, True, only, apply_mutant)
