"""The deterministic pages: docs/invariants.md and one page per rejected design of seed 000.

Each invariant is shown with its statement, the seed clause it comes from (quoted), the
model function that implements the rule (a link to its file and line), and what is known to
break it: the mutants that name it, the C mutants whose traces must diverge (CF-TRACE-EQUAL),
the proofs' broken twins refuted on it, and the rejected designs that violate it.
"""

from __future__ import annotations

from purgecheck.docs.exactness import EXACTNESS
from purgecheck.docs.facts import CHOSEN_DESIGN, Design, Facts, GraphFigure
from purgecheck.docs.md import GENERATED, Links, anchor, esc, quote, slug, table
from purgecheck.docs.steps import path_table, scenario_table, size, window
from purgecheck.reports.timeline import Timeline

SCOPES = {
    "page": "every page, after every op of every scenario",
    "world": "the whole modelled process, after every op of every scenario",
    "epoch": "the epoch state and the advance calls in flight, after every op and in every "
             "state of the interleaving explorer",
    "final": "the end of the liveness scenarios (their schedules meet the premise)",
    "proof": "no single state: the proof engines establish it for every geometry or time",
    "epoch-graph": "the state graph of the advance (the interleaving explorer)",
    "conformance": "the C reference on real memory, against the traces the model predicts "
                   "(the conformance engine), and its sanitizer builds (the conformance and "
                   "sanitizers engines)",
    "linearized": "concurrent runs of the C reference's op scripts on real threads, their "
                  "linearized traces replayed on the model event by event (the validate "
                  "engine)",
    "glibc-arena": "every glibc arena (heaps, chunks, top, the trim records), after every op "
                   "of every glibc workload for every modelled version",
    "trace": "the traces of the named scenarios that re-express the fork's real test cases "
             "(purgecheck/realtests/checks.py, docs/real-tests.md): the model's (the scenarios "
             "engine) and the C reference's (the conformance engine), and the unit grids of both",
    "glibc-published": "the system calls of each version's model on seed 001's bench-free, "
                       "against the counts published for that version (the glibc engine)",
    "weak": "the epoch advance and the park handoff over C11 weak memory: the weak explorer's "
            "executions (the weak engine) and Relacy's on the C reference (the relacy engine)",
}


OVERVIEW_IMAGE = "designs-overview.svg"


def graph_image(g: GraphFigure) -> str:
    return f"advance-graph-{slug(g.mutant)}.svg"


def design_image(d: Design) -> str:
    return f"design-{slug(d.name)}.svg"


def _function(facts: Facts, inv_id: str, links: Links) -> str:
    src = facts.sources[inv_id]
    if src.path is None:
        return f"`{src.name}` (not found in the sources)"
    where = f"{src.path}, line {src.line}" if src.line else src.path
    return f"[`{src.name}`]({links.source(src.path, src.line)}) ({where})"


def _short(statement: str, width: int = 110) -> str:
    """The first sentence, cut at a word near `width` characters."""
    first = statement.split(". ")[0].rstrip(".")
    if len(first) <= width:
        return first
    return first[:width].rsplit(" ", 1)[0] + " ..."


