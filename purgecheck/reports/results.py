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
FIGURE_MIN = 20  # the figure's room the names give way to (a full check's had 6 characters)
NAME_FLOORS = (24, 20)  # how far the invariant and engine columns give way to it


def cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, a longer one ending in an ellipsis."""
    return text if len(text) <= width else text[:width - 1] + "…"


def cut_engine(name: str, width: int) -> str:
    """An engine's name in at most `width` characters: its family (before the colon) and the
    end of the rest, where the names of one family differ (`explorer:explore-bare-1`,
    `...-bare-2`: cut at the end, every such row read `explorer:explore-ba…`)."""
    family, colon, rest = name.partition(":")
    tail = width - len(family) - len(colon) - 1
    if len(name) <= width or not colon or tail < 6:
        return cut(name, width)
    return f"{family}:…{rest[-tail:]}"


def summary_rows(results: list[Result], width: int = SUMMARY_WIDTH) -> list[str]:
    """The header and one line per result, each at most `width` characters: invariant,
    engine, result and time in columns as wide as their longest entry (the two names at most
    NAME_COLUMN, a longer one cut with an ellipsis: a row of several invariants, as
    `EP-NO-SHORT-EPOCH,EP-RECORDED-NOT-BEFORE-REAL,...`, once pushed the result out of the
    line), the figure in what is left (cut so too; `--verbose` and `--json` have them whole).
    Where that leaves the figure less than FIGURE_MIN, the engine's column and then the
    invariant's give way, down to NAME_FLOORS: in a full check, a mutant's engine name of 30
    beside `refuted-as-expected` left the figure 6 characters, `16,366…`."""
    heads = ("invariant", "engine", "result", "time")
    widths = [min(NAME_COLUMN, max(len(heads[0]), *(len(r.invariant) for r in results))),
              min(NAME_COLUMN, max(len(heads[1]), *(len(r.engine) for r in results))),
              max(len(heads[2]), *(len(r.status) for r in results)),
              max(len(heads[3]), *(len(f"{r.seconds:.2f}s") for r in results))] \
        if results else [len(h) for h in heads]
    for i in (1, 0):  # the engine gives way first: its family, before the colon, stays
        short = FIGURE_MIN - (width - sum(widths) - 2 * len(widths))
        if short > 0:
            widths[i] = max(min(widths[i], NAME_FLOORS[i]), widths[i] - short)
    room = max(0, width - sum(widths) - 2 * len(widths))
    cells = [(cut(r.invariant, widths[0]), cut_engine(r.engine, widths[1]), r.status,
              f"{r.seconds:.2f}s") for r in results]

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
