"""`purgecheck mutants`: run every mutant against every engine and print the kill matrix."""

from __future__ import annotations

import argparse
import sys

import orjson

from purgecheck.cli import UsageError
from purgecheck.cluster.client import add_scheduler_option

EXAMPLE = """examples:
  purgecheck mutants --quick                     every mutant x every engine, small budgets
  purgecheck mutants --list                      the catalogue: name, what it breaks
  purgecheck mutants --only age-lt-1 --engine scenarios
  purgecheck mutants --quick --json > kills.json
  purgecheck mutants --quick --first-kill        each mutant until its first kill, cheapest
                                                 engines first (what `make check` runs)
  purgecheck mutants --quick --kills 2           until two engines killed each mutant (the
                                                 one fewer engines kill runs on all of them)
  purgecheck mutants --scheduler tcp://nightly:8786    the full matrix on your Dask cluster
  purgecheck mutants --quick --pool              the home-made pool of forked runs, no Dask
Each cell is a task on a Dask cluster: by default one started here (one worker process per
core, stopped at the end); --scheduler ADDRESS or $PURGECHECK_SCHEDULER sends them to an
existing one. Each run is forked off its worker with the mutant applied in-process; a run that
hangs is killed at --timeout, one that crashes (or kills its worker twice) is reported; no
file changes. The matrix is saved under .purgecheck/mutants.json for `purgecheck docs`
(cells a first-kill run did not run keep their last full-matrix word).
exit status: 0 every mutant was killed by some engine, 1 a mutant survived every engine
(its name is printed), 2 bad usage
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("mutants", help="run every mutant against every engine (kill matrix)",
                       description="Show that the checks catch broken rules: apply each named "
                                   "mutant (one rule broken on purpose) and run each engine; "
                                   "an engine kills the mutant when any of its results fails.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", action="append", metavar="NAME",
                   help="run only this mutant (repeatable); see --list")
    p.add_argument("--engine", action="append", metavar="NAME",
                   help="run only this engine (repeatable)")
    p.add_argument("--quick", action="store_true", help="small engine budgets")
    p.add_argument("--json", action="store_true", help="the matrix as JSON on stdout")
    p.add_argument("--list", action="store_true", help="list the mutants and stop")
    p.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="seconds one mutant may take on one engine before it is killed "
                        "(default 600)")
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes of the embedded cluster, or of --pool (default: one "
                        "per core)")
    kill = p.add_mutually_exclusive_group()
    kill.add_argument("--first-kill", action="store_true",
                      help="stop each mutant at the first engine that kills it, cheapest "
                           "engines first; the other cells show '-'")
    kill.add_argument("--kills", type=int, metavar="N",
                      help="stop each mutant once N engines killed it, cheapest engines first "
                           "(--kills 2: is each mutant seen twice? one that fewer engines kill "
                           "runs on every engine); --first-kill is --kills 1")
    where = p.add_mutually_exclusive_group()
    add_scheduler_option(where, "the cells")
    where.add_argument("--pool", action="store_true",
                       help="no Dask: a pool of forked runs on this machine")
    return p


def _chosen(asked: list[str] | None, known: dict, what: str) -> list[str]:
    if not asked:
        return list(known)
    for name in asked:
        if name not in known:
            raise UsageError(f"unknown {what} {name!r}; expected one of {', '.join(known)}")
    return list(dict.fromkeys(asked))


def _progress(n: int, total: int, cell) -> None:
    """One line per cell as it comes back (with --first-kill the total shrinks as mutants
    die)."""
    who = cell.mutant or "(no mutant)"
    print(f"[{n:>3}/{total}] {who} x {cell.engine}: {cell.verdict} ({cell.seconds:.1f} s)",
          file=sys.stderr, flush=True)


def run(args) -> int:
    from purgecheck.cluster.client import ClusterError, dask_client, default_workers, scheduler_address
    from purgecheck.engines import load_engines
    from purgecheck.mutants import MUTANTS
    from purgecheck.mutants.matrix import run_matrix
    from purgecheck.mutants.report import print_matrix, save_matrix

    engines = load_engines()  # engine modules may add mutants too
    if args.list:
        for m in MUTANTS.values():
            print(f"{m.name:30} {m.description}  [catches {', '.join(m.catches)}]")
        return 0
    if args.timeout <= 0 or (args.workers is not None and args.workers < 1):
        raise UsageError("--timeout must be positive and --workers at least 1")
    if args.kills is not None and args.kills < 1:
        raise UsageError(f"--kills must be at least 1, got {args.kills}")
    kills = 1 if args.first_kill else args.kills or 0
    mutants = [MUTANTS[n] for n in _chosen(args.only, MUTANTS, "mutant")]
    chosen = _chosen(args.engine, engines, "engine")
    try:
        address = None if args.pool else scheduler_address(args.scheduler)
    except ClusterError as e:
        raise UsageError(str(e))
    if args.workers is not None and address:
        raise UsageError("--workers sizes the cluster started here (or the pool): not with a "
                         "scheduler's address")
    workers = args.workers or default_workers()
    where = "a pool of forked runs" if args.pool else \
        f"the Dask scheduler {address}" if address else f"a local Dask cluster"
    if not args.json:
        print(f"{len(mutants)} mutants x {len(chosen)} engines "
              f"({'quick' if args.quick else 'full'} budgets"
              f"{', first kill' if kills == 1 else f', until {kills} kills' if kills else ''}"
              f") on {where}"
              f"{'' if address else f' of {workers} workers'}", file=sys.stderr)
    common = dict(progress=_progress, kills=kills)  # on stderr, also with --json
    if args.pool:
        matrix = run_matrix(mutants, chosen, args.quick, args.timeout, workers, **common)
    else:
        try:
            with dask_client(address, workers) as client:
                matrix = run_matrix(mutants, chosen, args.quick, args.timeout, client=client,
                                    **common)
        except ClusterError as e:
            raise UsageError(str(e))
    save_matrix(matrix, args.quick)
    if args.json:
        doc = {"ok": not matrix.survivors(), "survivors": matrix.survivors(),
               **matrix.to_doc()}
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_matrix(matrix, first_kill=kills == 1)
    return 1 if matrix.survivors() else 0
