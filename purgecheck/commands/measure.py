"""`purgecheck measure`: a workload on the real Bun under each design its options express."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from purgecheck.cli import UsageError

EXAMPLE = """examples:
  purgecheck measure --list                        workloads, parameters, designs
  purgecheck measure bun-serve                     every design, 3 runs each, interleaved
  purgecheck measure bun-serve --design epoch --design no-hold --set load_s=5
  purgecheck measure typed-arrays --option purge_holes_min_interval=50
  purgecheck measure bun-serve --repeats 5 --json > serve.json
  purgecheck measure bun-serve --no-strace         without counting madvise (its cost)
  purgecheck measure bun-serve --compare           and the model beside it, figure by figure
  purgecheck measure --seed-tables                 seed 000's tables: seed | real | model
  purgecheck measure --seed-tables --from FILE     the same from a saved measurement
  purgecheck measure --script my-app.js --set idle_s=10     your own program
  purgecheck measure --seed-tables --add-to docs/data/real-bun.json
                                                   the recorded workloads again: add the
                                                   figures the recording lacks
designs: before (MIMALLOC_PURGE_HOLES=0), no-hold (MIMALLOC_PURGE_HOLES_MIN_INTERVAL=0 and
MIMALLOC_PURGE_HOLES_LARGE_FLOOR=0), epoch (MIMALLOC_PURGE_HOLES_LARGE_FLOOR=0: the seed's
rule), default (Bun 1.4.4 as shipped); --option adds a setting to every design run.
exit status: 0 measured, 1 a run failed (the program died, the load failed), 2 bad usage
(one line), or no bun (make setup installs it; --bun PATH)
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("measure", help="run a workload on the real Bun 1.4.4 under each design: "
                                       "RSS, anonymous memory, discards, page faults, CPU",
                       description="Run one of seed 000's workloads as a Bun program on the real "
                                   "Bun 1.4.4, whose mimalloc is the fork of seed 000, under each "
                                   "design its options express, several times, interleaved; "
                                   "measure from outside what the seed measured: RSS and "
                                   "anonymous memory (smaps_rollup) through the load and the "
                                   "idle, madvise calls and bytes (strace), minor page faults "
                                   "and CPU per request (/proc/PID/stat), requests per second. "
                                   "Servers and load generators use loopback and stop by "
                                   "themselves. See docs/measure.md.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload", nargs="?", metavar="WORKLOAD", help="a workload (--list)")
    p.add_argument("--list", action="store_true", help="list workloads, parameters and designs")
    p.add_argument("--script", metavar="FILE.js",
                   help="your own Bun program instead of a workload: it prints `load-start` and "
                        "`load-end [REQUESTS]` lines; the idle (--set idle_s=S) follows")
    p.add_argument("--design", action="append", metavar="D",
                   help="a design (repeatable; default: before, no-hold, epoch, default)")
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                   help="a mimalloc option for every design run, e.g. "
                        "purge_holes_min_interval=50 (repeatable)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                   help="a workload parameter (repeatable), e.g. load_s=5")
    p.add_argument("--repeats", type=int, default=3, metavar="N",
                   help="runs per design, interleaved across designs (1..50; default 3)")
    p.add_argument("--bun", metavar="PATH", help="the bun binary (default: the one make setup "
                                                 "installed, or $PURGECHECK_BUN)")
    p.add_argument("--no-strace", action="store_true",
                   help="do not count madvise calls (no strace: what counting costs)")
    p.add_argument("--sample-ms", type=float, default=50.0, metavar="MS",
                   help="sample smaps_rollup every MS ms (10..1000; default 50)")
    p.add_argument("--compare", action="store_true",
                   help="run the simulator on the measured workload (its parameters, its pace) "
                        "and compare each figure within its band (docs/measure.md)")
    p.add_argument("--seed-tables", action="store_true",
                   help="measure seed 000's workloads (bun-serve, bun-serve-nothing-kept, "
                        "typed-arrays, buffer-loop) under every design and print the seed's "
                        "tables with three columns per figure: seed, real, model")
    p.add_argument("--model-runs", type=int, default=None, metavar="N",
                   help="with --seed-tables or --compare: each model figure is the median of "
                        "N runs of the model with their own seeds (1..9; default 3, as the "
                        "real repeats)")
    p.add_argument("--from", dest="from_file", metavar="FILE",
                   help="with --seed-tables or --compare: the measurements of a saved --json "
                        "(or --out) run instead of measuring again")
    p.add_argument("--record", action="store_true",
                   help="with --seed-tables: keep the measurement as docs/data/real-bun.json, "
                        "which `purgecheck docs` turns into docs/real-bun.md")
    p.add_argument("--add-to", metavar="FILE",
                   help="with --seed-tables (every recorded workload) or a WORKLOAD: run the "
                        "workloads of a recorded --seed-tables measurement again at their "
                        "recorded parameters and designs, and add to FILE only the figures it "
                        "lacks, with the date, the load and this command")
    p.add_argument("--json", action="store_true", help="every run and the summary as JSON")
    p.add_argument("--out", metavar="FILE", help="also write the JSON to FILE")
    return p


