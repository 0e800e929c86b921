"""The picture of a workload: resident free memory and discards over time, one line per
design, the idle after the last allocation shaded (SVG and PNG, matplotlib)."""

from __future__ import annotations

from pathlib import Path

from purgecheck.simulate.result import DesignRun

MiB = 1 << 20


def _figure(runs: list[DesignRun], stem: str | None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # element ids derive from this, not from a random salt: the same picture, the same SVG
    matplotlib.rcParams["svg.hashsalt"] = "purgecheck-simulate"

    if not runs:
        raise ValueError("nothing to plot: no runs")
    stem = stem or runs[0].workload
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    for run in runs:
        t = [s.t_ms / 1000 for s in run.samples]
        label = run.design if run.model == "mimalloc" else f"glibc {run.design}"
        top.plot(t, [s.free_resident / MiB for s in run.samples], label=label, linewidth=1.2)
        bottom.plot(t, [s.discards for s in run.samples], label=label, linewidth=1.2)
    load_end = max(r.load_end_ms for r in runs) / 1000
    end = max(r.end_ms for r in runs) / 1000
    for ax in (top, bottom):
        if end > load_end:
            ax.axvspan(load_end, end, color="0.92", zorder=0)
        ax.grid(True, linewidth=0.3)
    top.text(load_end, top.get_ylim()[1] * 0.95, " idle", va="top", fontsize=8)
    top.set_ylabel("resident free (MB)")
    bottom.set_ylabel("discards (madvise calls)")
    bottom.set_xlabel("virtual time (s)")
    top.set_title(f"{stem}: what each design keeps resident and discards")
    top.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig, plt


def plot_runs(runs: list[DesignRun], out_dir: Path, stem: str | None = None) -> list[Path]:
    """Write `<stem>.svg` and `<stem>.png` into `out_dir`; returns the two paths."""
    stem = stem or runs[0].workload
    fig, plt = _figure(runs, stem)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{stem}.svg", out_dir / f"{stem}.png"]
    fig.savefig(paths[0], metadata={"Date": None})  # no date: the SVG is reproducible
    fig.savefig(paths[1], dpi=100)
    plt.close(fig)
    return paths


def svg_text(runs: list[DesignRun], stem: str | None = None) -> str:
    """The picture as SVG text (for the generated docs)."""
    import io
    fig, plt = _figure(runs, stem)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    plt.close(fig)
    return buf.getvalue()
