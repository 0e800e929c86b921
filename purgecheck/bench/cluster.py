"""Benchmark of the work on Dask (issue 19): the kill matrix's wall time in the home-made pool
and on a Dask LocalCluster of 2 workers; fuzz campaign examples per second with 1 and 2
workers; the split explorer's states per second with 1 and 2 workers, and the largest
configuration it checks exhaustively within 60 s. Prints figures; asserts nothing.

    .venv/bin/python -m purgecheck.bench.cluster            full sizes (about 15 minutes)
    .venv/bin/python -m purgecheck.bench.cluster --tiny     what the test suite runs
    .venv/bin/python -m purgecheck.bench.cluster --explorer the split explorer's figures only

The full kill matrix (42 mutants x 7 engines) takes most of half an hour on 2 cores; the
benchmark times every mutant against the three cheap engines (scenarios, validate, glibc),
the same cells in both. Each Dask figure includes the cluster's start, given on its own row.
"""

from __future__ import annotations

import argparse
import os
import time
from contextlib import ExitStack

from purgecheck.bench import Figure

BENCH = "cluster"
CHEAP_ENGINES = ("scenarios", "validate", "glibc")
CAMPAIGN_SECONDS = {True: 1.0, False: 60.0}
# the split explorer's ladder, in increasing size (states); the first not exhausted within the
# budget ends it
EXPLORER_LADDER = ("bare-1", "bare-2", "bare-3", "bare-4", "park-1-short", "park-1", "park-2",
                   "park-4-short", "park-3", "park-4")
EXPLORER_BUDGET = {True: 3.0, False: 60.0}
EXPLORER_RATE = {True: "bare-1", False: "park-2"}  # states/s: one process, 1 and 2 workers


def _started(workers: int, stack: ExitStack):
    """A LocalCluster of `workers`, closed with `stack`, and the seconds it took to start."""
    from purgecheck.cluster.client import dask_client

    t0 = time.perf_counter()
    client = stack.enter_context(dask_client(workers=workers))
    client.wait_for_workers(workers, timeout=120)
    return client, time.perf_counter() - t0


def _scaled_down(client, workers: int) -> float:
    """The client's LocalCluster down to `workers`, and the seconds until the scheduler
    counts no more."""
    from purgecheck.cluster.client import worker_addresses

    t0 = time.perf_counter()
    client.cluster.scale(workers)
    while len(worker_addresses(client)) > workers:
        if time.perf_counter() - t0 > 120:
            raise TimeoutError(f"the cluster did not scale down to {workers} workers in 120 s")
        time.sleep(0.05)
    return time.perf_counter() - t0


def kill_matrix(tiny: bool, client, start_s: float, every: int = 1) -> list[Figure]:
    """The cells of every `every`-th mutant of the catalogue x the cheap engines, in the pool
    and on the cluster."""
    from purgecheck.engines import load_engines
    from purgecheck.mutants import MUTANTS
    from purgecheck.mutants.matrix import run_matrix

    load_engines()
    # tiny (the test suite's): one mutant of the glibc model on the cheapest deterministic
    # engine, glibc's (2 s of CPU a quick run, the scenarios engine's 3.5 s)
    mutants = [MUTANTS["glibc-split-remainder-lost"]] if tiny else list(MUTANTS.values())[::every]
    engines = ["glibc"] if tiny else list(CHEAP_ENGINES)
    what = (f"{len(mutants)} mutants{f' (one in {every} of the catalogue)' if every > 1 else ''} x "
            f"{', '.join(engines)}, quick budgets")
    t0 = time.perf_counter()
    pool = run_matrix(mutants, engines, quick=True, timeout=600, workers=2)
    pool_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    dask = run_matrix(mutants, engines, quick=True, timeout=600, client=client)
    dask_s = time.perf_counter() - t0
    same = "the same verdicts" if _verdicts(pool) == _verdicts(dask) else \
        "DIFFERENT verdicts (a real-thread engine's timing)"
    return [Figure(BENCH, "kill matrix, home-made pool of 2: wall time", pool_s, "s", what),
            Figure(BENCH, "kill matrix, Dask LocalCluster of 2: wall time", dask_s + start_s,
                   "s", f"{what}; {same}; with the cluster's start ({start_s:.1f} s); "
                        f"without it {dask_s:.1f} s")]


def _verdicts(m) -> dict:
    return {k: c.verdict for k, c in m.cells.items()}


def campaign(tiny: bool, client, n: int, seconds: float | None = None) -> Figure:
    from purgecheck.cluster.campaign import Job, run_campaign

    jobs = [Job(m, "epoch", None) for m in ("page", "epoch", "park")]
    seconds = seconds or CAMPAIGN_SECONDS[tiny]
    camp = run_campaign(client, jobs, seconds, base_seed=1, database=None,
                        examples=10 if tiny else 50)
    return Figure(BENCH, f"fuzz campaign, {n} worker{'s' if n > 1 else ''}: examples per "
                         f"second", camp.examples_per_s, "examples/s",
                  f"{camp.examples:,} examples in {camp.seconds:.1f} s; the page, epoch and "
                  f"park machines under the epoch design, in turn")


def _config(name: str):
    from proofs.explorer_configs import BENCH_ONLY, CONFIGS

    return CONFIGS.get(name) or BENCH_ONLY[name]


def _rate(rep) -> float:
    return rep.states / rep.seconds if rep.seconds else 0.0


