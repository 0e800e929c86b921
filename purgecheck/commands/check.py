"""`purgecheck check`: run every engine and print the summary table."""

from __future__ import annotations

import argparse
import sys

from model.invariants import load_registry
from purgecheck.cli import UsageError
from purgecheck.cluster.client import add_scheduler_option
from purgecheck.engines import Budget, load_engines
from purgecheck.reports.results import SUMMARY_WIDTH, exit_code, print_table, to_json

EXAMPLE = """examples:
  purgecheck check                 every engine, full budget, summary table
  purgecheck check --quick         small budgets (what the test suite uses)
  purgecheck check --verbose       the table with each invariant's statement
  purgecheck check --engine scenarios --json > result.json
  purgecheck check --scheduler tcp://nightly:8786   the engines as tasks on your Dask cluster
  purgecheck check --in-process    one engine after another in this process, no Dask
With more than one engine, each engine is a task on a Dask cluster: by default one started
here (one worker process per core, stopped at the end), or the one at --scheduler ADDRESS or
$PURGECHECK_SCHEDULER. The table is the same whichever ran first.
exit status: 0 every invariant held, 1 one failed (its replay command is printed), 2 bad usage
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("check", help="run every engine over the invariant registry",
                       description="Run every engine that exists (scenarios, proofs, fuzzing, "
                                   "conformance) and print one row per invariant and engine.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--engine", action="append", metavar="NAME",
                   help="run only this engine (repeatable), as scenarios, prove (Z3, the "
                        "explorer, CrossHair) or fuzz; a name that is none lists them all")
    p.add_argument("--quick", action="store_true", help="small budgets, for a fast look")
    p.add_argument("--seed", type=int, default=0, help="seed for randomised engines")
    p.add_argument("--json", action="store_true", help="write the result as JSON on stdout")
    p.add_argument("--verbose", action="store_true",
                   help="the long form: each invariant's statement in the table (and in --json)")
    where = p.add_mutually_exclusive_group()
    add_scheduler_option(where, "the engines")
    where.add_argument("--in-process", action="store_true",
                       help="run the engines one after another in this process")
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes of the cluster started here (default: one per core)")
    return p


def run(args) -> int:
    engines = load_engines()
    chosen = args.engine or list(engines)
    unknown = [e for e in chosen if e not in engines]
    if unknown:
        raise UsageError(f"unknown engine {unknown[0]!r}; expected one of {', '.join(engines)}")
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    from purgecheck.cluster.client import ClusterError, scheduler_address
    try:  # the address checked before any engine runs; a scheduler named is used even for
        address = None if args.in_process else scheduler_address(args.scheduler)  # one engine
    except ClusterError as e:
        raise UsageError(str(e))
    if args.workers is not None and (args.in_process or address):
        raise UsageError("--workers sizes the cluster started here: not with "
                         + ("--in-process" if args.in_process else "a scheduler's address"))
    budget = Budget(quick=args.quick, seed=args.seed)
    say = (lambda text: None) if args.json else (lambda text: print(text, file=sys.stderr))
    from purgecheck.cbuild import RAN
    RAN.clear()  # the summary names the C builds of this check, not of earlier calls in-process
    if args.in_process or (len(chosen) == 1 and not address):
        results = []
        for name in chosen:
            say(f"running {name}: {engines[name].description} ...")
            results += engines[name].run(budget)
    else:
        results = _on_dask(chosen, budget, args, say)
    # The docs (`purgecheck docs`) show the last result of each engine with its date.
    from purgecheck.reports.store import save_results
    save_results(results, quick=args.quick)
    statements = {k: v.statement for k, v in load_registry().items()}
    if args.json:
        extra = {"statements": {r.invariant: statements.get(r.invariant, "") for r in results}} \
            if args.verbose else {}
        extra["c_builds"] = [info.to_doc() for info in RAN.values()]  # which C builds ran
        sys.stdout.buffer.write(to_json(results, command="check", **extra) + b"\n")
    else:
        # one line per invariant and engine, to fit a CI log; the statements with --verbose
        # (and in `purgecheck invariants` and docs/invariants.md)
        print_table(results, "purgecheck check", statements if args.verbose else None)
        from purgecheck.cbuild import summary_lines
        for line in summary_lines(SUMMARY_WIDTH):  # which C builds ran: a binary of these sources
            print(line)
    return exit_code(results)


def _engine_results(name: str, budget: Budget) -> list:
    """A task: the results of engine `name` (on a worker)."""
    return load_engines()[name].run(budget)


def _pieces(chosen: list[str], budget: Budget) -> list[tuple[str, Budget]]:
    """The tasks: an engine with parts (the prove engine's proofs and twins) one per part,
    those first (they are the long ones: submitted first, they start first), then each other
    engine whole."""
    from dataclasses import replace

    engines = load_engines()
    split = [(n, replace(budget, part=p)) for n in chosen if engines[n].parts
             for p in engines[n].parts(budget)]
    return split + [(n, budget) for n in chosen if not engines[n].parts]


def _on_dask(chosen: list[str], budget: Budget, args, say) -> list:
    """Each engine (or part of one) a task on a Dask cluster; the results in the order of
    `chosen` and of each engine's parts, whatever finished first. A task that failed (its
    worker died twice over) is a failed result naming it, never a missing row."""
    import time

    from distributed import as_completed

    from purgecheck.cluster.client import (ClusterError, call_with_malloc_environment, dask_client,
                                    malloc_environment, scheduler_address)
    from purgecheck.reports.results import Result

    got: dict[tuple, list] = {}
    pieces = _pieces(chosen, budget)
    t0 = time.monotonic()
    try:
        with dask_client(scheduler_address(args.scheduler), args.workers) as client:
            env = malloc_environment()
            futures = {client.submit(call_with_malloc_environment, env, _engine_results,
                                     name, b, pure=False): (name, b.part) for name, b in pieces}
            say(f"running {', '.join(chosen)} as {len(pieces)} tasks on Dask ...")
            for future in as_completed(futures):
                name, part = futures[future]
                try:
                    got[name, part] = future.result()
                except Exception as e:  # noqa: BLE001 - reported as the engine's failure
                    got[name, part] = [Result("ENGINE-RAN", name, "error", "", detail=(
                        f"the task of {part or 'the engine'} failed: {type(e).__name__}: "
                        f"{e}")[:300], replay=f"purgecheck check --engine {name}")]
                bad = sum(not r.ok for r in got[name, part])
                say(f"done {name}{f' [{part}]' if part else ''} after "
                    f"{time.monotonic() - t0:.0f} s: {len(got[name, part])} results, "
                    f"{bad} failed")
    except ClusterError as e:
        raise UsageError(str(e))
    order = {key: i for i, key in enumerate((n, b.part) for n, b in pieces)}
    keys = sorted(got, key=lambda k: (chosen.index(k[0]), order[k]))
    return [r for key in keys for r in got[key]]
