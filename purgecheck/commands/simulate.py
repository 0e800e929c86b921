"""`purgecheck simulate`: what a purge rule costs on a workload, design by design."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from purgecheck.cli import UsageError
from purgecheck.simulate.engine import AUTO_FROM, ENGINES

EXAMPLE = """examples:
  purgecheck simulate --list                      workloads, designs, idle behaviours
  purgecheck simulate bun-serve                   every design of seed 000 on Bun.serve
  purgecheck simulate bun-serve --design epoch --design no-hold --set requests=5000
  purgecheck simulate typed-arrays --plot /tmp/sim   and the picture (SVG, PNG)
  purgecheck record -o py.rec -- python3 prog.py; purgecheck simulate py.rec
                                                  your program on every glibc version and
                                                  every design, one table (docs/simulate-guide.md)
  purgecheck simulate py.rec --version 2.23+ --design epoch --json
  purgecheck simulate my.calls --idle park --park-after 50    a trace in the call format
  purgecheck simulate bench-free                  glibc: every version of seed 001
  purgecheck simulate --seeds                     each claim of the seeds beside the model's
exit status: 0 simulated (with --seeds: every claim holds, or holds by construction of the
model), 1 with --seeds: a claim fails (its comparison of the model's figures with the seed's
does not hold, or a ratio has a zero side), 2 bad usage or a bad trace (one line naming the
file, line or option)
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("simulate", help="what a purge rule costs: discards, refaults, resident "
                                        "memory, per design",
                       description="Run a workload through the mimalloc model under each "
                                   "design (purging off, the unit without the hold, the clock "
                                   "stamp, the epoch, the rejected designs) or through the glibc "
                                   "model of each version, and report what each costs: discard "
                                   "calls and bytes under load and at idle, refaults (OS pages "
                                   "discarded and written again), resident and resident free "
                                   "memory over time, and for glibc madvise, brk and munmap "
                                   "calls. Virtual time, per OS page; deterministic.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("workload", nargs="?", metavar="WORKLOAD|TRACE",
                   help="a named workload (--list), or a trace: a recording of `purgecheck "
                        "record`, a heaptrack file, a call trace (docs/simulate-guide.md)")
    p.add_argument("--list", action="store_true", help="list workloads, designs, idle behaviours")
    p.add_argument("--seeds", action="store_true",
                   help="the seeds' claims: each figure of the seed beside the model's, the "
                        "comparison and its verdict (holds, fails, by construction)")
    p.add_argument("--scale", type=float, metavar="F",
                   help="with --seeds: scale the loads by F (0 < F <= 1; default 1)")
    p.add_argument("--design", action="append", metavar="D",
                   help="a mimalloc design (repeatable; default: every one)")
    p.add_argument("--version", action="append", metavar="V",
                   help="a glibc version (repeatable; default: every one)")
    p.add_argument("--set", action="append", metavar="NAME=VALUE", default=[],
                   help="a workload parameter (repeatable), e.g. requests=5000")
    p.add_argument("--idle", metavar="BEHAVIOUR",
                   help="for a trace: what its threads do when idle (park, pool, inline, none; "
                        "default park); for a named workload, replaces its own")
    p.add_argument("--idle-ms", type=float, metavar="MS",
                   help="the idle after the last call (default: the workload's own; 1000 for "
                        "a trace)")
    p.add_argument("--park-after", type=float, metavar="MS",
                   help="a thread that makes no call for MS ms comes to its idle point: "
                        "parks, or sweeps inline, as --idle says (for a trace without loop "
                        "calls; 10 for a recording)")
    p.add_argument("--sample-ms", type=float, metavar="MS",
                   help=f"resident memory is sampled every MS ms of virtual time ({MIN_SAMPLE_MS:g} "
                        f".. 1e9, default 10; a run longer than its series' limit keeps every "
                        f"other sample and doubles the step)")
    p.add_argument("--image", type=int, metavar="N",
                   help="for a recording: which process image of the file (default: the last "
                        "that allocated, as replay)")
    p.add_argument("--engine", choices=ENGINES,
                   help="which interpreter runs the models: cpython (this one), pypy (a pypy3 "
                        "child: the same figures, 1.7 to 5.7 times faster on a million calls, "
                        "seconds of warm-up), auto (pypy for an input of "
                        f"{AUTO_FROM:,} ops or calls or more when pypy3 is found; default)")
    p.add_argument("--plot", metavar="DIR", help="write DIR/<workload>.svg and .png")
    p.add_argument("--json", action="store_true", help="the figures as JSON on stdout")
    return p


MIN_SAMPLE_MS = 0.001  # a finer step than 1 us adds nothing (the model's clock counts ms)
# and a step below the floats' resolution at a trace's 10^12 ms would not move time on


