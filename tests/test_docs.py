"""The generated docs: reproducible from the registries, complete, well-formed, self-contained.

The deterministic part is regenerated once per module (it runs every design on every scenario
and builds the advance graphs) and compared with the committed files in docs/.
"""

import dataclasses
import re
import xml.etree.ElementTree as ET
import pytest

from model.invariants import load_registry
from model.variants import VARIANTS
from purgecheck import docs
from purgecheck.docs import facts as facts_mod
from purgecheck.docs import pages
from purgecheck.docs.md import Links, slug
from purgecheck.engines import load_engines
from purgecheck.mutants import MUTANTS
from purgecheck.reports import store
from purgecheck.reports.store import project_root

from html_check import check_html

DOCS = project_root() / "docs"


# The fast tier's sample of the 58 scenarios the docs run every design on (290 timelines, most
# of this module's CPU): each design's figure (facts.DESIGN_SCENARIOS), each breach's first
# scenario and the overview's. A breach is the first scenario, in the catalogue's order, where
# a design breaks what the chosen one keeps, and the overview the scenario that tells most
# designs apart: both are the same on any sample that holds them, so the sample's pages are the
# whole run's (25 timelines). test_the_sample_gives_the_pages_of_every_scenario (slow, and
# `purgecheck docs` in `make check`) runs them all and says which scenario to add here.
BREACH_SCENARIOS = ("fork-while-moving", "abandoned-two-parks", "park-slow-sweeps")
SAMPLE = frozenset(facts_mod.DESIGN_SCENARIOS.values()) | set(BREACH_SCENARIOS)


@pytest.fixture(scope="module")
def facts():
    return facts_mod.collect(SAMPLE)


@pytest.fixture(scope="module")
def generated(facts):
    return docs.deterministic(facts)


def assert_not_stale(generated):
    stale = docs.stale(generated, DOCS)
    assert not stale, f"docs/ is stale against the registry: {stale}; run `purgecheck docs` " \
                      f"(or `make check`) and commit docs/"


def test_committed_docs_are_not_stale(generated):
    assert_not_stale(generated)


@pytest.mark.slow
def test_the_sample_gives_the_pages_of_every_scenario(facts, generated):
    """Every design on every scenario: the pages are the committed ones and the sample's (a
    breach or an overview on a scenario outside SAMPLE fails here, naming it; with SAMPLE
    less fork-while-moving this test and test_committed_docs_are_not_stale fail: the no-hold
    and handoff-only pages, invariants.md and .html lose a breach)."""
    whole = facts_mod.collect()
    shown = {b.scenario for d in whole.designs for b in d.breaches} | {whole.overview[0].scenario}
    assert shown <= SAMPLE, f"add {sorted(shown - SAMPLE)} to BREACH_SCENARIOS"
    pages_of_all = docs.deterministic(whole)
    assert_not_stale(pages_of_all)
    assert pages_of_all == generated


def test_staleness_is_noticed_when_the_registry_changes(facts, generated, tmp_path):
    # A new invariant (here a copy of one under another id) must make invariants.md stale.
    extra = dataclasses.replace(facts.invariants[0], id="ZZ-NEW-RULE")
    grown = dataclasses.replace(facts, invariants=facts.invariants + [extra],
                                sources={**facts.sources, "ZZ-NEW-RULE": facts.sources[
                                    facts.invariants[0].id]})
    page = pages.invariants_page(grown, Links(page="invariants.md"))
    assert "ZZ-NEW-RULE" in page
    docs.write(generated, tmp_path)
    assert docs.stale(generated, tmp_path) == []
    assert docs.stale({**generated, "invariants.md": page}, tmp_path) == ["invariants.md"]


def test_every_invariant_mutant_and_design_is_in_the_docs(generated):
    load_engines()
    page = generated["invariants.md"]
    html = generated["invariants.html"]
    for inv in load_registry():
        assert f'<a id="{slug(inv)}"></a>' in page, inv
        assert f'id="{slug(inv)}"' in html, inv
    for name in MUTANTS:
        assert f'<a id="mutant-{slug(name)}"></a>' in page, name
    rejected = [v for v in VARIANTS if v != facts_mod.CHOSEN_DESIGN]
    for v in rejected:
        assert f"designs/{slug(v)}.md" in generated, v
        assert f"(designs/{slug(v)}.md)" in page, v
        assert f"img/design-{slug(v)}.svg" in generated, v


