"""The kill matrix: every mutant against every engine, each run in a worker process of its own.

An engine kills a mutant when any of its results fails with the mutant applied. Each (mutant,
engine) run happens in a fresh child process (forked, so a mutant defined at run time is seen
too) that applies the mutant in-process with `purgecheck.mutants.applied`: no file in the
working tree changes, and a run that crashes or hangs (it is killed, with its process group,
at the timeout) leaves nothing patched behind. Each engine is first run without a mutant: an
engine that fails on the clean model cannot judge, and its "kills" are not counted.

Two ways to run the cells: the home-made pool of forked children here (`run_matrix` without a
client), or a Dask cluster (`purgecheck.cluster.client`), each cell one task whose run is forked off
the worker (`isolated`) so that the worker itself never holds a patch. With `first_kill` (a
`Plan`) each mutant's engines run one after another, cheapest first, until one kills it;
with `kills=N` until N engines have (two: the matrix that shows each mutant seen twice).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import select
import signal
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import wait
from typing import Callable

from purgecheck.mutants import Mutant

KILLED, SURVIVED, TIMEOUT, CRASHED = "killed", "survived", "timeout", "crashed"
NOT_RUN = "not run"  # first-kill: an engine already killed this mutant
HELD, FAILED = "held", "failed"  # verdicts of an engine on the clean model
MAX_FAILURES = 8  # failing results kept per cell
MAX_TABLES = 3  # of which this many get a step table


@dataclass
class Cell:
    """What one engine said with one mutant applied (mutant None: the clean model)."""

    mutant: str | None
    engine: str
    verdict: str
    seconds: float = 0.0
    failures: list[dict] = field(default_factory=list)  # invariant, status, detail, replay, steps
    note: str = ""
    # An engine of parts under first-kill: the part a mutant's run stopped at (the one that
    # failed), or the one part a clean run ran; None: the whole engine ran.
    part: str | None = None


@dataclass
class Matrix:
    engines: list[str]
    mutants: list[str]
    baseline: dict[str, Cell]
    cells: dict[tuple[str, str], Cell]

    def judges(self) -> list[str]:
        """Engines that hold on the clean model, so that a failure means the mutant."""
        return [e for e in self.engines if self.baseline[e].verdict == HELD]

    def killers(self, mutant: str) -> list[str]:
        judges = self.judges()
        return [e for e in self.engines if e in judges and
                (c := self.cells.get((mutant, e))) is not None and c.verdict == KILLED]

    def survivors(self) -> list[str]:
        return [m for m in self.mutants if not self.killers(m)]

    def to_doc(self) -> dict:
        return {"engines": self.engines, "mutants": self.mutants,
                "baseline": {e: asdict(c) for e, c in self.baseline.items()},
                "cells": [asdict(c) for c in self.cells.values()]}


def _scenario_steps(result) -> list[dict]:
    """A failing result of a scenario run (its replay is `purgecheck scenario NAME [--variant
    V]`) as the steps that led to its first failure, re-run with the mutant still applied."""
    from purgecheck.docs.steps import window
    from purgecheck.scenarios import SCENARIOS
    from purgecheck.reports.timeline import run_timeline

    words = result.replay.split()
    if words[:2] != ["purgecheck", "scenario"] or len(words) < 3 or words[2] not in SCENARIOS:
        return []
    variant = words[words.index("--variant") + 1] if "--variant" in words[:-1] else None
    tl = run_timeline(SCENARIOS[words[2]], variant)
    first = tl.first_violation(result.invariant)
    return window(tl, first[0]) if first else []


def _run_engine(engine, budget, stop_early: bool) -> tuple[list, str, str | None]:
    """The engine's results; with `stop_early` (first-kill, a mutant) an engine with parts
    runs them one by one and stops at the first that fails (the prove engine's twenty-odd
    proofs, when one refutes the mutant); one without parts is asked to stop at its first
    failure (Budget.first_failure). Returns the results, a note on what ran and the part it
    stopped at (None: it ran whole)."""
    from dataclasses import replace

    if not (stop_early and budget.mutant):
        return engine.run(budget), "", None
    if not engine.parts:
        return engine.run(replace(budget, first_failure=True)), "", None
    parts, results = engine.parts(budget), []
    for n, part in enumerate(parts, 1):
        results += engine.run(replace(budget, part=part))
        if any(not r.ok for r in results):
            return results, f"; stopped at {part} ({n} of {len(parts)} parts)", part
    return results, "", None


def judge(mutant: Mutant | None, engine: str, quick: bool, stop_early: bool = False,
          part: str | None = None) -> Cell:
    """Run `engine` with `mutant` applied, in this process. Call it in a child. `part`: run
    that part of the engine alone (a clean run that a first-kill verdict needs)."""
    from purgecheck.engines import Budget, load_engines
    from purgecheck.mutants import applied

    engines = load_engines()
    name = mutant.name if mutant else None
    t0 = time.perf_counter()
    with applied(mutant):
        results, ran, stopped = _run_engine(
            engines[engine], Budget(quick=quick, mutant=name, part=part), stop_early)
        seconds = time.perf_counter() - t0
        failing = [r for r in results if not r.ok]
        failures = []
        for n, r in enumerate(failing[:MAX_FAILURES]):
            steps = _scenario_steps(r) if n < MAX_TABLES and r.replay else []
            failures.append({"invariant": r.invariant, "status": r.status, "figure": r.figure,
                             "detail": r.detail, "replay": r.replay, "steps": steps})
    if mutant is None:
        return Cell(None, engine, FAILED if failing else HELD, seconds, failures, part=part)
    return Cell(name, engine, KILLED if failing else SURVIVED, seconds, failures,
                note=f"{len(failing)} of {len(results)} results failed{ran}" if failing else
                f"all {len(results)} results passed", part=stopped)


def _judged(mutant: Mutant | None, engine: str, quick: bool, stop_early: bool = False,
            part: str | None = None) -> Cell:
    """`judge`, with an exception of the run reported as its crash."""
    try:
        return judge(mutant, engine, quick, stop_early, part)
    except BaseException as e:  # noqa: BLE001 - reported as a crash of this run
        return Cell(mutant.name if mutant else None, engine, CRASHED,
                    note=f"{type(e).__name__}: {e}"[:300], part=part)


def _child(mutant: Mutant | None, engine: str, quick: bool, conn, stop_early: bool = False,
           part: str | None = None) -> None:
    os.setsid()  # its own process group: a timeout kills whatever the engine started too
    conn.send(_judged(mutant, engine, quick, stop_early, part))
    conn.close()


def isolated(mutant: Mutant | None, engine: str, quick: bool, timeout: float,
             malloc_env: dict[str, str] | None = None, stop_early: bool = False,
             part: str | None = None) -> Cell:
    """One cell judged in a child forked off this process (a Dask worker's task): the child
    applies the mutant, a hang is killed with its process group at `timeout`, a crash is
    reported with its exit status, and this process never holds a patch. `os.fork` itself,
    not multiprocessing, so that it works in a daemonic worker of someone else's cluster.
    `malloc_env`: the submitter's glibc malloc settings, made the child's (the glibc engine
    runs real programs under strace, and a worker's own settings would change what they do)."""
    name = mutant.name if mutant else None
    start = time.monotonic()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: judge, hand the cell over, and leave without cleaning up
        try:
            os.close(read)
            os.setsid()
            if malloc_env is not None:
                from purgecheck.cluster.client import use_malloc_environment
                use_malloc_environment(malloc_env)
            with os.fdopen(write, "wb") as out:
                out.write(pickle.dumps(_judged(mutant, engine, quick, stop_early, part)))
        finally:
            os._exit(0)
    os.close(write)
    data, ended = bytearray(), False
    try:
        while not ended:
            left = start + timeout - time.monotonic()
            if left <= 0:
                break
            if select.select([read], [], [], min(left, 1.0))[0]:
                chunk = os.read(read, 1 << 16)
                data += chunk
                ended = not chunk
    finally:
        os.close(read)
    if not ended:
        _kill_group(pid)
    status = os.waitpid(pid, 0)[1]
    seconds = time.monotonic() - start
    if not ended:
        return Cell(name, engine, TIMEOUT, seconds, note=f"no answer within {timeout:g} s; killed",
                    part=part)
    if not data:
        return Cell(name, engine, CRASHED, seconds, part=part,
                    note=f"the run died (exit code {os.waitstatus_to_exitcode(status)})")
    return pickle.loads(bytes(data))


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # not yet its own group leader
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


# Cheapest engines first, for first-kill: each engine's median seconds to kill a mutant in the
# quick matrix of 2026-12-01 (docs/mutants.md): validate 0.5, sanitizers 0.6 (1.2 on a page
# mutant), scenarios 1.3, glibc 1.6, fuzz 2-5, conformance 2-70, prove 30-95. An engine not
# named here runs after these.
CHEAP_FIRST = ("validate", "scenarios", "glibc", "sanitizers", "fuzz", "conformance", "prove")

# A mutant all of whose invariants are of these scopes starts its first-kill chain at the
# engine named (the only one that checks them: the glibc model's arena and the fuzz
# machines' own invariants), then goes on cheapest first; the others cannot see that part
# of the model, so running them first costs time (about 7 s a glibc mutant) and tells nothing.
SCOPE_ENGINE = {"glibc-arena": "glibc", "glibc-published": "glibc", "fuzz": "fuzz",
                "weak": "weak"}  # the weak explorer's properties (proofs/weak/registry.py)

Task = tuple  # (Mutant | None, engine name, part or None)


class Plan:
    """Which cells run, given what came back. Without `first_kill` every baseline and every
    cell runs. With `first_kill` each mutant's engines run one at a time in CHEAP_FIRST order
    until one kills it with a held baseline (a kill by an engine whose baseline is not in yet
    waits for it; one that fails on the clean model does not stop the chain), or with `kills`
    N until N engines have (a mutant that fewer engines kill runs through all of them, so
    the matrix also shows which engines cannot see it); the cells after that are NOT_RUN (a mutant of a part only one engine sees starts there: SCOPE_ENGINE).
    An engine of parts (`parted`: the prove engine) is then judged part by
    part: a kill at part P needs only P to hold on the clean model, so P alone is run clean
    when the first kill there asks for it, not the whole engine up front (the prove engine's
    clean run is most of a first-kill matrix's time, and few mutants get that far)."""

    def __init__(self, mutants: list[Mutant], engines: list[str], first_kill: bool = False,
                 parted: set[str] | frozenset[str] = frozenset(), kills: int = 0):
        # kills: judged kills after which a mutant's chain stops (0: every cell runs at once)
        self.kills = kills or (1 if first_kill else 0)
        self.first_kill = self.kills > 0  # the chained plan; each run stops at its first failure
        self.mutants, self.engines = mutants, list(engines)
        self.parted = set(parted) & set(engines) if self.first_kill else set()
        rank = {e: i for i, e in enumerate(CHEAP_FIRST)}
        self.order = sorted(self.engines, key=lambda e: rank.get(e, len(rank)))
        self.orders = {m.name: self._order_of(m) for m in mutants}
        self.baseline: dict[tuple, str] = {}  # (engine, part) -> verdict, as they come in
        self.asked: set[tuple] = set()  # the (engine, part) clean runs submitted
        self.next: dict[str, int] = {}  # mutant -> index in order of its next engine
        self.waiting: dict[str, tuple] = {}  # mutant -> (killer, part) whose clean run is out
        self.by_name = {m.name: m for m in mutants}
        self.done_chains: set[str] = set()
        self.killed: dict[str, int] = {}  # mutant -> judged kills so far

    def _order_of(self, m: Mutant) -> list[str]:
        """The engines in the order `m`'s first-kill chain tries them (SCOPE_ENGINE first; a
        weakening of a C11 ordering at the weak engine, then Relacy on the C reference,
        whatever it catches: the sequential engines run sequentially consistent memory and
        cannot see one)."""
        from model.invariants import load_registry
        from purgecheck.mutants.catalogue.weak import WEAKENINGS

        registry = load_registry()
        first = {SCOPE_ENGINE.get(getattr(registry.get(i), "scope", None)) for i in m.catches}
        if m.name in WEAKENINGS:
            ahead = [e for e in ("weak", "relacy") if e in self.order]
            return ahead + [x for x in self.order if x not in ahead]
        if len(first) == 1 and (e := first.pop()) in self.order:
            return [e] + [x for x in self.order if x != e]
        return self.order

    def initial(self) -> list[Task]:
        tasks: list[Task] = [(None, e, None) for e in self.engines if e not in self.parted]
        self.asked.update((e, None) for _, e, _ in tasks)
        if not self.first_kill:
            return tasks + [(m, e, None) for m in self.mutants for e in self.engines]
        self.next = {m.name: 1 for m in self.mutants}
        return tasks + [(m, self.orders[m.name][0], None) for m in self.mutants]

    def total(self, done: int, queued: int) -> int:
        """Cells in all as far as known now, given `done` cells back and `queued` submitted
        but not back (with first-kill an upper bound that shrinks as mutants die)."""
        if not self.first_kill:
            return len(self.engines) * (1 + len(self.mutants))
        return done + queued + sum(len(self.order) - i for m, i in self.next.items()
                                   if m not in self.done_chains)

    def after(self, cell: Cell) -> list[Task]:
        """The tasks that `cell`'s verdict lets start."""
        if not self.first_kill:
            return []
        if cell.mutant is None:
            key = (cell.engine, cell.part)
            self.baseline[key] = cell.verdict
            out = []
            for name, killer in list(self.waiting.items()):
                if killer == key:
                    del self.waiting[name]
                    out += self._judged_kill(name) if cell.verdict == HELD else \
                        self._advance(name)
            return out
        if cell.verdict == KILLED:
            key = (cell.engine, cell.part if cell.engine in self.parted else None)
            if self.baseline.get(key) == HELD:
                return self._judged_kill(cell.mutant)
            if key not in self.baseline:
                self.waiting[cell.mutant] = key
                if key in self.asked:
                    return []
                self.asked.add(key)
                return [(None, *key)]
        return self._advance(cell.mutant)

    def _judged_kill(self, name: str) -> list[Task]:
        """A kill that counts: the chain stops at the `kills`-th, else goes on."""
        self.killed[name] = self.killed.get(name, 0) + 1
        if self.killed[name] >= self.kills:
            self.done_chains.add(name)
            return []
        return self._advance(name)

    def _advance(self, name: str) -> list[Task]:
        i = self.next[name]
        if i >= len(self.order):
            self.done_chains.add(name)
            return []
        self.next[name] = i + 1
        return [(self.by_name[name], self.orders[name][i], None)]


def _not_run(name: str, engine: str) -> Cell:
    return Cell(name, engine, NOT_RUN, note="not run: cheaper engines killed this mutant")


def _parts_baseline(engine: str, runs: list[Cell]) -> Cell:
    """One baseline for an engine judged part by part: failed if a part failed on the clean
    model, held if every part a kill needed held, NOT_RUN if no kill needed any."""
    if not runs:
        return Cell(None, engine, NOT_RUN,
                    note="not run on the clean model: no mutant's run failed in it")
    names = ", ".join(c.part for c in runs)
    bad = [c for c in runs if c.verdict != HELD]
    return Cell(None, engine, bad[0].verdict if bad else HELD, sum(c.seconds for c in runs),
                [f for c in bad for f in c.failures],
                note=f"clean runs of the parts a kill needed: {names}")


def _matrix_of(done: list[Cell], mutants: list[Mutant], engines: list[str],
               parted: set[str]) -> Matrix:
    baseline = {c.engine: c for c in done if c.mutant is None and c.engine not in parted}
    for e in parted:
        baseline[e] = _parts_baseline(e, [c for c in done if c.mutant is None and c.engine == e])
    cells = {(c.mutant, c.engine): c for c in done if c.mutant is not None}
    ordered = {(m.name, e): cells.get((m.name, e)) or _not_run(m.name, e)
               for m in mutants for e in engines}
    return Matrix(list(engines), [m.name for m in mutants], baseline, ordered)


def run_matrix(mutants: list[Mutant], engines: list[str], quick: bool, timeout: float,
               workers: int = 2, progress: Callable[[int, int, Cell], None] | None = None,
               client=None, first_kill: bool = False, kills: int = 0) -> Matrix:
    """The kill matrix of `mutants` x `engines`: on the Dask `client`'s cluster when given,
    else in this machine's pool of at most `workers` forked runs at a time (every cell, or
    each mutant until `kills` engines killed it: `first_kill` is `kills=1`)."""
    from purgecheck.engines import load_engines

    loaded = load_engines()
    plan = Plan(mutants, engines, first_kill,
                parted={e for e in engines if e in loaded and loaded[e].parts}, kills=kills)
    if client is not None:
        done = _run_on_dask(client, plan, quick, timeout, progress)
    else:
        done = _run_in_pool(plan, quick, timeout, workers, progress)
    return _matrix_of(done, mutants, engines, plan.parted)


def _run_on_dask(client, plan: Plan, quick: bool, timeout: float,
                 progress: Callable[[int, int, Cell], None] | None) -> list[Cell]:
    """Each cell a task (`isolated`), results taken as they finish. A task whose worker died
    more than the cluster allows is a CRASHED cell, as is any error the task raised."""
    from distributed import as_completed
    from distributed.scheduler import KilledWorker

    from purgecheck.cluster.client import malloc_environment

    which: dict = {}  # future -> (mutant, engine)
    env = malloc_environment()

    def submit(tasks: list[Task]) -> list:
        futures = [client.submit(isolated, m, e, quick, timeout, env, plan.first_kill, part,
                                 pure=False)
                   for m, e, part in tasks]
        which.update(zip(futures, tasks))
        return futures

    done: list[Cell] = []
    pending = as_completed(submit(plan.initial()))
    for future in pending:
        m, e, part = which.pop(future)
        name = m.name if m else None
        try:
            cell = future.result()
        except KilledWorker as err:
            cell = Cell(name, e, CRASHED, part=part,
                        note=f"the {err.allowed_failures + 1} workers that ran "
                        f"it died (the run killed its worker, or it ran out of memory)")
        except Exception as err:  # noqa: BLE001 - the task failed outside the run
            cell = Cell(name, e, CRASHED, note=f"{type(err).__name__}: {err}"[:300], part=part)
        done.append(cell)
        for f in submit(plan.after(cell)):
            pending.add(f)
        if progress:
            progress(len(done), plan.total(len(done), pending.count()), cell)
    return done


def _run_in_pool(plan: Plan, quick: bool, timeout: float, workers: int,
                 progress: Callable[[int, int, Cell], None] | None) -> list[Cell]:
    """The home-made pool: a forked child per cell, at most `workers` at a time."""
    ctx = multiprocessing.get_context("fork")
    tasks = deque(plan.initial())
    running: dict = {}  # connection -> (process, mutant, engine, part, start)
    done: list[Cell] = []

    def finish(conn, cell: Cell) -> None:
        proc = running.pop(conn)[0]
        proc.join(5)
        if proc.is_alive():
            _kill(proc)
            proc.join()
        done.append(cell)
        tasks.extend(plan.after(cell))
        if progress:
            progress(len(done), plan.total(len(done), len(tasks) + len(running)), cell)

    while tasks or running:
        while tasks and len(running) < workers:
            m, e, part = tasks.popleft()
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(m, e, quick, send, plan.first_kill, part),
                               daemon=True)
            proc.start()
            send.close()
            running[recv] = (proc, m, e, part, time.monotonic())
        ready = wait(list(running) + [p.sentinel for p, *_ in running.values()], timeout=0.5)
        for conn in list(running):
            proc, m, e, part, start = running[conn]
            name = m.name if m else None
            if conn in ready or proc.sentinel in ready:
                try:
                    cell = conn.recv()
                except (EOFError, OSError):
                    proc.join(5)  # the pipe closes before the exit status is known
                    cell = Cell(name, e, CRASHED, time.monotonic() - start, part=part,
                                note=f"the worker died (exit code {proc.exitcode})")
                finish(conn, cell)
            elif time.monotonic() - start > timeout:
                _kill(proc)
                finish(conn, Cell(name, e, TIMEOUT, time.monotonic() - start, part=part,
                                  note=f"no answer within {timeout:g} s; killed"))
    return done
