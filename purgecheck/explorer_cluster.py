"""The interleaving explorer (proofs/explorer.py) with its state space split over Dask workers.

The states are partitioned by a hash of the state, as distributed model checkers do: each
partition is a Dask actor on a worker of its own that keeps the states it owns (with the
parent of each) and expands its part of each breadth-first level. A level goes in two
calls to each partition: each expands its frontier and sends each successor to the
successor's owner; each owner admits the successors it has not seen, judges them with every
invariant, and keeps the parent; the coordinator (this process) puts the new frontier in
order and hands each partition its ranks with the next expand.

The result is the single-process run's: the same states, transitions and depth, and the same
first violation of each invariant with the same shortest path. That holds because every
choice the sequential search makes by order is made here by the same order: each successor
carries the key (rank of its parent in the level, index of the move), which is its place in
the sequential run's loop; an owner admits the least key first (`setdefault` in that order),
the next level's ranks are the sorted keys, and of each invariant's violations the least key
of the first level that has one is kept.

Where it stops: every state is held once in the memory of its owner (about 1 KB with its
parent, in CPython); each transition sends the successor, its judged form and its parent to
the owner through the coordinator (`docs/proofs.md`, "Scaling the explorer").
"""

from __future__ import annotations

import time
import zlib

from proofs import explorer as ex
from proofs.explorer import Config, Report, Violation


def owner_of(s: tuple, parts: int) -> int:
    """The partition of state s: the same in every process (Python's own hash of a string is
    salted per process)."""
    return zlib.crc32(repr(s).encode()) % parts


class Partition:
    """One partition of the state space: a Dask actor (its methods run on its worker)."""

    def __init__(self, cfg: Config, index: int, parts: int, mutant: str | None = None):
        from purgecheck.mutants import MUTANTS, applied

        self.cfg, self.index, self.parts = cfg, index, parts
        # a broken twin's mutant, applied in this worker until close()
        self.applied = applied(MUTANTS[mutant] if mutant else None)
        self.applied.__enter__()
        self.parent: dict[tuple, tuple | None] = {}
        self.frontier: list[tuple[int, tuple]] = []  # (rank in the level, state)
        self.fresh: list[tuple[tuple, tuple]] = []  # (key, state) admitted in this level
        self.memo: dict = {}
        self.checks: dict = {}
        self.na: set[str] = set()
        reg = ex.load_registry()
        self.invs = [i for i in reg.values() if i.scope == "epoch" and i.predicate]
        self.world_invs = [i for i in reg.values() if i.scope == "world" and i.predicate] \
            if cfg.owner else []
        # What explore() sets for a run, put back by close(): the worker outlives the run.
        self.saved = (ex.ep.spin_max, ex._stale_start_ok[0])
        ex.ep.spin_max = cfg.spin_max
        ex._stale_start_ok[0] = ex.is_stale_start_sound(cfg)

    def close(self) -> int:
        ex.ep.spin_max, ex._stale_start_ok[0] = self.saved
        self.applied.__exit__(None, None, None)
        n = len(self.parent)
        self.parent.clear()
        self.memo.clear()
        self.checks.clear()
        return n

    def seed(self, init: tuple) -> None:
        self.parent[init] = None
        self.frontier = [(0, init)]

    def expand(self, ranks: list[int] | None = None) -> tuple[dict, int, list, list]:
        """Expand this partition's frontier (first made of the last level's new states with
        their global `ranks`, when given: one call a level the less): (successors by owner,
        transitions, edge violations (key, id, why, state, action, judged state),
        park-pending edges (key, edge, action, state))."""
        if ranks is not None:
            self.rank(ranks)
        cfg, out, moves_n, edge_bad, pending = self.cfg, {}, 0, [], []
        for rank, s in self.frontier:
            pending_s = cfg.graph and ex.is_park_pending(s)
            for n, (action, checked, ns, why) in enumerate(ex.moves(cfg, s, self.memo)):
                moves_n += 1
                key = (rank, n)
                if why:
                    edge_bad.append((key, *ex.edge_verdict(why), s, action, checked))
                if pending_s and action != ex.TICK and ex.is_park_pending(ns):
                    pending.append((key, (ex.system_part(s), ex.system_part(ns)), action, s))
                out.setdefault(owner_of(ns, self.parts), []).append(
                    (key, ns, s, action, checked))
        return out, moves_n, edge_bad, pending

    def admit(self, candidates: list) -> tuple[list, list]:
        """The successors this partition owns, from every expander: the least key of each
        state not seen before is kept, with its parent, and judged. Returns (the keys of the
        new states, violations (key, id, reason, state))."""
        candidates.sort(key=lambda c: c[0])
        self.fresh, bad = [], []
        for key, ns, s, action, checked in candidates:
            if ns in self.parent:
                continue
            self.parent[ns] = (s, action)
            self.fresh.append((key, ns))
            for inv_id, reason in ex.check_state(self.cfg, s, checked, self.invs,
                                                 self.world_invs, self.na,
                                                 ex.touches_world(action), self.checks):
                bad.append((key, inv_id, reason, ns))
        return [k for k, _ in self.fresh], bad

    def rank(self, ranks: list[int]) -> int:
        """The next frontier: this level's new states with their global ranks."""
        self.frontier = [(r, ns) for r, (_, ns) in zip(ranks, self.fresh)]
        self.fresh = []
        return len(self.frontier)

    def step_back(self, s: tuple) -> tuple | None:
        """(parent, action) of state s, or None for the initial state."""
        return self.parent[s]

    def not_applicable(self) -> set[str]:
        return set(self.na)


