"""A proof's encoding against the model's own function, over a whole bounded domain.

Some proofs cannot run the model: Z3 cannot execute its loops, so the rule is written once
more in the proof (the unit arithmetic's mirror, the walk's steps, the advance's transition,
glibc's counters and trim in C's bit widths). A proof about such a copy says nothing about
the model once the model's function changes. So each of those proofs begins by evaluating its
encoding on every point of a stated finite domain and comparing it with the model's function
(looked up at call time, so a mutant of the model is what is compared): where they differ
the proof's verdict is DIFFERS, which fails it, names the point, and is what a twin that
applies a mutant of the model's function expects. Only then does Z3 prove the encoding.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable

import z3

from proofs.core import DIFFERS, Outcome


def value(term) -> int | bool:
    """A term built from constants (or a Python value already) as a Python int or bool."""
    if not z3.is_expr(term):
        return term
    v = z3.simplify(term)
    if z3.is_true(v) or z3.is_false(v):
        return z3.is_true(v)
    return v.as_long()


def substituted(term, pairs: list[tuple]) -> int | bool:
    """`term` with each (variable, Python value) of `pairs` put in, evaluated."""
    return value(z3.substitute(term, *[(v, _const(v, x)) for v, x in pairs]))


def _const(var, x):
    if z3.is_bv(var):
        return z3.BitVecVal(x, var.size())
    if z3.is_bool(var):
        return z3.BoolVal(x)
    return z3.IntVal(x)


def compare(what: str, points: Iterable, encoded: Callable, modelled: Callable) -> Outcome | None:
    """None when `encoded(p) == modelled(p)` at every point; else the DIFFERS outcome naming
    the first point where they part."""
    t0 = time.perf_counter()
    n = 0
    for p in points:
        n += 1
        want, got = modelled(p), encoded(p)
        if want != got:
            return Outcome(DIFFERS, f"{n:,} points compared",
                           f"{what}: at {p} the model gives {want}, the proof's encoding "
                           f"{got}; the proof is about the encoding, which is no longer the "
                           f"model's rule (change one of them)", time.perf_counter() - t0)
    return None


def then_prove(agreement: Callable[[], Outcome | None], points: str,
               prove: Callable[[], Outcome]) -> Outcome:
    """The agreement first (a difference is the verdict), then the proof, whose figure says
    over what the encoding was compared with the model."""
    t0 = time.perf_counter()
    differs = agreement()
    if differs is not None:
        return differs
    agreed = time.perf_counter() - t0
    out = prove()
    out.figure = f"{out.figure}; the encoding equals the model's function on {points}"
    out.seconds += agreed
    return out
