"""`purgecheck prove`: the proofs, the exhaustive explorer and the contracts, in one table."""

from __future__ import annotations

import argparse
import sys

from purgecheck.cli import UsageError
from purgecheck.reports.results import exit_code, print_table, to_json

EXAMPLE = """examples:
  purgecheck prove                       every proof; full bounds (the explorer's biggest
                                         configurations take a minute or two)
  purgecheck prove --quick               small bounds (what the test suite runs)
  purgecheck prove --only advance        one proof (names: see --list)
  purgecheck prove --mutants             the broken twins: each must be refuted, with its
                                         counterexample printed as a step table
  purgecheck prove --mutants --only no-cas-exclusion --json
  purgecheck prove --list

results: proved (Z3: for all sizes, times, or N), bounded (explored exhaustively up to the
stated bound, or a contract CrossHair did not falsify in its time budget: not a proof),
refuted (a counterexample). With --mutants: refuted-as-expected passes, not-refuted fails.
exit status: 0 everything passed, 1 a proof failed or a twin was not refuted, 2 bad usage
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("prove", help="Z3 proofs, exhaustive interleavings, CrossHair contracts",
                       description="Prove what can be proved for all sizes and all times "
                                   "(Z3), check exhaustively what is finite (the interleaving "
                                   "explorer), and search the contracts (CrossHair).",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", action="append", metavar="NAME",
                   help="run only this proof or twin (repeatable); see --list")
    p.add_argument("--mutants", action="store_true",
                   help="run the broken twins instead: each must be refuted")
    p.add_argument("--quick", action="store_true", help="small bounds")
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    p.add_argument("--verbose", action="store_true",
                   help="the long table: each invariant's statement and every figure whole "
                        "(by default one line per result within 100 columns)")
    p.add_argument("--list", action="store_true", help="list the proofs and twins")
    p.add_argument("--rlimits", action="store_true",
                   help="run every Z3 proof and twin without a resource limit and print what "
                        "its costliest query used, beside the limit (proofs.core.Z3_RLIMIT)")
    p.add_argument("--dot", metavar="FILE",
                   help="with --mutants: write the first explorer counterexample as Graphviz "
                        "DOT (and FILE.svg when `dot` is installed)")
    return p


def run(args) -> int:
    from purgecheck.engines.prove import glibc_items, names, run_proofs, run_twins

    if args.list:
        from proofs.catalogue import proofs, twins
        gproofs, gtwins = glibc_items()
        for p in [*proofs(args.quick), *gproofs]:
            print(f"{p.name:34} {p.engine:10} {p.summary}\n{'':45} {', '.join(p.invariants)}")
        for t in [*twins(args.quick), *gtwins]:
            print(f"{t.name:34} {t.engine:10} twin of {t.proof}: {t.summary}")
        print(f"{'glibc':34} {'':10} every glibc proof (or, with --mutants, twin) above")
        return 0
    if args.rlimits:
        return _rlimits(args.quick, args.only)
    if args.only:
        known = names(args.quick) + names(False)
        bad = [n for n in args.only if n not in known]
        if bad:
            raise UsageError(f"--only {bad[0]!r}: no such proof or twin; expected one of "
                             f"{', '.join(dict.fromkeys(known))}")
    runner = run_twins if args.mutants else run_proofs
    results = runner(args.quick, args.only, quiet=args.json)
    if args.dot:
        _write_dot(args.dot, results)
    if args.json:
        sys.stdout.buffer.write(to_json(results, command="prove", mutants=args.mutants) + b"\n")
    else:
        statements = None
        if args.verbose:
            from proofs.registry import load_registry
            statements = {k: v.statement for k, v in load_registry().items()}
        print_table(results, "purgecheck prove" + (" --mutants" if args.mutants else ""),
                    statements)
        if args.mutants:
            for r in results:
                if r.ok and r.detail:
                    print(f"\n{r.engine}: counterexample\n{r.detail}")
    return exit_code(results)


def _rlimits(quick: bool, only: list[str] | None) -> int:
    """Each Z3 proof and twin run without a limit: the resources of its costliest query."""
    from proofs import core
    from proofs.catalogue import proofs, twins
    from purgecheck.engines.prove import glibc_items, run_proofs, run_twins

    gproofs, gtwins = glibc_items()
    items = [(p, run_proofs) for p in [*proofs(quick), *gproofs]] + \
        [(t, run_twins) for t in [*twins(quick), *gtwins]]
    worst = 0
    print(f"{'proof or twin':34} {'queries':>8} {'costliest':>14}  result")
    for item, runner in items:
        if item.engine != "z3" or (only and item.name not in only):
            continue
        with core.unlimited() as used:
            results = runner(quick, [item.name])
        worst = max([worst, *used])
        status = ",".join(sorted({r.status for r in results}))
        print(f"{item.name:34} {len(used):>8} {max(used, default=0):>14,}  {status}")
    print(f"costliest query: {worst:,}; the limit: {core.Z3_RLIMIT:,} "
          f"({core.Z3_RLIMIT / max(worst, 1):.1f} times it)")
    return 0


def _write_dot(path: str, results) -> None:
    """Re-run the first explorer twin to draw its counterexample."""
    import shutil
    import subprocess

    from proofs.catalogue import twins
    from proofs.explorer import explore, to_dot
    from purgecheck.mutants import MUTANTS, applied
    from dataclasses import replace
    from proofs.explorer_configs import CONFIGS

    names = {r.engine.split(":", 1)[1] for r in results}
    for t in twins(True):
        if t.engine != "explorer" or t.name not in names or not t.mutant:
            continue
        base = CONFIGS[t.proof.removeprefix("explore-")]
        cfg = replace(base, reduce_dead=False)
        with applied(MUTANTS[t.mutant]):
            rep = explore(cfg, stop_at_first=True, max_states=200_000)
        if rep.violations:
            v = next(iter(rep.violations.values()))
            with open(path, "w") as fh:
                fh.write(to_dot(v, cfg) + "\n")
            if shutil.which("dot"):
                subprocess.run(["dot", "-Tsvg", path, "-o", path + ".svg"], check=False)
            print(f"wrote {path}", file=sys.stderr)
            return
    raise UsageError("--dot: no explorer counterexample among the results (use --mutants)")
