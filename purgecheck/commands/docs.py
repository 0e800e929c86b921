"""`purgecheck docs`: generate the invariant docs, the design pages and the results pages."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from purgecheck.cli import UsageError

EXAMPLE = """examples:
  purgecheck docs               write docs/invariants.md and .html, docs/designs/, docs/img/,
                                and (after `purgecheck check` / `purgecheck mutants`)
                                docs/results.md, docs/mutants.md, docs/results.html
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
    return p


def run(args) -> int:
    from purgecheck import docs
    from purgecheck.reports import store

    out = Path(args.out) if args.out else store.project_root() / "docs"
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} is not a directory")
    if not args.check:  # before the work: a folder that cannot be made costs no run
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise UsageError(f"--out {out}: cannot make that directory: {e.strerror or e}")
    print("generating the invariant docs (running the designs and the advance graphs) ...",
          file=sys.stderr)
    files = docs.deterministic()
    if args.check:
        stale = docs.stale(files, out)
        for rel in stale:
            print(f"stale: {out / rel}", file=sys.stderr)
        if stale:
            print("regenerate with `purgecheck docs` (or `make check`) and commit docs/",
                  file=sys.stderr)
        return 1 if stale else 0
    try:
        files.update(docs.from_results())
    except store.StoreError as e:
        raise UsageError(str(e))
    print("simulating the seeds' workloads for docs/simulate.md ...", file=sys.stderr)
    from purgecheck.docs.simulate_page import simulate_files
    files.update(simulate_files())
    written = docs.write(files, out)
    for rel in docs.stale(files, out):  # designs or pictures nothing generates any more
        (out / rel).unlink()
        print(f"removed {out / rel}", file=sys.stderr)
    print(f"{len(files)} files in {out}, {len(written)} changed", file=sys.stderr)
    return 0