def _positive(value: float | None, option: str, zero_ok: bool = False,
              least: float = 0.0) -> None:
    if value is None:
        return
    if not (value > 0 or (zero_ok and value == 0)) or value != value or value > 1e9 \
            or value < least:
        lowest = f"{least:g} .. 1e9" if least else "up to 1e9"
        raise UsageError(f"{option}: expected a {'non-negative' if zero_ok else 'positive'} "
                         f"number of ms, {lowest}, found {value:g}")


def _params(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name:
            raise UsageError(f"--set {pair!r}: expected NAME=VALUE, e.g. requests=5000")
        try:
            number = float(value)
        except ValueError:
            raise UsageError(f"--set {name}: expected a number, found {value!r}")
        if number != number or abs(number) > 1e19:
            raise UsageError(f"--set {name}: {value} is not a usable number")
        out[name] = int(number) if number == int(number) and "." not in value else number
    return out


SAMPLE_MS = 10.0  # --sample-ms's default

# What --seeds does not read: the claims choose their workloads, designs and sampling.
SEEDS_IGNORE = {"design": "--design", "version": "--version", "set": "--set", "idle": "--idle",
                "idle_ms": "--idle-ms", "park_after": "--park-after", "plot": "--plot",
                "sample_ms": "--sample-ms", "engine": "--engine"}


def _given(args, options: dict[str, str]) -> list[str]:
    """The options of `options` (attribute: flag) given on the command line."""
    return [flag for attr, flag in options.items() if getattr(args, attr) not in (None, [])]


def _list() -> int:
    from purgecheck.simulate import glibc_versions, glibc_workloads
    from purgecheck.simulate.mimalloc import DESIGN_NAMES
    from purgecheck.simulate.workloads import IDLE_BEHAVIOURS, WORKLOADS, _parameters

    print("mimalloc workloads (seed 000):")
    for name, (gen, description, idle, idle_ms, defaults) in WORKLOADS.items():
        params = {**_parameters(gen), **defaults}
        print(f"  {name:24} {description} [idle: {idle}]")
        print(f"  {'':24} " + ", ".join(f"{k}={v}" for k, v in params.items()))
    print("glibc workloads (seed 001):")
    for name, description in glibc_workloads().items():
        print(f"  {name:24} {description}")
    print("designs (--design):")
    for name, what in DESIGN_NAMES.items():
        print(f"  {name:24} {what}")
    print("glibc versions (--version): " + ", ".join(glibc_versions()))
    print("idle behaviours (--idle):")
    for name, what in IDLE_BEHAVIOURS.items():
        print(f"  {name:24} {what}")
    return 0


def _real_figures() -> dict:
    """The real Bun's figures of the claims, from the recorded measurement."""
    from purgecheck.measure.seedtables import claim_reals, recorded
    return claim_reals(recorded())


def _seeds(args) -> int:
    from purgecheck.simulate.claims import FAILS, seed_claims, summary
    from purgecheck.simulate.report import print_claims

    scale = 1.0 if args.scale is None else args.scale
    if not 0 < scale <= 1:
        raise UsageError(f"--scale: expected a number in (0, 1], found {scale:g}")
    from purgecheck.measure.seedtables import claim_inputs, recorded
    claims = seed_claims(scale=scale, real=_real_figures(), inputs=claim_inputs(recorded()))
    if args.json:
        doc = {"claims": [c.as_json() for c in claims], "summary": summary(claims)}
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        print_claims(claims)
    return 1 if any(c.verdict == FAILS for c in claims) else 0


def run(args) -> int:
    if args.list:
        return _list()
    for value, option, zero_ok, least in ((args.idle_ms, "--idle-ms", True, 0.0),
                                          (args.park_after, "--park-after", False, 0.0),
                                          (args.sample_ms, "--sample-ms", False, MIN_SAMPLE_MS)):
        _positive(value, option, zero_ok, least)
    if args.seeds:
        if args.workload:
            raise UsageError("--seeds runs the seeds' own workloads: give no WORKLOAD with it")
        ignored = _given(args, SEEDS_IGNORE)
        if ignored:
            raise UsageError(f"{ignored[0]} does not go with --seeds (the seeds' workloads run "
                             f"as the claims set them)")
        return _seeds(args)
    args.sample_ms = SAMPLE_MS if args.sample_ms is None else args.sample_ms
    if args.scale is not None:
        raise UsageError("--scale scales the seeds' loads: it goes with --seeds (a named "
                         "workload takes --set)")
    if not args.workload:
        raise UsageError("name a workload or a trace (see --list), or give --seeds")
    from purgecheck.simulate.engine import MISSING, pypy_path
    args.engine = args.engine or "auto"
    if args.engine == "pypy" and pypy_path() is None:
        raise UsageError(MISSING)
    if args.engine == "auto" and pypy_path() is None:
        args.engine = "cpython"
    if args.plot is not None:  # before the run: a folder that cannot be made costs no run
        from purgecheck.inputs import output_dir
        output_dir(args.plot, "--plot")
    runs, name = _simulate(args)
    if args.plot:
        from purgecheck.simulate.plot import plot_runs
        try:
            paths = plot_runs(runs, Path(args.plot), stem=name)
        except OSError as e:
            raise UsageError(f"--plot {args.plot}: cannot write there: {e.strerror}")
        if not args.json:
            print(f"wrote {', '.join(str(p) for p in paths)}", file=sys.stderr)
    program = getattr(args, "program", None)
    if args.json:
        doc = {"workload": name, "engine": args.engine,
               "runs": [{k: v for k, v in r.as_json().items() if k != "samples"} for r in runs]}
        if program is not None:
            doc["trace"] = program_doc(program)
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    elif program is not None:
        from purgecheck.simulate.report import print_program
        print_program(runs, program, engine=args.engine)
    else:
        from purgecheck.simulate.report import print_runs
        print_runs(runs, name, engine=args.engine)
    return 0


def program_doc(program) -> dict:
    """What the figures of a trace cover: `complete` false and `prefix` saying why when the
    recording lost its end (docs/record.md)."""
    c = program.conversion
    return {"source": program.source, "kind": program.kind, "image": program.image,
            "ops": c.ops, "max_live_blocks": c.max_live, "complete": program.prefix is None,
            "prefix": program.prefix}


def _simulate(args):
    from purgecheck.simulate import glibc_simulator, glibc_workloads
    from purgecheck.simulate.mimalloc import DESIGNS, FLOOR, simulate
    from purgecheck.simulate.workloads import IDLE_BEHAVIOURS, WORKLOADS, Workload, make_workload

    params = _params(args.set)
    if "idle_ms" in params:
        if args.idle_ms is not None:
            raise UsageError("give the idle either as --idle-ms or as --set idle_ms, not both")
        args.idle_ms = params.pop("idle_ms")
    if args.idle is not None and args.idle not in IDLE_BEHAVIOURS:
        raise UsageError(f"--idle: unknown behaviour {args.idle!r}; expected one of "
                         f"{', '.join(IDLE_BEHAVIOURS)}")
    from purgecheck.simulate import glibc_versions
    for v in args.version or []:
        if v not in glibc_versions():
            raise UsageError(f"--version: unknown glibc version {v!r}; expected one of "
                             f"{', '.join(glibc_versions())}")
    designs = args.design or list(DESIGNS)
    for d in designs:
        if d not in (*DESIGNS, FLOOR):
            raise UsageError(f"--design: unknown design {d!r}; expected one of "
                             f"{', '.join((*DESIGNS, FLOOR))}")
    if args.workload in glibc_workloads():
        if args.design:
            raise UsageError(f"{args.workload} is a glibc workload: choose versions with "
                             f"--version, not --design")
        if args.engine == "pypy":  # seed 001's workloads are small: no engine for them
            raise UsageError(f"--engine pypy: {args.workload} is a glibc workload of seed "
                             f"001, which runs on cpython only")
        args.engine = "cpython"
        try:
            return (glibc_simulator().simulate_glibc(args.workload, args.version,
                                                     idle_ms=args.idle_ms,
                                                     sample_ms=args.sample_ms, **params),
                    args.workload)
        except ValueError as e:
            raise UsageError(str(e))
    if args.workload in WORKLOADS:
        try:
            w = make_workload(args.workload, idle_ms=args.idle_ms, **params)
        except ValueError as e:
            raise UsageError(str(e))
        if args.idle:
            w = Workload(w.name, w.description, w.calls, args.idle, w.idle_ms, w.params)
        calls = None
    else:
        return _simulate_program(args, params, designs)
    if args.version and not args.design:
        designs = []
    if args.engine != "cpython":  # the calls made once, here; the child runs the models
        calls = list(w.calls())
        args.engine = "pypy" if args.engine == "pypy" or len(calls) >= AUTO_FROM else "cpython"
        if args.engine == "pypy":
            return _in_pypy(args, w, calls, designs), w.name
    runs = []
    if args.version:  # the same calls on the glibc model of these versions as well
        if not args.json:
            print(f"simulating {w.name} on glibc {', '.join(args.version)} ...",
                  file=sys.stderr, flush=True)
        try:
            runs += glibc_simulator().simulate_calls(
                w.name, calls if calls is not None else list(w.calls()), args.version,
                idle_ms=w.idle_ms, sample_ms=args.sample_ms)
        except ValueError as e:
            raise UsageError(str(e))
    for d in designs:
        if not args.json:
            print(f"simulating {w.name} under {d} ...", file=sys.stderr, flush=True)
        runs.append(simulate(w, d, sample_ms=args.sample_ms, park_after_ms=args.park_after,
                             calls=calls))
    return runs, w.name


def _in_pypy(args, w, calls: list, designs: list[str]) -> list:
    """A named workload's calls on the glibc versions and mimalloc designs, in PyPy."""
    from purgecheck.simulate.engine import EngineError, simulate_in_pypy
    from purgecheck.simulate.program import ops_of_calls
    runs = []
    try:
        if args.version:
            runs += simulate_in_pypy(ops_of_calls(calls), True,
                                     [("glibc", v) for v in args.version], w,
                                     args.sample_ms, None, args.json)
        if designs:
            runs += simulate_in_pypy(calls, False, [("mimalloc", d) for d in designs], w,
                                     args.sample_ms, args.park_after, args.json)
    except (ValueError, EngineError) as e:
        raise UsageError(str(e))
    return runs


RECORDING_PARK_AFTER_MS = 10.0  # a recorded thread silent this long parks (no loop calls)


def _simulate_program(args, params: dict, designs: list[str]):
    """A trace of a program (a recording, a heaptrack file, a call trace): by default every
    glibc version and every mimalloc design, from the one stream of timed ops that
    purgecheck/simulate/program.py makes of it."""
    from purgecheck.formats.alloc_trace import AllocTraceError
    from purgecheck.formats.calls import CallTraceError
    from purgecheck.formats.heaptrack import HeaptrackError
    from purgecheck.glibc.fromtrace import ConvertError
    from purgecheck.simulate import glibc_simulator
    from purgecheck.simulate.mimalloc import calls_of, simulate
    from purgecheck.simulate.engine import EngineError
    from purgecheck.simulate.program import load_program
    from purgecheck.simulate.workloads import Workload

    path = Path(args.workload)
    if not path.exists():
        raise UsageError(f"{args.workload}: neither a named workload (--list) nor a file")
    from purgecheck.inputs import input_file
    input_file(path, "a trace: a recording, a heaptrack file or the call format "
                     "(docs/simulate-guide.md)")
    if params:
        raise UsageError("--set takes the parameters of a named workload, not of a trace")
    versions = args.version or ([] if args.design else glibc_simulator().version_names())
    if args.version and not args.design:
        designs = []
    park_after = args.park_after
    runs = []
    try:
        program = load_program(path, args.image)
        if park_after is None and program.kind != "calls":
            park_after = RECORDING_PARK_AFTER_MS
        w = Workload(program.name, f"the calls of {path}", lambda: iter(()), args.idle or "park",
                     1000.0 if args.idle_ms is None else args.idle_ms)
        if args.engine != "cpython":
            runs = _program_in_pypy(args, program, w, versions, designs, park_after)
        if args.engine == "cpython":
            if versions:
                if not args.json:
                    print(f"simulating {w.name} on glibc {', '.join(versions)} ...",
                          file=sys.stderr, flush=True)
                runs += glibc_simulator().simulate_ops(w.name, program.timed_ops, versions,
                                                       idle_ms=w.idle_ms,
                                                       sample_ms=args.sample_ms)
            for d in designs:
                if not args.json:
                    print(f"simulating {w.name} under {d} ...", file=sys.stderr, flush=True)
                runs.append(simulate(w, d, sample_ms=args.sample_ms, park_after_ms=park_after,
                                     calls=calls_of(program.timed_ops())))
    except (AllocTraceError, CallTraceError, ConvertError, HeaptrackError, ValueError,
            EngineError) as e:
        raise UsageError(str(e))
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}")
    args.program = program
    return runs, w.name


def _program_in_pypy(args, program, w, versions: list[str], designs: list[str],
                     park_after: float | None) -> list:
    """The trace's runs in PyPy when `args.engine` is pypy, or auto and the trace has
    AUTO_FROM ops or more (then args.engine says which ran; [] when CPython is to run them).
    Its one conversion here writes the child's input, or for auto finds the trace short (a
    whole pass, which program.py keeps for CPython's runs)."""
    from itertools import chain, islice

    from purgecheck.simulate.engine import simulate_in_pypy
    ops = program.timed_ops()
    if args.engine == "auto":
        head = list(islice(ops, AUTO_FROM))
        if len(head) < AUTO_FROM:  # the whole pass: program.py keeps it for CPython's runs
            args.engine = "cpython"
            return []
        args.engine = "pypy"
        ops = chain(head, ops)
    jobs = [("glibc", v) for v in versions] + [("mimalloc", d) for d in designs]
    return simulate_in_pypy(ops, True, jobs, w, args.sample_ms, park_after, args.json)
