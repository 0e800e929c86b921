"""`purgecheck fuzz`: run the Hypothesis state machines over the model, with progress, a table
per machine, and for a failure the shrunk program and one command that replays it."""

from __future__ import annotations

import argparse
import random
import sys
import time

import orjson

from purgecheck.cli import UsageError
from purgecheck.cluster.client import add_scheduler_option

EXAMPLE = """examples:
  purgecheck fuzz                               every machine, the epoch design, dev profile
  purgecheck fuzz --machine page --examples 500
  purgecheck fuzz --minutes 10 --profile nightly
  purgecheck fuzz --machine park --variant two-untouched    a rejected design: finds its defect
  purgecheck fuzz --variant all --profile ci    every design; reports which invariant each broke
  purgecheck fuzz --machine page --mutant unit-next-to-live  exit 1: the mutant is caught
  purgecheck fuzz --machine page --variant no-hold --replay AXicY3Bk...   replay a failure
  purgecheck fuzz --machine page --driver rules   Hypothesis's own stateful driver (slower)
  purgecheck fuzz --campaign --time 10m         every machine x design x mutant, many seeds,
                                                spread over a local Dask cluster for 10 minutes
  purgecheck fuzz --campaign --time 8h --scheduler tcp://nightly:8786 --db redis://nightly:6379/0
                                                a night on a cluster, sharing what it finds
machines: page (pages of every kind and OS page size, a byte shadow), epoch (sweepers
  interleaved one atomic step at a time), park (parks, the scavenger, liveness), glibc (seed
  001, when present). Found failures go to .purgecheck/hypothesis (or --db) and are tried
  first next time.
campaign: batches of 50 examples, each (machine, design, mutant) in turn with a new seed, as
  Dask tasks (a LocalCluster of one worker per core, or --scheduler / $PURGECHECK_SCHEDULER);
  findings shrunk and de-duplicated by invariant and program; a finding on the clean model
  under the epoch design fails the run, one under a mutant or a rejected design is a catch.
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
    p.add_argument("--variant", metavar="V",
                   help=f"design of the seed: {', '.join(VARIANTS)}, or all (default: epoch; "
                        f"all with --campaign)")
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
    p.add_argument("--db", metavar="WHERE",
                   help="the example database: redis://HOST:PORT/DB (shared by every worker "
                        "and run) or a directory (default: .purgecheck/hypothesis)")
    camp = p.add_argument_group("campaign")
    camp.add_argument("--campaign", action="store_true",
                      help="a campaign over every machine, design and mutant (or those given) "
                           "on Dask workers until --time is up")
    camp.add_argument("--time", metavar="DURATION",
                      help="how long the campaign searches: 90s, 10m, 2h (default 5m)")
    add_scheduler_option(camp, "the campaign's batches")
    camp.add_argument("--workers", type=int, metavar="N",
                      help="worker processes of the cluster started here (default: one per "
                           "core)")
    return p


def parse_duration(text: str) -> float:
    """Seconds of '90', '90s', '10m' or '2h'; UsageError otherwise."""
    unit = {"s": 1, "m": 60, "h": 3600}.get(text[-1:].lower(), None)
    number = text[:-1] if unit else text
    try:
        seconds = float(number) * (unit or 1)
    except ValueError:
        seconds = -1.0
    if not seconds > 0 or seconds != seconds or seconds == float("inf"):
        raise UsageError(f"--time {text!r}: expected a positive duration such as 90s, 10m or "
                         f"2h")
    return seconds


def run(args) -> int:
    from model.variants import VARIANTS
    from purgecheck.fuzz import (FuzzUsageError, check_database, machine_names, run_machine,
                                 takes_variant)

    machines = args.machine or machine_names()
    unknown = [m for m in machines if m not in machine_names()]
    if unknown:
        raise UsageError(f"unknown machine {unknown[0]!r}; expected one of "
                         f"{', '.join(machine_names())}")
    if args.campaign:
        return run_campaign_command(args, machines)
    for flag in ("time", "scheduler", "workers"):
        if getattr(args, flag) is not None:
            raise UsageError(f"--{flag} goes with --campaign")
    args.variant = args.variant or "epoch"
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
        check_database(args.db)
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
                  driver=args.driver, database=args.db)
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


def run_campaign_command(args, machines: list[str]) -> int:
    """`fuzz --campaign`: the jobs on Dask for --time, then the summary (or --json)."""
    from model.variants import VARIANTS
    from purgecheck.cluster.campaign import plan_jobs, run_campaign
    from purgecheck.cluster.client import (ClusterError, dask_client, scheduler_address,
                                           worker_addresses)
    from purgecheck.fuzz import FuzzUsageError, check_database
    from purgecheck.mutants import MUTANTS

    for flag, value in (("--examples", args.examples), ("--minutes", args.minutes),
                        ("--replay", args.replay), ("--steps", args.steps),
                        ("--driver", args.driver)):
        if value is not None:
            raise UsageError(f"{flag} does not go with --campaign (batches of 50 examples, "
                             f"each machine's own driver and steps)")
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    seconds = parse_duration("5m" if args.time is None else args.time)
    variant = args.variant or "all"
    if variant != "all" and variant not in VARIANTS:
        raise UsageError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}, "
                         f"or all")
    check_names(args)
    jobs = plan_jobs(machines, list(VARIANTS) if variant == "all" else [variant],
                     [args.mutant] if args.mutant else list(MUTANTS))
    if args.mutant and all(j.mutant is None for j in jobs):
        raise UsageError(f"--mutant {args.mutant}: it patches no model that the machines "
                         f"{', '.join(machines)} run")
    say = (lambda text: None) if args.json else (lambda text: print(text, file=sys.stderr))
    base = args.seed if args.seed is not None else random.randrange(1 << 32)
    try:
        address = scheduler_address(args.scheduler)
        if args.workers is not None and address:
            raise UsageError("--workers sizes the cluster started here: not with a "
                             "scheduler's address")
        check_database(args.db)
        with dask_client(address, args.workers) as client:
            say(f"campaign: {len(jobs)} jobs (machine x design x mutant) for {seconds:g} s on "
                f"{len(worker_addresses(client))} Dask workers, seeds from {base}, "
                f"examples in {args.db or '.purgecheck/hypothesis'}")

            def progress(camp, totals):
                say(f"[{camp.examples:>8,} examples] {totals.job.label}: batch {totals.batches}"
                    f"{', FAIL' if totals.findings else ''}; {len(camp.findings)} findings")
            camp = run_campaign(client, jobs, seconds, base, args.profile, args.db,
                                progress=progress, database_label=args.db)
    except (ClusterError, FuzzUsageError) as e:
        raise UsageError(str(e))
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(camp.as_dict(), option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_campaign(camp)
    return 0 if camp.as_dict()["ok"] else 1


def print_campaign(camp) -> None:
    """The summary: a row per job that ran, then each finding with its replay command."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=160)
    t = Table(title=f"fuzz campaign: {camp.examples:,} examples in {camp.seconds:.0f} s on "
                    f"{camp.workers} workers ({camp.examples_per_s:.0f} ex/s)")
    for col in ("machine", "design", "mutant", "batches", "examples", "failed batches"):
        t.add_column(col, justify="left" if col in ("machine", "design", "mutant") else "right")
    ran = [x for x in camp.totals.values() if x.batches]
    for x in ran:
        t.add_row(x.job.machine, x.job.variant or "-", x.job.mutant or "-", str(x.batches),
                  f"{x.examples:,}", str(x.findings) if x.findings else ".")
    console.print(t)
    plain = dict(highlight=False, markup=False, soft_wrap=True)
    for f in camp.findings.values():
        kind = "catch" if f.expected else "DEFECT"
        console.print(f"{kind} {f.invariant}: {f.reason} (found in {', '.join(f.jobs)})",
                      **plain)
        for line in f.program.splitlines():
            console.print(f"    {line}", **plain)
        console.print(f"  replay: {f.replay}", **plain)
    for e in camp.errors:
        console.print(f"ERROR {e}", **plain)
    console.print(f"{len(ran)} of {len(camp.totals)} jobs ran; {len(camp.findings)} distinct "
                  f"findings, {len(camp.defects())} on the clean model under the epoch design; "
                  f"{len(camp.errors)} batches could not run", **plain)


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
