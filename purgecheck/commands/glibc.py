"""`purgecheck glibc`: run an op script on the glibc model and on the real glibc under strace.

`run` checks one script (or named workload): the model of the installed glibc, every
glibc-arena invariant after every op, and the real library's system calls beside the model's.
`compare` prints the table a reviewer of a glibc change wants: for every modelled version the
predicted madvise / brk / mmap counts, and the measured ones of the installed glibc.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import orjson

from model.glibc.params import ENV_ALIASES, settings_from_environ
from model.glibc.syscalls import CATEGORIES
from model.glibc.versions import VERSIONS, version_for_release
from purgecheck.cli import UsageError
from purgecheck.formats.ops import OpScriptError

ENV_NAMES = tuple(ENV_ALIASES) + ("GLIBC_TUNABLES",)

EXAMPLE = """examples:
  purgecheck glibc list                                   the named workloads and cases
  purgecheck glibc run bench-free                         seed 001's loop: model vs glibc
  purgecheck glibc run bench-free --env MALLOC_MMAP_THRESHOLD_=33554432 \\
                                  --env MALLOC_TRIM_THRESHOLD_=131072
  purgecheck glibc run bench-free --script > bench.ops    the op script (docs/glibc.md)
  purgecheck glibc run bench.ops --env GLIBC_TUNABLES=glibc.malloc.trim_threshold=131072
  purgecheck glibc run bench-free --version 2.21 --no-trace   the model of 2.21 only
  purgecheck glibc compare bench-free                     every version beside the real one
  purgecheck glibc compare lifo --quick --json
MALLOC_*_ variables and GLIBC_TUNABLES already in the environment count too.
exit status: 0 the model held and agreed with glibc, 1 a mismatch or a failed invariant
(the replay command is printed), 2 bad usage, a bad script, or no strace
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("glibc", help="glibc heap trimming: model vs the real glibc (seed 001)",
                       description=__doc__.split("\n\n")[1].replace("\n", " "),
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    gsub = p.add_subparsers(dest="glibc_command", metavar="SUBCOMMAND")
    for name, help_ in (("run", "one script: model of the installed glibc, invariants, strace"),
                        ("compare", "predicted counts of every version beside the measured")):
        q = gsub.add_parser(name, help=help_, description=help_, epilog=EXAMPLE,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        q.add_argument("workload", help="a named workload (see `purgecheck glibc list`) or an "
                                        "op script file")
        q.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                       help=f"a setting for both the model and the traced glibc; NAME is one "
                            f"of {', '.join(ENV_NAMES)} (repeatable)")
        q.add_argument("--quick", action="store_true", help="the workload at its small scale")
        q.add_argument("--scale", type=int, metavar="N", help="the workload's iterations/blocks")
        q.add_argument("--no-trace", action="store_true", help="the model only, no strace")
        q.add_argument("--json", action="store_true", help="JSON on stdout")
        if name == "run":
            q.add_argument("--version", choices=list(VERSIONS),
                           help="model this version (default: the installed glibc's)")
            q.add_argument("--script", action="store_true",
                           help="print the op script and stop")
    gsub.add_parser("list", help="the named workloads and conformance cases")
    return p


MAX_SCALE = 1_000_000  # iterations or blocks: a workload's script is about 3 lines a unit


def load_workload(args) -> tuple[str, str]:
    """(script text, source name) of a named workload or a file."""
    from purgecheck.glibc.workloads import WORKLOADS

    if args.workload in WORKLOADS:
        w = WORKLOADS[args.workload]
        if args.scale is not None and not 1 <= args.scale <= MAX_SCALE:
            raise UsageError(f"--scale: expected the workload's iterations or blocks in "
                             f"1..{MAX_SCALE:,}, got {args.scale}")
        return w.script(quick=args.quick, scale=args.scale), args.workload
    if args.scale is not None or args.quick:
        raise UsageError(f"{'--scale' if args.scale is not None else '--quick'} sizes a named "
                         f"workload ({', '.join(WORKLOADS)}): not an op script file")
    if not args.workload.strip():
        raise UsageError("'': expected an op script file or one of " + ", ".join(WORKLOADS))
    path = Path(args.workload)
    if not path.exists():
        raise UsageError(f"unknown workload {args.workload!r}: expected an op script file or "
                         f"one of {', '.join(WORKLOADS)}")
    try:
        return path.read_text(), str(path)
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}")


