"""Which code of the fork made each discard under load: the madvise calls' stacks, told apart
by what `before` uses.

`purgecheck measure` counts discard calls and their lengths; a black box does not say whether a
call is a hole purge of a page in use (the rule under review) or the arena's purge of pages that
went back to it (`purge_delay`, which every design has). `strace -k` prints the stack of every
call it traces, and the stack tells them apart. Bun 1.4.4 keeps no symbols of its mimalloc, so
a call site is the first `SITE_DEPTH` return addresses inside the program above libc's madvise.
The sites are named by calibration, not by address: with `MIMALLOC_PURGE_HOLES=0` (`before`)
the fork gives memory back only through its arena's purge (`mi_arena_purge` from the purge
visitor of arena.c; JavaScriptCore's own allocator gives back small ranges too), so a site that
`before` uses is "arena or runtime", and one that only a design with hole purging uses is "hole
purging" (`_mi_page_purge_holes`' walk, digest 3). An arena purge is of whole 64 KiB slices,
and a range of which a slice was taken again is purged slice by slice (arena.c,
`mi_arena_try_purge_visitor`), so its calls of exactly one slice are counted apart.

    python -m purgecheck.measure.callsites bun-serve --design epoch --runs 3 --set load_s=3

runs `before` and each design interleaved (with `-k`, which costs each call an unwinding of its
stack: the figures of `measure` itself come from runs without it) and prints, per run, the
calls of 64 KiB or more under load by kind (docs/measure.md, "What the real epoch discards
under load, by call site").
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

from purgecheck.measure.probe import DISCARD_ADVICES, Madvise, parse_call

SITE_DEPTH = 2  # return addresses in the program that name a call site
SLICE = 64 * 1024  # mimalloc v3's arena slice (MI_ARENA_SLICE_SIZE)
LARGE_CALL = 64 * 1024  # the calls `measure` compares (discards_load_large)
HOLES, ARENA = "hole purging", "arena or runtime"

# ` > /path/bun() [0x1c4480b]` or ` > /usr/lib/.../libc.so.6(__madvise+0x7) [0x101b07]`
_FRAME = re.compile(r"^ > (\S+?)\(.*\) \[(0x[0-9a-f]+)\]")


@dataclass(frozen=True)
class StackedCall:
    call: Madvise
    site: tuple[str, ...]  # the first SITE_DEPTH return addresses in the program


def parse_stacks(text: str, depth: int = SITE_DEPTH) -> list[StackedCall]:
    """The discard calls of a `strace -f -ttt -k -e trace=madvise` log with their call sites
    (frames of shared libraries, libc's madvise among them, are passed over). A call's stack
    follows the line where it returns: its own line, or for a call that another thread's line
    interrupted (`<unfinished ...>`), its thread's `<... madvise resumed>` line."""
    out: list[StackedCall] = []
    frames: list[str] = []
    current: Madvise | None = None
    pending: dict[int, Madvise | None] = {}  # thread -> its unfinished call

    def close() -> None:
        if current is not None and current.advice in DISCARD_ADVICES:
            out.append(StackedCall(current, tuple(frames[:depth])))

    for line in text.splitlines():
        if line.startswith(" >"):
            m = _FRAME.match(line)
            if m and ".so" not in m.group(1).rsplit("/", 1)[-1]:
                frames.append(m.group(2))
            continue
        close()
        current, frames = None, []
        tid = line.split(maxsplit=1)[0] if line[:1].isdigit() else ""
        if "<unfinished ...>" in line:
            pending[int(tid)] = parse_call(line)
        elif "madvise resumed>" in line:
            if " = -1 " not in line and not line.rstrip().endswith("= -1"):
                current = pending.pop(int(tid), None)
        else:
            current = parse_call(line)  # None for a failed call: its stack is passed over
    close()
    return out


def before_sites(calls: list[StackedCall]) -> set[tuple[str, ...]]:
    """The call sites of runs with hole purging off: the arena's purge and the runtime's own."""
    return {c.site for c in calls}


def kind_of(call: StackedCall, known: set[tuple[str, ...]]) -> str:
    """HOLES for a site that `before` never used, else ARENA."""
    return ARENA if call.site in known else HOLES


def load_figures(calls: list[StackedCall], t_end: float,
                 known: set[tuple[str, ...]]) -> dict[str, float]:
    """The calls of 64 KiB or more under load (before `t_end`) by kind: calls and MB, and the
    arena's calls of exactly one slice."""
    big = [c for c in calls if c.call.t < t_end and c.call.length >= LARGE_CALL]
    out: dict[str, float] = {}
    for kind, key in ((HOLES, "holes"), (ARENA, "arena")):
        sel = [c for c in big if kind_of(c, known) == kind]
        out[f"{key}_calls"] = len(sel)
        out[f"{key}_mb"] = sum(c.call.length for c in sel) / (1 << 20)
    out["arena_one_slice_calls"] = sum(1 for c in big if kind_of(c, known) == ARENA
                                       and c.call.length == SLICE)
    return out


def _row(design: str, rep: int, requests: float, fig: dict[str, float]) -> str:
    return (f"{design:8} {rep + 1:3} {requests:9,.0f} {fig['arena_calls']:7.0f} "
            f"{fig['arena_mb']:8.1f} {fig['arena_one_slice_calls']:10.0f} "
            f"{fig['holes_calls']:7.0f} {fig['holes_mb']:8.1f}")


def main(argv: list[str]) -> int:
    import argparse

    from purgecheck.measure.bun import BunMissing, find_bun
    from purgecheck.measure.designs import parse_option
    from purgecheck.measure.run import RunError, measure_once
    from purgecheck.measure.workloads import workload_params

    p = argparse.ArgumentParser(prog="python -m purgecheck.measure.callsites",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("workload")
    p.add_argument("--design", action="append", default=[],
                   help="a design beside before (default: epoch)")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--bun")
    p.add_argument("--json", metavar="OUT", help="also write every run's figures to OUT")
    args = p.parse_args(argv)
    try:
        bun = find_bun(args.bun)
        w, params = workload_params(args.workload, dict(s.split("=", 1) for s in args.set))
        options = dict(parse_option(o) for o in args.option)
    except (BunMissing, ValueError) as e:
        print(f"purgecheck callsites: {e}", file=sys.stderr)
        return 2
    designs = ["before", *(args.design or ["epoch"])]
    load_at_start = [round(x, 2) for x in __import__("os").getloadavg()[:2]]
    logs: dict[tuple[str, int], tuple[float, list[StackedCall], float]] = {}
    for rep in range(args.runs):
        for d in designs:
            got = {}
            try:
                r = measure_once(bun, w, params, d, options, rep, strace_stacks=True,
                                 on_strace=lambda text, t_end: got.update(text=text, t=t_end))
            except RunError as e:
                print(f"purgecheck callsites: {e}", file=sys.stderr)
                return 1
            logs[d, rep] = (r.figures["requests"], parse_stacks(got["text"]), got["t"])
    known = before_sites([c for (d, _), (_, calls, _) in logs.items() if d == "before"
                          for c in calls])
    print(f"{w.name}: discard calls of 64 KiB or more under load, by call site (strace -k)")
    print(f"{'design':8} {'run':>3} {'requests':>9} {'arena':>7} {'arena MB':>8} "
          f"{'one slice':>10} {'holes':>7} {'holes MB':>8}")
    runs = []
    for (d, rep), (requests, calls, t_end) in logs.items():
        fig = load_figures(calls, t_end, known)
        print(_row(d, rep, requests, fig))
        runs.append({"design": d, "repeat": rep, "requests": requests, **fig})
    if args.json:
        import orjson

        from purgecheck.measure.report import machine
        doc = {"command": "python -m purgecheck.measure.callsites " + " ".join(argv),
               "workload": w.name, "params": params, "options": options,
               "machine": machine(), "load_at_start": load_at_start, "before_sites": sorted(known), "runs": runs}
        Path(args.json).write_bytes(orjson.dumps(doc, option=orjson.OPT_INDENT_2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
