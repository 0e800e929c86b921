"""The generated docs: the invariants, the designs seed 000 rejected, the last results.

Two parts. The deterministic part (docs/invariants.md and .html, docs/designs/*.md,
docs/img/*.svg) is computed from the registries, the scenarios and the mutants alone, so a
test can regenerate it and compare it with the committed files. The results part
(docs/results.md, docs/mutants.md, docs/results.html) comes from the last `purgecheck check`
and `purgecheck mutants` runs saved under .purgecheck/, carries dates, and is written only
when such runs exist.
"""

from __future__ import annotations

from pathlib import Path

from purgecheck.docs.md import Links, slug

INVARIANTS_NAV = [("invariants", "invariants.html"), ("results and mutants", "results.html")]


def deterministic(facts=None) -> dict[str, str]:
    """{path under docs/: content} of everything derived from the registries (from `facts`,
    a purgecheck.docs.facts.Facts, when the caller collected them already)."""
    from purgecheck.docs import plots
    from purgecheck.docs import html, pages
    from purgecheck.docs.facts import collect

    facts = facts or collect()
    files = {"invariants.md": pages.invariants_page(facts, Links(page="invariants.md"))}
    for d in facts.designs:
        files[f"designs/{slug(d.name)}.md"] = pages.design_page(
            facts, d, Links(depth=1, page=f"designs/{slug(d.name)}.md"))
        files[f"img/{pages.design_image(d)}"] = plots.timeline_svg(
            d.chosen, [d.rejected], f"{d.scenario}: {d.chosen.variant} (chosen) against "
                                    f"{d.name}")
    chosen, *others = facts.overview
    files[f"img/{pages.OVERVIEW_IMAGE}"] = plots.timeline_svg(
        chosen, others, f"{chosen.scenario}: every design of seed 000")
    for g in facts.graphs:
        files[f"img/{pages.graph_image(g)}"] = plots.state_graph_svg(
            g.graph, f"the epoch advance under {g.mutant}: {g.graph.config.describe()}")
    one = Links(html="invariants.html")
    text = pages.invariants_page(facts, one) + "\n" + "\n".join(
        pages.design_page(facts, d, one, level=2) for d in facts.designs)
    files["invariants.html"] = html.render("purgecheck: invariants", text, INVARIANTS_NAV)
    from purgecheck.realtests.cases import real_tests_files
    files.update(real_tests_files())
    return files


def from_results() -> dict[str, str]:
    """{path under docs/: content} of the results pages, from .purgecheck/ (may be empty)."""
    from purgecheck.reports import store
    from purgecheck.docs import html, results_pages

    files: dict[str, str] = {}
    results, mutants = store.load(store.RESULTS), store.load(store.MUTANTS)
    if results:
        files["results.md"] = results_pages.results_page(results, Links(page="results.md"))
    if mutants:
        files["mutants.md"] = results_pages.mutants_page(mutants, Links(page="mutants.md"))
    if files:
        one = Links(html="results.html")
        text = "\n".join(f(doc, one) for f, doc in ((results_pages.results_page, results),
                                                     (results_pages.mutants_page, mutants))
                         if doc)
        files["results.html"] = html.render("purgecheck: last results", text, INVARIANTS_NAV)
    return files


def write(files: dict[str, str], out: Path) -> list[Path]:
    written = []
    for rel, text in sorted(files.items()):
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            written.append(path)
    return written


def svg_labels(svg: str) -> list[str]:
    """The text a picture shows (titles, axis labels, legend counts, the failing invariant):
    what an SVG says, without the drawing details that change between matplotlib versions."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(svg)
    return ["".join(t.itertext()).strip() for t in root.iter("{http://www.w3.org/2000/svg}text")]


def _same(rel: str, old: str, new: str) -> bool:
    if rel.endswith(".svg"):
        return old == new or svg_labels(old) == svg_labels(new)
    return old == new


def stale(files: dict[str, str], out: Path) -> list[str]:
    """Paths under `out` whose content differs from `files` (an SVG: its labels), and
    generated files of the deterministic kinds that nothing generates any more."""
    diff = [rel for rel, text in sorted(files.items())
            if not (out / rel).exists() or not _same(rel, (out / rel).read_text(), text)]
    leftovers = [p.relative_to(out).as_posix() for pattern in ("designs/*.md", "img/*.svg")
                 for p in sorted(out.glob(pattern))]
    return diff + [rel for rel in leftovers if rel not in files]
