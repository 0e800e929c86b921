"""CrossHair in a fresh interpreter of its own, with the mutants applied around the call.

CrossHair makes its terms in Z3's main context, and Z3's search depends on what that context
was asked before (proofs.core.fresh_solver says the same of the Z3 proofs, which each take a
context of their own). Once, in a `make check` on a loaded machine, the twin
`contracts-age-no-modulo` ran in a Dask worker after other proofs and stopped inside Z3
(`Z3Exception: b'unreachable'`): reported unknown, so the run failed; alone it was refuted.
So each search (proofs/crosshair_run.py's `check_here`) runs in `python -m` of this module,
with Python's hash seed fixed, and the mutants applied here (`purgecheck.mutants.active`) are
applied there again by name: what CrossHair checks is still the model as mutated. A mutant
the child cannot find by name (one made at run time, in a test) keeps the search here.
`install` makes this the runner of proofs.crosshair_run.check_functions (the prove engine
does, on import).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from proofs import core, crosshair_run
from proofs.core import UNKNOWN, Outcome

ROOT = Path(__file__).resolve().parents[2]  # the project, on the child's import path


def check_apart(functions: list[Callable], paths: int) -> Outcome:
    """crosshair_run.check_here in a fresh interpreter (above)."""
    from purgecheck.mutants import MUTANTS, active

    applied_now = active()
    if any(MUTANTS.get(m.name) is not m for m in applied_now):
        return crosshair_run.check_here(functions, paths)
    job = {"functions": [[f.__module__, f.__qualname__] for f in functions], "paths": paths,
           "mutants": [m.name for m in applied_now], "rlimit": core.Z3_RLIMIT}
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": path}
    t0 = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", __name__], input=json.dumps(job),
                         capture_output=True, text=True, env=env, cwd=ROOT)
    seconds = time.perf_counter() - t0
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        return Outcome(UNKNOWN, "CrossHair",
                       f"CrossHair's process exited {run.returncode}: {last}", seconds)
    out = json.loads(run.stdout)
    return Outcome(out["status"], out["figure"], out["detail"], seconds)


def install() -> None:
    crosshair_run.RUNNER = check_apart


def _child() -> None:
    """The fresh interpreter's side: the job on stdin, the outcome as JSON on stdout."""
    from purgecheck.engines import load_engines
    from purgecheck.mutants import MUTANTS, applied

    job = json.load(sys.stdin)
    load_engines()  # the engines' modules add mutants of their own to the catalogue
    core.Z3_RLIMIT = job["rlimit"]
    functions = []
    for module, qualname in job["functions"]:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        functions.append(obj)
    with contextlib.ExitStack() as stack:
        for name in job["mutants"]:
            stack.enter_context(applied(MUTANTS[name]))
        out = crosshair_run.check_here(functions, job["paths"])
    json.dump({"status": out.status, "figure": out.figure, "detail": out.detail}, sys.stdout)


if __name__ == "__main__":
    _child()
