"""Repeated runs of the real Bun, per design: each figure's minimum, median and maximum, as
a table or as JSON (the machine is noisy; seed 000 gave its figures as ranges too)."""

from __future__ import annotations

import os
import platform
import statistics
import time

from purgecheck.measure.run import FIGURES, RunResult


def spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": statistics.median(values), "max": max(values),
            "n": len(values)}


def summarise(runs: list[RunResult]) -> dict[str, dict[str, dict[str, float]]]:
    """design -> figure -> {min, median, max, n} over the repeats."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for design in dict.fromkeys(r.design for r in runs):
        mine = [r for r in runs if r.design == design]
        out[design] = {k: spread([r.figures[k] for r in mine if k in r.figures])
                       for k in FIGURES if any(k in r.figures for r in mine)}
    return out


def summary_of(runs: list[dict]) -> dict[str, dict[str, dict]]:
    """summarise() of runs as JSON (a recorded measurement's `runs`, one workload's)."""
    out: dict[str, dict[str, dict]] = {}
    for design in dict.fromkeys(r["design"] for r in runs):
        mine = [r["figures"] for r in runs if r["design"] == design]
        # a count that one run lacks (perf did not attach in time) is the spread of the runs
        # that have it (`n` says how many)
        out[design] = {k: spread([f[k] for f in mine if k in f])
                       for k in dict.fromkeys(k for f in mine for k in f)}
    return out


def machine() -> dict:
    """Where and when: the figures of a black box depend on both."""
    load1, load5, _ = os.getloadavg()
    return {"date": time.strftime("%Y-%m-%d %H:%M %Z"), "host": platform.node(),
            "cpus": os.cpu_count(), "kernel": platform.release(),
            "load_1min": round(load1, 2), "load_5min": round(load5, 2)}


def num(v: float | None) -> str:
    """A figure as the tables print it: whole above 100, two decimals below; "-" for none."""
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.2f}"


def _cell(s: dict[str, float]) -> str:
    if s["n"] == 1 or s["min"] == s["max"]:
        return num(s["median"])
    return f"{num(s['median'])} ({num(s['min'])}..{num(s['max'])})"


def table(summary: dict, workload: str, request: str) -> str:
    designs = list(summary)
    rows = [["figure", *designs]]
    for k in FIGURES:
        if all(k in summary[d] for d in designs):
            rows.append([k.replace("request", request), *(_cell(summary[d][k]) for d in designs)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"{workload}: median (min..max) of {summary[designs[0]]['requests']['n']} runs "
             f"per design"]
    for i, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if j == 0 else c.rjust(w)
                               for j, (c, w) in enumerate(zip(r, widths))))
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)
