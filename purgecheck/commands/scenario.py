"""`purgecheck scenario`: run a named scenario (or an op script) and print its timeline."""

from __future__ import annotations

import argparse
import sys

import orjson

from model.invariants import WORLD_SCOPES, HeldPages, check_world, load_registry
from purgecheck.cli import UsageError
from purgecheck.formats.ops import OpScriptError, parse_script, render_script

EXAMPLE = """examples:
  purgecheck scenario --list
  purgecheck scenario every-third            the timeline, invariants checked after each op
  purgecheck scenario every-third --script   the op script (input of the C driver)
  purgecheck scenario --file my.ops          run your own op script
  purgecheck scenario inline-hold --variant handoff-only   a rejected design of the seed
exit status: 0 every invariant held, 1 one failed, 2 bad usage or a bad op script
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("scenario", help="run a named scenario and print its timeline",
                       description="Run a scenario of the seed's tests on the model (virtual "
                                   "clock, deterministic) and print what happened after each "
                                   "op; every invariant is checked after every op.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", nargs="?", help="scenario name (see --list)")
    p.add_argument("--list", action="store_true", help="list the scenarios")
    p.add_argument("--file", metavar="SCRIPT", help="run this op script instead")
    p.add_argument("--script", action="store_true", help="print the op script and stop")
    p.add_argument("--variant", metavar="V",
                   help="run under a design of the seed: epoch (default), no-hold, clock, "
                        "handoff-only, two-untouched")
    p.add_argument("--json", action="store_true", help="events as JSON lines")
    return p


def run(args) -> int:
    from purgecheck.runner import run_ops
    from purgecheck.scenarios import SCENARIOS
    from model.world import Options

    if args.list:
        for sc in SCENARIOS.values():
            print(f"{sc.name:24} {sc.description}")
        return 0
    if args.file and args.name:
        raise UsageError(f"give a scenario name or --file SCRIPT, not both (got "
                         f"{args.name!r} and --file {args.file})")
    if args.file:
        try:
            with open(args.file, "rb") as f:
                data = f.read()
        except OSError as e:
            raise UsageError(f"cannot read {args.file}: {e.strerror}")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data.count(b"\n", 0, e.start) + 1
            raise UsageError(f"{args.file}:{line}: expected an op script in UTF-8 text, found "
                             f"byte {data[e.start]:#04x}")
        source, options = args.file, Options()
    elif args.name:
        if args.name not in SCENARIOS:
            raise UsageError(f"unknown scenario {args.name!r}; `purgecheck scenario --list` "
                             f"lists them")
        sc = SCENARIOS[args.name]
        text, source, options = sc.build(), f"scenario:{sc.name}", sc.options
    else:
        raise UsageError("name a scenario, or give --file SCRIPT or --list")
    if args.variant:
        import dataclasses
        from model.variants import VARIANTS
        if args.variant not in VARIANTS:
            raise UsageError(f"unknown variant {args.variant!r}; expected one of "
                             f"{', '.join(VARIANTS)}")
        options = dataclasses.replace(options, variant=args.variant)
    try:
        ops = parse_script(text, source)
    except OpScriptError as e:
        raise UsageError(str(e))
    if args.script:
        sys.stdout.write(render_script(ops))
        return 0

    failures: dict[str, str] = {}
    shown = 0
    steps = 0
    held = HeldPages()  # the pages judged already (model.invariants.check_world)

    def after(op, world):
        nonlocal shown
        new = world.log[shown:]
        shown = len(world.log)
        if args.json:
            for ev in new:
                sys.stdout.buffer.write(orjson.dumps({"line": op.line, **ev}) + b"\n")
        else:
            interesting = [e for e in new if e["ev"] not in ("malloc", "free", "extend")]
            if interesting or op.name not in ("malloc", "free"):
                print(f"{op.line:5} t={world.clock.read():<6} epoch={world.epoch.epoch:<3} "
                      f"{op.render()}")
                for e in interesting:
                    fields = " ".join(f"{k}={v}" for k, v in e.items() if k != "ev")
                    print(f"        {e['ev']:14} {fields}")
        nonlocal steps
        steps += 1
        for inv_id, reason in check_world(world, held):
            # the first failure of each invariant: a broken state stays broken after it
            failures.setdefault(inv_id, f"line {op.line} ({op.render()}): {inv_id}: {reason}")

    try:
        run_ops(ops, options, after_step=after, source=source)
    except OpScriptError as e:
        raise UsageError(str(e))
    checked = sum(1 for i in load_registry().values()
                  if i.predicate and i.scope in WORLD_SCOPES)  # what check_world judges
    if args.json:
        # the last line is the verdict, an event like the others (after the last op)
        sys.stdout.buffer.write(orjson.dumps({"line": ops[-1].line if ops else 0,
                                              "ev": "verdict",
                                              "verdict": "fail" if failures else "held",
                                              "ops": steps, "invariants": checked,
                                              "failures": list(failures.values())}) + b"\n")
    for f in failures.values():
        print(f"FAIL {f}", file=sys.stderr)
    if failures:
        print(f"{len(failures)} of {checked} invariants failed over {steps} ops",
              file=sys.stderr)
    elif not args.json:
        print(f"{checked} invariants held after each of {steps} ops")
    return 1 if failures else 0
