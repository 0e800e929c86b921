"""Pictures for the generated docs, as SVG: a scenario's timeline per design, and the state
graph of the epoch advance with a counterexample path.

matplotlib writes the SVG with a fixed hash salt, no date and text kept as text, so the same
inputs give the same bytes (the docs staleness test compares them) and a test can read the
labels back.
"""

from __future__ import annotations

import io
from collections import defaultdict

import matplotlib

matplotlib.use("svg")  # no display, no GUI toolkit: the docs are built headless

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402

from purgecheck.docs.advance_graph import Graph  # noqa: E402
from purgecheck.reports.timeline import Timeline  # noqa: E402

STYLE = {
    "svg.hashsalt": "purgecheck-docs",  # element ids derive from this, not from a random salt
    "svg.fonttype": "none",  # text stays text: smaller, searchable, no glyph paths
    "font.family": "DejaVu Sans",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
CHOSEN = "#4d4d4d"  # the seed's design (epoch)
REJECTED = "#c0392b"  # the design under review
OTHERS = ["#c0392b", "#2471a3", "#d68910", "#7d3c98", "#17a589"]  # several at once


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": "purgecheck docs"})
    plt.close(fig)
    return buf.getvalue()


def _mib(n: int) -> float:
    return n / 2**20


def _series(tl: Timeline) -> dict[str, list[float]]:
    """Per op of the script: epoch, cumulative discards, resident (MiB), and the ops that
    swept. The x axis is the op, not the virtual time: many ops share a millisecond."""
    out: dict[str, list[float]] = defaultdict(list)
    total = 0
    for s in tl.steps:
        total += s.discarded
        out["x"].append(s.line)
        out["epoch"].append(s.epoch)
        out["discarded"].append(_mib(total))
        out["resident"].append(_mib(s.resident))
        out["sweep_x"] += [s.line] * bool(s.sweeps)
    return out


def timeline_svg(chosen: Timeline, others: list[Timeline], title: str) -> str:
    """Epochs, sweeps, cumulative discards and residency op by op: the chosen design (thick,
    grey) against the others, each one's first invariant violation marked."""
    colours = [REJECTED] if len(others) == 1 else OTHERS
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(3, 1, figsize=(7.5, 5.8), sharex=True)
        runs = [(chosen, CHOSEN, 2.6)] + [(tl, colours[n % len(colours)], 1.2)
                                          for n, tl in enumerate(others)]
        for row, (tl, colour, width) in enumerate(runs):
            s = _series(tl)
            axes[0].step(s["x"], s["epoch"], where="post", color=colour, lw=width,
                         label=tl.variant)
            axes[0].plot(s["sweep_x"], [-0.5 * (row + 1)] * len(s["sweep_x"]), "|",
                         color=colour, ms=4)
            axes[1].step(s["x"], s["discarded"], where="post", color=colour, lw=width)
            axes[2].step(s["x"], s["resident"], where="post", color=colour, lw=width)
            first = tl.first_violation()
            if row and first is not None:
                n, inv, _ = first
                line = tl.steps[n].line
                for ax in axes:
                    ax.axvline(line, color=colour, ls="--", lw=0.8)
                axes[0].annotate(f"{inv} fails at line {line}", (line, 1 - 0.13 * row),
                                 xycoords=("data", "axes fraction"), xytext=(4, 0),
                                 textcoords="offset points", color=colour, fontsize=7.5)
        axes[0].set_yticks([t for t in axes[0].get_yticks() if t >= 0 and t == int(t)])
        axes[0].set_ylabel("epoch\n(ticks: sweeps)")
        axes[1].set_ylabel("discarded\n(MiB, total)")
        axes[2].set_ylabel("resident\n(MiB)")
        axes[2].set_xlabel(f"op (line of the script of {chosen.scenario})")
        fig.legend(*axes[0].get_legend_handles_labels(), loc="upper center", frameon=False,
                   ncol=len(runs), bbox_to_anchor=(0.5, 0.955))
        fig.suptitle(title, fontsize=10)
        fig.tight_layout(rect=(0, 0, 1, 0.93))
        return _svg(fig)


def _layers(g: Graph) -> dict:
    """x = depth (steps from the initial state), y = order in the layer, each node placed
    near the mean of its predecessors so that edges run mostly left to right."""
    by_depth: dict[int, list] = defaultdict(list)
    for n, d in g.graph.nodes(data=True):
        by_depth[d["depth"]].append(n)
    pos: dict = {}
    for depth in sorted(by_depth):
        nodes = by_depth[depth]

        def key(n):
            ys = [pos[p][1] for p in g.graph.predecessors(n) if p in pos]
            return (sum(ys) / len(ys) if ys else 0.0, repr(n))

        nodes.sort(key=key)
        for i, n in enumerate(nodes):
            pos[n] = (depth, i - (len(nodes) - 1) / 2)
    return pos


def state_graph_svg(g: Graph, title: str) -> str:
    """Every state of the configuration as a dot, layered by distance from the start; the
    states where an epoch invariant fails in red, the shortest path to one drawn over it."""
    pos = _layers(g)
    on_path = set(zip(g.path, g.path[1:]))
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(9, 5.2))
        # every edge off the path in one collection: an artist per edge (thousands) made
        # the drawing most of the docs' cost, for the same picture
        ax.add_collection(LineCollection(
            [(pos[a], pos[b]) for a, b in g.graph.edges() if (a, b) not in on_path],
            colors="#d5d5d5", linewidths=0.4, zorder=1))
        plain = [n for n in g.graph if not g.graph.nodes[n]["violations"]]
        bad = g.violating
        ax.scatter([pos[n][0] for n in plain], [pos[n][1] for n in plain], s=5,
                   color="#7f8c8d", zorder=2, label=f"{len(plain)} states")
        ax.scatter([pos[n][0] for n in bad], [pos[n][1] for n in bad], s=14,
                   color=REJECTED, zorder=3, label=f"{len(bad)} violating states")
        for n, (a, b) in enumerate(zip(g.path, g.path[1:])):
            (x0, y0), (x1, y1) = pos[a], pos[b]
            ax.plot([x0, x1], [y0, y1], color=REJECTED, lw=2.0, zorder=4)
            ax.annotate(f"{n + 1}", ((x0 + x1) / 2, (y0 + y1) / 2), fontsize=7,
                        color="#7b241c", xytext=(0, 6 if n % 2 else -10),
                        textcoords="offset points", ha="center", zorder=5)
        x, y = pos[g.initial]
        ax.scatter([x], [y], s=40, color="black", zorder=5, label="initial state")
        ax.set_xlabel("atomic steps from the initial state")
        ax.set_yticks([])
        ax.spines["left"].set_visible(False)
        ax.legend(loc="upper left", frameon=False, fontsize=7)
        ax.set_title(title, fontsize=10)
        fig.tight_layout()
        return _svg(fig)
