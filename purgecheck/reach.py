"""Which engine that runs the C reference reaches which rule of the seed (docs/conformance.md).

A rule is reached by a script when the script's trace shows the rule at work: an event, or
an event with the values only that path gives (a fork while MOVING is held, a clock reading
behind the one before it). The engines that run C compare the model's trace with the C
reference's event by event, so a rule the model's trace shows on a script that the engine
found equal is a rule the C was checked on; the model's trace is what is counted here.

The explorer (proofs/explorer.py) runs the model only, every interleaving of its atomic steps;
its column counts the transitions of the configurations that add the rare paths (EXPLORER_CONFIGS:
a fork while a sweeper holds MOVING, a clock that steps back) that show an epoch rule at work,
and shows "-" for the rules it is not counted for (the pages' rules, which it does not model;
its park configurations reach the hold and the park: docs/proofs.md).

`python -m purgecheck.reach` prints the table; `--write docs/conformance.md` puts it between
the markers there (tests/test_reach.py checks that the committed table is this one).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

BEGIN, END = "<!-- reach:begin (python -m purgecheck.reach --write) -->", "<!-- reach:end -->"
HALF_WRAP = 1 << 31


@dataclass(frozen=True)
class Rule:
    id: str
    clause: str  # where the seed (or the digest) states it
    shown: Callable[[list[dict]], bool]  # the trace of one script shows it at work


def _has(kind: str, **values) -> Callable[[list[dict]], bool]:
    return lambda evs: any(ev["ev"] == kind and all(ev.get(k) == v for k, v in values.items())
                           for ev in evs)


def _any(kind: str, test: Callable[[dict], bool]) -> Callable[[list[dict]], bool]:
    return lambda evs: any(ev["ev"] == kind and test(ev) for ev in evs)


def _clock_back(evs: list[dict]) -> bool:
    readings = [ev["now"] for ev in evs if ev["ev"] == "clock"]
    return any(b < a for a, b in zip(readings, readings[1:]))


def _clock_inside_advance(evs: list[dict]) -> bool:
    """A clock reading inside an op that is not `clock`: a clock_at that fired."""
    op = None
    for ev in evs:
        if ev["ev"] == "op":
            op = ev["op"]
        elif ev["ev"] == "clock" and op != "clock":
            return True
    return False


RULES = [
    Rule("walk discards a run of free units", "seed 000 (1); digest 3 steps 2, 4",
         _any("walk", lambda ev: bool(ev["runs"]))),
    Rule("walk keeps blocks next to live ones, reversed", "digest 3 step 3",
         _any("walk", lambda ev: bool(ev["runs"]) and len(ev.get("free", [])) >= 2)),
    Rule("a failed discard is un-purged", "digest 3 step 4", _has("discard", ok=False)),
    Rule("malloc unpurges the lowest run", "digest 4", _has("malloc", src="unpurge")),
    Rule("the unformed tail is discarded and reused", "digest 3",
         lambda evs: _has("discard_tail")(evs) and _has("reuse_tail")(evs)),
    Rule("a page back in the arena is unpurged", "digest 4 (unpurge all)",
         _has("unpurge_all")),
    Rule("a double free is reported", "seed 000 (1): mi_free unchanged", _has("double_free")),
    Rule("the epoch advances", "seed 000 (2); digest 7", _has("epoch_advance")),
    Rule("the hold keeps a young large page", "seed 000 (2)",
         _has("sweep_page", outcome="held")),
    Rule("an old large page is swept", "seed 000 (2)", _has("sweep_page", outcome="walked")),
    Rule("an age of 2^31 epochs or more is old", "digest 7 (uint32 age)",
         _any("epoch_skip", lambda ev: ev["epoch"] % (1 << 32) >= HALF_WRAP)),
    Rule("the park hands sweeps to the scavenger", "seed 000 (2): park", _has("park_sweep")),
    Rule("an abandoned page is swept and reclaimed", "seed 000 (2): abandoned pages",
         lambda evs: _has("abandon")(evs) and _has("reclaim")(evs)),
    Rule("a fork while MOVING is held: the child records a new start",
         "seed 000 (2): _mi_page_purge_holes_forked_child", _has("fork", moving=True)),
    Rule("a clock that goes back makes the advance due", "digest 7", _clock_back),
    Rule("a clock reading between the steps of an advance", "digest 7 (two readings)",
         _clock_inside_advance),
]


def reach(traces: Iterable[list[dict]]) -> dict[str, int]:
    """How many of the traces show each rule."""
    counts = {r.id: 0 for r in RULES}
    for evs in traces:
        for r in RULES:
            counts[r.id] += r.shown(evs)
    return counts


# -- the inputs of each engine that runs C ------------------------------------------------------

def _model_events(text: str, options) -> list[dict]:
    from purgecheck.formats.ops import parse_script
    from purgecheck.formats.trace import model_trace
    return model_trace(parse_script(text), options, "sweeps", "<reach>")[1]


def scenario_traces() -> Iterable[list[dict]]:
    """The conformance engine's scenarios (each under its own options)."""
    from purgecheck.scenarios import SCENARIOS
    for sc in SCENARIOS.values():
        yield _model_events(sc.build(), sc.options)


