"""`purgecheck invariants`: list the invariant registry."""

from __future__ import annotations

import argparse
import sys

import orjson

from model.invariants import load_registry

EXAMPLE = """examples:
  purgecheck invariants              id, scope and statement of each invariant
  purgecheck invariants --verbose    with the seed clause and the implementing function
  purgecheck invariants --json
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("invariants", help="list the invariant registry",
                       description="List every invariant the engines check: its id, what it "
                                   "states, the seed clause it comes from and the model "
                                   "function that implements the rule.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--verbose", "-v", action="store_true", help="show clause and function")
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    return p


def run(args) -> int:
    from purgecheck.engines import load_engines
    load_engines()  # engines may register invariants that only they check
    rows = [{"id": i.id, "scope": i.scope, "statement": i.statement, "clause": i.clause,
             "implements": i.implements} for i in load_registry().values()]
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(rows, option=orjson.OPT_INDENT_2) + b"\n")
        return 0
    from rich.console import Console
    from rich.table import Table
    t = Table(title=f"{len(rows)} invariants")
    for col in ("id", "scope", "statement") + (("clause", "implements") if args.verbose else ()):
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(r["id"], r["scope"], r["statement"],
                  *((r["clause"], r["implements"]) if args.verbose else ()))
    Console(width=180).print(t)
    return 0
