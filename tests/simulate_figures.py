"""Every figure `purgecheck simulate` computes, hashed case by case, so that a change made for
speed is seen to leave them all as they were (issue 29, 4: the simulator is a specification
tool). Each case is a run of the simulator's own entry points: every workload under every
mimalloc design (the floor included) and the idle behaviours, scavenger and sweeper options
and sampling steps its callers use; every glibc workload and a mimalloc workload's calls on
every glibc version; `simulate TRACE --json` on the recorded trace of tests/data and on a call
trace; the seeds' claims at a small scale. A case's hash covers its whole result (every
counter and every sample of the series, which --json leaves out).

    PYTHONPATH=TREE python tests/simulate_figures.py [--fast] [TRACE ...] > hashes
    PYTHONPATH=TREE python tests/simulate_figures.py --write tests/data/simulate_figures.json

Run it on two trees and compare the outputs; `--write` pins the hashes of this tree in the
manifest that tests/test_simulate_figures.py checks (as the tlaplus Examples pin state
counts): regenerate it in the commit that changes a figure on purpose, and say why there.
A TRACE named on the command line is added as a case of its own (a recording made now: its
addresses differ from run to run, so it is compared between trees, never pinned).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import sys
import time
from pathlib import Path
from typing import Callable, Iterator

import orjson

DATA = Path(__file__).resolve().parent / "data"
MANIFEST = DATA / "simulate_figures.json"
XZ = DATA / "xz-T2.rec"
# The cases the fast tier of the test runs (a few seconds of CPU); the slow tier runs all.
FAST = ("bun-serve/threads", "typed-arrays/collected", "buffer-loop/inline",
        "bun-serve/machine", "glibc/bench-free", "trace/xz-T2.rec")


def digest(obj) -> str:
    return hashlib.sha256(orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)).hexdigest()[:20]


def _designs() -> list[str]:
    from purgecheck.simulate.mimalloc import DESIGNS, FLOOR
    return [*DESIGNS, FLOOR]


def mimalloc_case(workload: str, idle: str | None = None, options: dict | None = None,
                  **kw) -> Callable[[], list]:
    """`workload` ({name: params}) under every design, with simulate()'s keywords `kw`."""
    def run() -> list:
        from model.world import Options
        from purgecheck.simulate.mimalloc import simulate
        from purgecheck.simulate.workloads import Workload, make_workload
        ((name, params),) = workload.items()
        w = make_workload(name, **params)
        if idle:
            w = Workload(w.name, w.description, w.calls, idle, w.idle_ms, w.params)
        opts = Options(**options) if options else None
        return [simulate(w, d, opts, **kw).as_json() for d in _designs()]
    return run


def glibc_case(workload: str, **params) -> Callable[[], list]:
    def run() -> list:
        from purgecheck.simulate.glibc import simulate_glibc
        return [r.as_json() for r in simulate_glibc(workload, **params)]
    return run


def calls_on_glibc() -> list:
    from purgecheck.simulate.glibc import simulate_calls
    from purgecheck.simulate.workloads import make_workload
    w = make_workload("bun-serve", requests=300, threads=2, idle_ms=100)
    return [r.as_json() for r in simulate_calls(w.name, w.calls(), idle_ms=w.idle_ms)]


def cli_json(*argv: str) -> dict:
    """`purgecheck ARGV --json`'s output, run in this process."""
    from purgecheck.cli import main
    out = io.StringIO()
    buf = io.BytesIO()
    out.buffer = buf  # type: ignore[attr-defined]  # orjson writes to stdout.buffer
    with contextlib.redirect_stdout(out):
        rc = main([*argv, "--json"])
    doc = orjson.loads(buf.getvalue() or out.getvalue() or b"null")
    if isinstance(doc, dict):
        doc.pop("engine", None)  # the interpreter that ran the models (--engine), no figure
    return {"rc": rc, "out": doc}


def trace_case(path: Path, *extra: str) -> Callable[[], dict]:
    """`simulate TRACE --json` with every design and version (and the samples of each run,
    which --json leaves out, from the same calls)."""
    def run() -> dict:
        from purgecheck.simulate.mimalloc import calls_of, simulate
        from purgecheck.simulate.program import load_program
        from purgecheck.simulate.workloads import Workload
        doc = cli_json("simulate", str(path), *extra)
        doc["out"]["trace"]["source"] = path.name  # not the folder it was written in
        program = load_program(path)
        w = Workload(program.name, "", lambda: iter(()), "park", 1000.0)
        park_after = None if program.kind == "calls" else 10.0
        doc["samples"] = {d: [list(s) for s in simulate(
            w, d, sample_ms=10, park_after_ms=park_after,
            calls=calls_of(program.timed_ops())).as_json()["samples"]] for d in _designs()}
        return doc
    return run


