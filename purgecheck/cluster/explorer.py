"""The interleaving explorer (proofs/explorer.py) with its state space split over Dask workers.

The design of the distributed model checkers (Stern and Dill's parallel Murphi; a
level-synchronous breadth-first search): each partition OWNS the states whose shared part
hashes to it (owner_of), for the whole run, in a Dask actor pinned to a worker. Each partition
goes through the levels on its own, in one long call (PartitionActor.run_levels); for each:
- admit: of the successors sent to it, keep those not seen before (the least key of each),
  with the parent of each;
- expand: every move of each state it admitted, in order; a successor it owns and has seen is
  dropped at once, and of the others the first of each is judged with every invariant and put
  in the batch for its owner;
- post: one batch to each other partition, actor to actor, without waiting. A batch is one
  `marshal` blob of the states' canonical bytes, their keys and parents, and the rare
  verdicts; no state goes through the coordinator, which seeds the first level and adds up
  the counts at the end.
The first version routed every successor through the coordinator with two calls a level
(bare-3: 40 s); then one call a level with the batches sent actor to actor (5 s); now no
call a level (4 s at the same load; docs/proofs.md).

The result is the single-process run's: the same states, transitions and depth, and the same
first violation of each invariant with the same shortest path. Every choice the sequential
search makes by order is made here by the same order: a state's key is its place in the
sequential loop (the key of its parent times 256, plus the index of the move: the order of
keys is the order of the sequential run's frontier), an owner admits the least key first,
and of each invariant's violations the least (level, key) is kept, an edge's before a
state's on the same transition.

Where it stops: every state is held once, by its owner, as bytes with its parent's number
(`docs/proofs.md`, "Scaling the explorer", gives the figures).
"""

from __future__ import annotations

import marshal
import sys
import time
import zlib

from proofs import explorer as ex
from proofs.explorer import Config, Report, Violation
from purgecheck.cluster.client import worker_addresses

MOVE_BITS = 8  # fewer than 256 moves from a state: a key is its parent's key << 8 | move
ROOT = -1  # the parent number of the initial state
LEVEL_WAIT_S = 900  # a partition that waits this long for a level's batches reports it
ENCODING = 2  # marshal version 2 writes no back-references: equal states, equal bytes


class PartitionLost(Exception):
    """A partition's batches did not come: its worker is gone, with the states it owned."""


def encode(s: tuple) -> bytes:
    """The canonical bytes of a state (the same in every process of one Python version)."""
    return marshal.dumps(s, ENCODING)


def owner_of(s: tuple, parts: int) -> int:
    """The partition of state s: a hash of its shared part (the clock, the start, the epoch
    and its beginnings), the same in every process (Python's own hash of bytes is salted
    per process). The model-step results that explorer.moves keeps are keyed by that part
    and each thread's own: with the states of one shared part on one partition, each is
    computed by one partition only, and most moves keep their owner (park-2: 7.5% of the
    successors sent to another partition, against 35% with a hash of the whole state)."""
    return zlib.crc32(marshal.dumps(s[:5], ENCODING)) % parts