def _list() -> int:
    from purgecheck.measure.designs import DESIGNS
    from purgecheck.measure.workloads import WORKLOADS
    print("workloads (parameter=default):")
    for w in WORKLOADS.values():
        print(f"  {w.name}: {w.description}")
        print("      " + ", ".join(f"{k}={v}" for k, v in w.params.items()))
    print("designs:")
    for name, (what, opts) in DESIGNS.items():
        env = " ".join(f"MIMALLOC_{k.upper()}={v}" for k, v in opts.items()) or "(nothing set)"
        print(f"  {name:8} {what}: {env}")
    return 0


def _pairs(items: list[str], what: str) -> dict[str, str]:
    out = {}
    for item in items:
        k, eq, v = item.partition("=")
        if not eq or not k.strip() or not v.strip():
            raise UsageError(f"{what} {item!r}: expected NAME=VALUE")
        out[k.strip()] = v.strip()
    return out


def _measure(bun, w, params: dict, designs: list[str], options: dict, args,
             progress: str = "") -> dict:
    """Every design `args.repeats` times, interleaved: the JSON document of one workload."""
    from purgecheck.measure.bun import installed_version
    from purgecheck.measure.report import machine, summarise
    from purgecheck.measure.run import measure_once
    runs = []
    total = args.repeats * len(designs)
    for rep in range(args.repeats):
        for d in designs:
            print(f"{progress}run {len(runs) + 1}/{total}: {w.name} under {d} (repeat {rep + 1})",
                  file=sys.stderr, flush=True)
            runs.append(measure_once(bun, w, params, d, options, rep,
                                     count_madvise=not args.no_strace, sample_ms=args.sample_ms))
    return {"workload": w.name, "params": params, "options": options, "designs": designs,
            "bun": str(bun), "bun_version": installed_version(bun),
            "counted_madvise": not args.no_strace, "machine": machine(),
            "summary": summarise(runs), "runs": [r.as_json() for r in runs]}


def _add_to(bun, args) -> int:
    """--add-to: each recorded workload (or the one named) run again at its recorded
    parameters and designs; the figures the recording lacks go into it
    (purgecheck/measure/recording.py)."""
    from purgecheck.measure.recording import RecordingMismatch, add_figures, recorded_figures
    from purgecheck.measure.run import RunError
    from purgecheck.measure.workloads import workload_params
    path = Path(args.add_to)
    record = orjson.loads(path.read_bytes()) if path.is_file() else {}
    recorded = record.get("workloads") if isinstance(record, dict) else None
    if not isinstance(recorded, dict):
        raise UsageError(f"--add-to {path}: not a recorded --seed-tables measurement")
    names = list(recorded) if args.seed_tables else [args.workload]
    if any(n not in recorded for n in names):
        raise UsageError(f"--add-to {path}: no recorded workload {args.workload!r}; it has "
                         f"{', '.join(recorded)}")
    known = recorded_figures(recorded)  # before any is added
    command = (f"purgecheck measure {'--seed-tables' if args.seed_tables else args.workload} "
               f"--add-to {path} --repeats {args.repeats}")
    for i, name in enumerate(names):
        rec = recorded[name]
        try:
            w, params = workload_params(name, {k: str(v) for k, v in rec["params"].items()})
        except ValueError as e:
            raise UsageError(f"--add-to {path}: {e}") from None
        try:
            doc = _measure(bun, w, params, list(rec["designs"]), dict(rec["options"]), args,
                           f"[{i + 1}/{len(names)}] " if len(names) > 1 else "")
        except RunError as e:
            print(f"purgecheck measure: {e}", file=sys.stderr)
            return 1
        try:
            added = add_figures(rec, doc, command, known)
        except RecordingMismatch as e:
            raise UsageError(f"--add-to {path}: {e}") from None
        path.write_bytes(orjson.dumps(record, option=orjson.OPT_INDENT_2))  # each workload kept
        print(f"{name}: added {', '.join(added) or 'nothing (the recording has every figure)'}")
        for d, s in rec["summary"].items():
            print("  " + d + ": " + ", ".join(
                f"{k} {s[k]['median']:g} ({s[k]['min']:g}..{s[k]['max']:g})"
                for k in added if k in s))
    return 0


