"""The state graph of a small configuration of the epoch advance, built by running the model.

Seed 000, change (2): "No epoch is shorter than the interval, whoever looks and wherever a
sweeper is preempted". Every interleaving of N sweepers' atomic steps
(`model.epoch.advance_step`) and of clock ticks is a path in this graph; a state where an
epoch invariant of the registry fails is a violation, and the shortest path to one is the
counterexample the docs draw. Used for the pictures only: the exhaustive checker of the
proofs engine is the one that judges.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import networkx as nx

import model.epoch as ep
from model.epoch_invariants import EpochView
from model.invariants import load_registry

# A state: (clock, shared start, epoch, real beginnings, recorded beginnings, frames)
Frame = tuple  # (pc, start, now, now2, spins, increments, advanced)
State = tuple


@dataclass(frozen=True)
class Config:
    sweepers: int = 2
    interval: int = 2  # ms
    clock_start: int = 2  # the first epoch is due at once
    clock_max: int = 3
    spin_max: int = 1  # pauses on MOVING (the real code: MI_EPOCH_SPIN_MAX)

    def describe(self) -> str:
        return (f"{self.sweepers} sweepers, one advance each; interval {self.interval} ms; "
                f"clock {self.clock_start}..{self.clock_max} ms; spin bound {self.spin_max}")


@dataclass
class Graph:
    config: Config
    graph: nx.DiGraph  # nodes: State; node attr `violations`; edge attr `label`
    initial: State
    path: list[State]  # shortest path to a violation ([] when none)

    @property
    def violating(self) -> list[State]:
        return [n for n, d in self.graph.nodes(data=True) if d["violations"]]


def _initial(cfg: Config) -> State:
    frames = tuple(_freeze(ep.begin_advance(cfg.interval)) for _ in range(cfg.sweepers))
    return (cfg.clock_start, 0, 0, (), (), frames)


def _freeze(f: ep.AdvanceFrame) -> Frame:
    return (f.pc, f.start, f.now, f.now2, f.spins, f.increments, f.advanced)


def _thaw(state: State) -> tuple[int, ep.EpochState, list[ep.AdvanceFrame]]:
    clock, start, epoch, real, rec, frames = state
    st = ep.EpochState(start, epoch, ep.EpochHistory(dict(real), dict(rec)))
    return clock, st, [ep.AdvanceFrame(*f) for f in frames]


def _pack(clock: int, st: ep.EpochState, frames: list[ep.AdvanceFrame]) -> State:
    h = st.history
    return (clock, st.start, st.epoch, tuple(sorted(h.real_begin.items())),
            tuple(sorted(h.recorded_begin.items())), tuple(_freeze(f) for f in frames))


def successors(cfg: Config, state: State) -> list[tuple[str, State]]:
    """(label, next state) for each sweeper that can take a step, and a clock tick."""
    out = []
    for i in range(cfg.sweepers):
        clock, st, frames = _thaw(state)
        f = frames[i]
        if f.done:
            continue
        pc = f.pc
        ep.advance_step(st, f, clock, cfg.interval)
        out.append((f"s{i} {pc}", _pack(clock, st, frames)))
    if state[0] < cfg.clock_max:
        out.append(("tick", (state[0] + 1,) + state[1:]))
    return out


def violations(cfg: Config, state: State) -> list[tuple[str, str]]:
    """The epoch invariants of the registry that fail in `state`."""
    _, st, frames = _thaw(state)
    view = EpochView(st, cfg.interval, True, frames)
    out = []
    for inv in load_registry().values():
        if inv.scope == "epoch" and inv.predicate is not None:
            reason = inv.predicate(view)
            if reason:
                out.append((inv.id, reason))
    return out


@contextlib.contextmanager
def _spin_bound(n: int):
    old = ep.spin_max
    ep.spin_max = n
    try:
        yield
    finally:
        ep.spin_max = old


def build(cfg: Config = Config()) -> Graph:
    """Breadth-first, in a fixed order, so the graph (and its picture) is the same every run.
    Violating states are not expanded: the path to the first one is what matters."""
    g = nx.DiGraph()
    init = _initial(cfg)
    with _spin_bound(cfg.spin_max):
        g.add_node(init, violations=violations(cfg, init), depth=0)
        frontier = [init]
        while frontier:
            nxt = []
            for s in frontier:
                if g.nodes[s]["violations"]:
                    continue
                for label, t in successors(cfg, s):
                    if t not in g:
                        g.add_node(t, violations=violations(cfg, t),
                                   depth=g.nodes[s]["depth"] + 1)
                        nxt.append(t)
                    g.add_edge(s, t, label=label)
            frontier = nxt
    bad = [n for n, d in g.nodes(data=True) if d["violations"]]
    path: list[State] = []
    if bad:
        target = min(bad, key=lambda n: g.nodes[n]["depth"])
        path = nx.shortest_path(g, init, target)
    return Graph(cfg, g, init, path)


def describe_state(state: State) -> dict[str, object]:
    """The columns of a step table for one state."""
    clock, start, epoch, real, rec, frames = state
    row: dict[str, object] = {"clock": clock, "start": "MOVING" if start == ep.MOVING else start,
                              "epoch": epoch}
    for i, f in enumerate(frames):
        row[f"s{i}.pc"] = f[0]
    row["began"] = ", ".join(f"e{e}@{t}" for e, t in real) or "-"
    return row