def invariants_page(facts: Facts, links: Links) -> str:
    out = [GENERATED, "", f"# {anchor('invariants')}Invariants", ""]
    n_broken = sum(1 for i in facts.invariants if facts.is_shown(i.id))
    out += [f"Every property the engines hold the model to: {len(facts.invariants)} "
            f"invariants, {len(facts.mutants)} mutants, {len(facts.designs)} rejected designs "
            f"of seed 000, {len(facts.twins)} broken twins of the proofs. {n_broken} of the "
            f"invariants are broken by a named mutant, a refuted broken twin or a rejected "
            f"design, which shows that the check can fail. The last result of "
            f"every engine ({', '.join(f'`{e}`' for e in facts.engines)}) on each invariant "
            f"is in [the results]({links.results()}); the kill matrix of the last "
            f"`purgecheck mutants` run is in [the mutants report]({links.kills()}).", ""]
    rows = []
    for inv in facts.invariants:
        broken = facts.mutants_of(inv.id) + [m for m in facts.c_mutants_of(inv.id)
                                             if m not in facts.mutants_of(inv.id)]
        muts = ", ".join(f"[`{m.name}`]({links.mutant(m.name)})" for m in broken)
        twins = ", ".join(f"`{t.name}`" for t in facts.twins_of(inv.id))
        designs = ", ".join(sorted({f"[`{b.design}`]({links.design(b.design)})"
                                    for b in facts.breaches_of(inv.id)}))
        rows.append([f"[{inv.id}]({links.invariant(inv.id)})", esc(_short(inv.statement)),
                     EXACTNESS.get(inv.id, ("?", ""))[0],
                     muts or ("**none**" if not facts.is_shown(inv.id) else ""), twins,
                     designs])
    out += ["*exact*: the invariant fails on any departure from the seed's rule, in both "
            "directions; *bound*: on one side only (why, and the exact partner where there is "
            "one, under each invariant below).", "",
            table(["invariant", "in short", "exact or bound", "broken by mutants",
                   "refuted broken twins", "broken by designs"], rows), ""]
    for inv in facts.invariants:
        out += _invariant_section(facts, inv, links)
    out += _mutant_catalogue(facts, links)
    out += _graphs(facts, links)
    chosen, *others = facts.overview
    out += ["## Rejected designs of seed 000", "",
            f"The seed chose `{CHOSEN_DESIGN}`; each rejected design has a page with the "
            f"scenario that shows its defect. All of them on `{chosen.scenario}`, the scenario "
            f"that tells the most of them from the chosen one (dashed: where a design first "
            f"breaks an invariant):", "",
            f"![every design on {chosen.scenario}]({links.image(OVERVIEW_IMAGE)})", "",
            table(["design", "discarded", "refaulted blocks", "first invariant violation"],
                  [[f"`{t.variant}`", size(t.discarded) or "nothing", str(t.refaulted),
                    _first(t)] for t in facts.overview]), ""]
    for d in facts.designs:
        broken = ", ".join(f"[{b.invariant}]({links.invariant(b.invariant)})"
                           for b in d.breaches) or "no invariant (see its page)"
        out.append(f"- [`{d.name}`]({links.design(d.name)}): breaks {broken}.")
    out.append("")
    return "\n".join(out)


def _invariant_section(facts: Facts, inv, links: Links) -> list[str]:
    out = [f"## {anchor(slug(inv.id))}{inv.id}", "", esc(inv.statement), "",
           quote(esc(inv.clause)), "",
           f"- **Implemented by** {_function(facts, inv.id, links)}",
           f"- **Judged on** {SCOPES.get(inv.scope, f'scope `{inv.scope}`')}",
           f"- **{EXACTNESS.get(inv.id, ('?', ''))[0].capitalize()}**: "
           f"{esc(EXACTNESS.get(inv.id, ('', 'not listed'))[1])}",
           f"- **Last results**: [every engine that checked it]({links.results(inv.id)})"]
    muts = facts.mutants_of(inv.id)
    if muts:
        out.append("- **Broken by mutants**: " + ", ".join(
            f"[`{m.name}`]({links.mutant(m.name)}) ({esc(m.description)}; "
            f"[counterexamples]({links.kills(m.name)}))" for m in muts))
    for b in facts.breaches_of(inv.id):
        where = "at the end" if not b.line else f"line {b.line} (`{b.op}`)"
        out.append(f"- **Broken by the design** [`{b.design}`]({links.design(b.design)}) on "
                   f"scenario `{b.scenario}`, {where}: {esc(b.reason)}")
    for g in facts.graphs:
        if inv.id in g.invariants:
            out.append(f"- **State graph**: [the advance under `{g.mutant}`]"
                       f"({links.graph(g.mutant)}), a shortest path of {len(g.graph.path) - 1} "
                       f"steps")
    c_muts = facts.c_mutants_of(inv.id)
    if c_muts:
        out.append("- **Broken in the C reference** by each C mutant that shows without "
                   "preemption: its run-time switch makes the C trace differ from the clean "
                   "model's on some scenario (the conformance engine's C mutants): " + ", ".join(
                       f"[`{m.name}`]({links.mutant(m.name)}) (`{m.c_switch}`)" for m in c_muts))
    twins = facts.twins_of(inv.id)
    if twins:
        out.append("- **Refuted broken twins** (`purgecheck prove --mutants`): " + ", ".join(
            f"`{t.name}` ({esc(t.summary)}, {t.engine})" for t in twins))
    if not facts.is_shown(inv.id):
        out.append("- **Not yet shown to catch anything**: no mutant names it, no broken twin "
                   "of a proof is refuted on it and no rejected design breaks it.")
    return out + [""]


