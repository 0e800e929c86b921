"""`purgecheck fuzz`: run the Hypothesis state machines over the model, with progress, a table
per machine, and for a failure the shrunk program and one command that replays it."""

from __future__ import annotations

import argparse
import random
import sys
import time

import orjson

from purgecheck.cli import UsageError

EXAMPLE = """examples:
  purgecheck fuzz                               every machine, the epoch design, dev profile
  purgecheck fuzz --machine page --examples 500
  purgecheck fuzz --minutes 10 --profile nightly
  purgecheck fuzz --machine park --variant two-untouched    a rejected design: finds its defect
  purgecheck fuzz --variant all --profile ci    every design; reports which invariant each broke
  purgecheck fuzz --machine page --mutant unit-next-to-live  exit 1: the mutant is caught
  purgecheck fuzz --machine page --variant no-hold --replay AXicY3Bk...   replay a failure
  purgecheck fuzz --machine page --driver rules   Hypothesis's own stateful driver (slower)
machines: page (pages of every kind and OS page size, a byte shadow), epoch (sweepers
  interleaved one atomic step at a time), park (parks, the scavenger, liveness), glibc (seed
  001, when present). Found failures go to .purgecheck/hypothesis and are tried first next time.
exit status: 0 every invariant held, 1 one failed (its program and replay command are
  printed), 2 bad usage
"""


def add_parser(sub) -> argparse.ArgumentParser:
    from model.variants import VARIANTS
    from purgecheck.fuzz import DRIVERS
    from stateful_tests.profiles import PROFILES

    p = sub.add_parser("fuzz", help="run the Hypothesis state machines over the model",
                       description="Drive the model with Hypothesis rule-based state machines "
                                   "and check every invariant of the registry after every "
                                   "step (the steps are read from one byte string Hypothesis "
                                   "draws per example, or chosen by Hypothesis's stateful "
                                   "driver with --driver rules). A failure prints the shrunk "
                                   "program and a command that replays it exactly.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--machine", action="append", metavar="NAME",
                   help="run this machine (repeatable; default: all of them)")
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--examples", type=int, metavar="N",
                        help="examples per machine and design (default: the profile's)")
    budget.add_argument("--minutes", type=float, metavar="M",
                        help="search for M minutes in all, shared by the runs")
    p.add_argument("--steps", type=int, metavar="N",
                   help="steps per example (default: the profile's)")
    p.add_argument("--seed", type=int, metavar="S", help="seed of the search (default: random, "
                                                         "or fixed by the ci profile)")
    p.add_argument("--variant", default="epoch", metavar="V",
                   help=f"design of the seed: {', '.join(VARIANTS)}, or all (default: epoch)")
    p.add_argument("--mutant", metavar="M", help="apply this mutant of the model "
                                                 "(purgecheck.mutants) while the machines run")
    p.add_argument("--profile", default="dev", choices=list(PROFILES),
                   help="Hypothesis profile: ci (quick, derandomized), dev (default), nightly")
    p.add_argument("--driver", choices=list(DRIVERS),
                   help="who chooses the steps: program (one byte string per example, read as "
                        "the program: fast; the default for the model's machines) or rules "
                        "(Hypothesis's own stateful driver; the glibc machine's)")
    p.add_argument("--no-shrink", action="store_true",
                   help="report the first failing program as found, without shrinking it")
    p.add_argument("--replay", metavar="BLOB", help="replay the failure of this "
                                                    "@reproduce_failure blob (one --machine)")
    p.add_argument("--json", action="store_true", help="write the outcome as JSON on stdout")
    return p


def run(args) -> int:
    from model.variants import VARIANTS
    from purgecheck.fuzz import FuzzUsageError, machine_names, run_machine, takes_variant

    machines = args.machine or machine_names()
    unknown = [m for m in machines if m not in machine_names()]
    if unknown:
        raise UsageError(f"unknown machine {unknown[0]!r}; expected one of "
                         f"{', '.join(machine_names())}")
    if args.variant != "all" and args.variant not in VARIANTS:
        raise UsageError(f"unknown variant {args.variant!r}; expected one of "
                         f"{', '.join(VARIANTS)}, or all")
    for flag, value in (("--examples", args.examples), ("--minutes", args.minutes),
                        ("--steps", args.steps)):
        if value is not None and value <= 0:
            raise UsageError(f"{flag} must be positive, got {value}")
    if args.replay and (len(machines) != 1 or args.variant == "all"):
        raise UsageError("--replay replays one program: give one --machine (and the --variant "
                         "and --mutant of the failure)")
    check_names(args)
    variants = list(VARIANTS) if args.variant == "all" else [args.variant]
    jobs = [(m, v) for m in machines for v in (variants if takes_variant(m) else [None])]

    runs = []
    try:
        with Progress(quiet=args.json) as progress:
            share = args.minutes * 60 / len(jobs) if args.minutes else None
            for machine, variant in jobs:
                runs.append(run_job(machine, variant, args, share, progress, run_machine))
    except FuzzUsageError as e:
        raise UsageError(str(e))
    if args.json:
        doc = {"ok": all(r.ok for r in runs), "command": "fuzz",
               "runs": [r.as_dict() for r in runs]}
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_report(runs)
    return 0 if all(r.ok for r in runs) else 1