def explorer_alone(tiny: bool) -> list[Figure]:
    """The single-process explorer's states per second, for the split runs to be set against."""
    from proofs.explorer import explore

    explore(_config("bare-1"))  # the imports and the registry, not counted
    cpu = time.process_time()
    rep = explore(_config(EXPLORER_RATE[tiny]))
    cpu = time.process_time() - cpu
    return [Figure(BENCH, f"explorer, one process, {rep.config.name}: states per second",
                   _rate(rep), "states/s", f"{rep.states:,} states in {rep.seconds:.1f} s"),
            Figure(BENCH, f"explorer, one process, {rep.config.name}: states per CPU second",
                   rep.states / cpu if cpu else 0.0, "states/s", f"{cpu:.1f} s of CPU")]


def explorer(tiny: bool, client, n: int, top: str | None = None,
             budget: float | None = None) -> list[Figure]:
    """The split explorer's states per second on EXPLORER_RATE's configuration with what its
    partitions hold and send; with 2 workers, up the ladder (as far as `top`) until a
    configuration is not exhausted within the budget: the last one exhausted is the largest."""
    from purgecheck.cluster.explorer import explore_on

    workers = f"{n} worker{'s' if n > 1 else ''}"
    rep = explore_on(client, _config(EXPLORER_RATE[tiny]), figures=True)
    out = [Figure(BENCH, f"split explorer, {workers}, {rep.config.name}: states per second",
                  _rate(rep), "states/s", f"{rep.states:,} states in {rep.seconds:.1f} s"),
           Figure(BENCH, f"split explorer, {workers}, {rep.config.name}: states per CPU "
                         f"second", rep.states / rep.cpu if rep.cpu else 0.0, "states/s",
                  f"{rep.cpu:.1f} s of CPU in the partitions' admissions and expansions, "
                  f"all added (against the wall's: the machine's load)"),
           Figure(BENCH, f"split explorer, {workers}, {rep.config.name}: bytes held per state",
                  rep.held_bytes / rep.states, "bytes", "each state's bytes in its owner's set, "
                                                        "with its parent's number"),
           Figure(BENCH, f"split explorer, {workers}, {rep.config.name}: successors sent",
                  rep.sent, "successors", f"{rep.sent_bytes / 1e6:,.1f} MB between partitions, "
                                      f"{rep.sent_bytes / max(rep.sent, 1):.0f} bytes each, over "
                                      f"{rep.depth + 1} levels; {rep.transitions:,} transitions")]
    if n < 2:
        return out
    budget, exhausted = budget or EXPLORER_BUDGET[tiny], []
    ladder = EXPLORER_LADDER[:EXPLORER_LADDER.index(top) + 1] if top else EXPLORER_LADDER
    for name in EXPLORER_LADDER[:1] if tiny else ladder:
        rep = explore_on(client, _config(name), time_limit=budget)
        out.append(Figure(BENCH, f"split explorer, {workers}, ladder, {name}: states per second",
                          _rate(rep), "states/s",
                          f"{rep.states:,} states in {rep.seconds:.1f} s, "
                          f"{'exhaustive' if rep.complete else 'NOT exhaustive'}"))
        if not rep.complete or rep.seconds > budget:
            break
        exhausted.append((name, rep))
    for kind, found in (("", exhausted), (" park", [e for e in exhausted if "park" in e[0]])):
        if found:
            name, rep = max(found, key=lambda e: e[1].states)
            out.append(Figure(BENCH, f"split explorer, {workers}: largest{kind} configuration "
                                     f"exhausted within {budget:g} s", rep.states, "states",
                              f"{name} ({_config(name).describe()}), {rep.seconds:.1f} s"
                              + (f"; the ladder went no further than {top}" if top else "")))
    return out


# `make bench`'s sizes (python -m purgecheck.bench; --full gives this module's own): a third
# of the catalogue in the matrix, a 20 s campaign, the ladder as far as park-2 at 30 s each
STANDARD = {"every": 3, "campaign_s": 20.0, "top": "park-2", "ladder_s": 30.0}


def figures(tiny: bool = False, explorer_only: bool = False, every: int = 1,
            campaign_s: float | None = None, top: str | None = None,
            ladder_s: float | None = None) -> list[Figure]:
    """Every figure, on one cluster of 2 workers and then one of 1 (`explorer_only`: the
    explorer's alone); `every`, `campaign_s`, `top` and `ladder_s` make it smaller (STANDARD)."""
    out = explorer_alone(tiny)
    with ExitStack() as cluster:
        for n in (2, 1):
            if n == 1 and tiny:
                # the test suite's figures of 1 worker on the same cluster, one worker retired:
                # a second start was a tenth of the tiny run's CPU (a worker's spawn, imports)
                start_s = _scaled_down(client, n)
                out.append(Figure(BENCH, f"Dask LocalCluster of {n}: scaled down from 2",
                                  start_s, "s", ""))
            else:
                cluster.close()  # the cluster of 2 goes before the one of 1 starts
                client, start_s = _started(n, cluster)
                out.append(Figure(BENCH, f"Dask LocalCluster of {n}: start", start_s, "s", ""))
            if n == 2 and not explorer_only:
                out += kill_matrix(tiny, client, start_s, every)
            if not explorer_only:
                out.append(campaign(tiny, client, n, campaign_s))
            out += explorer(tiny, client, n, top, ladder_s)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="the test suite's sizes")
    ap.add_argument("--explorer", action="store_true",
                    help="only the split explorer's figures (about 5 minutes)")
    args = ap.parse_args(argv)
    print(f"cluster benchmark: {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    for f in figures(args.tiny, args.explorer):
        print(f"{f.name:78} {f.value:>12,.1f} {f.unit:12} {f.note}", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