def _mutant_catalogue(facts: Facts, links: Links) -> list[str]:
    out = [f"## {anchor('mutants')}Mutants", "",
           "A mutant breaks one rule on purpose. It is applied in-process for the length of "
           "a run (`purgecheck.mutants.applied`), never by editing a file; the C reference "
           "takes the same mutant as a run-time switch. `purgecheck mutants` runs every "
           "mutant against every engine; an engine kills a mutant when any of its results "
           "fails, and a mutant that no engine kills fails the run.", ""]
    rows = []
    for m in facts.mutants:
        patched = []
        for n, p in enumerate(m.patches):
            target = f"{p.module}.{p.attr}" + (f"[{p.key!r}]" if p.key is not None else "")
            src = facts.patch_sources[(m.name, n)]
            repl = f"[`{src.name}`]({links.source(src.path, src.line)})" if src.path \
                else f"`{src.name}`"
            patched.append(f"`{target}` by {repl}")
        catches = ", ".join(f"[{c}]({links.invariant(c)})" for c in m.catches)
        rows.append([f"{anchor('mutant-' + slug(m.name))}[`{m.name}`]({links.kills(m.name)})",
                     esc(m.description), "; ".join(patched) or "(C reference only)",
                     f"`{m.c_switch}`" if m.c_switch else "", catches])
    out += [table(["mutant", "what is broken", "patched", "C switch", "expected to be caught "
                   "by"], rows), ""]
    return out


def _graphs(facts: Facts, links: Links) -> list[str]:
    if not facts.graphs:
        return []
    cfg = facts.graphs[0].graph.config
    out = ["## The epoch advance as a state graph", "",
           "Every interleaving of the sweepers' atomic steps (`model.epoch.advance_step`) and "
           f"of clock ticks, for {cfg.describe()}, built breadth-first by running the model "
           "under each mutant of the advance. A state where an epoch invariant of the "
           "registry fails is red; the shortest path to one is drawn over the graph and "
           "listed below it (`.`: unchanged). Violating states are not expanded.", ""]
    for g in facts.graphs:
        gr = g.graph
        out += [f"### {anchor('graph-' + slug(g.mutant))}Under `{g.mutant}`", "",
                f"{gr.graph.number_of_nodes()} states, {gr.graph.number_of_edges()} "
                f"transitions, {len(gr.violating)} violating; the path breaks "
                + ", ".join(f"[{i}]({links.invariant(i)})" for i in g.invariants) + ".", "",
                f"![state graph of the advance under {g.mutant}]"
                f"({links.image(graph_image(g))})", ""]
        from purgecheck.docs.advance_graph import describe_state
        rows = [("initial state" if n == 0 else gr.graph.edges[a, b]["label"],
                 describe_state(b)) for n, (a, b) in
                enumerate(zip([gr.path[0]] + gr.path, gr.path))]
        out += [path_table(rows), ""]
        reasons = gr.graph.nodes[gr.path[-1]]["violations"]
        out += [f"At the last step: " + "; ".join(f"**{i}**: {esc(r)}" for i, r in reasons), ""]
    return out


# -- one page per rejected design ------------------------------------------------------------

