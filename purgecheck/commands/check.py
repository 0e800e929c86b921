"""`purgecheck check`: run every engine and print the summary table."""

from __future__ import annotations

import argparse
import sys

from model.invariants import load_registry
from purgecheck.cli import UsageError
from purgecheck.engines import Budget, load_engines
from purgecheck.reports.results import exit_code, print_table, to_json

EXAMPLE = """examples:
  purgecheck check                 every engine, full budget, summary table
  purgecheck check --quick         small budgets (what the test suite uses)
  purgecheck check --verbose       the table with each invariant's statement
  purgecheck check --engine scenarios --json > result.json
exit status: 0 every invariant held, 1 one failed (its replay command is printed), 2 bad usage
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("check", help="run every engine over the invariant registry",
                       description="Run every engine that exists (scenarios, proofs, fuzzing, "
                                   "conformance) and print one row per invariant and engine.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", action="append", metavar="NAME",
                   help="run only this engine (repeatable); see the list in the table")
    p.add_argument("--quick", action="store_true", help="small budgets, for a fast look")
    p.add_argument("--seed", type=int, default=0, help="seed for randomised engines")
    p.add_argument("--json", action="store_true", help="write the result as JSON on stdout")
    p.add_argument("--verbose", action="store_true",
                   help="the long form: each invariant's statement in the table (and in --json)")
    return p


def run(args) -> int:
    engines = load_engines()
    chosen = args.engine or list(engines)
    unknown = [e for e in chosen if e not in engines]
    if unknown:
        raise UsageError(f"unknown engine {unknown[0]!r}; expected one of {', '.join(engines)}")
    budget = Budget(quick=args.quick, seed=args.seed)
    results = []
    for name in chosen:
        if not args.json:
            print(f"running {name}: {engines[name].description} ...", file=sys.stderr)
        results += engines[name].run(budget)
    # The docs (`purgecheck docs`) show the last result of each engine with its date.
    from purgecheck.reports.store import save_results
    save_results(results, quick=args.quick)
    statements = {k: v.statement for k, v in load_registry().items()}
    if args.json:
        extra = {"statements": {r.invariant: statements.get(r.invariant, "") for r in results}} \
            if args.verbose else {}
        from purgecheck.cbuild import RAN
        extra["c_builds"] = [info.to_doc() for info in RAN.values()]  # which C builds ran
        sys.stdout.buffer.write(to_json(results, command="check", **extra) + b"\n")
    else:
        # one line per invariant and engine, to fit a CI log; the statements with --verbose
        # (and in `purgecheck invariants` and docs/invariants.md)
        print_table(results, "purgecheck check", statements if args.verbose else None)
        from purgecheck.cbuild import summary_lines
        for line in summary_lines():  # which C builds ran: a binary of these sources
            print(line)
    return exit_code(results)
