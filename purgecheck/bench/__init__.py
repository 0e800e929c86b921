"""The benchmarks: figures of speed and size, printed and never asserted (DESIGN.md).

One module per part measured (the conformance machinery, the explorer, the fuzz machines,
the trace reader and `validate` at scale); `python -m purgecheck.bench` (`make bench`) runs
them all and prints one table with the machine's load.

Each module has `figures(tiny) -> list[Figure]`, the figures its own `main()` prints (with
`tiny`, at a size that takes seconds: what the test suite runs, so that no benchmark rots).
"""

from __future__ import annotations

import math
import pkgutil
from dataclasses import dataclass

# The benchmarks, in the order `python -m purgecheck.bench` runs them: the modules of this
# package, by name (adding a benchmark is adding a module with `figures(tiny)`), except the
# tools that run them (compare: `make bench-compare`; predictions: the model's predictions
# hashed, to show a change for speed left them as they were; pypy: CPython and PyPy side by
# side at full length, rounds alternated, which `simulate`'s figures sum up).
TOOLS = frozenset({"compare", "predictions", "pypy"})
BENCHMARKS = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__)
                          if not m.name.startswith("_") and m.name not in TOOLS))


@dataclass(frozen=True)
class Figure:
    """One measured figure: `value` in `unit`; NaN when it was not measured (`note` says why:
    a tool that is not installed, a benchmark that failed)."""

    bench: str
    name: str
    value: float
    unit: str
    note: str = ""

    @property
    def measured(self) -> bool:
        return math.isfinite(self.value)

    def as_json(self) -> dict:
        """The figure as a JSON object; a figure not measured has the value null."""
        return {"bench": self.bench, "name": self.name,
                "value": self.value if self.measured else None, "unit": self.unit,
                "note": self.note}


def against_aim(value: float, aim: float, unit: str, at_most: bool = False) -> str:
    """The words a figure's note gives it beside an aim (issue 29's: replay and simulate at
    the scale of real programs): the aim and whether this run reached it. A benchmark prints
    this, nothing asserts it (the machine's load moves the figures)."""
    reached = value <= aim if at_most else value >= aim
    return (f"aim: {'at most' if at_most else 'at least'} {aim:,.0f} {unit}, "
            f"{'reached' if reached else 'not reached'} here")


def not_measured(bench: str, name: str, unit: str, why: str) -> Figure:
    """The row of a figure that could not be measured here, saying why."""
    return Figure(bench, name, math.nan, unit, why)


def own_peak_kb() -> int:
    """This process's own peak resident memory in KiB: its VmHWM. Not ru_maxrss: on Linux a
    process started by vfork+exec (as subprocess starts one) inherits its parent's peak in
    ru_maxrss, so a child measuring a replay would report the benchmark's own memory."""
    import re
    import resource
    try:
        with open("/proc/self/status") as f:
            return int(re.search(r"VmHWM:\s*(\d+) kB", f.read()).group(1))
    except (OSError, AttributeError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def children_cpu() -> float:
    """CPU seconds (user and system) of this process's children that have ended."""
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def tree_peak_kb() -> int:
    """The peak resident memory of the largest process of this process's tree so far (its
    own, own_peak_kb, and its ended children's): a child's ru_maxrss may hold this process's
    peak when it started (own_peak_kb), never more than that, so the largest is right."""
    import resource
    return max(own_peak_kb(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
