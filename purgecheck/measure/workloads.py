"""Seed 000's workloads as programs that the real Bun runs (purgecheck/measure/js/).

Written here from the seed's words ("Numbers"): typed arrays, strings and Buffers of 100 to
500 KiB with 1 in 12 kept, then idle; a Bun.serve with 256 KiB bodies, 40 kept, under 16
connections, then idle; the same with nothing kept; a loop that frees and takes 256 KiB
buffers. Each parameter is an option (`--set NAME=VALUE`); servers and load generators use
loopback only, and every program stops by itself (LIFETIME_MS) if the measurement dies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

JS = Path(__file__).resolve().parent / "js"
KiB = 1024


@dataclass(frozen=True)
class MeasuredWorkload:
    name: str
    description: str
    script: str  # a file of js/
    kind: str  # "serve": a server and a load generator; "single": one program
    model: str  # the simulator's workload of the same shape (purgecheck simulate --list)
    params: dict = field(default_factory=dict)  # name -> default
    request: str = "request"  # what "per request" counts

    def env_of(self, params: dict) -> dict[str, str]:
        """The program's own parameters as its environment (UPPER_CASE)."""
        own = {k: v for k, v in params.items() if k not in LOAD_PARAMS}
        return {k.upper(): str(v) for k, v in own.items()}


# Parameters that the harness uses itself and does not pass to the program.
LOAD_PARAMS = ("connections", "load_s", "body", "idle_s", "max_load_s")

SERVE = {"body": 256 * KiB, "kept": 40, "keep_every": 1000, "connections": 16, "load_s": 10.0,
         "idle_s": 5.0, "gc_every": 0, "work_us": 0}
WORKLOADS: dict[str, MeasuredWorkload] = {w.name: w for w in (
    MeasuredWorkload("bun-serve", "Bun.serve, 256 KiB request bodies, 40 kept (one every 1000 "
                     "requests), 16 connections on loopback for load_s, then idle_s idle",
                     "serve.js", "serve", "bun-serve", dict(SERVE)),
    MeasuredWorkload("bun-serve-nothing-kept", "the same server with no body kept",
                     "serve.js", "serve", "bun-serve-nothing-kept", {**SERVE, "kept": 0}),
    MeasuredWorkload("typed-arrays", "typed arrays, strings and Buffers of 100..500 KiB, one "
                     "in 12 kept, the others dropped 8 allocations later (the collector runs "
                     "every 8), then idle_s idle (turn_ms: the least time a turn of the loop "
                     "takes, busy: the program at 1 byte at the real one's pace)",
                     "typed-arrays.js", "single", "typed-arrays",
                     {"allocations": 3000, "lo": 100 * KiB, "hi": 500 * KiB, "keep_every": 12,
                      "lifetime": 8, "turn_ms": 0.0, "idle_s": 2.0}, request="allocation"),
    MeasuredWorkload("buffer-loop", "a loop that frees and takes 8 buffers of 256 KiB a round, "
                     "a round every millisecond (the loop parks in between), for 3 s; then "
                     "idle_s idle", "buffer-loop.js", "single", "buffer-loop",
                     {"size": 256 * KiB, "batch": 8, "step_ms": 1, "seconds": 3.0, "kept": 1,
                      "idle_s": 1.0}, request="round"),
)}

def script_workload(path: str) -> MeasuredWorkload:
    """A program of the user's: it prints `load-start` when its load begins and `load-end`
    (optionally followed by how many requests it served) when it ends; the idle follows.
    A ValueError names what is wrong with the file."""
    from purgecheck.inputs import InputError, input_file
    p = Path(path)
    try:  # a directory or a device is not "no such file"
        input_file(p, "a Bun program")
    except InputError as e:
        raise ValueError(f"--script {e}") from None
    try:
        text = p.read_text(errors="replace")
    except OSError as e:
        raise ValueError(f"--script {path}: {e.strerror or e}") from None
    for word in ("load-start", "load-end"):
        if word not in text:
            raise ValueError(f"--script {path}: the program must print a line `{word}` (see "
                             f"docs/measure.md, measuring your own program)")
    return MeasuredWorkload(p.name, f"the program {path}", str(p.resolve()), "single", "",
                            {"idle_s": 2.0, "max_load_s": 300.0}, request="request")


# Each parameter's range (lo, hi): bounded so that a measurement always ends.
RANGES = {"body": (1, 64 << 20), "kept": (0, 100_000), "keep_every": (1, 10_000_000),
          "connections": (1, 256), "load_s": (0.1, 600), "idle_s": (0, 600),
          "allocations": (1, 10_000_000), "lo": (1, 64 << 20), "hi": (1, 64 << 20),
          "lifetime": (0, 100_000), "size": (1, 64 << 20), "batch": (1, 10_000),
          "step_ms": (0, 10_000), "turn_ms": (0, 1000), "seconds": (0.1, 600),
          "max_load_s": (1, 3600), "gc_every": (0, 1_000_000), "work_us": (0, 100_000)}


def workload_params(name: str, sets: dict[str, str],
                    script: str | None = None) -> tuple[MeasuredWorkload, dict]:
    """The workload (or the user's `script`) and its parameters with `sets` applied; a
    ValueError names the workload, the parameter and its range."""
    if script is not None:
        w = script_workload(script)
    elif name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}; expected one of {', '.join(WORKLOADS)}")
    else:
        w = WORKLOADS[name]
    params = dict(w.params)
    for k, text in sets.items():
        if k not in params:
            raise ValueError(f"workload {name} has no parameter {k!r}; it has "
                             f"{', '.join(params)}")
        try:
            value = float(text) if isinstance(params[k], float) else int(text)
        except ValueError:
            raise ValueError(f"workload {name}: {k} must be a number, found {text!r}") from None
        lo, hi = RANGES[k]
        if not lo <= value <= hi:
            raise ValueError(f"workload {name}: {k} must be in {lo:g}..{hi:g}, found {text}")
        params[k] = value
    if params.get("lo", 0) > params.get("hi", 1 << 62):
        raise ValueError(f"workload {name}: lo must not be above hi")
    return w, params
