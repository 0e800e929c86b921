"""What the generated docs say, computed once from the registries and the model.

Everything here is deterministic: the invariant registry, the source lines of the functions
that implement each rule, the mutant catalogue, the rejected designs of seed 000 run on the
scenarios (virtual clock), and the state graph of the epoch advance under each mutant of it.
Dates and timings live in the results pages, never here.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

from model.invariants import Invariant, load_registry
from proofs.core import Twin
from purgecheck.docs.advance_graph import Graph
from purgecheck.mutants import MUTANTS, TRACE_INVARIANT, Mutant, is_c_trace_mutant
from purgecheck.scenarios import SCENARIOS
from purgecheck.reports.store import project_root
from purgecheck.reports.timeline import Timeline, run_timeline

CHOSEN_DESIGN = "epoch"

# The scenario on which seed 000 reports each rejected design's defect. A design not named
# here gets the first scenario on which it breaks an invariant that the chosen design keeps.
DESIGN_SCENARIOS = {
    "no-hold": "server-parks",  # "a Bun.serve ... discarded and refaulted 3 GB in 20 s"
    "handoff-only": "buffer-loop-inline",  # "left the inline path purging 58 MB in 3 s"
    "two-untouched": "abandoned-two-parks",  # "got its two sweeps within a millisecond"
    "clock": "server-parks",  # "nothing on the allocating side reads a clock"
}


@dataclass(frozen=True)
class Source:
    """Where a name of the project is defined: path relative to the project root, line."""

    name: str
    path: str | None
    line: int | None


@dataclass
class Breach:
    """A rejected design breaking an invariant the chosen design keeps on a scenario."""

    design: str
    invariant: str
    scenario: str
    line: int
    op: str
    reason: str


@dataclass
class Design:
    name: str
    clause: str  # the seed's words on it (model/variants.py)
    scenario: str
    chosen: Timeline
    rejected: Timeline
    breaches: list[Breach] = field(default_factory=list)  # over every scenario


@dataclass
class GraphFigure:
    mutant: str
    graph: Graph
    invariants: list[str]  # those failing at the end of the path


@dataclass
class Facts:
    invariants: list[Invariant]
    sources: dict[str, Source]  # invariant id -> implementing function
    mutants: list[Mutant]
    patch_sources: dict[tuple[str, int], Source]  # (mutant, patch index) -> replacement
    designs: list[Design]
    graphs: list[GraphFigure]
    engines: list[str]
    overview: list[Timeline]  # every design on one scenario, the chosen design first
    twins: list[Twin] = field(default_factory=list)  # the proofs' broken twins

    def mutants_of(self, inv_id: str) -> list[Mutant]:
        from purgecheck.realtests.checks import caught_by  # the real tests' checks (RT-*)
        return [m for m in self.mutants if inv_id in m.catches or inv_id in caught_by(m.name)]

    def breaches_of(self, inv_id: str) -> list[Breach]:
        return [b for d in self.designs for b in d.breaches if b.invariant == inv_id]

    def twins_of(self, inv_id: str) -> list[Twin]:
        return [t for t in self.twins if inv_id in t.invariants]

    def c_mutants_of(self, inv_id: str) -> list[Mutant]:
        """The C mutants whose trace the conformance engine must tell from the model's."""
        return [m for m in self.mutants if is_c_trace_mutant(m)] if inv_id == TRACE_INVARIANT \
            else []

    def is_shown(self, inv_id: str) -> bool:
        """Something is known to break it: the check has been seen failing."""
        return bool(self.mutants_of(inv_id) or self.breaches_of(inv_id)
                    or self.twins_of(inv_id) or self.c_mutants_of(inv_id))


def collect_twins() -> list[Twin]:
    """Every broken twin `purgecheck prove --mutants` runs (purgecheck.engines.prove.run_twins):
    the catalogue's (Z3, the explorer, CrossHair) and the glibc throttle proofs'."""
    from proofs import glibc_throttle
    from proofs.catalogue import twins

    return list(twins(quick=False)) + list(glibc_throttle.TWINS)


def locate(dotted: str) -> Source:
    """Where `dotted` is defined: a file of the project ("reference_c/driver.c", optionally
    ":name" of a function in it), or a Python name (import the longest module prefix,
    getattr the rest)."""
    path, _, name = dotted.partition(":")
    if "/" in path and (project_root() / path).is_file():
        line = None
        if name:
            lines = (project_root() / path).read_text(errors="replace").splitlines()
            line = next((n + 1 for n, text in enumerate(lines)
                         if re.match(rf"^\w.*\b{re.escape(name)}\s*\(", text)), None)
        return Source(dotted, path, line)
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return Source(dotted, None, None)
        return source_of(obj, dotted)
    return Source(dotted, None, None)


