"""`purgecheck replay`: a recorded program's allocations on the glibc model of every version,
and with --real on this machine's glibc, compared."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from model.glibc.params import settings_from_environ
from model.glibc.syscalls import CATEGORIES
from model.glibc.versions import VERSIONS
from purgecheck.cli import UsageError
from purgecheck.simulate.engine import ENGINES, REPLAY_AUTO_FROM

PROGRESS_BYTES = 1 << 20  # a trace of more records than this says that it is being replayed

EXAMPLE = """examples:
  purgecheck record -o py.rec -- python3 -c 'import json; json.dumps(list(range(10**5)))'
  purgecheck replay py.rec                        the system calls each glibc version predicts
  purgecheck replay py.rec --version 2.21         one version's model
  purgecheck replay py.rec --real                 and this machine's glibc under strace, compared
  purgecheck replay py.rec --real --env MALLOC_TRIM_THRESHOLD_=131072
  purgecheck replay py.rec --real --addresses     and every block at glibc's address
  purgecheck replay py.rec --invariants           the model's invariants after every call
  purgecheck replay cc.rec.4242 --image 1         the second process image of a file (exec)
  purgecheck replay py.rec --script py.ops        the calls as a glibc op script (docs/glibc.md)
  purgecheck replay py.rec --engine pypy          the model run by a pypy3 child (auto: large traces)
  heaptrack -o py.heaptrack python3 prog.py; purgecheck replay py.heaptrack.zst
                                                  a heaptrack recording (one thread, docs/record.md)
exit status: 0 replayed (with --real: the model of the installed version and glibc agree in
every category), 1 they differ (the first op after which their system calls part is named,
with the model's state there), 2 bad usage or a bad trace (one line: file, record, what was
expected)
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("replay", help="replay a recorded program on the glibc model of each "
                                      "version (and on the real glibc with --real)",
                       description="Replay the calls of a trace written by `purgecheck record` "
                                   "on the glibc model of each version, and print the system "
                                   "calls each predicts per category (heap madvise, brk grow "
                                   "and shrink, chunk mmap/munmap/mremap, heaps, stacks). With "
                                   "--real, the same calls run on this machine's glibc "
                                   "(reference_c/glibc_driver under strace) and are compared "
                                   "with the model of the installed version.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", help="a trace file written by `purgecheck record`")
    p.add_argument("--version", choices=list(VERSIONS), help="only this version's model")
    p.add_argument("--real", action="store_true",
                   help="also replay on this machine's glibc and compare")
    p.add_argument("--addresses", action="store_true",
                   help="with --real: also check that the model puts every block at the "
                        "address glibc gives it (the driver without strace)")
    p.add_argument("--invariants", action="store_true",
                   help="check every glibc-arena invariant on every arena after every op "
                        "(the installed version's model, or --version's)")
    p.add_argument("--image", type=int, metavar="N",
                   help="which process image of the file (default: the last that allocated)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="a malloc setting for the model and the real replay (MALLOC_*_, "
                        "GLIBC_TUNABLES; repeatable)")
    p.add_argument("--script", metavar="FILE", help="write the calls as a glibc op script and "
                                                    "stop")
    p.add_argument("--engine", choices=ENGINES, default="auto",
                   help="what runs the model: cpython (this process), pypy (a pypy3 child: "
                        "1.5 times as fast on a recording of a million calls, the same "
                        "figures), auto (the default: pypy when pypy3 is installed and the "
                        "trace's records times the versions replayed reach %s)"
                        % f"{REPLAY_AUTO_FROM:,}")
    p.add_argument("--json", action="store_true", help="JSON on stdout")
    return p


def run(args) -> int:
    from purgecheck.commands.glibc import collect_env
    from purgecheck.formats.alloc_trace import AllocTraceError
    from purgecheck.formats.heaptrack import HeaptrackError
    from purgecheck.glibc.fromtrace import ConvertError
    from purgecheck.glibc.replay import ReplayError, load_stream, replay, write_script
    from purgecheck.glibc.trace import TraceError
    from purgecheck.simulate.engine import EngineError

    from purgecheck.inputs import input_file, output_file

    env = collect_env(args.env)
    path = input_file(args.trace, "a trace written by `purgecheck record`, or a heaptrack file")
    if args.script is not None:
        output_file(args.script, "--script")
        if args.real or args.addresses or args.invariants or args.version or args.json:
            raise UsageError("--script writes the calls as an op script and stops: not with "
                             "--real, --addresses, --invariants, --version or --json")
    if args.engine == "pypy":
        from purgecheck.simulate.engine import MISSING, pypy_path
        if pypy_path() is None:
            raise UsageError(MISSING)
    if args.addresses and (not args.real or args.env):
        raise UsageError("--addresses: compares with this machine's glibc, so it needs --real "
                         "and no --env")
    try:
        if args.script is not None:
            img, _ = load_stream(path, args.image)
            n = write_script(img, Path(args.script))
            print(f"{args.script}: {n:,} ops")
            return 0
        if not args.json and path.stat().st_size > PROGRESS_BYTES:
            print(f"replaying {path} on the model"
                  + (" and on this machine's glibc (strace)" if args.real else "") + " ...",
                  file=sys.stderr)
        rep = replay(path, [args.version] if args.version else None,
                     settings_from_environ(env), env, args.real, args.image, args.engine)
        if args.addresses:
            from purgecheck.glibc.replay import first_address_difference
            img, _ = load_stream(path, args.image)
            diff = first_address_difference(img, VERSIONS[rep.installed])
            if diff is not None:
                rep.mismatches.append(
                    f"op {diff.op_index} (record {diff.op.line}, {diff.op.render()}): the "
                    f"model's block is at {diff.where} offset {diff.model:#x}, glibc's at "
                    f"{diff.real:#x}")
            rep.addresses_checked = True
        if args.invariants:
            from purgecheck.glibc.replay import invariant_failures
            img, _ = load_stream(path, args.image)
            name = args.version or rep.installed or "2.23+"
            rep.invariant_checks, failures = invariant_failures(img, VERSIONS[name])
            rep.mismatches += failures
    except (AllocTraceError, ConvertError, HeaptrackError, ReplayError, TraceError,
            ValueError, EngineError) as e:
        raise UsageError(str(e))
    except OSError as e:  # the file the error is about: the trace, or what --script names
        raise UsageError(f"{e.filename or path}: {e.strerror or e}")
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(to_doc(rep, env), option=orjson.OPT_INDENT_2)
                                + b"\n")
    else:
        print_table(rep, env)
        if args.invariants:
            print(f"  invariants: {rep.invariant_checks:,} checks after every op on every arena"
                  + "".join(f"\n    {m}" for m in rep.mismatches if m.startswith("record ")))
    if rep.mismatches:
        again = " ".join(["purgecheck replay", str(path)]
                         + [flag for flag, on in (("--real", args.real),
                                                  ("--addresses", args.addresses),
                                                  ("--invariants", args.invariants)) if on]
                         + ([f"--version {args.version}"] if args.version else [])
                         + [f"--env {k}={v}" for k, v in env.items()]
                         + ([f"--image {args.image}"] if args.image is not None else []))
        print(f"replay: {again}", file=sys.stderr)
        return 1
    return 0


