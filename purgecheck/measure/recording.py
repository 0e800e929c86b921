"""A recorded measurement that gains a figure measured later: the same workloads, parameters
and designs run again, and only the figures the recording lacks are added to it, each with
the date, the load and the command of the runs that gave it (the workload's `apart`).

The rest of the recording stays as it was: its figures are another hour's, on another load,
and the figures added are ones that do not depend much on either (the event loop's turns in
the idle are its timers'), which is why they may stand beside it. docs/real-bun.md says so
where it shows them.
"""

from __future__ import annotations


class RecordingMismatch(ValueError):
    """The new runs are not of the recorded workload (another parameter or design)."""


def recorded_figures(workloads: dict) -> set[str]:
    """Every figure some design of some recorded workload has: the recording's format. A
    figure that only some runs give (`requests_per_late_collection`: only where a collection
    freed a survivor) is in it, and its absence from a workload is a finding, not a gap."""
    return {k for w in workloads.values() for s in w["summary"].values() for k in s}


def new_figures(known: set[str], measured: dict) -> list[str]:
    """The figures of `measured`'s summary (a workload's `purgecheck measure` JSON) that are
    not `known`, in the order measured."""
    return [k for k in dict.fromkeys(k for s in measured["summary"].values() for k in s)
            if k not in known]


def add_figures(recorded: dict, measured: dict, command: str,
                known: set[str] | None = None) -> list[str]:
    """Add to `recorded` (one workload of a recording, changed in place) the figures that
    `measured` has and the recording lacks (`known`: recorded_figures of the whole recording;
    by default this workload's), design by design; returns their names. The runs must be of
    the same parameters and designs (RecordingMismatch otherwise), so that a figure added
    describes the recorded workload."""
    if measured["params"] != recorded["params"]:
        raise RecordingMismatch(f"{recorded['workload']}: the runs' parameters "
                                f"{measured['params']} are not the recorded {recorded['params']}")
    if set(measured["summary"]) != set(recorded["summary"]):
        raise RecordingMismatch(f"{recorded['workload']}: the runs' designs "
                                f"{sorted(measured['summary'])} are not the recorded "
                                f"{sorted(recorded['summary'])}")
    added = new_figures(recorded_figures({"_": recorded}) if known is None else known, measured)
    for design, figures in measured["summary"].items():
        for k in added:
            if k in figures:
                recorded["summary"][design][k] = figures[k]
    m = measured["machine"]
    note = {"date": m["date"], "load_1min": m["load_1min"], "load_5min": m["load_5min"],
            "runs": len(measured["runs"]), "command": command}
    recorded.setdefault("apart", {}).update({k: note for k in added})
    return added


def apart_text(recorded: dict) -> str | None:
    """One line on the figures of a recorded workload that were measured apart, or None."""
    apart = recorded.get("apart") or {}
    if not apart:
        return None
    by_note: dict[tuple, list[str]] = {}
    for k, note in apart.items():
        by_note.setdefault(tuple(sorted(note.items())), []).append(k)
    parts = []
    for note, keys in by_note.items():
        n = dict(note)
        parts.append(f"{', '.join(f'`{k}`' for k in keys)} measured apart on {n['date']} at "
                     f"load {n['load_1min']} (1 min) and {n['load_5min']} (5 min), {n['runs']} "
                     f"runs (`{n['command']}`)")
    return "; ".join(parts)