def source_of(obj, name: str) -> Source:
    try:
        obj = inspect.unwrap(obj)
        path = Path(inspect.getsourcefile(obj)).resolve()
        lines, line = inspect.getsourcelines(obj)
        rel = path.relative_to(project_root())
    except (TypeError, OSError, ValueError):
        return Source(name, None, None)
    # getsourcelines starts at the decorators; the link goes to the def (or class) line
    skip = next((n for n, text in enumerate(lines)
                 if re.match(r"\s*(async\s+)?(def|class)\s", text)), 0)
    return Source(name, rel.as_posix(), max(line, 1) + skip)


def design_clauses() -> dict[str, str]:
    """The seed's words on each design, as model/variants.py quotes them."""
    import model.variants as variants

    doc = variants.__doc__ or ""
    out = {}
    for name, text in re.findall(r"^- `([\w-]+)`: (.*?)(?=^- `|\Z)", doc, re.M | re.S):
        out[name] = " ".join(text.split())
    return out


def _design_runs(name: str, chosen_runs: dict[str, Timeline]) -> tuple[list[Breach], dict]:
    """Run every scenario of `chosen_runs` under design `name`; keep the first breach of each
    invariant that the chosen design keeps on that scenario. Returns (breaches, {scenario:
    timeline})."""
    breaches: list[Breach] = []
    runs: dict[str, Timeline] = {}
    for sc in (SCENARIOS[n] for n in chosen_runs):
        tl = run_timeline(sc, name)
        runs[sc.name] = tl
        kept = chosen_runs[sc.name].violated() | {b.invariant for b in breaches}
        found = [(s.line, s.op, inv, reason) for s in tl.steps for inv, reason in s.violations]
        found += [(0, "(at the end)", inv, reason) for inv, reason in tl.end_violations]
        for line, op, inv, reason in found:
            if inv not in kept:
                kept.add(inv)
                breaches.append(Breach(name, inv, sc.name, line, op, reason))
    return breaches, runs


def _overview(chosen_runs: dict[str, Timeline], runs: dict[str, dict[str, Timeline]]
              ) -> list[Timeline]:
    """Every design on the scenario that tells the most of them from the chosen one."""
    def told_apart(sc: str) -> int:
        kept = chosen_runs[sc].violated()
        return sum(1 for by_sc in runs.values() if by_sc[sc].violated() - kept)

    best = max(chosen_runs, key=lambda sc: (told_apart(sc), "variant" in SCENARIOS[sc].tags,
                                            -list(SCENARIOS).index(sc)))
    return [chosen_runs[best]] + [by_sc[best] for by_sc in runs.values()]


def collect_designs(scenarios: Collection[str] | None = None
                    ) -> tuple[list[Design], list[Timeline]]:
    """Every rejected design run on every scenario (or on those named in `scenarios`, in the
    catalogue's order: the same pages where they hold every scenario the pages show, each
    breach's and the overview's; tests/test_docs.py's fast tier runs such a sample)."""
    from model.variants import VARIANTS

    clauses = design_clauses()
    chosen_runs = {sc.name: run_timeline(sc, CHOSEN_DESIGN) for sc in SCENARIOS.values()
                   if scenarios is None or sc.name in scenarios}
    designs, all_runs = [], {}
    for name in VARIANTS:
        if name == CHOSEN_DESIGN:
            continue
        breaches, runs = _design_runs(name, chosen_runs)
        all_runs[name] = runs
        scenario = DESIGN_SCENARIOS.get(name)
        if scenario not in SCENARIOS:
            scenario = breaches[0].scenario if breaches else next(iter(chosen_runs))
        designs.append(Design(name, clauses.get(name, ""), scenario, chosen_runs[scenario],
                              runs[scenario], breaches))
    return designs, _overview(chosen_runs, all_runs)


def epoch_mutants() -> list[Mutant]:
    """Mutants of the advance itself: the ones the state graph can show."""
    return [m for m in MUTANTS.values() if any(p.module == "model.epoch" for p in m.patches)]


def collect_graphs() -> list[GraphFigure]:
    from purgecheck.docs import advance_graph
    from purgecheck.mutants import applied

    out = []
    for m in epoch_mutants():
        with applied(m):
            g = advance_graph.build()
        if g.path:
            failing = [inv for inv, _ in g.graph.nodes[g.path[-1]]["violations"]]
            out.append(GraphFigure(m.name, g, failing))
    return out


def collect(scenarios: Collection[str] | None = None) -> Facts:
    from purgecheck.engines import load_engines

    engines = list(load_engines())  # engine modules may add invariants (proofs, glibc)
    invariants = sorted(load_registry().values(), key=lambda i: i.id)
    sources = {i.id: locate(i.implements) for i in invariants}
    mutants = sorted(MUTANTS.values(), key=lambda m: m.name)
    patch_sources = {(m.name, n): source_of(p.replacement, p.replacement.__name__)
                     for m in mutants for n, p in enumerate(m.patches)}
    designs, overview = collect_designs(scenarios)
    return Facts(invariants, sources, mutants, patch_sources, designs, collect_graphs(),
                 engines, overview, collect_twins())