def to_doc(rep, env) -> dict:
    doc = {"trace": rep.source, "image": rep.image, "pid": rep.pid, "env": env,
           "ops": rep.conversion.ops, "max_live_blocks": rep.conversion.max_live,
           "skipped": rep.conversion.skipped,
           "stopped": (None if rep.conversion.stopped is None else
                       {"record": rep.conversion.stopped[0], "why": rep.conversion.stopped[1]}),
           "complete": rep.prefix is None, "prefix": rep.prefix,
           "predicted": rep.predicted,
           "model_seconds": rep.model_seconds, "engine": rep.engine, "ok": rep.ok}
    if rep.measured is not None:
        doc |= {"glibc": rep.release, "installed_model": rep.installed,
                "measured": rep.measured.counts, "real_seconds": rep.real_seconds,
                "memory": rep.memory.as_json() if rep.memory else None,
                "mismatches": rep.mismatches}
    if rep.divergence is not None:
        d = rep.divergence
        doc["divergence"] = {"op": d.op_index, "record": d.op.line, "call": d.op.render(),
                             "model": d.model, "glibc": d.real, "model_state": d.state}
    return doc


def print_table(rep, env) -> None:
    conv = rep.conversion
    print(f"{rep.source} image {rep.image} (pid {rep.pid}): {conv.ops:,} ops, at most "
          f"{conv.max_live:,} blocks live" + (f", {sum(conv.skipped.values())} records "
                                              f"left out ({'; '.join(conv.skipped)})"
                                              if conv.skipped else "")
          + (f"; {' '.join(f'{k}={v}' for k, v in env.items())}" if env else ""))
    if rep.prefix is not None:
        print(f"  PREFIX: these figures cover part of the run only: {rep.prefix}")
    versions = list(rep.predicted)
    head = f"  {'category':14}" + "".join(f" {'model ' + v:>13}" for v in versions)
    if rep.measured is not None:
        head += f" {'glibc ' + rep.release:>12}"
    print(head)
    for cat in CATEGORIES:
        row = [rep.predicted[v][cat] for v in versions]
        real = rep.measured.counts[cat] if rep.measured is not None else None
        if not any(row) and not real:
            continue
        line = f"  {cat:14}" + "".join(f" {n:>13}" for n in row)
        if real is not None:
            line += f" {real:>12}"
            if real != rep.predicted[rep.installed][cat]:
                line += "   <- differs"
        print(line)
    rates = [f"{v} {conv.ops / rep.model_seconds[v]:,.0f}" for v in versions
             if rep.model_seconds.get(v)]
    if rates:  # the speed a reviewer can expect of their own trace (docs/record.md, "Speed")
        by = "pypy, the child's CPU after CPython's reading" if rep.engine == "pypy" \
            else "cpython"
        print(f"  ops per CPU second, conversion included (run by {by}): {', '.join(rates)}")
    if rep.measured is None:
        return
    m = rep.memory
    if m is not None:  # the band: docs/record.md, "Resident memory"
        print(f"  resident memory: model {rep.installed} peak {m.model_peak_kb / 1024:,.1f} MB, "
              f"{m.model_faults:,} pages faulted ({m.model_refaults:,} refaults); glibc "
              f"{rep.release} driver peak RSS {m.real_peak_kb / 1024:,.1f} MB, "
              f"{m.real_minor_faults:,} minor faults (over the ops, above its own tables)")
    if rep.ok:
        print(f"  the model of {rep.installed} and glibc {rep.release} agree in every category"
              + (", and every block is at glibc's address" if rep.addresses_checked else ""))
        return
    print(f"  {len(rep.mismatches)} differences: {'; '.join(rep.mismatches[:4])}")
    d = rep.divergence
    if d is None:
        if not any(m.startswith("op ") for m in rep.mismatches):
            print("  (op by op, the streams did not part: the difference is in the order only)")
        return
    print(f"  the streams part at op {d.op_index} (record {d.op.line}): {d.op.render()}")
    print(f"    model: {', '.join(d.model) or 'no system call'}")
    print(f"    glibc: {', '.join(d.real) or 'no system call'}")
    print("    the model's state after it:")
    for line in d.state:
        print(f"      {line}")
