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


def print_table(results: list[Result], title: str, statements: dict[str, str] | None = None,
                file=None) -> None:
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
    passed = len(results) - len(failed)
    unknown = sum(r.status == "unknown" for r in failed)
    console.print(f"{passed} passed, {len(failed)} failed" + (
        f" ({unknown} of them unknown: a solver stopped at its resource limit, "
        f"no verdict either way)" if unknown else ""))