def _load_saved(path: str) -> dict:
    try:
        doc = orjson.loads(Path(path).read_bytes())
    except OSError as e:
        raise UsageError(f"--from {path}: {e.strerror or e}") from None
    except orjson.JSONDecodeError as e:
        raise UsageError(f"--from {path}: not JSON ({e})") from None
    if isinstance(doc, dict) and "summary" in doc and "workload" in doc:
        return {doc["workload"]: doc}
    if isinstance(doc, dict) and isinstance(doc.get("workloads"), dict):
        return doc["workloads"]
    raise UsageError(f"--from {path}: not the JSON of `purgecheck measure --json`")


def _check(args) -> None:
    if not 1 <= args.repeats <= 50:
        raise UsageError(f"--repeats must be in 1..50, found {args.repeats}")
    if not 10 <= args.sample_ms <= 1000:
        raise UsageError(f"--sample-ms must be in 10..1000, found {args.sample_ms:g}")
    if args.out is not None and (not args.out or Path(args.out).is_dir()
                                 or not Path(args.out).resolve().parent.is_dir()):
        raise UsageError(f"--out {args.out!r}: not a file in an existing folder")
    if args.record and not args.seed_tables:
        raise UsageError("--record keeps a --seed-tables measurement: give --seed-tables")
    if args.from_file is not None and not (args.seed_tables or args.compare):
        raise UsageError("--from reads a saved measurement for --seed-tables or --compare")
    if args.model_runs is not None and not (args.seed_tables or args.compare):
        raise UsageError("--model-runs is for the model beside a measurement: give "
                         "--seed-tables or --compare")
    if args.model_runs is not None and not 1 <= args.model_runs <= 9:
        raise UsageError(f"--model-runs must be in 1..9, found {args.model_runs}")
    if args.add_to is not None:
        clash = [o for o, on in (("--from", args.from_file), ("--record", args.record),
                                 ("--set", args.set), ("--design", args.design),
                                 ("--script", args.script), ("--compare", args.compare),
                                 ("--option", args.option)) if on]
        if clash:
            raise UsageError(f"--add-to runs the recorded workloads as they were recorded: "
                             f"give no {clash[0]} with it")
        if bool(args.seed_tables) == bool(args.workload):
            raise UsageError("--add-to: name a recorded workload, or give --seed-tables")
        if not Path(args.add_to).is_file():
            raise UsageError(f"--add-to {args.add_to}: no such file")
        return
    if args.seed_tables and (args.workload or args.design):
        raise UsageError("--seed-tables measures the seed's workloads under every design: give "
                         "no WORKLOAD or --design with it")


def _emit(doc: dict, args) -> None:
    if args.out:
        Path(args.out).write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")


