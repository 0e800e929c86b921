"""How CrossHair is run here: in this process, bounded by a count of paths, never by time.

CrossHair's own limits are CPU seconds per condition and per path (and a Z3 `timeout` in
wall-clock milliseconds derived from them), so what it explores depends on how fast the
machine runs that minute. Here every time limit is off (infinite) and the search stops at a
number of paths (`max_iterations`, with as many uninteresting ones allowed) or when the path
tree is exhausted; each Z3 check inside it is bounded by Z3's resource count
(CROSSHAIR_SMT_RLIMIT, set to proofs.core.Z3_RLIMIT), and CrossHair's path choices come from
its fixed-seed generator. The same contracts and paths give the same verdict at any load.

`check_here` runs in this process. The tool hands `check_functions` a runner (`RUNNER`) that
runs each search in a fresh interpreter with the mutants applied around the call applied
again there (purgecheck/engines/crosshair_apart.py says why: Z3's main context keeps the
history of the process).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Callable

from proofs.core import REFUTED, UNKNOWN, Outcome

FAILED_STATES = ("POST_FAIL", "EXEC_ERR", "PRE_UNSAT", "POST_ERR")


# Set by the tool (purgecheck.engines.crosshair_apart): how check_functions runs a search.
RUNNER: Callable[[list[Callable], int], Outcome] | None = None


def check_functions(functions: list[Callable], paths: int) -> Outcome:
    """check_here, through the tool's RUNNER when it set one."""
    return (RUNNER or check_here)(functions, paths)


def check_here(functions: list[Callable], paths: int) -> Outcome:
    """Every PEP 316 condition of `functions` searched for up to `paths` paths each: refuted
    with the first counterexample, else bounded (with how many conditions were confirmed
    over all their paths, i.e. the tree was exhausted)."""
    import crosshair.statespace as statespace
    from crosshair.core_and_libs import analyze_function, run_checkables
    from crosshair.options import AnalysisKind, AnalysisOptionSet

    from proofs import core

    opts = AnalysisOptionSet(max_iterations=paths, max_uninteresting_iterations=paths,
                             per_condition_timeout=math.inf, per_path_timeout=math.inf,
                             analysis_kind=[AnalysisKind.PEP316])
    t0 = time.perf_counter()
    # CrossHair reads the environment variable once at import; its module global is what each
    # path's solver is given, so it is set here (and put back) for this run.
    saved = statespace.CROSSHAIR_SMT_RLIMIT
    statespace.CROSSHAIR_SMT_RLIMIT = core.Z3_RLIMIT
    try:
        messages = [m for fn in functions
                    for m in run_checkables(analyze_function(fn, opts))]
    except Exception as e:  # CrossHair itself failed: say so, never pass
        return Outcome(UNKNOWN, "CrossHair", f"CrossHair stopped: {type(e).__name__}: {e}",
                       time.perf_counter() - t0)
    finally:
        statespace.CROSSHAIR_SMT_RLIMIT = saved
    dt = time.perf_counter() - t0
    failed = [m for m in messages if m.state.name in FAILED_STATES]
    if failed:
        return Outcome(REFUTED, f"CrossHair, {len(failed)} condition(s) falsified",
                       "\n".join(f"{Path(m.filename).name}:{m.line}: {m.message}"
                                 for m in failed), dt)
    confirmed = sum(m.state.name == "CONFIRMED" for m in messages)
    return Outcome("bounded", f"CrossHair, {len(messages)} conditions: {confirmed} confirmed "
                              f"over all paths, the others not falsified in {paths} paths", "",
                   dt)