def test_every_model_function_named_by_an_invariant_is_linked_to_its_line(facts):
    for inv in facts.invariants:
        if not inv.implements.startswith("model."):
            continue
        src = facts.sources[inv.id]
        assert src.path and src.line, f"{inv.id}: {inv.implements} not found"
        line = (project_root() / src.path).read_text().splitlines()[src.line - 1]
        name = inv.implements.rsplit(".", 1)[1]
        assert re.match(rf"\s*(def|class) {name}\b", line), (inv.id, line)


def test_each_design_page_shows_its_defect_on_the_seed_scenario(facts):
    by_name = {d.name: d for d in facts.designs}
    # seed: "(1) alone ... discarded and refaulted"; "left the inline path purging"
    for name in ("no-hold", "handoff-only"):
        d = by_name[name]
        assert d.rejected.discarded > 0 and d.rejected.refaulted > 0
        assert d.chosen.discarded == 0 and d.chosen.first_violation() is None
        assert d.rejected.first_violation() is not None
    # seed: "two sweeps within a millisecond": an invariant breaks, and the page says where
    two = by_name["two-untouched"]
    n, inv, _ = two.rejected.first_violation()
    page = pages.design_page(facts, two, Links(depth=1))
    assert f"At line {two.rejected.steps[n].line}" in page and inv in page
    # seed: "nothing on the allocating side reads a clock"
    clock = by_name["clock"]
    assert clock.rejected.alloc_clock_reads > 0 == clock.chosen.alloc_clock_reads


def test_advance_graph_of_each_epoch_mutant_ends_in_a_violation(facts):
    names = {g.mutant for g in facts.graphs}
    assert {"epoch-not-rate-limited", "double-increment"} <= names
    for g in facts.graphs:
        last = g.graph.graph.nodes[g.graph.path[-1]]
        assert last["violations"] and set(g.invariants) <= set(MUTANTS[g.mutant].catches) | {
            i for i, _ in last["violations"]}


def test_html_is_well_formed_and_self_contained(generated, tmp_path):
    docs.write(generated, tmp_path)
    check_html(generated["invariants.html"], tmp_path, {"invariants.html", "results.html"})


def test_svgs_parse_and_label_what_they_show(generated, facts):
    svgs = {k: v for k, v in generated.items() if k.endswith(".svg")}
    assert svgs
    for name, text in svgs.items():
        root = ET.fromstring(text)
        assert root.tag == "{http://www.w3.org/2000/svg}svg", name
    for d in facts.designs:
        labels = docs.svg_labels(svgs[f"img/{pages.design_image(d)}"])
        assert any(d.name in t for t in labels) and "epoch" in labels
        first = d.rejected.first_violation()
        if first:
            assert f"{first[1]} fails at line {d.rejected.steps[first[0]].line}" in labels
    overview = docs.svg_labels(svgs[f"img/{pages.OVERVIEW_IMAGE}"])
    assert set(VARIANTS) <= set(overview)  # the legend names every design
    for g in facts.graphs:
        labels = docs.svg_labels(svgs[f"img/{pages.graph_image(g)}"])
        assert f"{len(g.graph.violating)} violating states" in labels


def test_results_pages_come_from_the_last_check_run(tmp_path, monkeypatch, engines_run_once):
    from purgecheck.cli import main

    monkeypatch.setenv("PURGECHECK_STATE_DIR", str(tmp_path))
    assert docs.from_results() == {}  # no run yet: no results pages
    assert main(["check", "--engine", "scenarios", "--quick", "--json"]) == 0
    files = docs.from_results()
    assert set(files) == {"results.md", "results.html"}
    saved = store.load_results()
    assert saved and all(r["date"] for r in saved)
    for r in saved:
        assert f'<a id="r-{slug(r["invariant"])}"></a>' in files["results.md"]
        assert r["figure"] in files["results.md"]
    check_html(files["results.html"], tmp_path, {"invariants.html", "results.html"})


def test_docs_check_command_reports_stale_docs(tmp_path, monkeypatch):
    from purgecheck.cli import main

    monkeypatch.setattr(docs, "deterministic", lambda: {"invariants.md": "new text\n"})
    (tmp_path / "invariants.md").write_text("old text\n")
    assert main(["docs", "--check", "--out", str(tmp_path)]) == 1
    (tmp_path / "invariants.md").write_text("new text\n")
    assert main(["docs", "--check", "--out", str(tmp_path)]) == 0
