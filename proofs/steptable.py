"""Counterexamples as step tables: one row per step, one column per variable that changed.

Both Z3 (a model of an unrolled trace) and the explorer (a shortest path in the state graph)
produce a list of (actor, action, {variable: value}) rows; `render` prints them so that a
reader sees who did what, and what each step changed, without the solver's notation.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Step:
    actor: str
    action: str
    values: dict[str, object] = field(default_factory=dict)
    note: str = ""


def _fmt(v: object) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def render(steps: list[Step], columns: list[str] | None = None, changed_only: bool = True,
           title: str = "") -> str:
    """A fixed-width table: step number, actor, action, the columns, a note.

    With `changed_only`, a value equal to the one in the row above is shown as '.', so the
    eye falls on what each step changed."""
    if columns is None:
        columns = []
        for s in steps:
            for k in s.values:
                if k not in columns:
                    columns.append(k)
    head = ["#", "actor", "action"] + columns + ["note"]
    rows = []
    prev: dict[str, object] = {}
    for n, s in enumerate(steps):
        cells = [str(n), s.actor, s.action]
        for c in columns:
            v = s.values.get(c)
            same = changed_only and n > 0 and c in prev and prev[c] == v
            cells.append("." if same else _fmt(v))
        cells.append(s.note)
        prev = dict(s.values)
        rows.append(cells)
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    lines = [title] if title else []
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(lines)


def render_facts(facts: list[tuple[str, object]], title: str = "") -> str:
    """A two-column table for a counterexample that is one state, not a trace."""
    w = max((len(k) for k, _ in facts), default=0)
    lines = [title] if title else []
    lines += [f"  {k.ljust(w)}  {_fmt(v)}" for k, v in facts]
    return "\n".join(lines)
