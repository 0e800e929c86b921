"""The tables of `purgecheck simulate`: one row per design, and the seeds' claims."""

from __future__ import annotations

import sys

from purgecheck.simulate.result import DesignRun

MiB = 1 << 20


def _mb(n: float) -> str:
    return f"{n / MiB:,.1f}"


# (column, counter, format) of the mimalloc table and of the glibc table
MIMALLOC_COLUMNS = [
    ("discards load", "discards_load", "{:,.0f}"),
    ("MB load", "discarded_bytes_load", _mb),
    ("discards idle", "discards_idle", "{:,.0f}"),
    ("MB idle", "discarded_bytes_idle", _mb),
    ("refaults", "refaults", "{:,.0f}"),
    ("/request", "refaults_per_request", "{:.2f}"),
    ("/1k allocs", "refaults_per_1k_allocs", "{:.1f}"),
    ("RSS load end", "rss_load_end", _mb),
    ("free res. load end", "free_resident_load_end", _mb),
    ("RSS end", "rss_end", _mb),
    ("free res. end", "free_resident_end", _mb),
    ("ms to floor", "ms_to_floor", "{:,.0f}"),
]
GLIBC_COLUMNS = [
    ("madvise", "madvise", "{:,.0f}"),
    ("madvise/s", "madvise_per_s", "{:,.2f}"),
    ("brk grow", "brk_grow", "{:,.0f}"),
    ("brk shrink", "brk_shrink", "{:,.0f}"),
    ("mmap", "mmap", "{:,.0f}"),
    ("munmap", "munmap", "{:,.0f}"),
    ("page faults", "page_faults", "{:,.0f}"),
    ("records/s", "records_per_s", "{:,.0f}"),
    ("kernel ms", "sys_ms", "{:,.1f}"),
    ("RSS load end", "rss_load_end", _mb),
    ("RSS end", "rss_end", _mb),
]


def _cell(fmt, value) -> str:
    if value is None:
        return "-"
    return fmt(value) if callable(fmt) else fmt.format(value)


def print_runs(runs: list[DesignRun], workload: str, file=None) -> None:
    """One table per model (a workload may have run on both)."""
    for model in ("glibc", "mimalloc"):
        part = [r for r in runs if r.model == model]
        if part:
            _print_table(part, workload, file)


def _print_table(runs: list[DesignRun], workload: str, file=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file or sys.stdout, width=200)
    glibc = bool(runs) and runs[0].model == "glibc"
    columns = GLIBC_COLUMNS if glibc else MIMALLOC_COLUMNS
    first = runs[0].counters if runs else {}
    what = (f"{first.get('allocations', 0):,.0f} allocations"
            + (f", {first['requests']:,.0f} requests" if first.get("requests") else ""))
    table = Table(title=f"{workload}: {what}; bytes in MB (MiB), residency per OS page",
                  show_lines=False)
    table.add_column("glibc" if glibc else "design", no_wrap=True)
    for name, _, _ in columns:
        table.add_column(name, justify="right")
    for r in runs:
        table.add_row(r.design, *(_cell(fmt, r.counters.get(key)) for _, key, fmt in columns))
    console.print(table)


def print_claims(claims, file=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file or sys.stdout, width=200)
    table = Table(title="the seeds' claims beside the model's figures (computed now)",
                  show_lines=True)
    for col, width in (("seed", 4), ("claim", 44), ("the seed measured", 36),
                       ("the model computes", 52), ("holds", 5)):
        table.add_column(col, max_width=width)
    for c in claims:
        style = "green" if c.holds else "bold red"
        table.add_row(c.seed, c.claim, c.seed_figures, c.model_figures,
                      f"[{style}]{'yes' if c.holds else 'NO'}[/{style}]")
    console.print(table)
    held = sum(c.holds for c in claims)
    console.print(f"{held} of {len(claims)} claims hold in the model; docs/simulate.md explains "
                  f"the others")
