"""`purgecheck docs`: generate the invariant docs, the design pages and the results pages."""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import multiprocessing
import sys
from pathlib import Path

from purgecheck.cli import UsageError

EXAMPLE = """examples:
  purgecheck docs               write docs/invariants.md and .html, docs/designs/, docs/img/,
                                docs/simulate.md (all deterministic), and the dated pages of
                                the last `purgecheck check` / `purgecheck mutants` runs
                                (results.md, mutants.md, results.html) under .purgecheck/docs/
  purgecheck docs --results     the dated pages into docs/ as well (to commit a run's record)
  purgecheck docs --check       exit 1 when the committed docs are stale against the
                                registry, the scenarios or the mutants (writes nothing)
  purgecheck docs --out /tmp/d  write somewhere else
exit status: 0 written (or up to date), 1 stale (--check), 2 bad usage
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("docs", help="generate the invariant docs (and the results pages)",
                       description="Generate the docs users read: every invariant with its "
                                   "seed clause, implementing function and what breaks it; a "
                                   "page per rejected design; the last results and the kill "
                                   "matrix with their dates.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", metavar="DIR", help="docs directory (default: docs/ of the project)")
    p.add_argument("--check", action="store_true",
                   help="compare the deterministic part with DIR; write nothing")
    p.add_argument("--results", action="store_true",
                   help="write the dated results pages into DIR too (default: only into "
                        ".purgecheck/docs/, so that a run leaves the work tree as it was)")
    return p


def run(args) -> int:
    from purgecheck import docs
    from purgecheck.reports import store

    from purgecheck.inputs import given, output_dir

    # '' is no directory (not the project's docs, which it used to mean)
    out = Path(given(args.out, "--out", "a directory")) if args.out is not None \
        else store.project_root() / "docs"
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: not a directory")
    if args.check and not out.is_dir():
        raise UsageError(f"--out {out}: no such directory to compare with")
    if not args.check:  # before the work: a folder that cannot be made costs no run
        output_dir(out, "--out")
    print("generating the invariant docs (running the designs and the advance graphs) ...",
          file=sys.stderr)
    with _beside(None if args.check else _simulated) as simulated:
        files = docs.deterministic()
        if not args.check:
            files.update(_dated(docs, args, out))
            print("simulating the seeds' workloads for docs/simulate.md ...", file=sys.stderr)
            files.update(simulated.result())
    if args.check:
        stale = docs.stale(files, out)
        for rel in stale:
            print(f"stale: {out / rel}", file=sys.stderr)
        if stale:
            print("regenerate with `purgecheck docs` (or `make check`) and commit docs/",
                  file=sys.stderr)
        return 1 if stale else 0
    written = docs.write(files, out)
    for rel in docs.stale(files, out):  # designs or pictures nothing generates any more
        (out / rel).unlink()
        print(f"removed {out / rel}", file=sys.stderr)
    print(f"{len(files)} files in {out}, {len(written)} changed", file=sys.stderr)
    return 0


def _dated(docs, args, out: Path) -> dict[str, str]:
    """The dated pages of the last runs: {path: text} to write into `out` with --results;
    otherwise written under .purgecheck/docs/ here and {} returned."""
    from purgecheck.reports import store

    try:
        dated = docs.from_results()
    except store.StoreError as e:
        raise UsageError(str(e))
    if args.results:
        return dated
    if dated:  # per run, with dates and times: kept out of version control
        where = store.state_dir() / "docs"
        docs.write(dated, where)
        print(f"the last runs' pages: {', '.join(str(where / k) for k in sorted(dated))} "
              f"(`purgecheck docs --results` puts them in {out})", file=sys.stderr)
    return {}


def _simulated() -> dict[str, str]:
    from purgecheck.docs.real_bun_page import real_bun_files
    from purgecheck.docs.simulate_page import simulate_files
    from purgecheck.reports import store
    return {**simulate_files(), **real_bun_files(store.project_root())}


@contextlib.contextmanager
def _beside(fn):
    """`fn()` in a forked process while this one goes on (the simulator's pages and the
    invariant pages share nothing, and each is about half of the work: two cores give the
    docs in about the time of the larger), as a future; None: nothing to run."""
    if fn is None:
        yield None
        return
    ctx = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
        yield pool.submit(fn)
