"""Results computed once per test session and read by its other tests, in any of its processes.

Some runs are deterministic and asked for by tests of several modules: the clean run of an
engine that the kill matrix judges each mutant against, the weak explorer's named
configurations, the simulator's full-size runs of a recorded measurement's workloads. With `make test` the modules are spread over xdist's workers, so a cache in a
process shares a run only by chance. `once(key, compute)` keeps the value in a file of the
session's folder (tests/conftest.py starts it: under xdist the folder of all the session's
workers) and reads it there when another process computed it first; a forked child's value is
kept too. The key must name every input of the run: a run under a patched model is another
key, or must not come here.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from pathlib import Path
from typing import Callable, TypeVar

T = TypeVar("T")
_FOLDER: list[Path] = []


def start(folder: Path) -> None:
    folder.mkdir(exist_ok=True)
    _FOLDER[:] = [folder]


def folder() -> Path | None:
    """This session's folder (None outside a test session)."""
    return _FOLDER[0] if _FOLDER else None


def once(key: str, compute: Callable[[], T], keep: Callable[[T], bool] = lambda v: True) -> T:
    """The value kept under `key` in this session, else `compute()` (kept when `keep` says)."""
    if not _FOLDER:  # outside a test session
        return compute()
    path = _FOLDER[0] / hashlib.sha256(key.encode()).hexdigest()[:24]
    if path.exists():
        return pickle.loads(path.read_bytes())
    value = compute()
    if keep(value):
        partial = path.with_name(f"{path.name}.{os.getpid()}")
        partial.write_bytes(pickle.dumps(value))
        os.replace(partial, path)  # whole or not at all for a reader in another process
    return value


def clean_cells(judged):
    """`judged` (purgecheck.mutants.matrix._judged) whose clean cells (no mutant) of a known
    engine are judged once per session, kept when the verdict is not a crash. The key is the
    engine by the function that runs it (a test's own engine under a known name is another
    key) and the judge's arguments. `.alone` is `judged` itself."""
    def judged_once(mutant, engine, quick, stop_early=False, part=None):
        from purgecheck.engines import load_engines
        from purgecheck.mutants import matrix

        engines = load_engines()
        if mutant is not None or engine not in engines:
            return judged(mutant, engine, quick, stop_early, part)
        run = engines[engine].run
        return once(
            f"clean cell {(engine, run.__module__, run.__qualname__, quick, stop_early, part)}",
            lambda: judged(None, engine, quick, stop_early, part),
            keep=lambda cell: cell.verdict in (matrix.HELD, matrix.FAILED))
    judged_once.alone = judged
    return judged_once


def _judge_in_worker(folder: str | None, tests: str) -> None:
    """In a Dask worker: its clean cells from the test session's (clean_cells), or (folder
    None) its own again. A worker started later (one killed and replaced) judges its own."""
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import session_cache
    from purgecheck.mutants import matrix

    judged = getattr(matrix._judged, "alone", matrix._judged)
    if folder is None:
        matrix._judged = judged
        return
    session_cache.start(Path(folder))
    matrix._judged = session_cache.clean_cells(judged)


def workers_clean_cells(client, shared: bool = True) -> None:
    """The Dask client's workers judge their clean cells from the session's (shared), or
    their own again: what clean_cells does in this process, in theirs (a clean run of the
    scenarios engine is 3 to 5 s of a worker's CPU, the glibc engine's 2)."""
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import it
    client.run(_judge_in_worker, str(folder()) if shared else None, str(Path(__file__).parent))


def z3_runs(name: str, run: Callable[[], T]) -> tuple[T, list[int]]:
    """`run()` (proofs of the unmutated model, under the resource limit) and the resource
    counts of the Z3 queries it made (proofs.core.USAGE), once per session: the tests that a
    proof holds and the test that its queries decide far inside the limit read one run. A
    query that decides uses as much with the limit as without it (the limit only stops it)."""
    from proofs import core

    def measured():
        start = len(core.USAGE)
        value = run()
        return value, core.USAGE[start:]
    return once(f"z3 {name}", measured)


