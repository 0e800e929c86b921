"""Step tables: a scenario run, or a path in a state graph, one row per step.

Scenario steps come from `purgecheck.reports.timeline` (as dicts, since the mutants report carries
them through JSON); graph paths from `purgecheck.docs.advance_graph`. In a graph path a value
equal to the row above is shown as "." so that the eye falls on what each step changed.
"""

from __future__ import annotations

from dataclasses import asdict

from purgecheck.docs.md import esc, table
from purgecheck.reports.timeline import Timeline

SCENARIO_HEADER = ["line", "op", "t (ms)", "epoch", "discarded", "refaulted blocks",
                   "resident", "what happened"]


def size(n: int) -> str:
    if not n:
        return ""
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n // 1024} KiB"


def window(tl: Timeline, index: int, before: int = 8, after: int = 2) -> list[dict]:
    """The steps around step `index` (the ops that led to it and a few after), as dicts."""
    lo, hi = max(0, index - before), min(len(tl.steps), index + after + 1)
    return [asdict(s) for s in tl.steps[lo:hi]]


def scenario_table(steps: list[dict]) -> str:
    rows = []
    for s in steps:
        notes = []
        if s["sweeps"]:
            notes.append(f"{s['sweeps']} sweep(s), {s['held']} page(s) held")
        if s["alloc_clock_reads"]:
            notes.append(f"{s['alloc_clock_reads']} clock read(s) by the allocation")
        notes += [f"**{inv}** fails: {esc(reason)}" for inv, reason in s["violations"]]
        rows.append([str(s["line"]), f"`{s['op']}`", str(s["now"]), str(s["epoch"]),
                     size(s["discarded"]), str(s["refaulted"] or ""), size(s["resident"]),
                     "; ".join(notes)])
    return table(SCENARIO_HEADER, rows)


def path_table(rows: list[tuple[str, dict[str, object]]]) -> str:
    """(action, state columns) per step of a path; unchanged values shown as '.'."""
    columns: list[str] = []
    for _, values in rows:
        columns += [k for k in values if k not in columns]
    out, prev = [], {}
    for n, (action, values) in enumerate(rows):
        cells = [str(n), esc(action)]
        for c in columns:
            v = values.get(c, "")
            cells.append("." if n and prev.get(c) == v else esc(str(v)))
        out.append(cells)
        prev = values
    return table(["#", "step"] + columns, out)
