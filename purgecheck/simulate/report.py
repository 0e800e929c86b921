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


# the table of a program's trace: every glibc version and every mimalloc design side by side
PROGRAM_COLUMNS = [
    ("discards", "discards", "{:,.0f}"),
    ("MB given back", "discarded_bytes", _mb),
    ("refaults", "refaults", "{:,.0f}"),
    ("peak MB", "rss_peak", _mb),
    ("MB·s", "rss_mb_s", "{:,.1f}"),
]


def print_program(runs: list[DesignRun], program, file=None, engine: str | None = None) -> None:
    """One row per glibc version and mimalloc design: what each gives back (calls and
    bytes), refaults, resident memory at its peak and over time, and glibc's system calls by
    category (those that occur); a recording that lost its end says it is a prefix."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file or sys.stdout, width=220)
    c = program.conversion
    cats = sorted({k for r in runs for k, n in r.syscalls.items() if n})
    title = (f"{program.source}: {c.ops:,} ops, at most {c.max_live:,} blocks live; bytes in "
             f"MB (MiB), residency per OS page" + _ran_on(engine))
    table = Table(title=title)
    table.add_column("model", no_wrap=True)
    table.add_column("design", no_wrap=True)
    for name, _, _ in PROGRAM_COLUMNS:
        table.add_column(name, justify="right")
    for cat in cats:
        table.add_column(cat, justify="right")
    for r in runs:
        calls = [f"{r.syscalls.get(cat, 0):,}" if r.model == "glibc" else "-" for cat in cats]
        table.add_row(r.model, r.design, *(_cell(fmt, r.counters.get(key))
                                           for _, key, fmt in PROGRAM_COLUMNS), *calls)
    console.print(table)
    if program.prefix is not None:
        console.print(f"PREFIX: these figures cover part of the run only: {program.prefix}")


def _cell(fmt, value) -> str:
    if value is None:
        return "-"
    return fmt(value) if callable(fmt) else fmt.format(value)


def _ran_on(engine: str | None) -> str:
    """The title's note of the interpreter that ran the models (purgecheck/simulate/engine.py)."""
    return f"; run by {engine}" if engine else ""


def print_runs(runs: list[DesignRun], workload: str, file=None,
               engine: str | None = None) -> None:
    """One table per model (a workload may have run on both)."""
    for model in ("glibc", "mimalloc"):
        part = [r for r in runs if r.model == model]
        if part:
            _print_table(part, workload, file, engine)


def _print_table(runs: list[DesignRun], workload: str, file=None,
                 engine: str | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file or sys.stdout, width=200)
    glibc = bool(runs) and runs[0].model == "glibc"
    columns = GLIBC_COLUMNS if glibc else MIMALLOC_COLUMNS
    first = runs[0].counters if runs else {}
    what = (f"{first.get('allocations', 0):,.0f} allocations"
            + (f", {first['requests']:,.0f} requests" if first.get("requests") else ""))
    table = Table(title=f"{workload}: {what}; bytes in MB (MiB), residency per OS page"
                        + _ran_on(engine),
                  show_lines=False)
    table.add_column("glibc" if glibc else "design", no_wrap=True)
    for name, _, _ in columns:
        table.add_column(name, justify="right")
    for r in runs:
        table.add_row(r.design, *(_cell(fmt, r.counters.get(key)) for _, key, fmt in columns))
    console.print(table)


def figure_text(f) -> str:
    """A claim's figure in one line: the seed's value or range, the model's, the real one."""
    from purgecheck.simulate.claims import _num
    seed = ("-" if f.seed_lo is None else _num(f.seed_lo) if f.seed_lo == f.seed_hi
            else f"{_num(f.seed_lo)} .. {_num(f.seed_hi)}")
    real = "" if f.real is None else f", real {_num(f.real)}"
    return f"{f.name} ({f.unit}): seed {seed}, model {_num(f.model)}{real}"


def comparison_text(c) -> str:
    return f"{'ok' if c.holds else 'NO'}: {c.statement()}" + (f" ({c.note})" if c.note else "")


def summary_text(s: dict) -> str:
    return (f"{s['reproduced']} of {s['claims']} claims reproduced, {s['fails']} fail, "
            f"{s['by_construction']} hold by construction of the model (not counted as "
            f"reproduced)")


VERDICT_STYLE = {"holds": "green", "fails": "bold red", "by construction": "yellow"}


def print_claims(claims, file=None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from purgecheck.simulate.claims import summary

    console = Console(file=file or sys.stdout, width=200)
    table = Table(title="the seeds' claims beside the model's figures (computed now)",
                  show_lines=True)
    for col, width in (("claim", 46), ("figures: the seed, the model", 62),
                       ("comparisons", 62), ("verdict", 15)):
        table.add_column(col, max_width=width, no_wrap=col == "verdict")
    for c in claims:
        style = VERDICT_STYLE[c.verdict]
        why = f"\n[{'by construction' if c.by_construction else 'band'}: {c.reason}]" \
            if c.reason else ""
        table.add_row(escape(f"{c.id} (seed {c.seed}): {c.claim}{why}"),
                      escape("\n".join(figure_text(f) for f in c.figures)),
                      escape("\n".join(comparison_text(k) for k in c.comparisons)),
                      f"[{style}]{c.verdict}[/{style}]")
    console.print(table)
    console.print(summary_text(summary(claims)))