def _first_divergence(a: Timeline, b: Timeline) -> int | None:
    """The first step where the two designs did something different."""
    for n, (x, y) in enumerate(zip(a.steps, b.steps)):
        if (x.discarded, x.refaulted, x.held, x.alloc_clock_reads, x.violations) != \
                (y.discarded, y.refaulted, y.held, y.alloc_clock_reads, y.violations):
            return n
    return None


def _first(tl: Timeline) -> str:
    v = tl.first_violation()
    if v is None:
        return "none"
    n, inv, _ = v
    return f"{inv} at line {tl.steps[n].line}"


def _figures(d: Design) -> str:
    rows = []
    for label, f in (("discarded", lambda t: f"{size(t.discarded)} by {t.discard_ops} ops"
                                             if t.discarded else "nothing"),
                     ("refaulted blocks (taken back after a discard)", lambda t: str(t.refaulted)),
                     ("sweeps", lambda t: str(t.sweeps)),
                     ("clock reads by the allocating side", lambda t: str(t.alloc_clock_reads)),
                     ("first invariant violation", _first)):
        rows.append([label, f(d.chosen), f(d.rejected)])
    return table(["", f"`{CHOSEN_DESIGN}` (chosen)", f"`{d.name}`"], rows)


def design_page(facts: Facts, d: Design, links: Links, level: int = 1) -> str:
    from purgecheck.scenarios import SCENARIOS

    h = "#" * level
    sc = SCENARIOS[d.scenario]
    out = [GENERATED, ""] if level == 1 else []
    out += [f"{h} {anchor('design-' + slug(d.name))}Rejected design: `{d.name}`", "",
            quote(esc(d.clause) or "(model/variants.py says nothing of it)"), "",
            f"Scenario `{d.scenario}`: {sc.description} It runs on the model's virtual clock "
            f"under the chosen design (`{CHOSEN_DESIGN}`) and under `{d.name}`; every "
            f"invariant is checked after every op. Replay: `purgecheck scenario {d.scenario} "
            f"--variant {d.name}`.", "", _figures(d), "",
            f"![timeline of {d.scenario} under {CHOSEN_DESIGN} and {d.name}]"
            f"({links.image(design_image(d))})", ""]
    first = d.rejected.first_violation()
    if first is not None:
        n, inv, reason = first
        s = d.rejected.steps[n]
        out += [f"{h}# The first violation", "",
                f"At line {s.line} (`{s.op}`), t = {s.now} ms, epoch {s.epoch}: "
                f"[{inv}]({links.invariant(inv)}) fails: {esc(reason)}", "",
                scenario_table(window(d.rejected, n)), ""]
    else:
        out += [f"{h}# No invariant fails here", "",
                f"No invariant of the registry fails under `{d.name}` on this scenario. "
                f"What separates it from `{CHOSEN_DESIGN}` is the work it does: "
                f"{d.rejected.alloc_clock_reads} clock reads by the allocating side against "
                f"{d.chosen.alloc_clock_reads}, {size(d.rejected.discarded) or '0 bytes'} "
                f"discarded against {size(d.chosen.discarded) or '0 bytes'}.", ""]
        n = _first_divergence(d.chosen, d.rejected)
        if n is not None:
            out += [f"Where the two runs first differ (under `{d.name}`):", "",
                    scenario_table(window(d.rejected, n, before=3, after=3)), ""]
    out += [f"{h}# Every invariant `{d.name}` breaks", "",
            "Over every scenario, the first breach of each invariant that the chosen design "
            "keeps on the same scenario:", ""]
    if d.breaches:
        out += [table(["invariant", "scenario", "line", "op", "what failed"],
                      [[f"[{b.invariant}]({links.invariant(b.invariant)})", f"`{b.scenario}`",
                        str(b.line or "end"), f"`{b.op}`", esc(b.reason)]
                       for b in d.breaches]), ""]
    else:
        out += ["None: the registry has no invariant that tells this design from the chosen "
                "one; the seed rejected it for its cost (above).", ""]
    return "\n".join(out)
