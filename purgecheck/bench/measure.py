"""Benchmark of `purgecheck measure` on the real Bun: what the measurement costs the program
(strace on madvise, perf on the loop's turns, sampling smaps_rollup) and the model beside
the real system, figure by figure, as the model's excess over the real one (1.0: the same;
the model's figures the median of compare.COMPARISON_RUNS runs with their own seeds, as the
real ones are the median of the repeats). Prints figures; asserts nothing.

    .venv/bin/python -m purgecheck.bench.measure               2 runs, 4 s of load each
    .venv/bin/python -m purgecheck.bench.measure --load-s 10 --repeats 3

The overhead runs alternate (strace and perf, perf only, neither, strace and perf, ...) on
the default design; their medians are compared. Without a bun installed every row says so.
"""

from __future__ import annotations

import argparse
import statistics
import time

from purgecheck.bench import Figure, not_measured

BENCH = "measure"
STANDARD = {"load_s": 4.0, "repeats": 2}


def _overhead(bun, load_s: float, repeats: int, sample_ms: float) -> list[Figure]:
    """Alternated runs of the default design: counted in full (strace on madvise and perf on
    the loop's turns), counted with perf only, and not counted."""
    from purgecheck.measure.run import measure_once
    from purgecheck.measure.workloads import workload_params
    w, p = workload_params("bun-serve", {"load_s": str(load_s), "idle_s": "0.3"})
    arms = {"strace and perf": (True, True), "perf only": (False, True),
            "neither": (False, False)}
    got: dict[str, list[dict]] = {arm: [] for arm in arms}
    for _ in range(repeats):
        for arm, (strace, perf) in arms.items():
            got[arm].append(measure_once(bun, w, p, "default", count_madvise=strace,
                                         sample_ms=sample_ms, count_turns=perf).figures)
    out = []
    for arm in ("strace and perf", "perf only"):
        for key, what, unit in (("requests_per_s", "requests per second", "req/s"),
                                ("sys_us_per_request", "kernel CPU per request", "us"),
                                ("user_us_per_request", "user CPU per request", "us")):
            with_s = statistics.median(f[key] for f in got[arm])
            without = statistics.median(f[key] for f in got["neither"])
            out.append(Figure(BENCH, f"bun-serve default, {what}: {arm} / neither",
                              with_s / without if without else float("nan"), "ratio",
                              f"{with_s:,.1f} against {without:,.1f} {unit}, median of "
                              f"{repeats} alternated runs, {load_s:g} s of load, smaps_rollup "
                              f"every {sample_ms:g} ms in both"))
    return out


def _model_vs_real(bun, load_s: float, repeats: int, workloads: tuple[str, ...],
                   designs: list[str], model_runs: int) -> list[Figure]:
    from purgecheck.measure.compare import MachineModel, compare
    from purgecheck.measure.report import summarise
    from purgecheck.measure.run import measure_once
    from purgecheck.measure.workloads import workload_params
    out = []
    for name in workloads:
        sets = {"load_s": str(load_s), "idle_s": "2"} if name.startswith("bun-serve") else \
            {"seconds": str(load_s), "idle_s": "1"} if name == "buffer-loop" else {}
        w, p = workload_params(name, sets)
        t0 = time.perf_counter()
        runs = [measure_once(bun, w, p, d, repeat=r) for r in range(repeats) for d in designs]
        wall = time.perf_counter() - t0
        out.append(Figure(BENCH, f"{name}: one measured run, wall time", wall / len(runs), "s",
                          f"{len(runs)} runs ({len(designs)} designs x {repeats})"))
        c = compare(name, p, summarise(runs), machine=MachineModel(runs=model_runs))
        for row in c.rows:
            label = f"{name}, {row.design}, {row.figure}: model / real"
            if row.model is None or row.real is None or row.real <= 0:  # no ratio to 0 or less
                why = "the model has no such design" if row.model is None else \
                    f"the real excess over before is {row.real or 0:,.2f}, not above 0"
                out.append(not_measured(BENCH, label, "ratio", f"not measured: {why}"))
                continue
            out.append(Figure(BENCH, label, row.model / row.real, "ratio",
                              f"{row.verdict} ({row.band}): real {row.real:,.2f} (noise "
                              f"{row.real_noise:,.2f}), model {row.model:,.2f}, excess over "
                              f"before"))
        for fig, o in c.order.items():
            out.append(Figure(BENCH, f"{name}, designs ordered by {fig}: same on both sides",
                              1.0 if o["same"] else 0.0, "bool",
                              f"real {' < '.join(o['real'])}; model {' < '.join(o['model'])}"))
    return out


def figures(tiny: bool = False, load_s: float = 10.0, repeats: int = 3) -> list[Figure]:
    from purgecheck.measure.bun import BunMissing, find_bun
    try:
        bun = find_bun()
    except BunMissing as e:
        return [not_measured(BENCH, "bun-serve default, requests per second: strace and perf / "
                                    "neither", "ratio", f"not measured: {e}")]
    if tiny:  # half a second of load: every figure measured (about 4,000 requests), half the
        # CPU of 1 s's (the test suite's; 2.5 of 5 s, docs/guide.md section 8, thirteenth round)
        return (_overhead(bun, 0.5, 1, 50.0) +
                _model_vs_real(bun, 0.5, 1, ("bun-serve",), ["before", "no-hold"], 1))
    from purgecheck.measure.compare import COMPARISON_RUNS
    from purgecheck.measure.designs import DESIGNS
    return (_overhead(bun, load_s, repeats, 50.0) +
            _model_vs_real(bun, load_s, repeats, ("bun-serve", "typed-arrays", "buffer-loop"),
                           list(DESIGNS), COMPARISON_RUNS))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m purgecheck.bench.measure",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--load-s", type=float, default=STANDARD["load_s"])
    p.add_argument("--repeats", type=int, default=STANDARD["repeats"])
    args = p.parse_args(argv)
    for f in figures(load_s=args.load_s, repeats=args.repeats):
        print(f"{f.name:70} {f.value:>10,.2f} {f.unit:6} {f.note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
