"""A hash of every prediction of the glibc model, op by op: what a change for speed must leave
as it was (docs/record.md, "Every change below left every prediction as it was").

For each recorded trace given, at every version, and for every glibc workload at every
version with and without overcommit 2, one hash of: after each op, the system calls it made
(name, category, address, length), its block's chunk (address, size, state) and the
resident-page counters; at the end, every arena's chunks in address order, its bins in
order, fastbins, tcaches, trim records, `mp_`, and the resident and given-back pages.
Run it on two trees and compare the lines:

    PYTHONPATH=BASE python purgecheck/bench/predictions.py TRACE... > base.txt
    PYTHONPATH=HEAD python purgecheck/bench/predictions.py TRACE... > head.txt
    diff base.txt head.txt

It imports only the model and the replay's conversion (no other part of purgecheck.bench),
so the same file runs against an older tree. A tool, not a benchmark: `make bench` skips it.
"""

from __future__ import annotations

import argparse
import hashlib
import sys

from model.glibc.process import Process
from model.glibc.versions import VERSIONS
from purgecheck.formats.glibc_ops import expand, parse_script
from purgecheck.glibc.modelrun import handlers
from purgecheck.glibc.replay import load_stream, ops_of, run_model
from purgecheck.glibc.workloads import WORKLOADS

SKIPPED = ("repeat", "end")
NO_BLOCK = ("trim", "mallopt", "start", "join")  # ops whose first argument is not a block


def final_state(p: Process, h) -> None:
    """Everything the model holds at the end, in a fixed order."""
    for av in p.arenas:
        for seg in av.segments:
            h.update(repr([(a, c.size, c.state) for a, c in sorted(seg.chunks.items())]).encode())
            h.update(repr((seg.base, seg.size, seg.mprotect_size)).encode())
        h.update(repr([(c.addr, c.size, c.bin) for c in av.bins.chunks()]).encode())
        h.update(repr({s: [c.addr for c in fb] for s, fb in sorted(av.fastbins.items())}).encode())
        h.update(repr([(r.where, r.top_size, r.extra, r.shrunk, r.top_after, r.counters)
                       for r in av.trims]).encode())
        h.update(repr((av.system_mem, av.last_remainder,
                       av.top and (av.top.addr, av.top.size))).encode())
    for tid, t in sorted(p.threads.items()):
        if t.tcache:
            h.update(repr([[c.addr for c in b] for b in t.tcache]).encode())
    h.update(repr(sorted(vars(p.mp).items())).encode())
    r = p.resident
    h.update(repr((r.pages, r.faults, r.refaults, r.dropped, r.runs(),
                   sorted(r.given_back()))).encode())


def prediction_hash(ops, version: str, overcommit_2: bool = False) -> str:
    """The hash of one run: every op's calls, block and counters, then the final state."""
    p = Process(VERSIONS[version], {}, overcommit_2)
    do = handlers(p)
    h = hashlib.sha256()
    seen = 0
    for op in ops:
        if op.name in SKIPPED:
            continue
        do[op.name](op.thread, *op.args)
        calls = p.calls[seen:]
        seen = len(p.calls)
        c = p.blocks.get(op.args[0]) if op.args and op.name not in NO_BLOCK else None
        h.update(repr(([(x.name, x.category, x.addr, x.length) for x in calls],
                       c and (c.addr, c.size, c.state), p.resident.pages, p.resident.faults,
                       p.resident.refaults)).encode())
    final_state(p, h)
    return h.hexdigest()[:16]


def replay_hash(img, version: str) -> str:
    """The hash of `purgecheck replay`'s own run (replay.run_model, whose conversion makes
    most ops on the process directly): every system call, then the final state."""
    p = run_model(img, VERSIONS[version], {}, False)
    h = hashlib.sha256(repr([(x.name, x.category, x.addr, x.length) for x in p.calls]).encode())
    final_state(p, h)
    return h.hexdigest()[:16]


def lines(traces: list[str], workloads: bool = True, versions=None):
    """(what, hash) for each trace at each version, op by op and as `replay` runs it, then
    each workload at each version with and without overcommit 2."""
    versions = list(versions or VERSIONS)
    for path in traces:
        img, _ = load_stream(path)
        ops = list(ops_of(img))
        for v in versions:
            yield f"{path} {v}", prediction_hash(ops, v)
            yield f"{path} {v} replay", replay_hash(img, v)
    if workloads:
        for name, w in sorted(WORKLOADS.items()):
            ops = list(expand(parse_script(w.script(quick=True))))
            for v in versions:
                for o2 in (False, True):
                    yield f"{name} {v} {o2}", prediction_hash(ops, v, o2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("traces", nargs="*", help="recorded traces (purgecheck record), heaptrack")
    ap.add_argument("--no-workloads", action="store_true", help="only the traces")
    ap.add_argument("--version", action="append", choices=sorted(VERSIONS),
                    help="only this version (repeatable; default: every version)")
    a = ap.parse_args(argv)
    for what, digest in lines(a.traces, not a.no_workloads, a.version):
        print(what, digest, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