def shared_bmc(bmc):
    """`bmc` (proofs.advance_z3's bounded model check of a broken advance, the proof's own copy
    of the step: no mutant of the model reaches it) once a session for its arguments: the
    start-before-increment twin's is test_proofs_z3's and test_proofs_cli's (3.5 s of CPU). A
    run with a mutant applied is run, not kept."""
    from purgecheck.mutants.patching import active

    def run(*args, **kwargs):
        if active():
            return bmc(*args, **kwargs)
        return once(f"bmc {bmc.__module__}.{bmc.__qualname__} {args!r} {sorted(kwargs.items())!r}",
                    lambda: bmc(*args, **kwargs))
    return run


def _weak_key(what: str, cfg, checker) -> str:
    """The key of a weak explorer's run of `cfg`: the configuration and the mutants applied
    now, but for those whose every patch is an entry of proofs.weak.configs.WEAKENED (the weak
    mutants, purgecheck/mutants/catalogue/weak.py): only configs.engine_config reads that table,
    so their whole effect is in `cfg` already, and test_weak_park's weakened configuration is
    the weak engine's under the mutant of the same weakening."""
    from purgecheck.mutants.patching import active

    mutants = [m.name for m in active()
               if any((p.module, p.attr) != ("proofs.weak.configs", "WEAKENED")
                      for p in m.patches)]
    return f"weak {what} {checker.__name__} {hashlib.sha256(pickle.dumps(cfg)).hexdigest()} " \
           f"{mutants}"


def weak_check(cfg, checker=None):
    """The weak explorer's check of configuration `cfg` (by `checker`, default
    proofs.weak.configs.checker's), the mutants applied now in the key (_weak_key)."""
    from proofs.weak import configs as C

    checker = checker or C.checker(cfg)
    return once(_weak_key("check", cfg, checker), lambda: checker.check(cfg))


def weak_counterexample(cfg, checker=None):
    """The shortest counterexample of `cfg` (its checker's `counterexample`), once a session."""
    from proofs.weak import configs as C

    checker = checker or C.checker(cfg)
    return once(_weak_key("counterexample", cfg, checker), lambda: checker.counterexample(cfg))


class SharedChecker:
    """A weak explorer's module (proofs.weak.protocol, park or fork) whose `check` is
    weak_check's: for a test of the weak engine, whose runs the modules' tests make too."""

    def __init__(self, module) -> None:
        self.module = module
        self.__name__ = module.__name__

    def check(self, cfg):
        return weak_check(cfg, self.module)

    def counterexample(self, cfg):
        return weak_counterexample(cfg, self.module)

    def __getattr__(self, name):
        return getattr(self.module, name)


def shared_simulate(simulate):
    """`simulate` (purgecheck.simulate.mimalloc's) whose runs of a named workload are kept for
    the session: the key is the workload's name, idle and parameters (make_workload's stream
    is its generator over them), the design and every other argument, and the mutants applied.
    A run of given calls, or of a workload whose stream is not make_workload's, is run."""
    from purgecheck.mutants.patching import active
    from purgecheck.simulate.workloads import make_workload

    made_by = make_workload("bun-serve").calls.__code__

    def run(workload, design, options=None, *args, **kwargs):
        stream = workload.calls
        if kwargs.get("calls") is not None or getattr(stream, "__code__", None) is not made_by:
            return simulate(workload, design, options, *args, **kwargs)
        cells = dict(zip(made_by.co_freevars, (c.cell_contents for c in stream.__closure__)))
        gen, params = cells["gen"], cells["params"]
        key = repr(("simulate", workload.name, workload.idle, workload.idle_ms,
                    gen.__module__, gen.__qualname__, sorted(params.items()), design, options,
                    args, sorted(kwargs.items()), [m.name for m in active()]))
        return once(key, lambda: simulate(workload, design, options, *args, **kwargs))
    return run
