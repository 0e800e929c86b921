"""The kill matrix for people (a table) and for the docs (merged into .purgecheck/mutants.json).

A partial run (`--only`, `--engine`) replaces only the cells it ran, so the saved matrix is
always the latest word of each engine on each mutant, each cell with its date.
"""

from __future__ import annotations

import sys
from dataclasses import asdict

from purgecheck.reports import store
from purgecheck.mutants.matrix import CRASHED, KILLED, NOT_RUN, SURVIVED, TIMEOUT, Matrix

STYLE = {KILLED: "green", SURVIVED: "dim", NOT_RUN: "dim", TIMEOUT: "yellow", CRASHED: "yellow"}


def cell_text(verdict: str, seconds: float) -> str:
    if verdict == KILLED:
        return f"killed {seconds:.1f}s"
    return {SURVIVED: ".", NOT_RUN: "-"}.get(verdict, verdict)


def kill_lines(matrix: Matrix, width: int = 100) -> list[str]:
    """A first-kill run as a CI log reads it: a line per mutant within `width` columns, the
    engine that killed it, in how long, and how many engines ran on it (the table of every
    engine is mostly "not run" then, and a column per engine made it 170 wide in `make
    check`'s log)."""
    from purgecheck.reports.results import NAME_COLUMN, cut

    name_w = min(NAME_COLUMN, max([len("mutant"), *map(len, matrix.mutants)]))
    engine_w = min(NAME_COLUMN, max([len("killed by"), *map(len, matrix.engines)]))
    out = [f"{'mutant':{name_w}}  {'killed by':{engine_w}}  {'time':>8}  engines run"]
    for m in matrix.mutants:
        killers = matrix.killers(m)
        ran = sum(1 for e in matrix.engines
                  if (c := matrix.cells.get((m, e))) is not None and c.verdict != NOT_RUN)
        killer = killers[0] if killers else "SURVIVED"
        seconds = f"{matrix.cells[(m, killers[0])].seconds:.1f}s" if killers else "-"
        out.append(f"{cut(m, name_w):{name_w}}  {cut(killer, engine_w):{engine_w}}  "
                   f"{seconds:>8}  {ran}"[:width])
    return out


def print_matrix(matrix: Matrix, file=None, first_kill: bool = False) -> None:
    """The matrix: a table, engine by engine; under first kill a line per mutant
    (kill_lines). Then the warnings, the survivors with their replay, and the count."""
    from rich.console import Console

    console = Console(file=file or sys.stdout, width=200)
    if first_kill:
        for line in kill_lines(matrix):
            console.print(line, markup=False, highlight=False)
    else:
        _print_table(console, matrix)
    _print_footer(console, matrix)


def _print_table(console, matrix: Matrix) -> None:
    from rich.table import Table

    table = Table(title="purgecheck mutants: which engine killed each mutant, and how fast")
    table.add_column("mutant", no_wrap=True)
    for e in matrix.engines:
        table.add_column(e, no_wrap=True, justify="right")
    table.add_column("killed by", justify="right")
    for m in matrix.mutants:
        row = [m]
        for e in matrix.engines:
            c = matrix.cells[(m, e)]
            style = STYLE.get(c.verdict, "")
            row.append(f"[{style}]{cell_text(c.verdict, c.seconds)}[/{style}]")
        n = len(matrix.killers(m))
        row.append(f"[bold red]0[/]" if not n else str(n))
        table.add_row(*row)
    console.print(table)


def _print_footer(console, matrix: Matrix) -> None:
    for e, c in matrix.baseline.items():
        if e not in matrix.judges() and c.verdict != NOT_RUN:
            console.print(f"[yellow]WARNING[/] engine {e} does not hold on the clean model "
                          f"({c.verdict}: {c.note or c.failures[:1]}); its kills are not "
                          f"counted")
    from purgecheck.mutants import MUTANTS
    for m in matrix.survivors():
        mut = MUTANTS.get(m)
        expected = ", ".join(mut.catches) if mut else "?"
        console.print(f"[bold red]SURVIVED[/] {m}: {mut.description if mut else ''} "
                      f"(expected to be caught by {expected})")
        console.print(f"  replay: purgecheck mutants --only {m}")
    killed = len(matrix.mutants) - len(matrix.survivors())
    several = sum(1 for m in matrix.mutants if len(matrix.killers(m)) > 1)
    console.print(f"{len(matrix.mutants)} mutants: {killed} killed ({several} by more than one "
                  f"engine), {len(matrix.survivors())} survived")


def save_matrix(matrix: Matrix, quick: bool):
    """Merge this run's cells and baselines into .purgecheck/mutants.json, dated now."""
    date = store.now_stamp()
    old = store.load(store.MUTANTS) or {}
    cells = {(c["mutant"], c["engine"]): c for c in old.get("cells", [])}
    for c in matrix.cells.values():
        if c.verdict == NOT_RUN:  # first-kill: the full matrix's word on it stays
            continue
        cells[(c.mutant, c.engine)] = {**asdict(c), "date": date, "quick": quick}
    baseline = dict(old.get("baseline", {}))
    for e, c in matrix.baseline.items():
        if c.verdict != NOT_RUN:  # first-kill: no kill needed the engine's clean run
            baseline[e] = {**asdict(c), "date": date, "quick": quick}
    return store.save(store.MUTANTS, {"saved": date, "baseline": baseline,
                                      "cells": list(cells.values())})
