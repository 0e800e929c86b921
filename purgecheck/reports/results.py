"""How the results of the engines are shown: a table for people, JSON for CI.

The result type itself is proofs/results.py (the proofs return it and may not import the
tool); it is imported here so that the tool's modules name one place for results.
"""

from __future__ import annotations

import sys
from dataclasses import asdict

import orjson

from proofs.results import PASSING, Result

__all__ = ["PASSING", "Result", "exit_code", "to_json", "print_table"]


def exit_code(results: list[Result]) -> int:
    return 0 if all(r.ok for r in results) else 1


def to_json(results: list[Result], **extra) -> bytes:
    doc = {"ok": all(r.ok for r in results), **extra, "results": [asdict(r) for r in results]}
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2)


SUMMARY_WIDTH = 100  # a CI log's columns: the summary's rows are one line each within them


def print_table(results: list[Result], title: str, statements: dict[str, str] | None = None,
                file=None) -> None:
    """The summary: one line per result within SUMMARY_WIDTH columns (a figure too long for
    its column ends in an ellipsis), then each failure with its replay command; with
    `statements` (`--verbose`) the long form, a table with each invariant's statement and
    every figure whole."""
    if statements is None:
        print_lines(results, title, file or sys.stdout)
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file or sys.stdout, width=160)
    table = Table(title=title, show_lines=False)
    table.add_column("invariant", no_wrap=True)
    if statements is not None:
        table.add_column("statement", max_width=60)
    table.add_column("engine", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("figure", justify="right")
    table.add_column("time", justify="right")
    for r in results:
        style = "green" if r.ok else "bold red"
        row = [r.invariant]
        if statements is not None:
            row.append(statements.get(r.invariant, ""))
        row += [r.engine, f"[{style}]{r.status}[/{style}]", r.figure, f"{r.seconds:.2f}s"]
        table.add_row(*row)
    console.print(table)
    failed = [r for r in results if not r.ok]
    for r in failed:
        console.print(f"[bold red]FAIL[/] {r.invariant} ({r.engine}): {r.detail}")
        if r.replay:
            console.print(f"  replay: {r.replay}")
    console.print(passed_line(results))


NAME_COLUMN = 30  # the widest the invariant and engine columns get: the verdict always shows


def cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, a longer one ending in an ellipsis."""
    return text if len(text) <= width else text[:width - 1] + "…"


def summary_rows(results: list[Result], width: int = SUMMARY_WIDTH) -> list[str]:
    """The header and one line per result, each at most `width` characters: invariant,
    engine, result and time in columns as wide as their longest entry (the two names at most
    NAME_COLUMN, a longer one cut with an ellipsis: a row of several invariants, as
    `EP-NO-SHORT-EPOCH,EP-RECORDED-NOT-BEFORE-REAL,...`, once pushed the result out of the
    line), the figure in what is left (cut so too; `--verbose` and `--json` have them whole)."""
    heads = ("invariant", "engine", "result", "time")
    cells = [(cut(r.invariant, NAME_COLUMN), cut(r.engine, NAME_COLUMN), r.status,
              f"{r.seconds:.2f}s") for r in results]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h)
              for i, h in enumerate(heads)]
    room = max(0, width - sum(widths) - 2 * len(widths))

    def line(fixed: tuple[str, ...], figure: str) -> str:
        text = "  ".join(c.rjust(w) if i == 3 else c.ljust(w)
                         for i, (c, w) in enumerate(zip(fixed, widths)))
        return f"{text}  {cut(figure, room) if room else ''}".rstrip()[:width]
    return [line(heads, "figure")] + [line(c, r.figure) for c, r in zip(cells, results)]


def print_lines(results: list[Result], title: str, file) -> None:
    print(title, file=file)
    for row in summary_rows(results):
        print(row, file=file)
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"FAIL {r.invariant} ({r.engine}): {r.detail}", file=file)
        if r.replay:
            print(f"  replay: {r.replay}", file=file)
    print(passed_line(results), file=file)


def passed_line(results: list[Result]) -> str:
    """`N passed, M failed`, and how many of the failures are unknowns (a solver stopped at its
    resource limit, no verdict either way)."""
    failed = [r for r in results if not r.ok]
    unknown = sum(r.status == "unknown" for r in failed)
    return f"{len(results) - len(failed)} passed, {len(failed)} failed" + (
        f" ({unknown} of them unknown: a solver stopped at its resource limit, "
        f"no verdict either way)" if unknown else "")
