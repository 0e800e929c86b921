"""What a proof is, how Z3 is asked, and how its answer becomes a Result.

A claim is proved when Z3 finds its negation (under the hypotheses) unsatisfiable; it is
refuted when Z3 finds a model, which the proof renders as a counterexample. A broken twin is
the same proof with one rule broken: it passes only when Z3 refutes it.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable

import z3

from proofs.results import Result

PROVED = "proved"
REFUTED = "refuted"
UNKNOWN = "unknown"
VACUOUS = "vacuous"  # the hypotheses are contradictory: a bug in the proof, never a pass
DIFFERS = "differs"  # the proof's encoding is not the model's function (proofs/agreement.py)


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


# Every Z3 query is bounded by Z3's resource count (`rlimit`: the solver's own count of the
# work it did), never by wall-clock time: the same query stops at the same point on any
# machine under any load, so a verdict cannot flip with the load (a 60 s `timeout` once turned
# into "unknown" on a loaded machine). The costliest query of every proof and twin used
# Z3_RLIMIT_MEASURED (`purgecheck prove --rlimits` prints each one's use); the limit is
# more than twenty times that, so each decides with room to spare and one that does not is
# reported as unknown, with Z3's reason, never as proved, refuted or vacuous.
# Measured 2026-12-03 (z3-solver 5.4.1.0), each query in a context of its own (fresh_solver):
# 11,151,961, the BMC of the twin no-cas-exclusion; the costliest proof query 3,451,019
# (glibc-trim-floor). Z3's rlimit is a 32-bit parameter.
Z3_RLIMIT_MEASURED = 11_151_961
Z3_RLIMIT = 250_000_000  # 22 times the costliest query


@dataclass
class Solved:
    """One Z3 check: its answer, the resources it used, and why it gave up when it did."""

    answer: z3.CheckSatResult
    used: int
    reason: str = ""


def rlimit_count(s: z3.Solver) -> int:
    """Z3's resource counter (cumulative over the context: a check's use is a difference)."""
    try:
        return int(s.statistics().get_key_value("rlimit count"))
    except z3.Z3Exception:  # no key before anything ran in the context
        return 0


USAGE: list[int] = []  # every check's use in this process, for the measurement


@contextmanager
def unlimited():
    """Every check in the block without a resource limit (Z3's rlimit 0), its use recorded in
    the list yielded: how `purgecheck prove --rlimits` measures what each query needs."""
    global Z3_RLIMIT
    saved, Z3_RLIMIT = Z3_RLIMIT, 0
    start = len(USAGE)
    seen: list[int] = []
    try:
        yield seen
    finally:
        Z3_RLIMIT = saved
        seen += USAGE[start:]


def solve(s: z3.Solver, rlimit: int | None = None) -> Solved:
    """`s.check()` under the resource limit (Z3_RLIMIT unless given)."""
    s.set("rlimit", rlimit if rlimit is not None else Z3_RLIMIT)
    before = rlimit_count(s)
    answer = s.check()
    used = rlimit_count(s) - before
    USAGE.append(used)
    return Solved(answer, used, s.reason_unknown() if answer == z3.unknown else "")


def fresh_solver() -> z3.Solver:
    """A solver in a Z3 context of its own. Z3's search (and so the resources a query takes,
    and on a hard quantified query whether it decides at all) depends on the context's
    history: the ids of the terms made before. A query put into a fresh context is decided
    the same way whatever this process asked before (a Dask worker runs the proofs in another
    order than `--in-process` does). Add terms with `put`; read models with `model_of`."""
    return z3.Solver(ctx=z3.Context())


def put(s: z3.Solver, *terms) -> None:
    """Add terms made in the main context to `s` (in its own context)."""
    for t in terms:
        s.add((t if z3.is_expr(t) else z3.BoolVal(t)).translate(s.ctx))


def model_of(s: z3.Solver) -> z3.ModelRef:
    """`s`'s model, in the main context (where the proofs' terms, and their renderers, are)."""
    return s.model().translate(z3.main_ctx())


def check_claim(claim: Claim, rlimit: int | None = None
                ) -> tuple[str, z3.ModelRef | None, str]:
    """Is `hyps -> goal` valid? Returns (PROVED, None, ""), (REFUTED, model, ""), (VACUOUS,
    None, "") or (UNKNOWN, None, what Z3 gave as its reason, e.g. "max. resource limit
    exceeded"). Hypotheses Z3 could not decide are unknown, not vacuous: only unsat ones are."""
    s = fresh_solver()
    put(s, *claim.hyps)
    first = solve(s, rlimit)
    if first.answer == z3.unknown:
        return UNKNOWN, None, f"the hypotheses alone: {first.reason}"
    if first.answer == z3.unsat:  # hypotheses that cannot hold would prove anything
        return VACUOUS, None, ""
    put(s, z3.Not(claim.goal))
    r = solve(s, rlimit)
    if r.answer == z3.unsat:
        return PROVED, None, ""
    if r.answer == z3.unknown:
        return UNKNOWN, None, r.reason
    model = model_of(s)
    if claim.small:
        put(s, *claim.small)
        if solve(s, rlimit).answer == z3.sat:  # a readable one, when there is one in reach
            model = model_of(s)
    return REFUTED, model, ""


def unknown_detail(reason: str, rlimit: int | None = None) -> str:
    return f"Z3 answered unknown ({reason}) under rlimit {rlimit or Z3_RLIMIT:,}: " \
           f"neither proved nor refuted"


def run_claims(claims: list[Claim], render: Callable[[Claim, z3.ModelRef], str],
               figure: str) -> Outcome:
    """Check every claim; stop at the first that is not proved and render its model."""
    t0 = time.perf_counter()
    for c in claims:
        status, model, reason = check_claim(c)
        if status != PROVED:
            detail = render(c, model) if model is not None else \
                "Z3 answered unsat for the hypotheses alone: they are contradictory" \
                if status == VACUOUS else unknown_detail(reason)
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
        # a twin that breaks the model's function flips the proof either way: Z3 refutes
        # it, or the encoding no longer equals the model's function (agreement.py)
        status = "refuted-as-expected" if out.status in (REFUTED, DIFFERS) else \
            ("not-refuted" if out.status in (PROVED, "bounded") else out.status)
    else:
        status = out.status
    return Result(inv, f"{p.engine}:{p.name}", status, out.figure, out.seconds, out.detail,
                  replay=f"purgecheck prove --only {p.name}" + (" --mutants" if twin else ""))