def call_trace_case() -> dict:
    """A call trace written from a workload (several threads, reallocs, loop calls) through
    `simulate TRACE --json`, parked after 2 ms of silence and with the loop calls."""
    import tempfile
    from purgecheck.formats.calls import Call, write_calls
    from purgecheck.simulate.workloads import make_workload
    w = make_workload("bun-serve", requests=400, threads=2, gc_every=3, idle_ms=100)
    calls = list(w.calls())
    calls += [Call(calls[-1].t_ms + 1, 3, "malloc", 10**6, 100),
              Call(calls[-1].t_ms + 2, 3, "realloc", 10**6, 70_000),
              Call(calls[-1].t_ms + 3, 3, "realloc", 10**6, 60_000),
              Call(calls[-1].t_ms + 40, 3, "free", 10**6)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "serve.calls"
        with open(path, "w") as f:
            write_calls(calls, f)
        return {"loop": trace_case(path)(),
                "park-after": trace_case(path, "--park-after", "2", "--idle", "inline",
                                         "--sample-ms", "3")()}


def claims_case(inputs: bool) -> Callable[[], dict]:
    def run() -> dict:
        from purgecheck.measure.seedtables import claim_inputs, recorded
        from purgecheck.simulate.claims import seed_claims, summary
        claims = seed_claims(scale=0.02, inputs=claim_inputs(recorded()) if inputs else None)
        return {"claims": [c.as_json() for c in claims], "summary": summary(claims)}
    return run


SERVE = {"requests": 1500, "idle_ms": 600}
CASES: dict[str, Callable[[], object]] = {
    "bun-serve/default": mimalloc_case({"bun-serve": SERVE}),
    "bun-serve/threads": mimalloc_case({"bun-serve": {"requests": 500, "threads": 3,
                                                      "gc_every": 4, "per_turn": 2.5,
                                                      "pause_every": 100, "pause_ms": 30,
                                                      "idle_ms": 300}}),
    "bun-serve/fine-samples": mimalloc_case({"bun-serve": SERVE}, sample_ms=0.05),
    "bun-serve/park-after": mimalloc_case({"bun-serve": {"requests": 600, "idle_ms": 300}},
                                          park_after_ms=0.2, sample_ms=10),
    "bun-serve/pool": mimalloc_case({"bun-serve": {"requests": 600, "idle_ms": 300}}, "pool"),
    "bun-serve/inline": mimalloc_case({"bun-serve": {"requests": 600, "idle_ms": 300}},
                                      "inline"),
    "bun-serve/none": mimalloc_case({"bun-serve": {"requests": 600, "idle_ms": 300}}, "none"),
    "bun-serve/machine": mimalloc_case({"bun-serve": {"requests": 800, "gc_every": 3,
                                                      "per_turn": 4, "idle_ms": 400}},
                                       options={"arena_reuse": True, "page_queue_order": True},
                                       scavenger_late_ms=0.6, seed=3, sample_ms=5),
    "bun-serve/reach": mimalloc_case({"bun-serve": {"requests": 800, "idle_ms": 400}},
                                     options={"arena_reuse": True}, scavenger_reach=0.3,
                                     sample_ms=5),
    "bun-serve/sweeper": mimalloc_case({"bun-serve": {"requests": 800, "idle_ms": 400}},
                                       sweeper_every_ms=7.0, scavenger_late_ms=2.0),
    "bun-serve/small-os-pages": mimalloc_case({"bun-serve": {"requests": 400, "body": 5000,
                                                             "idle_ms": 300}},
                                              options={"os_page_size": 16384,
                                                       "purge_holes_min_interval": 30}),
    # the generator's small objects, survivors of a collection and major collections
    "bun-serve/objects": mimalloc_case({"bun-serve": {"requests": 400, "threads": 2,
                                                      "gc_every": 3, "per_turn": 2,
                                                      "survivors": 0.5, "major_every": 50,
                                                      "small": 200, "small_per_request": 3,
                                                      "idle_ms": 300}}),
    "bun-serve-nothing-kept": mimalloc_case({"bun-serve-nothing-kept": SERVE}),
    "typed-arrays/default": mimalloc_case({"typed-arrays": {"allocations": 400}}),
    "typed-arrays/collected": mimalloc_case({"typed-arrays": {"allocations": 300, "gc_every": 8,
                                                              "per_turn": 8, "temp_every": 3,
                                                              "lo": 2000, "hi": 300_000}},
                                            options={"arena_reuse": True,
                                                     "page_queue_order": True},
                                            scavenger_late_ms=0.6),
    "buffer-loop/inline": mimalloc_case({"buffer-loop": {"seconds": 0.4}}),
    "buffer-loop/late": mimalloc_case({"buffer-loop": {"seconds": 0.4, "free_late": 1,
                                                       "gc_every": 5}}, "park",
                                      options={"arena_reuse": True}),
    "glibc/bench-free": glibc_case("bench-free", num=64),
    "glibc/bench-free-touched": glibc_case("bench-free", num=40, touch_pages=3, thread=0,
                                           trim_threshold=65536),
    "glibc/ebizzy": glibc_case("ebizzy", seconds=0.05),
    "glibc/ebizzy-threads": glibc_case("ebizzy", seconds=0.02, threads=3, grow=4096,
                                       mmap_threshold=1 << 20, sample_ms=0.5),
    "glibc/calls": calls_on_glibc,
    "trace/xz-T2.rec": trace_case(XZ),
    "trace/calls": call_trace_case,
    "claims/defaults": claims_case(False),
    "claims/measured": claims_case(True),
}


def hashes(names: list[str], traces: list[Path] = ()) -> Iterator[tuple[str, str]]:
    """(case, hash) as each case is computed."""
    for name in names:
        yield name, digest(CASES[name]())
    for path in traces:
        yield f"trace/{path.name}", digest(trace_case(path)())


def main(argv: list[str]) -> int:
    write = "--write" in argv
    fast = "--fast" in argv
    rest = [a for a in argv if a not in ("--write", "--fast")]
    if write:
        MANIFEST.write_text(orjson.dumps(dict(hashes(list(CASES))), option=orjson.OPT_INDENT_2
                                         | orjson.OPT_SORT_KEYS).decode() + "\n")
        return 0
    names = list(FAST if fast else CASES)
    cpu = time.process_time()
    for name, h in hashes(names, [Path(p) for p in rest]):
        print(f"{h}  {name}", flush=True)
        print(f"{time.process_time() - cpu:8.2f} s CPU  {name}", file=sys.stderr)
        cpu = time.process_time()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