def fuzz_traces(examples: int, seed: int = 0) -> Iterable[list[dict]]:
    """The Hypothesis differential fuzzer's first `examples` scripts at `seed`."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed

    from stateful_tests.differential import differential_examples

    out: list[list[dict]] = []

    @hypothesis_seed(seed)
    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(differential_examples())
    def one(example):
        out.append(_model_events(example[1], example[0]))

    one()
    return out


def campaign_traces(scripts: int, seed: int = 0) -> Iterable[list[dict]]:
    """The campaign's first `scripts` scripts at `seed`."""
    from stateful_tests.differential import random_example
    for i in range(scripts):
        options, text = random_example(seed, i)
        yield _model_events(text, options)


# -- the explorer: transitions of its configurations that show an epoch rule -----------------

EXPLORER_CONFIGS = ("fork-2", "clock-back-1")  # proofs/explorer_configs.py


def _cas_taken(s: tuple, ns: tuple) -> bool:
    """One more sweeper at its CAS after the step: its compare found the epoch due."""
    from model.epoch import PC_CAS
    at_cas = [sum(1 for sw in x[5] if sw[0] == PC_CAS) for x in (s, ns)]
    return at_cas[1] > at_cas[0]


def _between_steps(action: str, s: tuple) -> bool:
    """The clock moves while a sweeper is inside its advance, past its load."""
    from model.epoch import PC_LOAD
    from proofs.explorer import CLOCK_BACK, TICK
    return action in (TICK, CLOCK_BACK) and any(sw[0] not in ("idle", PC_LOAD) for sw in s[5])


def _explorer_rules() -> dict[str, Callable[[str, tuple, tuple], bool]]:
    """Rule id -> does transition (action, state, successor) show it. The explorer's states
    are (clock, start, epoch, ..., sweepers, ...): proofs/explorer.py, "the state"."""
    from proofs.explorer import COMPARE_BEHIND, FORK
    return {
        "the epoch advances": lambda a, s, ns: ns[2] > s[2],
        "a fork while MOVING is held: the child records a new start":
            lambda a, s, ns: a == FORK and s[1] != ns[1],
        "a clock that goes back makes the advance due":
            lambda a, s, ns: a == COMPARE_BEHIND and _cas_taken(s, ns),
        "a clock reading between the steps of an advance":
            lambda a, s, ns: _between_steps(a, s),
    }


def explorer_reach(configs: Iterable[str] = EXPLORER_CONFIGS) -> dict[str, int | None]:
    """Transitions of the explorer's `configs` that show each rule (None: a rule of pages,
    which the explorer does not model)."""
    from proofs.explorer import explore
    from proofs.explorer_configs import CONFIGS

    rules = _explorer_rules()
    counts: dict[str, int | None] = {r.id: (0 if r.id in rules else None) for r in RULES}

    def seen(action: str, s: tuple, ns: tuple) -> None:
        for rule_id, shown in rules.items():
            counts[rule_id] += shown(action, s, ns)

    for name in configs:
        explore(CONFIGS[name], on_transition=seen)
    return counts


def table(scenarios: dict[str, int], fuzz: dict[str, int], campaign: dict[str, int],
          sizes: tuple[int, int, int], explorer: dict[str, int | None] | None = None) -> str:
    """The markdown table: a row per rule, a column per engine, scripts that reach it (the
    explorer's column, when given: transitions)."""
    head = (f"| rule of the seed | where | conformance: {sizes[0]} scenarios "
            f"| conformance-fuzz: {sizes[1]} scripts (seed 0) "
            f"| conformance-campaign: {sizes[2]} scripts (seed 0) |")
    rule = "|---|---|---|---|---|"
    if explorer is not None:
        head += f" explorer (model only): transitions of {', '.join(EXPLORER_CONFIGS)} |"
        rule += "---|"
    rows = [head, rule]
    for r in RULES:
        row = f"| {r.id} | {r.clause} | {scenarios[r.id]} | {fuzz[r.id]} | {campaign[r.id]} |"
        if explorer is not None:
            row += f" {'-' if explorer[r.id] is None else explorer[r.id]} |"
        rows.append(row)
    return "\n".join(rows)


def generate(fuzz_examples: int = 200, campaign_scripts: int = 1000) -> str:
    from purgecheck.scenarios import SCENARIOS
    return table(reach(scenario_traces()), reach(fuzz_traces(fuzz_examples)),
                 reach(campaign_traces(campaign_scripts)),
                 (len(SCENARIOS), fuzz_examples, campaign_scripts), explorer_reach())


def rules_in(doc: str) -> list[str]:
    """The rule ids of the table between the markers of a page."""
    block = doc.split(BEGIN, 1)[1].split(END, 1)[0]
    return [line.split("|")[1].strip() for line in block.strip().splitlines()[2:]]


def write(path: Path, text: str) -> None:
    doc = path.read_text()
    before, rest = doc.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    path.write_text(f"{before}{BEGIN}\n{text}\n{END}{after}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m purgecheck.reach",
                                description="which engine that runs C reaches which seed rule")
    p.add_argument("--write", metavar="PAGE", help="put the table between the markers of PAGE")
    p.add_argument("--fuzz", type=int, default=200, help="fuzz examples (default 200)")
    p.add_argument("--campaign", type=int, default=1000, help="campaign scripts (default 1000)")
    args = p.parse_args(argv)
    text = generate(args.fuzz, args.campaign)
    if args.write:
        write(Path(args.write), text)
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