def collect_env(pairs: list[str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in ENV_NAMES}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or name not in ENV_NAMES:
            raise UsageError(f"--env {pair!r}: expected NAME=VALUE with NAME one of "
                             f"{', '.join(ENV_NAMES)}")
        env[name] = value
    try:
        settings_from_environ(env)
    except ValueError as e:
        raise UsageError(str(e))
    return env


def run(args) -> int:
    from purgecheck.glibc.trace import TraceError

    if args.glibc_command == "list":
        return list_workloads()
    if args.glibc_command is None:
        raise UsageError("expected a subcommand: run, compare or list (see --help)")
    text, source = load_workload(args)
    env = collect_env(args.env)
    try:
        if args.glibc_command == "run":
            return run_one(args, text, source, env)
        return compare_all(args, text, source, env)
    except OpScriptError as e:
        raise UsageError(str(e))
    except TraceError as e:
        raise UsageError(str(e))


def replay_command(args, env: dict[str, str]) -> str:
    parts = ["purgecheck glibc", args.glibc_command, args.workload]
    parts += [f"--env {k}={v}" for k, v in env.items()]
    parts += ["--quick"] if args.quick else []
    parts += [f"--scale {args.scale}"] if args.scale else []
    return " ".join(parts)


def run_one(args, text: str, source: str, env: dict[str, str]) -> int:
    from purgecheck.glibc.compare import compare
    from purgecheck.glibc.modelrun import run_model
    from purgecheck.formats.glibc_ops import parse_script, render_script
    from purgecheck.glibc.trace import installed_release, may_shrink_heap

    ops = parse_script(text, source)
    if args.script:
        sys.stdout.write(render_script(ops))
        return 0
    release = installed_release()
    installed = version_for_release(release).name
    version = args.version or installed
    trace = not args.no_trace and version == installed
    from model.invariants import load_registry  # not at the top: `replay` imports this module
    invs = [i for i in load_registry().values() if i.scope == "glibc-arena" and i.predicate]
    failures: list[str] = []
    checks = 0

    def after(op, p):
        nonlocal checks
        for av in p.arenas:
            for inv in invs:
                checks += 1
                reason = inv.predicate(av)
                if reason and len(failures) < 20:
                    failures.append(f"line {op.line} ({op.render()}): {inv.id}: {reason}")

    p = run_model(ops, VERSIONS[version], settings_from_environ(env),
                  may_shrink_heap() if trace else False, after_step=after, source=source)
    predicted = p.count()
    cmp = None
    if trace:
        if not args.json:
            print(f"tracing glibc {release} with strace -f ...", file=sys.stderr)
        cmp = compare(text, source, env, versions=[])
    ok = not failures and (cmp is None or cmp.ok)
    if args.json:
        doc = {"source": source, "env": env, "version": version, "ok": ok,
               "predicted": predicted, "invariant_checks": checks, "failures": failures}
        if cmp is not None:
            doc |= {"glibc": release, "measured": cmp.measured.counts,
                    "mismatches": cmp.mismatches}
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        settings = " ".join(f"{k}={v}" for k, v in env.items()) or "defaults"
        print(f"{source}: model {version}" + (f", glibc {release} (strace)" if cmp else "")
              + f", {settings}")
        print(f"  {'category':16} {'model ' + version:>14}" + (f" {'glibc ' + release:>12}"
                                                                 if cmp else ""))
        for cat in CATEGORIES:
            real = cmp.measured.counts[cat] if cmp else None
            if predicted[cat] or real:
                mark = "" if real is None or real == predicted[cat] else "   <- differs"
                print(f"  {cat:16} {predicted[cat]:>14}" + (f" {real:>12}" if cmp else "")
                      + mark)
        print(f"  invariants: {len(invs)} checked after every op on every arena, "
              f"{checks:,} checks, {len(failures)} failed")
        for f in failures:
            print(f"FAIL {f}", file=sys.stderr)
        for m in (cmp.mismatches if cmp else []):
            print(f"MISMATCH {m}", file=sys.stderr)
        if not ok:
            print(f"replay: {replay_command(args, env)}", file=sys.stderr)
    return 0 if ok else 1


def compare_all(args, text: str, source: str, env: dict[str, str]) -> int:
    from purgecheck.glibc.compare import compare

    if not args.no_trace and not args.json:
        print("running the model of every version, tracing the installed glibc ...",
              file=sys.stderr)
    cmp = compare(text, source, env, measure=not args.no_trace)
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(cmp.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")
        return 0 if cmp.ok else 1
    from rich.console import Console
    from rich.table import Table

    settings = " ".join(f"{k}={v}" for k, v in env.items()) or "defaults"
    table = Table(title=f"{source} ({settings}): system calls per version")
    table.add_column("category", no_wrap=True)
    for name in cmp.predicted:
        label = f"model {name}" + (" (installed)" if name == cmp.installed else "")
        table.add_column(label, justify="right")
    if cmp.measured:
        table.add_column(f"glibc {cmp.release} (strace)", justify="right")
    for cat in cmp.categories():
        row = [cat] + [str(c[cat]) for c in cmp.predicted.values()]
        if cmp.measured:
            real = cmp.measured.counts[cat]
            same = real == cmp.predicted[cmp.installed][cat]
            row.append(str(real) if same else f"[bold red]{real}[/]")
        table.add_row(*row)
    console = Console(width=160)
    console.print(table)
    for m in cmp.mismatches:
        console.print(f"[bold red]MISMATCH[/] {m}")
    if cmp.mismatches:
        console.print(f"replay: {replay_command(args, env)}")
    elif cmp.measured:
        console.print(f"the model of {cmp.installed} agrees with glibc {cmp.release} "
                      f"in every category")
    return 0 if cmp.ok else 1


def list_workloads() -> int:
    from purgecheck.glibc.workloads import CASES, WORKLOADS

    print("workloads (purgecheck glibc run NAME; --script prints the op script):")
    for w in WORKLOADS.values():
        print(f"  {w.name:20} {w.description} (scale {w.full}, quick {w.quick})")
    print("conformance cases (checked by the glibc engine; * = quick budget):")
    for c in CASES:
        env = " ".join(f"{k}={v}" for k, v in c.env.items()) or "defaults"
        print(f"  {'*' if c.quick else ' '} {c.name:32} {env}")
    return 0