def path_to(partitions: list, s: tuple) -> list[tuple[str, tuple]]:
    """proofs.explorer.path_to, asking each state's owner for its parent."""
    out = []
    while s is not None:
        p = partitions[owner_of(s, len(partitions))].step_back(s).result()
        out.append(("initial state" if p is None else p[1], s))
        s = p[0] if p else None
    return out[::-1]


def explore_on(client, cfg: Config, parts: int | None = None, progress=None,
               mutant: str | None = None, time_limit: float | None = None) -> Report:
    """Explore `cfg` exhaustively on the Dask `client`'s workers (`parts` partitions, one per
    worker by default, each pinned to a worker in turn), with `mutant` applied there; a run
    past `time_limit` seconds stops at the end of a level, not complete."""
    import networkx as nx

    workers = sorted(client.scheduler_info()["workers"])
    parts = parts or len(workers)
    t0 = time.perf_counter()
    partitions = [client.submit(Partition, cfg, i, parts, mutant, actor=True, pure=False,
                                workers=[workers[i % len(workers)]],
                                allow_other_workers=False).result() for i in range(parts)]
    try:
        rep = _levels(cfg, partitions, progress, t0, time_limit)
        if cfg.graph:
            _stuck(cfg, partitions, rep, nx)
        na = set().union(*(p.not_applicable().result() for p in partitions))
    finally:
        rep_states = sum(p.close().result() for p in partitions)
    rep.states = rep_states
    rep.seconds = time.perf_counter() - t0
    invs = [i for i in ex.load_registry().values() if i.scope == "epoch" and i.predicate]
    world = [i for i in ex.load_registry().values() if i.scope == "world" and i.predicate] \
        if cfg.owner else []
    rep.checked = [i.id for i in invs] + [i.id for i in world if i.id not in na] + \
        ["EP-EPOCH-MOVES"] + (["PK-DONE-WITHIN-MAX"] if cfg.parked else []) + \
        (["PK-NO-STUCK-CYCLE"] if cfg.graph else [])
    rep.not_applicable = sorted(na)
    return rep


def _levels(cfg: Config, partitions: list, progress, t0: float,
            time_limit: float | None = None) -> Report:
    rep = Report(cfg)
    init = ex.initial_state(cfg)
    parts = len(partitions)
    partitions[owner_of(init, parts)].seed(init).result()
    rep._pending, rep._first_seen = {}, {}
    level, admitted = 0, 1
    ranks: list = [None] * parts
    while True:
        expanded = [f.result() for f in [p.expand(r) for p, r in zip(partitions, ranks)]]
        edge_bad, routed = [], [[] for _ in range(parts)]
        for out, moves_n, bad, pending in expanded:
            rep.transitions += moves_n
            edge_bad += bad
            for q, items in out.items():
                routed[q] += items
            for key, edge, action, s in pending:
                rep._pending.setdefault((level, key, edge), (action, s))
        answers = [f.result() for f in [p.admit(c) for p, c in zip(partitions, routed)]]
        _first_violations(rep, partitions, edge_bad, answers)
        keys = sorted((k, q, i) for q, (ks, _) in enumerate(answers) for i, k in enumerate(ks))
        if not keys:
            break
        ranks = [[0] * len(ks) for ks, _ in answers]
        for r, (_, q, i) in enumerate(keys):
            ranks[q][i] = r
        level += 1
        admitted += len(keys)
        if progress:
            progress(admitted, time.perf_counter() - t0)
        if time_limit and time.perf_counter() - t0 > time_limit:
            rep.complete = False
            break
    rep.depth = level
    return rep


def _first_violations(rep: Report, partitions: list, edge_bad: list, answers: list) -> None:
    """Of this level's violations, each new invariant's first in the sequential order: an
    edge violation (EP-EPOCH-MOVES) at its transition, a state's at its admission; both are
    ordered by the transition's key, the edge's before the state's on the same transition."""
    found = [(key, 0, inv, why, (s, action, checked))
             for key, inv, why, s, action, checked in edge_bad]
    found += [(key, 1, inv, why, (ns,)) for _, bad in answers for key, inv, why, ns in bad]
    for key, _, inv, why, where in sorted(found, key=lambda f: (f[0], f[1])):
        if inv in rep.violations:
            continue
        if len(where) == 3:
            s, action, checked = where
            path = path_to(partitions, s) + [(action, checked)]
        else:
            path = path_to(partitions, where[0])
        rep.violations[inv] = Violation(inv, why, path)


def _stuck(cfg: Config, partitions: list, rep: Report, nx) -> None:
    """The park-pending graph, its edges in the sequential order (the first action seen for
    each edge, the first state seen for each node), and its stuck cycle."""
    pending, first_seen = {}, {}
    for (_, _, edge), (action, s) in sorted(rep._pending.items(), key=lambda i: i[0][:2]):
        pending.setdefault(edge, action)
        first_seen.setdefault(edge[0], s)
    g = nx.DiGraph()
    g.add_edges_from(pending)
    nx.set_edge_attributes(g, pending, "action")
    rep.graph_nodes = g.number_of_nodes()
    cyc = ex.stuck_cycle(g)
    if cyc is not None:
        rep.violations["PK-NO-STUCK-CYCLE"] = Violation(
            "PK-NO-STUCK-CYCLE", "a cycle sweeps the parked thread again and again and the "
                                 "park is never done",
            path_to(partitions, first_seen[cyc[0]]) + [(a, n) for a, n in cyc[1]])
