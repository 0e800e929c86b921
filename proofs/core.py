"""What a proof is, how Z3 is asked, and how its answer becomes a Result.

A claim is proved when Z3 finds its negation (under the hypotheses) unsatisfiable; it is
refuted when Z3 finds a model, which the proof renders as a counterexample. A broken twin is
the same proof with one rule broken: it passes only when Z3 refutes it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import z3

from proofs.results import Result

PROVED = "proved"
REFUTED = "refuted"
UNKNOWN = "unknown"
VACUOUS = "vacuous"  # the hypotheses are contradictory: a bug in the proof, never a pass


@dataclass
class Outcome:
    """What one proof (or twin) found."""

    status: str  # proved | refuted | unknown | bounded
    figure: str = ""  # what was covered: "64-bit and 32-bit, 6 cases"
    detail: str = ""  # the counterexample (a step table) when refuted
    seconds: float = 0.0
    claims: int = 0


@dataclass(frozen=True)
class Proof:
    """A named proof: the invariants it establishes, and how to run it."""

    name: str
    invariants: tuple[str, ...]  # registry ids the proof cites
    engine: str  # "z3", "explorer", "crosshair"
    run: Callable[[bool], Outcome]  # run(quick)
    summary: str


@dataclass(frozen=True)
class Twin:
    """A broken twin of a proof: one rule broken, expected to be refuted. When `mutant` names
    one of the project's mutants (purgecheck.mutants), the runner applies it to the model
    around `run`: the proof itself is unchanged and runs the broken model."""

    name: str
    proof: str  # the proof it is a twin of
    invariants: tuple[str, ...]
    engine: str
    run: Callable[[bool], Outcome]
    summary: str
    mutant: str | None = None


@dataclass
class Claim:
    """One validity question: do `hyps` imply `goal`? `label` names it in reports."""

    label: str
    hyps: list = field(default_factory=list)
    goal: object = True
    small: list = field(default_factory=list)  # tried first, for a readable counterexample


def check_claim(claim: Claim, timeout_ms: int = 60_000) -> tuple[str, z3.ModelRef | None]:
    """Is `hyps -> goal` valid? Returns (PROVED, None), (REFUTED, model), (VACUOUS, None) or (UNKNOWN, None)."""
    s = z3.Solver()
    s.set("timeout", timeout_ms)
    s.add(*claim.hyps)
    if s.check() != z3.sat:  # hypotheses that cannot hold would prove anything
        return VACUOUS, None
    s.add(z3.Not(claim.goal))
    r = s.check()
    if r == z3.unsat:
        return PROVED, None
    if r != z3.sat:
        return UNKNOWN, None
    model = s.model()
    if claim.small:
        s.add(*claim.small)
        if s.check() == z3.sat:
            model = s.model()
    return REFUTED, model


def run_claims(claims: list[Claim], render: Callable[[Claim, z3.ModelRef], str],
               figure: str) -> Outcome:
    """Check every claim; stop at the first that is not proved and render its model."""
    t0 = time.perf_counter()
    for c in claims:
        status, model = check_claim(c)
        if status != PROVED:
            detail = render(c, model) if model is not None else \
                f"Z3 answered {status}: the hypotheses are contradictory" if status == VACUOUS \
                else "Z3 gave up (timeout)"
            return Outcome(status, figure, f"{c.label}\n{detail}",
                           time.perf_counter() - t0, len(claims))
    return Outcome(PROVED, f"{figure}, {len(claims)} claims", "", time.perf_counter() - t0,
                   len(claims))


def val(model: z3.ModelRef, term) -> int | bool:
    """A term's value in a model, as a Python int or bool."""
    v = model.eval(term, model_completion=True)
    if z3.is_true(v) or z3.is_false(v):
        return z3.is_true(v)
    if z3.is_bv_value(v):
        return v.as_long()
    return v.as_long()


def proof_result(inv: str, p: Proof | Twin, out: Outcome, twin: bool):
    """A Result row. A twin passes when refuted; a proof passes when proved or bounded."""
    if twin:
        status = "refuted-as-expected" if out.status == REFUTED else \
            ("not-refuted" if out.status in (PROVED, "bounded") else out.status)
    else:
        status = out.status
    return Result(inv, f"{p.engine}:{p.name}", status, out.figure, out.seconds, out.detail,
                  replay=f"purgecheck prove --only {p.name}" + (" --mutants" if twin else ""))
