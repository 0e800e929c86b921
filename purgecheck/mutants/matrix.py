"""The kill matrix: every mutant against every engine, each run in a worker process of its own.

An engine kills a mutant when any of its results fails with the mutant applied. Each (mutant,
engine) run happens in a fresh child process (forked, so a mutant defined at run time is seen
too) that applies the mutant in-process with `purgecheck.mutants.applied`: no file in the
working tree changes, and a run that crashes or hangs (it is killed, with its process group,
at the timeout) leaves nothing patched behind. Each engine is first run without a mutant: an
engine that fails on the clean model cannot judge, and its "kills" are not counted.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import wait
from typing import Callable

from purgecheck.mutants import Mutant

KILLED, SURVIVED, TIMEOUT, CRASHED = "killed", "survived", "timeout", "crashed"
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


def judge(mutant: Mutant | None, engine: str, quick: bool) -> Cell:
    """Run `engine` with `mutant` applied, in this process. Call it in a child."""
    from purgecheck.engines import Budget, load_engines
    from purgecheck.mutants import applied

    engines = load_engines()
    name = mutant.name if mutant else None
    t0 = time.perf_counter()
    with applied(mutant):
        results = engines[engine].run(Budget(quick=quick, mutant=name))
        seconds = time.perf_counter() - t0
        failing = [r for r in results if not r.ok]
        failures = []
        for n, r in enumerate(failing[:MAX_FAILURES]):
            steps = _scenario_steps(r) if n < MAX_TABLES and r.replay else []
            failures.append({"invariant": r.invariant, "status": r.status, "figure": r.figure,
                             "detail": r.detail, "replay": r.replay, "steps": steps})
    if mutant is None:
        return Cell(None, engine, FAILED if failing else HELD, seconds, failures)
    return Cell(name, engine, KILLED if failing else SURVIVED, seconds, failures,
                note=f"{len(failing)} of {len(results)} results failed" if failing else
                f"all {len(results)} results passed")


def _child(mutant: Mutant | None, engine: str, quick: bool, conn) -> None:
    os.setsid()  # its own process group: a timeout kills whatever the engine started too
    try:
        cell = judge(mutant, engine, quick)
    except BaseException as e:  # noqa: BLE001 - reported as a crash of this run
        cell = Cell(mutant.name if mutant else None, engine, CRASHED,
                    note=f"{type(e).__name__}: {e}"[:300])
    conn.send(cell)
    conn.close()


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def run_matrix(mutants: list[Mutant], engines: list[str], quick: bool, timeout: float,
               workers: int = 2, progress: Callable[[int, int, Cell], None] | None = None
               ) -> Matrix:
    """The kill matrix of `mutants` x `engines`, at most `workers` runs at a time."""
    ctx = multiprocessing.get_context("fork")
    tasks = deque([(None, e) for e in engines] + [(m, e) for m in mutants for e in engines])
    total = len(tasks)
    running: dict = {}  # connection -> (process, mutant, engine, start)
    done: list[Cell] = []

    def finish(conn, cell: Cell) -> None:
        proc = running.pop(conn)[0]
        proc.join(5)
        if proc.is_alive():
            _kill(proc)
            proc.join()
        done.append(cell)
        if progress:
            progress(len(done), total, cell)

    while tasks or running:
        while tasks and len(running) < workers:
            m, e = tasks.popleft()
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_child, args=(m, e, quick, send), daemon=True)
            proc.start()
            send.close()
            running[recv] = (proc, m, e, time.monotonic())
        ready = wait(list(running) + [p.sentinel for p, *_ in running.values()], timeout=0.5)
        for conn in list(running):
            proc, m, e, start = running[conn]
            name = m.name if m else None
            if conn in ready or proc.sentinel in ready:
                try:
                    cell = conn.recv()
                except (EOFError, OSError):
                    proc.join(5)  # the pipe closes before the exit status is known
                    cell = Cell(name, e, CRASHED, time.monotonic() - start,
                                note=f"the worker died (exit code {proc.exitcode})")
                finish(conn, cell)
            elif time.monotonic() - start > timeout:
                _kill(proc)
                finish(conn, Cell(name, e, TIMEOUT, time.monotonic() - start,
                                  note=f"no answer within {timeout:g} s; killed"))
    baseline = {c.engine: c for c in done if c.mutant is None}
    cells = {(c.mutant, c.engine): c for c in done if c.mutant is not None}
    ordered = {(m.name, e): cells[(m.name, e)] for m in mutants for e in engines}
    return Matrix(list(engines), [m.name for m in mutants], baseline, ordered)