def run(args) -> int:
    from purgecheck.measure.bun import BunMissing, find_bun
    from purgecheck.measure.designs import DESIGNS, parse_option
    from purgecheck.measure.run import RunError
    from purgecheck.measure.workloads import WORKLOADS, workload_params
    if args.list:
        return _list()
    _check(args)
    if args.script is not None and (args.workload or args.seed_tables or args.compare):
        raise UsageError("--script measures your program: give no WORKLOAD, --seed-tables or "
                         "--compare with it (the model has no workload of its shape)")
    if not args.workload and not args.seed_tables and args.script is None:
        raise UsageError("name a workload (see --list), or give --seed-tables or --script")
    try:
        sets = _pairs(args.set, "--set")
        options = dict(parse_option(o) for o in args.option)
        if args.workload or args.script is not None:
            w, params = workload_params(args.workload, sets, args.script)
    except ValueError as e:
        raise UsageError(str(e)) from None
    designs = args.design or list(DESIGNS)
    for d in designs:
        if d not in DESIGNS:
            raise UsageError(f"unknown design {d!r}; expected one of {', '.join(DESIGNS)}")
    if args.from_file:
        measured = _load_saved(args.from_file)
    else:
        try:
            bun = find_bun(args.bun)
        except BunMissing as e:
            raise UsageError(str(e)) from None
        if args.add_to:
            return _add_to(bun, args)
        names = list(WORKLOADS) if args.seed_tables else [w.name]
        measured = {}
        try:
            for i, name in enumerate(names):
                if args.seed_tables:  # --set applies where the workload has the parameter
                    try:
                        w, params = workload_params(name, {k: v for k, v in sets.items()
                                                           if k in WORKLOADS[name].params})
                    except ValueError as e:
                        raise UsageError(str(e)) from None
                prefix = f"[{i + 1}/{len(names)}] " if len(names) > 1 else ""
                measured[name] = _measure(bun, w, params, designs, options, args, prefix)
        except RunError as e:
            print(f"purgecheck measure: {e}", file=sys.stderr)
            return 1
    if args.seed_tables:
        return _seed_tables(measured, args)
    doc = measured.get(args.workload) or next(iter(measured.values()))
    if args.compare:
        from purgecheck.measure.compare import compare
        doc["comparison"] = compare(doc["workload"], doc["params"], doc["summary"],
                                    machine=_machine(args)).as_json()
    _emit(doc, args)
    if not args.json:
        _print_doc(doc, args)
    return 0


def _print_doc(doc: dict, args) -> None:
    from purgecheck.measure.report import table
    from purgecheck.measure.workloads import WORKLOADS
    request = WORKLOADS[doc["workload"]].request if doc["workload"] in WORKLOADS else "request"
    m = doc["machine"]
    print(table(doc["summary"], doc["workload"], request))
    print(f"({m['date']}, {m['cpus']} cpus, load {m['load_1min']} at the end; "
          f"options {doc['options'] or 'none'} on top of each design)")
    if "comparison" in doc:
        from purgecheck.measure.compare import WorkloadComparison, Comparison, table as ctable
        c = doc["comparison"]
        wc = WorkloadComparison(c["workload"], c["params"], c["model_params"],
                                [Comparison(**r) for r in c["rows"]], c["order"])
        print()
        print(ctable(wc))


def _machine(args):
    """The model beside the measurement: each figure the median of --model-runs runs."""
    from purgecheck.measure.compare import COMPARISON_RUNS, MachineModel
    return MachineModel(runs=args.model_runs or COMPARISON_RUNS)


def _seed_tables(measured: dict, args) -> int:
    from purgecheck.docs.real_bun_page import count_line
    from purgecheck.measure.compare import compare
    from purgecheck.measure.report import machine
    from purgecheck.measure.seedtables import model_runs, render, tables
    from purgecheck.reports import store
    model = _machine(args)
    models = model_runs(measured, model)  # once, for the tables and the counts
    tabs = tables(measured, models)
    doc = {"machine": machine(), "model_runs": model.runs, "workloads": measured,
           "tables": {k: [c.as_json() for c in v] for k, v in tabs.items()}}
    keep = store.project_root() / ".purgecheck" / "measure" / "seed-tables.json"
    if not args.from_file:
        keep.parent.mkdir(parents=True, exist_ok=True)
        keep.write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    if args.record:  # without the samples of each run (the page reads the figures only)
        rec = store.project_root() / "docs" / "data" / "real-bun.json"
        rec.parent.mkdir(parents=True, exist_ok=True)
        lean = {**doc, "workloads": {name: {**w, "runs": [{k: v for k, v in r.items()
                                                           if k != "samples"}
                                                          for r in w["runs"]]}
                                     for name, w in measured.items()}}
        rec.write_bytes(orjson.dumps(lean, option=orjson.OPT_INDENT_2))
        print(f"kept as {rec} (purgecheck docs renders docs/real-bun.md from it)",
              file=sys.stderr)
    _emit(doc, args)
    if not args.json:
        print(render(tabs))
        print("seed: seed 000's figure; real: Bun 1.4.4 here (median of the runs); model: the "
              "real before plus the simulator's excess for the design (docs/measure.md)")
        print(count_line([compare(name, w["params"], w["summary"], models[name], model)
                          for name, w in measured.items()]))
    return 0
