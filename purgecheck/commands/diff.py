"""`purgecheck diff`: run an op script through the model and the C reference, compare traces."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import orjson

from purgecheck.cli import UsageError

EXAMPLE = """examples:
  purgecheck diff my.ops                       model and C on one script: equal, or the first divergence
  purgecheck diff --scenario park-handoff      a scenario of the seed's tests (its own options)
  purgecheck diff my.ops --variant clock       a rejected design of the seed, on both sides
  purgecheck diff my.ops --mutant age-lt-1     the C side with a mutant's switch: expect a divergence
  purgecheck diff fork.ops --non-monotone      a clock that may go back (clock -50, clock_at STEP -50)
  purgecheck diff my.ops --keep out/           also write out/model.jsonl and out/c.jsonl
  purgecheck diff --traces out/model.jsonl out/c.jsonl   compare two trace files
exit status: 0 the traces are equal, 1 they differ (the first divergence is printed),
             2 bad usage or bad input (one line: file, line, what was expected)
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("diff", help="compare the model's trace of an op script with the C reference's",
                       description="Run an op script (docs/op-script.md) through the model and "
                                   "through the C reference (reference_c/build/driver, real "
                                   "memory, virtual clock) and compare their traces "
                                   "(docs/trace-format.md) event by event. On a difference, "
                                   "print the first divergent event of each side, the events "
                                   "before it and the model's state there.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("script", nargs="?", help="the op script (a file)")
    p.add_argument("--scenario", metavar="NAME", help="a named scenario instead of a file")
    p.add_argument("--traces", nargs=2, metavar=("A", "B"), help="compare two trace files")
    p.add_argument("--variant", metavar="V", help="epoch (default), no-hold, clock, "
                                                  "handoff-only, two-untouched")
    p.add_argument("--mutant", metavar="M", help="run the C side with this mutant's switch "
                                                 "(a name of purgecheck.mutants or its c_switch)")
    p.add_argument("--interval", type=int, metavar="MS", help="purge_holes_min_interval")
    p.add_argument("--os-page", type=int, metavar="BYTES", help="the OS page size")
    p.add_argument("--arch", type=int, choices=(32, 64), help="64-bit (default) or 32-bit")
    p.add_argument("--offset", type=int, metavar="BYTES", help="first_block_offset")
    p.add_argument("--full-every", type=int, metavar="N", help="purge_holes_full_every")
    p.add_argument("--sweep-ms", type=int, metavar="MS", help="virtual time of a handoff sweep")
    p.add_argument("--stale-epochs", type=int, metavar="N",
                   help="how old an allocating thread's relaxed epoch read may be")
    p.add_argument("--non-monotone", action="store_true",
                   help="a clock that may go back: `clock` and `clock_at` with a negative MS")
    p.add_argument("--observe", choices=("sweeps", "all"), default="sweeps",
                   help="observe pages after the sweeping ops (default) or after every op")
    p.add_argument("--build", default="release", choices=("release", "asan", "tsan"),
                   help="which build of the C driver")
    p.add_argument("--context", type=int, default=5, metavar="N",
                   help="events shown before the divergence (default 5)")
    p.add_argument("--keep", metavar="DIR", help="write the two traces to DIR")
    p.add_argument("--json", action="store_true", help="the result as JSON on stdout")
    return p


def _options(args, base):
    from model.geometry import ARCH32, ARCH64
    from model.variants import VARIANTS

    changes = {}
    if args.variant:
        if args.variant not in VARIANTS:
            raise UsageError(f"unknown variant {args.variant!r}; expected one of "
                             f"{', '.join(VARIANTS)}")
        changes["variant"] = args.variant
    for flag, field in (("interval", "purge_holes_min_interval"), ("os_page", "os_page_size"),
                        ("offset", "first_block_offset"), ("full_every", "purge_holes_full_every"),
                        ("sweep_ms", "sweep_ms"), ("stale_epochs", "stale_epochs")):
        if getattr(args, flag) is not None:
            changes[field] = getattr(args, flag)
    if args.arch:
        changes["arch"] = ARCH32 if args.arch == 32 else ARCH64
    if args.non_monotone:
        changes["clock_monotone"] = False
    if changes.get("purge_holes_full_every", 1) <= 0:
        raise UsageError("--full-every: expected a positive integer")
    page = changes.get("os_page_size", 4096)
    if page < 4096 or page & (page - 1):
        raise UsageError(f"--os-page: expected a power of two of 4096 or more, got {page}")
    offset = changes.get("first_block_offset", 0)
    if offset < 0 or offset % 8 or offset >= 65536:
        raise UsageError(f"--offset: expected a multiple of 8 below 65536, got {offset}")
    for flag, field, hi in (("--interval", "purge_holes_min_interval", 1 << 31),
                            ("--sweep-ms", "sweep_ms", 1 << 31),
                            ("--stale-epochs", "stale_epochs", 1 << 31),
                            ("--full-every", "purge_holes_full_every", 1 << 31)):
        if field in changes and not 0 <= changes[field] <= hi:
            raise UsageError(f"{flag}: expected an integer in 0..{hi}, got {changes[field]}")
    return dataclasses.replace(base, **changes)


def _load_script(args):
    from model.world import Options
    from purgecheck.scenarios import SCENARIOS

    if args.scenario:
        sc = SCENARIOS.get(args.scenario)
        if sc is None:
            raise UsageError(f"unknown scenario {args.scenario!r}; `purgecheck scenario --list` "
                             f"lists them")
        return sc.build(), f"scenario:{sc.name}", sc.options
    try:  # bytes, decoded as `scenario` does: no newline translation, the same lines
        data = Path(args.script).read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read {args.script}: {e.strerror or e}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise UsageError(f"{args.script}:{line}: expected an op script in UTF-8 text, found "
                         f"byte {data[e.start]:#04x}")
    return text, args.script, Options()


def _report(args, div, events: int, names: tuple[str, str], replay: str | None,
            build=None) -> int:
    """`build`: the C build that ran (purgecheck.cbuild.BuildInfo), None for two files."""
    from purgecheck.conformance import format_divergence

    if args.json:
        doc = {"equal": div is None, "events": events, "replay": replay,
               "c_build": build.to_doc() if build else None,
               "divergence": dataclasses.asdict(div) if div else None}
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
        return 0 if div is None else 1
    print(f"equal: {events} events ({names[0]} and {names[1]})" if div is None
          else format_divergence(div, names))
    if build:
        print(f"C build: {build.line()}")
    if div is not None and replay:
        print(f"replay: {replay}")  # last: the line to copy
    return 0 if div is None else 1


def _diff_traces(args) -> int:
    from purgecheck.conformance import compare_traces, explain_traces
    from purgecheck.formats.trace import TraceError, open_trace

    files = []
    try:
        try:
            fa, ta = open_trace(args.traces[0])
            files.append(fa)
            fb, tb = open_trace(args.traces[1])
            files.append(fb)
        except OSError as e:
            raise UsageError(f"cannot read {e.filename}: {e.strerror}")
        div, counted = compare_traces(ta, tb, args.context)
    except TraceError as e:
        raise UsageError(str(e))
    finally:
        for f in files:
            f.close()
    if div is not None and div.index >= 0:
        explain_traces(div, _ops_before(args.traces[0], div.index), ta.header)
    names = (f"A ({ta.header['producer'].get('name', '?')})",
             f"B ({tb.header['producer'].get('name', '?')})")
    return _report(args, div, counted, names, None)


def _ops_before(path: str, index: int) -> list[dict]:
    """The op events of a trace before event `index`, read again once the traces are known to
    differ: keeping every op of a long trace while comparing made diff's memory grow with it
    (and the garbage collector walk it over and over)."""
    import itertools

    from purgecheck.formats.trace import open_trace

    f, trace = open_trace(path)
    with f:
        return [ev for ev in itertools.islice(trace.events, index) if ev["ev"] == "op"]


def run(args) -> int:
    if args.traces:
        if args.script or args.scenario:
            raise UsageError("--traces compares two trace files: give no SCRIPT or --scenario")
        return _diff_traces(args)
    if bool(args.script) == bool(args.scenario):
        raise UsageError("give an op script (a file) or --scenario NAME (or --traces A B)")
    from purgecheck.conformance import CDriver, DriverError, diff_script
    from purgecheck.formats.ops import OpScriptError
    from purgecheck.formats.trace import TraceError, write_trace

    from purgecheck.conformance import replay_command

    if args.context < 0 or args.context > 10_000:
        raise UsageError(f"--context: expected a number of events in 0..10000, got "
                         f"{args.context}")
    if args.keep is not None:  # made before anything runs, so a bad DIR costs no run
        from purgecheck.inputs import output_dir
        output_dir(args.keep, "--keep")
    text, source, base = _load_script(args)
    options = _options(args, base)
    target = f"--scenario {args.scenario}" if args.scenario else args.script
    replay = replay_command(target, options, base, args.mutant, args.observe)
    try:
        with CDriver(args.build) as driver:
            build = driver.info
            result = diff_script(text, options, driver, mutant=args.mutant, observe=args.observe,
                                 source=source, context=args.context)
    except OpScriptError as e:
        raise UsageError(str(e))
    except (DriverError, TraceError) as e:
        raise UsageError(str(e))
    events = result.model[1]
    if events and events[-1].get("ev") == "error":
        # a script the model cannot run (as `scenario` says): bad input on both sides, not
        # an equality of two traces that stop at the same line
        raise UsageError(f"{source}:{events[-1]['line']}: {events[-1]['msg']}")
    if args.keep is not None:
        out = Path(args.keep)
        out.mkdir(parents=True, exist_ok=True)
        for name, (header, events) in (("model", result.model), ("c", result.c)):
            with open(out / f"{name}.jsonl", "wb") as f:
                write_trace(f, header, events)
    names = ("model", f"C{' --mutant ' + args.mutant if args.mutant else ''}")
    return _report(args, result.divergence, len(result.model[1]), names, replay, build)