class Partition:
    """One partition of the state space (a Dask actor as PartitionActor; here, in one process,
    what explore_local runs). A state is numbered by its owner (gid = local index * parts +
    partition) and kept as visited[bytes] = parent gid << MOVE_BITS | move index."""

    def __init__(self, cfg: Config, index: int, parts: int, mutant: str | None = None):
        from purgecheck.mutants import MUTANTS, applied

        self.cfg, self.index, self.parts = cfg, index, parts
        # a broken twin's mutant, applied in this worker until close()
        self.applied = applied(MUTANTS[mutant] if mutant else None)
        self.applied.__enter__()
        self.visited: dict[bytes, int] = {}
        self.states: list[bytes] = []  # by local index
        self.memo: dict = {}
        self.checks: dict = {}
        self.na: set[str] = set()
        # invariant -> ((level, key, 0 edge / 1 state), reason, (gid, action, judged) / gid)
        self.first_bad: dict[str, tuple] = {}
        self.pending: dict[tuple, tuple] = {}  # park-pending edge -> (level, key, action, gid)
        self.inbox: dict[int, list[bytes]] = {}  # level -> batches sent here
        self.peers: list = []  # every partition, this one too
        self.sent = [0, 0]  # successors and bytes sent to other partitions
        self.cpu = 0.0  # seconds of CPU its admissions and expansions took (its thread's)
        self.invs, self.world_invs = ex.judged_invariants(cfg)
        # What explore() sets for a run, put back by close(): the worker outlives the run.
        self.saved = (ex.ep.spin_max, ex._stale_start_ok[0])
        ex.ep.spin_max = cfg.spin_max
        ex._stale_start_ok[0] = ex.is_stale_start_sound(cfg)

    def close(self) -> None:
        ex.ep.spin_max, ex._stale_start_ok[0] = self.saved
        self.applied.__exit__(None, None, None)

    def connect(self, peers: list) -> int:
        self.peers = peers
        return len(peers)

    def take(self, level: int, batch: bytes) -> None:
        """A batch of level `level` from a partition."""
        self.inbox.setdefault(level, []).append(batch)

    def step(self, level: int) -> tuple[int, int]:
        """Admit this level's states sent here, expand them and send each partition its
        batch of the next level: (admitted, transitions). The caller starts level + 1 only
        when every partition's step has returned, so every batch has arrived."""
        frontier = self.admit(level, self.inbox.pop(level, []))
        transitions, batches, _ = self.expand(level + 1, frontier)
        self.send(level + 1, batches)
        return len(frontier), transitions

    def send(self, level: int, batches: list) -> None:
        for peer, batch in zip(self.peers, batches):
            peer.take(level, batch)

    def count_sent(self, batches: list[bytes], counts: list[int]) -> None:
        for q, (batch, n) in enumerate(zip(batches, counts)):
            if q != self.index:
                self.sent[0] += n
                self.sent[1] += len(batch)

    def admit(self, level: int, batches: list) -> list[tuple]:
        cpu = time.thread_time()
        try:
            return self._admit(level, batches)
        finally:
            self.cpu += time.thread_time() - cpu

    def _admit(self, level: int, batches: list) -> list[tuple]:
        """Each batch is bytes from another partition, or this one's own as it was built (its
        states' tuples with it: not written and read again)."""
        keys, parents, states, verdicts, tuples = [], [], [], {}, []
        for batch in batches:
            if isinstance(batch, bytes):
                k, p, s, v = marshal.loads(batch)
                tuples += [None] * len(k)
            else:
                k, p, s, v, d = batch
                tuples += d
            keys += k
            parents += p
            states += s
            verdicts.update(v)
        visited, mine, parts, q = self.visited, self.states, self.parts, self.index
        frontier = []
        for i in admission_order(keys):
            b = states[i]
            if b in visited:
                continue
            visited[b] = parents[i]
            gid = len(mine) * parts + q
            mine.append(b)
            frontier.append((keys[i], gid, b, tuples[i]))
            for inv, reason in verdicts.get(keys[i], ()):
                self.first_bad.setdefault(inv, ((level, keys[i], 1), reason, gid))
        return frontier

    def expand(self, level: int, frontier: list) -> tuple:
        cpu = time.thread_time()
        try:
            return self._expand(level, frontier)
        finally:
            self.cpu += time.thread_time() - cpu

    def _expand(self, level: int, frontier: list) -> tuple:
        cfg, memo, parts, q, visited = self.cfg, self.memo, self.parts, self.index, self.visited
        out = [([], [], [], {}, []) for _ in range(parts)]  # and the own states' tuples
        queued = [set() for _ in range(parts)]  # sent at this level: the first is the least
        transitions = 0
        for key, gid, b, s in frontier:
            if s is None:
                s = marshal.loads(b)
            pending_s = cfg.graph and ex.is_park_pending(s)
            base = key << MOVE_BITS
            for n, (action, checked, ns, why) in enumerate(ex.moves(cfg, s, memo)):
                transitions += 1
                k = base | n
                if why:  # EP-EPOCH-MOVES's reason, or a finished call's (id, reason)
                    inv, reason = ex.edge_verdict(why)
                    self.first_bad.setdefault(inv, ((level, k, 0), reason, (gid, action, checked)))
                if pending_s and action != ex.TICK and ex.is_park_pending(ns):
                    edge = (ex.system_part(s), ex.system_part(ns))
                    self.pending.setdefault(edge, (level, k, action, gid))
                nb = marshal.dumps(ns, ENCODING)
                to = owner_of(ns, parts)
                if to == q and nb in visited or nb in queued[to]:
                    continue
                queued[to].add(nb)
                keys, parents, states, verdicts, tuples = out[to]
                keys.append(k)
                parents.append(gid << MOVE_BITS | n)
                states.append(nb)
                if to == q:
                    tuples.append(ns)
                bad = ex.check_state(cfg, s, checked, self.invs, self.world_invs, self.na,
                                     ex.touches_world(action), self.checks)
                if bad:
                    verdicts[k] = bad
        batches = [o if p == q else marshal.dumps(o[:4]) for p, o in enumerate(out)]
        self.count_sent(batches, [len(o[0]) for o in out])
        return transitions, batches, sum(len(o[0]) for o in out)

    def trace(self, gid: int) -> tuple[list, int]:
        """The path back from state `gid` while its parents are owned here: ([(state, parent
        gid, move)], the first parent owned elsewhere, or ROOT)."""
        out = []
        while gid != ROOT and gid % self.parts == self.index:
            b = self.states[gid // self.parts]
            value = self.visited[b]
            parent = value >> MOVE_BITS if value != ROOT else ROOT
            out.append((marshal.loads(b), parent, value & ((1 << MOVE_BITS) - 1)))
            gid = parent
        return out, gid

    def actions(self, steps: list[tuple[tuple, int]]) -> list[str]:
        """The label of move n of each state (as the model with this run's mutant gives it)."""
        return [list(ex.moves(self.cfg, s, self.memo))[n][0] for s, n in steps]

    def finish(self) -> tuple:
        return len(self.visited), self.first_bad, self.pending, set(self.na)

    def footprint(self) -> tuple[int, int, int, float]:
        """(bytes that the states held here take: the set with each state's bytes and its
        parent's number, and the list by number; successors sent; bytes sent; CPU seconds)."""
        held = sys.getsizeof(self.visited) + sys.getsizeof(self.states) + \
            sum(sys.getsizeof(b) + sys.getsizeof(v) for b, v in self.visited.items())
        return held, *self.sent, self.cpu


def admission_order(keys: list[int]) -> list[int]:
    """The candidates in the sequential run's order: least key first (the first of several
    transitions to one state is the one the sequential run keeps as its parent)."""
    return sorted(range(len(keys)), key=keys.__getitem__)


class PartitionActor(Partition):
    """A partition as a Dask actor: its methods run in its worker. It goes through the levels
    on its own (run_levels), one long call, and sends its batches to the other partitions'
    actors without waiting for them: a level costs one message from each partition to each
    other, and no round trip through the coordinator."""

    def connect(self, peers: list) -> int:
        import threading

        self.arrived = threading.Condition()
        self.news: dict[int, list] = {}  # level -> (successors sent, stop) from each sender
        self.posted: list = []  # deliveries of this partition's batches, while under way
        return super().connect(peers)

    async def receive(self, level: int, batch: bytes, sent: int, stop: bool) -> None:
        """A batch from another partition (runs on the worker's event loop, not in the
        actor's thread, which is busy with its own level meanwhile)."""
        self.arrive(level, batch, sent, stop)

    def arrive(self, level: int, batch: bytes, sent: int, stop: bool) -> None:
        """A batch of `level`, with the number of successors its sender sent to all the
        partitions at that level, and whether the sender is past the time limit."""
        with self.arrived:
            self.take(level, batch)
            self.news.setdefault(level, []).append((sent, stop))
            self.arrived.notify_all()

    async def run_levels(self, time_limit: float | None) -> tuple[list, bool]:
        """levels_here in a thread of this partition's own: the worker's one actor thread
        stays free for the other partitions it holds (more partitions than workers)."""
        import asyncio
        import contextvars
        from concurrent.futures import ThreadPoolExecutor

        self.loop = asyncio.get_running_loop()
        # with this call's context: Dask finds its worker there (get_worker), and so do the
        # deliveries the thread schedules on the loop (the actor handles' calls need it)
        here = contextvars.copy_context()
        with ThreadPoolExecutor(1, thread_name_prefix=f"partition-{self.index}") as pool:
            return await self.loop.run_in_executor(pool, here.run, self.levels_here, time_limit)

    def levels_here(self, time_limit: float | None) -> tuple[list, bool]:
        """Every level from the first: wait for every partition's batch of it (the
        coordinator's alone at level 0), admit, expand, send. Every partition hears the same
        news of a level, so all stop at the same one: when no partition sent a successor
        (the search is over), or when one was past `time_limit` seconds. Returns
        ([(admitted, transitions)] by level, stopped by the time limit)."""
        deadline = None if time_limit is None else time.perf_counter() + time_limit
        counts: list[tuple[int, int]] = []
        level = 0
        while True:
            news = self.wait_for_level(level, 1 if level == 0 else self.parts)
            if not sum(n for n, _ in news):
                return counts, False
            frontier = self.admit(level, self.inbox.pop(level, []))
            if any(stop for _, stop in news):
                counts.append((len(frontier), 0))
                return counts, True
            transitions, batches, sent = self.expand(level + 1, frontier)
            counts.append((len(frontier), transitions))
            late = deadline is not None and time.perf_counter() > deadline
            self.post(level + 1, batches, sent, late)
            level += 1

    def wait_for_level(self, level: int, expected: int) -> list:
        """The news of `level` from each of the `expected` senders; a batch this partition
        could not deliver raises here, and so does a wait of LEVEL_WAIT_S."""
        waited = 0.0
        with self.arrived:
            while len(self.news.get(level, ())) < expected:
                for f in self.posted:
                    if f.done():
                        f.result()  # a failed delivery raises
                self.posted = [f for f in self.posted if not f.done()]
                if waited >= LEVEL_WAIT_S:
                    raise PartitionLost(f"partition {self.index} waited {LEVEL_WAIT_S} s for "
                                        f"the batches of level {level}: a worker is gone")
                self.arrived.wait(timeout=1.0)
                waited += 1.0
            return self.news.pop(level)

    def post(self, level: int, batches: list, sent: int, stop: bool) -> None:
        import asyncio

        async def deliver(peer, batch):  # on the event loop: the handle's calls are coroutines
            await peer.receive(level, batch, sent, stop)
        for q, (peer, batch) in enumerate(zip(self.peers, batches)):
            if q == self.index:
                self.arrive(level, batch, sent, stop)
            else:
                self.posted.append(asyncio.run_coroutine_threadsafe(deliver(peer, batch),
                                                                    self.loop))


# -- the coordinator -------------------------------------------------------------------------

class _Run:
    """The partitions of one run, each an actor pinned to a worker in turn."""

    def __init__(self, client, cfg: Config, parts: int, mutant: str | None):
        workers = worker_addresses(client)
        # the actors' futures are kept: an actor whose future is dropped is released
        self.futures = [client.submit(PartitionActor, cfg, q, parts, mutant, actor=True,
                                      pure=False,                                      workers=[workers[q % len(workers)]],
                                      allow_other_workers=False) for q in range(parts)]
        self.actors = [f.result() for f in self.futures]
        self.parts = parts
        self.all("connect", self.actors)

    def all(self, method: str, *args) -> list:
        """`method(*args)` on every partition at once; their results in order."""
        return [f.result() for f in [getattr(a, method)(*args) for a in self.actors]]

    def call(self, q: int, method: str, *args):
        return getattr(self.actors[q], method)(*args).result()

    def levels(self, cfg: Config, progress, t0: float, time_limit: float | None) -> Report:
        """Every partition goes through the levels on its own; the coordinator seeds the
        first and adds up the counts at the end."""
        rep = Report(cfg)
        init = encode(ex.initial_state(cfg))
        for q in range(self.parts):
            mine = [init] if owner_of(ex.initial_state(cfg), self.parts) == q else []
            self.call(q, "arrive", 0, marshal.dumps(([0] * len(mine), [ROOT] * len(mine), mine,
                                                     {})), 1, False)
        left = max(0.0, time_limit - (time.perf_counter() - t0)) if time_limit else None
        ran = self.all("run_levels", left)
        rep.complete = not any(stopped for _, stopped in ran)
        for level, counts in enumerate(zip(*(c for c, _ in ran))):
            rep.transitions += sum(t for _, t in counts)
            if sum(n for n, _ in counts):
                rep.depth = level
        if progress:
            progress(sum(n for c, _ in ran for n, _ in c), time.perf_counter() - t0)
        return rep


class _LocalRun:
    """The partitions of one run in this process, one after the other (explore_local)."""

    def __init__(self, cfg: Config, parts: int, mutant: str | None):
        self.parts = parts
        self.partitions = [Partition(cfg, q, parts, mutant) for q in range(parts)]
        self.all("connect", self.partitions)

    def all(self, method: str, *args) -> list:
        # closed last opened first: each puts back what the one before it had set
        order = self.partitions[::-1] if method == "close" else self.partitions
        out = [getattr(p, method)(*args) for p in order]
        return out[::-1] if method == "close" else out

    def call(self, q: int, method: str, *args):
        return getattr(self.partitions[q], method)(*args)

    def levels(self, cfg: Config, progress, t0: float, time_limit: float | None) -> Report:
        return _levels(cfg, self, progress, t0, time_limit)


def explore_on(client, cfg: Config, parts: int | None = None, progress=None,
               mutant: str | None = None, time_limit: float | None = None,
               figures: bool = False) -> Report:
    """Explore `cfg` exhaustively on the Dask `client`'s workers (`parts` partitions, one per
    worker by default, each pinned to a worker in turn), with `mutant` applied there; a run
    past `time_limit` seconds stops at the end of a level, not complete. `figures`: see
    _explore."""
    parts = parts or len(worker_addresses(client))
    t0 = time.perf_counter()
    return _explore(_Run(client, cfg, parts, mutant), cfg, progress, t0, time_limit, figures)


def explore_local(cfg: Config, parts: int = 2, mutant: str | None = None) -> Report:
    """The split run with its `parts` partitions in this process, one after the other: the
    algorithm without Dask (its cost over explore(), and tests that need no cluster)."""
    t0 = time.perf_counter()
    return _explore(_LocalRun(cfg, parts, mutant), cfg, None, t0, None)


def _explore(run, cfg: Config, progress, t0: float, time_limit: float | None,
             figures: bool = False) -> Report:
    """The run; with `figures`, the report also has held_bytes (what the states take in
    the partitions), sent and sent_bytes (successors sent from one partition to another)
    and cpu (the CPU seconds of the partitions' admissions and expansions, all added)."""
    try:
        rep = run.levels(cfg, progress, t0, time_limit)
        _verdicts(cfg, run, rep)
        if figures:
            rep.held_bytes, rep.sent, rep.sent_bytes, rep.cpu = \
                map(sum, zip(*run.all("footprint")))
    finally:
        run.all("close")
    rep.seconds = time.perf_counter() - t0
    return rep


def _levels(cfg: Config, run: _LocalRun, progress, t0: float,
            time_limit: float | None) -> Report:
    """A level is one step of each partition in turn; the next starts when all are done."""
    rep = Report(cfg)
    init = encode(ex.initial_state(cfg))
    run.call(owner_of(ex.initial_state(cfg), run.parts), "take", 0,
             marshal.dumps(([0], [ROOT], [init], {})))
    level, admitted = 0, 0
    while True:
        counts = run.all("step", level)
        new = sum(n for n, _ in counts)
        rep.transitions += sum(t for _, t in counts)
        if not new:
            break
        admitted += new
        rep.depth = level
        level += 1
        if progress:
            progress(admitted, time.perf_counter() - t0)
        if time_limit and time.perf_counter() - t0 > time_limit:
            rep.complete = False
            break
    return rep


def _verdicts(cfg: Config, run: _Run, rep: Report) -> None:
    """The states, the first violation of each invariant with its shortest path, and the
    invariants checked, from every partition."""
    import networkx as nx

    ends = run.all("finish")
    rep.states = sum(n for n, _, _, _ in ends)
    first: dict[str, tuple] = {}
    for _, bad, _, _ in ends:
        for inv, found in bad.items():
            if inv not in first or found[0] < first[inv][0]:
                first[inv] = found
    for inv, (_, reason, where) in sorted(first.items(), key=lambda i: i[1][0]):
        if isinstance(where, tuple):  # an edge's: the path to its parent, then the move
            gid, action, judged = where
            rep.violations[inv] = Violation(inv, reason, path_to(run, gid) + [(action, judged)])
        else:
            rep.violations[inv] = Violation(inv, reason, path_to(run, where))
    if cfg.graph:
        _stuck(run, rep, [p for _, _, p, _ in ends], nx)
    na = set().union(*(n for _, _, _, n in ends))
    invs, world = ex.judged_invariants(cfg)
    rep.checked = [i.id for i in invs] + [i.id for i in world if i.id not in na] + \
        ["EP-EPOCH-MOVES"] + (["PK-DONE-WITHIN-MAX"] if cfg.parked else []) + \
        (["PK-NO-STUCK-CYCLE"] if cfg.graph else [])
    rep.not_applicable = sorted(na)


def path_to(run: _Run, gid: int) -> list[tuple[str, tuple]]:
    """proofs.explorer.path_to: the parents from each owner in turn, then the moves' labels
    from a worker (where the run's mutant is applied)."""
    back = []
    while gid != ROOT:
        part, gid = run.call(gid % run.parts, "trace", gid)
        back += part
    back.reverse()
    labels = run.call(0, "actions", [(s, n) for (s, _, _), (_, _, n) in zip(back, back[1:])])
    return [("initial state", back[0][0])] + list(zip(labels, (s for s, _, _ in back[1:])))


def _stuck(run: _Run, rep: Report, found: list[dict], nx) -> None:
    """The park-pending graph with its edges in the sequential order (the first action seen for
    each edge, the first state seen for each node), and its stuck cycle."""
    least: dict[tuple, tuple] = {}
    for pending in found:
        for edge, seen in pending.items():
            if edge not in least or seen[:2] < least[edge][:2]:
                least[edge] = seen
    pending, first_seen = {}, {}  # first_seen: the number of a state of each node
    for edge, (_, _, action, gid) in sorted(least.items(), key=lambda i: i[1][:2]):
        pending[edge] = action
        first_seen.setdefault(edge[0], gid)
    g = nx.DiGraph()
    g.add_edges_from(pending)
    nx.set_edge_attributes(g, pending, "action")
    rep.graph_nodes = g.number_of_nodes()
    cyc = ex.stuck_cycle(g)
    if cyc is not None:
        rep.violations["PK-NO-STUCK-CYCLE"] = Violation(
            "PK-NO-STUCK-CYCLE", "a cycle sweeps the parked thread again and again and the "
                                 "park is never done",
            path_to(run, first_seen[cyc[0]]) + [(a, n) for a, n in cyc[1]])
