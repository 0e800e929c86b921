"""The `glibc` engine of `purgecheck check`: the glibc model's invariants after every op of
every named workload for every version, and strace conformance of the installed glibc.

Quick budget: the workloads at their quick scale and the quick conformance cases; full: the
full scale and every case.
"""

from __future__ import annotations

import time

from model.glibc.invariants import SCOPE
from model.glibc.versions import VERSIONS
from model.invariants import Invariant, load_registry, register
from purgecheck.engines import Budget, engine
from purgecheck.glibc.compare import compare
from purgecheck.glibc.modelrun import run_model
from purgecheck.formats.glibc_ops import parse_script
from purgecheck.glibc.trace import TraceError
from purgecheck.glibc.workloads import CASES, WORKLOADS
from purgecheck.reports.results import Result

ENGINE = "glibc"

register(Invariant(
    "GL-PUBLISHED",
    "The model of each version makes the system calls published for it: on seed 001's "
    "bench-free in a worker thread (1024 times free(malloc(48 pages)), default settings), "
    "glibc 2.21 calls madvise 1024 times (1023 heap tails and the thread's stack at its "
    "exit) and the 2015 RFC twice; 2.23+ madvises no heap tail (measured on 2.36).",
    "seed 001: \"Before the patch, this resulted in 1024 calls to madvise. With the patch "
    "applied, madvise is called twice\"; digest glibc-trim.md, measured on 2.36",
    "model.glibc.system.heap_trim", scope="glibc-published"))

# (version, category counted, published count) on bench-free at its full scale; "madvise" is
# every madvise call (heap tails and stacks), as the seed counted them with strace.
PUBLISHED = (("2.21", "madvise", 1024), ("rfc-2015", "madvise", 2), ("2.23+", "heap_madvise", 0))


def published_check(quick: bool) -> Result:
    """Each version's model against what is published about it (GL-PUBLISHED). The seed's
    count is of the whole loop, so this runs at the full scale whatever the budget (0.1 s)."""
    t0 = time.perf_counter()
    w = WORKLOADS["bench-free"]
    ops = parse_script(w.script(), "workload:bench-free")
    wrong = []
    for version, category, expected in PUBLISHED:
        try:
            counts = run_model(ops, VERSIONS[version], {}, source=w.name).count()
        except Exception as e:  # a broken rule may stop the model: that is a failure too
            wrong.append(f"{version}: the model stopped ({type(e).__name__}: {e})")
            continue
        got = counts["heap_madvise"] + counts["stack_madvise"] if category == "madvise" \
            else counts[category]
        if got != expected:
            wrong.append(f"{version}: {got} {category} calls, published {expected}")
    if wrong:
        return Result("GL-PUBLISHED", ENGINE, "fail", "", time.perf_counter() - t0,
                      detail="bench-free: " + "; ".join(wrong),
                      replay="purgecheck glibc run bench-free --no-trace")
    return Result("GL-PUBLISHED", ENGINE, "hold", f"{len(PUBLISHED)} versions on bench-free",
                  time.perf_counter() - t0)


def invariant_checks(quick: bool, until: frozenset[str] = frozenset()
                     ) -> tuple[dict[str, int], dict[str, Result]]:
    """Every glibc-arena invariant on every arena after every op: (checks, first failures).
    With `until`, the runs stop after the first (workload, version) at whose end every
    invariant it names has failed: the same first failures, for a test of a mutant's kill."""
    invs = [i for i in load_registry().values() if i.scope == SCOPE and i.predicate]
    counts = {i.id: 0 for i in invs}
    failures: dict[str, Result] = {}
    for w in WORKLOADS.values():
        ops = parse_script(w.script(quick=quick), f"workload:{w.name}")
        for version in VERSIONS:
            def after(op, p, w=w, version=version):
                for av in p.arenas:
                    for inv in invs:
                        counts[inv.id] += 1
                        if inv.id in failures:
                            continue
                        reason = inv.predicate(av)
                        if reason:
                            failures[inv.id] = Result(
                                inv.id, ENGINE, "fail", "",
                                detail=f"workload {w.name}, version {version}, line "
                                       f"{op.line} ({op.render()}): {reason}",
                                replay=f"purgecheck glibc run {w.name} --version {version} "
                                       f"--no-trace" + (" --quick" if quick else ""))
            try:
                run_model(ops, VERSIONS[version], {}, after_step=after, source=w.name)
            except Exception as e:  # a broken rule may crash the model later on
                failures.setdefault("GL-MODEL-RAN", Result(
                    "GL-MODEL-RAN", ENGINE, "fail", "",
                    detail=f"workload {w.name}, version {version} stopped: "
                           f"{type(e).__name__}: {e}",
                    replay=f"purgecheck glibc run {w.name} --version {version} --no-trace"))
            if until and until <= failures.keys():
                return counts, failures
    return counts, failures


def conformance(quick: bool) -> Result:
    """The quick (or every) case on the model of the installed version and under strace."""
    t0 = time.perf_counter()
    cases = [c for c in CASES if c.quick or not quick]
    for case in cases:
        w = WORKLOADS[case.workload]
        env_args = " ".join(f"--env {k}={v}" for k, v in case.env.items())
        replay = f"purgecheck glibc run {w.name} {env_args}".rstrip() + \
            (" --quick" if quick else "")
        try:
            cmp = compare(w.script(quick=quick), case.name, case.env, versions=[])
        except TraceError as e:
            return Result("GL-STRACE-CONFORMANCE", ENGINE, "error", "",
                          time.perf_counter() - t0, detail=str(e), replay="make setup")
        except Exception as e:  # a broken rule may stop the model's prediction
            return Result("GL-STRACE-CONFORMANCE", ENGINE, "fail", "", time.perf_counter() - t0,
                          detail=f"case {case.name}: the model stopped ({type(e).__name__}: "
                                 f"{e})", replay=replay)
        if not cmp.ok:
            return Result("GL-STRACE-CONFORMANCE", ENGINE, "fail", "",
                          time.perf_counter() - t0,
                          detail=f"case {case.name}: {'; '.join(cmp.mismatches[:3])}",
                          replay=replay)
    return Result("GL-STRACE-CONFORMANCE", ENGINE, "hold",
                  f"{len(cases)} cases on glibc {cmp.release}", time.perf_counter() - t0)


@engine(ENGINE, "glibc model invariants over the named workloads, every version; strace "
                "conformance of the installed glibc")
def run_glibc(budget: Budget) -> list[Result]:
    t0 = time.perf_counter()
    counts, failures = invariant_checks(budget.quick)
    dt = time.perf_counter() - t0
    out = []
    for inv_id, n in counts.items():
        r = failures.get(inv_id) or Result(inv_id, ENGINE, "hold", "")
        r.figure = f"{n:,} checks"
        r.seconds = dt / max(1, len(counts))
        out.append(r)
    if "GL-MODEL-RAN" in failures:
        out.append(failures["GL-MODEL-RAN"])
    out.append(published_check(budget.quick))
    out.append(conformance(budget.quick))
    return out