def check_names(args) -> None:
    """The mutant and the replay blob, before anything runs."""
    from purgecheck.fuzz import FuzzUsageError, replay_blob
    from purgecheck.mutants import MUTANTS

    if args.mutant and args.mutant not in MUTANTS:
        raise UsageError(f"unknown mutant {args.mutant!r}; expected one of "
                         f"{', '.join(MUTANTS)}")
    if args.replay:
        try:
            replay_blob(args.replay)
        except FuzzUsageError as e:
            raise UsageError(str(e))


BATCH_EXAMPLES = 50  # with --minutes: examples per batch, each batch with a new seed


def run_job(machine, variant, args, share, progress, run_machine):
    """One machine under one design: the profile's budget, or batches until `share` seconds
    are spent (each batch a new seed) or something fails."""
    label = machine + (f" [{variant}]" if variant else "") + \
        (f" mutant {args.mutant}" if args.mutant else "")
    task = progress.start(label)
    common = dict(variant=variant, mutant=args.mutant, profile=args.profile, steps=args.steps,
                  shrink=not args.no_shrink, on_example=lambda: progress.tick(task),
                  driver=args.driver)
    if share is None:
        return run_machine(machine, examples=args.examples, seed=args.seed,
                           replay=args.replay, **common)
    end, batch, total = time.monotonic() + share, 0, None
    base = args.seed if args.seed is not None else random.randrange(1 << 32)
    while True:
        r = run_machine(machine, examples=BATCH_EXAMPLES, seed=base + batch, **common)
        if total is not None:
            r.examples += total.examples
            r.steps += total.steps
            r.seconds += total.seconds
        total, batch = r, batch + 1
        if not r.ok or time.monotonic() >= end:
            return r


class Progress:
    """A rich progress bar on stderr: examples, steps, and examples per second."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet

    def __enter__(self):
        if not self.quiet:
            from rich.console import Console
            from rich.progress import Progress as Bar, SpinnerColumn, TextColumn, TimeElapsedColumn

            self.bar = Bar(SpinnerColumn(), TextColumn("{task.description:32}"),
                           TextColumn("{task.completed:>7,} examples"),
                           TextColumn("{task.fields[steps]:>9,} steps"),
                           TextColumn("{task.fields[rate]:>6.0f} ex/s"), TimeElapsedColumn(),
                           console=Console(stderr=True), refresh_per_second=4)
            self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        if not self.quiet:
            self.bar.__exit__(*exc)

    def start(self, label: str):
        from stateful_tests.failures import STATS

        self.stats, self.t0 = STATS, time.perf_counter()
        if self.quiet:
            return None
        return self.bar.add_task(label, total=None, steps=0, rate=0.0)

    def tick(self, task) -> None:
        if self.quiet:
            return
        dt = time.perf_counter() - self.t0
        self.bar.update(task, completed=self.stats.examples, steps=self.stats.steps,
                        rate=self.stats.examples / dt if dt else 0.0)


def print_report(runs) -> None:
    from rich.console import Console

    from purgecheck.fuzz import reproduce_line
    from rich.table import Table

    console = Console(width=160)
    for machine in dict.fromkeys(r.machine for r in runs):
        t = Table(title=f"fuzz: {machine} machine")
        for col in ("design", "mutant", "examples", "steps", "ex/s", "steps/s", "time",
                    "result", "found after"):
            t.add_column(col, justify="right" if col not in ("design", "mutant", "result")
                         else "left")
        for r in (r for r in runs if r.machine == machine):
            result = "[green]held[/]" if r.ok else f"[bold red]FAIL {r.failure.invariant}[/]"
            t.add_row(r.variant or "-", r.mutant or "-", f"{r.examples:,}", f"{r.steps:,}",
                      f"{r.examples_per_s:.0f}", f"{r.steps_per_s:.0f}", f"{r.seconds:.1f}s",
                      result, f"{r.found_after} examples" if r.found_after else "")
        console.print(t)
    for r in runs:
        for note in r.notes:
            console.print(f"[yellow]note[/] {r.machine}: {note}")
        if r.ok:
            continue
        f = r.failure
        plain = dict(highlight=False, markup=False, soft_wrap=True)
        console.print(f"[bold red]FAIL[/] {f.invariant} ({r.command()}): {f.reason}",
                      highlight=False)
        kind = "shrunk program" if r.shrunk and not r.replayed else "program"
        console.print(f"  {kind} (every invariant is checked after every step):", **plain)
        for line in f.program.splitlines():
            console.print(f"    {line}", **plain)
        console.print(f"  replay: {r.replay_command()}", **plain)
        if f.blob:
            console.print(f"  or add {reproduce_line(f)} to the machine's test", **plain)
    failed = sum(not r.ok for r in runs)
    console.print(f"{len(runs) - failed} held, {failed} failed")
