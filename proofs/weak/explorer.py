"""Exhaustive exploration of a concurrent program over the weak memory of proofs.weak.memory.

A depth-first search over thread steps and, within each step, over the memory's choices
(which message a load reads, where in mo a store goes), with de-duplication of states. A
program is a set of threads, each a function from its registers (a tuple whose first item
is the program counter) to its next instruction, or None when it has ended; optionally a
virtual clock that ticks 1 ms at a time up to a bound (a clock read returns the time of its
step), and a ghost that a property hook updates after each step and may find violated.

Counts reported: `states` (distinct states reached), `transitions`, `finals` (distinct states
in which every thread has ended) and `outcomes` (the distinct results of `System.outcome`
over the final states). These are not GenMC's execution counts (GenMC counts execution
graphs; a final state here is the memory with its mo and views, and the registers), but
they are pinned the same way, so a change in the size of a space is noticed.

A violation is reported with the path that reached it as a timeline: each step with its
thread, what it did, and for a read the message it read from (location, mo index, the step
that wrote it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from proofs.weak import memory as mm


# -- instructions ------------------------------------------------------------------------

@dataclass(frozen=True)
class Load:
    loc: int
    order: str
    then: Callable  # (regs, value) -> regs; timed: (regs, value, clock) -> regs
    tag: str = ""
    timed: bool = False


@dataclass(frozen=True)
class Store:
    loc: int
    value: object
    order: str
    then: Callable  # (regs) -> regs
    tag: str = ""


@dataclass(frozen=True)
class Rmw:
    loc: int
    update: Callable  # old -> new, or None: a failed CAS
    order: str
    fail_order: str
    then: Callable  # (regs, old, ok) -> regs
    tag: str = ""
    what: str = "rmw"


@dataclass(frozen=True)
class Fence:
    order: str
    then: Callable  # (regs) -> regs
    tag: str = ""


@dataclass(frozen=True)
class Clock:
    then: Callable  # (regs, now) -> regs
    tag: str = ""


@dataclass(frozen=True)
class Process:
    """A step of the process rather than of its memory (a fork, a thread creation): `step(T,
    mem, views, regs, t)` gives every outcome as (what, mem', views', regs') over all threads
    (proofs/weak/fork.py)."""

    step: Callable
    tag: str = ""


def cas(loc, expected, new, order, fail_order, then, tag=""):
    """A strong compare-exchange: then(regs, old, ok)."""
    return Rmw(loc, lambda v: new if v == expected else None, order, fail_order, then, tag,
               f"CAS {_v(expected)} -> {_v(new)}")


def fetch_add(loc, delta, order, then, tag=""):
    return Rmw(loc, lambda v: v + delta, order, order, then, tag, f"fetch_add {delta}")


def _v(value) -> str:
    return "MOVING" if isinstance(value, int) and value < -(1 << 60) else str(value)


# -- the system ----------------------------------------------------------------------------

@dataclass
class System:
    """What to explore. `threads`: (name, program, initial regs) per thread; threads whose
    indices are in one tuple of `symmetric` run the same program and are kept sorted."""

    locations: tuple[str, ...]
    initial: tuple
    threads: list[tuple[str, Callable, tuple]]
    model: mm.MemoryModel = mm.RC11
    clock_bound: int | None = None  # None: no clock
    symmetric: tuple[tuple[int, ...], ...] = ()
    ghost: object = None
    # after each step: (ghost, step info dict, state after) -> (ghost, violation or None)
    on_step: Callable | None = None
    # over a final state: (regs tuple, memory) -> hashable outcome
    outcome: Callable | None = None
    # observed over every state: (state) -> hashable value; the report keeps the max
    measure: Callable | None = None
    # drop the messages no thread can read any more (every thread's view is past them)
    collect: bool = False


@dataclass
class Report:
    states: int = 0
    transitions: int = 0
    finals: int = 0
    outcomes: set = field(default_factory=set)
    violation: str | None = None
    path: list | None = None  # [(step info, state)] to the violation
    measured: object = None
    seconds: float = 0.0
    complete: bool = True

    def figure(self) -> str:
        return f"{self.states:,} states, {self.transitions:,} transitions, " \
               f"{self.finals:,} final states, {len(self.outcomes)} outcomes"


# A state: (T, mem, views, regs, ghost); views[t] = (cur, acq, rel), regs[t] a tuple.

def initial_state(sys: System) -> tuple:
    n = len(sys.locations)
    views = tuple(mm.initial_thread(n) for _ in sys.threads)
    regs = tuple(r for _, _, r in sys.threads)
    T = 0 if sys.clock_bound is not None else None
    return canonical(sys, (T, mm.initial_memory(sys.initial), views, regs, sys.ghost))


def canonical(sys: System, s: tuple) -> tuple:
    if sys.collect:
        s = (s[0],) + mm.collect(s[1], s[2]) + s[3:]
    if not sys.symmetric:
        return s
    T, mem, views, regs, ghost = s
    views, regs = list(views), list(regs)
    for group in sys.symmetric:
        pairs = sorted((regs[i], views[i]) for i in group)
        for i, (r, v) in zip(group, pairs):
            regs[i], views[i] = r, v
    return T, mem, tuple(views), tuple(regs), ghost


def successors(sys: System, s: tuple):
    """Yield (step info, next state)."""
    T, mem, views, regs, ghost = s
    if T is not None and T < sys.clock_bound:
        yield {"thread": None, "what": "clock tick", "T": T + 1}, (T + 1, mem, views, regs, ghost)
    seen_groups = set()
    for t, (name, prog, _) in enumerate(sys.threads):
        key = (regs[t], views[t])
        group = next((g for g in sys.symmetric if t in g), None)
        if group is not None:
            if (group, key) in seen_groups:
                continue  # an identical thread of the same group was stepped already
            seen_groups.add((group, key))
        ins = prog(regs[t])
        if ins is None:
            continue
        for info, mem2, views2, r2 in _execute(sys, ins, T, mem, views, regs, t):
            info["thread"], info["name"], info["T"] = t, name, T
            info["tag"], info["regs_before"] = ins.tag, regs[t]
            ns = (T, mem2, views2, r2 if isinstance(ins, Process) else
                  regs[:t] + (r2,) + regs[t + 1:], ghost)
            if sys.on_step is not None:
                g2, bad = sys.on_step(ghost, info, ns)
                info["violation"] = bad
                ns = ns[:4] + (g2,)
            yield info, ns


def _execute(sys: System, ins, T, mem, views, regs, t):
    model, locs, r = sys.model, sys.locations, regs[t]
    if isinstance(ins, Load):
        for i, value, m2, v2 in mm.load(model, mem, views, t, ins.loc, ins.order):
            yield ({"what": f"load {locs[ins.loc]} ({ins.order}) = {_v(value)}",
                    "read": (ins.loc, i), "value": value, "loc": ins.loc, "kind": "load"},
                   m2, v2, ins.then(r, value, T) if ins.timed else ins.then(r, value))
    elif isinstance(ins, Store):
        for m2, v2 in mm.store(model, mem, views, t, ins.loc, ins.value, ins.order):
            p = v2[t][0][ins.loc]
            yield ({"what": f"store {locs[ins.loc]} = {_v(ins.value)} ({ins.order})",
                    "wrote": (ins.loc, p), "value": ins.value, "loc": ins.loc,
                    "kind": "store"}, m2, v2, ins.then(r))
    elif isinstance(ins, Rmw):
        for i, old, ok, m2, v2 in mm.rmw(model, mem, views, t, ins.loc, ins.update, ins.order,
                                      ins.fail_order):
            if ok:
                p = v2[t][0][ins.loc]
                info = {"what": f"{ins.what} on {locs[ins.loc]} ({ins.order}): read "
                                f"{_v(old)}, wrote {_v(ins.update(old))}",
                        "read": (ins.loc, p - 1), "wrote": (ins.loc, p), "rmw": True}
            else:
                info = {"what": f"{ins.what} on {locs[ins.loc]} fails ({ins.fail_order}): "
                                f"read {_v(old)}",
                        "read": (ins.loc, i)}
            info.update(value=old, ok=ok, loc=ins.loc, kind="rmw")
            yield info, m2, v2, ins.then(r, old, ok)
    elif isinstance(ins, Fence):
        m2, v2 = mm.fence(model, mem, views, t, ins.order)
        yield {"what": f"fence ({ins.order})", "kind": "fence"}, m2, v2, ins.then(r)
    elif isinstance(ins, Clock):
        yield {"what": f"clock read = {T}", "kind": "clock", "value": T}, mem, views, \
            ins.then(r, T)
    elif isinstance(ins, Process):
        for what, m2, v2, regs2 in ins.step(T, mem, views, regs, t):
            yield {"what": what, "kind": "process"}, m2, v2, regs2
    else:
        raise TypeError(f"not an instruction: {ins!r}")


def explore(sys: System, max_states: int | None = None, stop_at_first: bool = True) -> Report:
    """Depth-first over every reachable state. The stack of the search is the path: a
    violation is reported with it."""
    rep = Report()
    t0 = time.perf_counter()
    init = initial_state(sys)
    seen = {init}
    stack = [(init, successors(sys, init), None)]
    if sys.measure is not None:
        rep.measured = sys.measure(init)
    finals = set()
    while stack:
        s, it, _ = stack[-1]
        nxt = next(it, None)
        if nxt is None:
            stack.pop()
            continue
        info, ns = nxt
        rep.transitions += 1
        ns = canonical(sys, ns)
        if info.get("violation") and rep.violation is None:
            rep.violation = info["violation"]
            rep.path = [(i, st) for st, _, i in stack[1:]] + [(info, ns)]
            if stop_at_first:
                break
        if ns in seen:
            continue
        seen.add(ns)
        if sys.measure is not None:
            m = sys.measure(ns)
            if rep.measured is None or m > rep.measured:
                rep.measured = m
        if max_states and len(seen) >= max_states:
            rep.complete = False
            break
        if all(prog(ns[3][t]) is None for t, (_, prog, _) in enumerate(sys.threads)):
            finals.add(ns)
            if sys.outcome is not None:
                rep.outcomes.add(sys.outcome(ns[3], ns[1]))
            if ns[0] is None:
                continue
        stack.append((ns, successors(sys, ns), info))
    rep.states = len(seen)
    rep.finals = len(finals)
    rep.seconds = time.perf_counter() - t0
    return rep


def shortest_violation(sys: System, max_states: int | None = None) -> Report:
    """Breadth first, for the shortest path to a violation (the timeline a reader gets)."""
    from collections import deque

    rep = Report()
    init = initial_state(sys)
    parent = {init: None}
    queue = deque([init])
    while queue and rep.violation is None:
        s = queue.popleft()
        for info, ns in successors(sys, s):
            rep.transitions += 1
            ns = canonical(sys, ns)
            if info.get("violation"):
                rep.violation, rep.path = info["violation"], _forward(parent, s) + [(info, ns)]
                break
            if ns not in parent:
                parent[ns] = (s, info)
                queue.append(ns)
                if max_states and len(parent) >= max_states:
                    rep.complete = False
                    queue.clear()
                    break
    rep.states = len(parent)
    return rep


def counterexample(sys: System) -> str | None:
    """The shortest violation's timeline, found breadth first without the threads' symmetry
    (so threads keep their numbers along the path; build `sys` without collecting old
    messages so that mo indices keep theirs)."""
    sys.symmetric = ()
    rep = shortest_violation(sys)
    if rep.violation is None:
        return None
    return rep.violation + "\n" + timeline(sys, rep.path)


def _forward(parent: dict, s: tuple) -> list:
    out = []
    while parent[s] is not None:
        p, info = parent[s]
        out.append((info, s))
        s = p
    return out[::-1]


def timeline(sys: System, path: list) -> str:
    """The path as a table: time, thread, what it did, reads-from (the step that wrote the
    message read, by its number in the path; 'init' for the initial value) and the thread's
    view after the step (per location, the mo index it may not read before)."""
    writers = [["init"] for _ in sys.locations]  # per location, by mo index: the writer step
    lines = [f"{'step':>4}  {'T':>3}  {'thread':<14} what  [reads-from]"]
    for n, (info, st) in enumerate(path, 1):
        rf = ""
        if "read" in info:
            x, i = info["read"]
            rf = f"  [reads {sys.locations[x]} mo#{i} from {writers[x][i]}]"
        if "wrote" in info:
            x, p = info["wrote"]
            writers[x].insert(p, f"step {n}")
            rf += f"  [at {sys.locations[x]} mo#{p}]"
        if info.get("kind") == "process":  # a fork's copy: the messages after it are gone
            writers = [w[:len(loc)] for w, loc in zip(writers, st[1][0])]
        who = "-" if info["thread"] is None else f"{info['thread']}:{info['name']}"
        if info["thread"] is not None and info.get("kind") not in (None, "clock") and st:
            cur = st[2][info["thread"]][0]
            rf += "  view " + " ".join(f"{loc}#{i}" for loc, i in zip(sys.locations, cur))
        T = "" if info.get("T") is None else info["T"]
        lines.append(f"{n:>4}  {T!s:>3}  {who:<14} {info['what']}{rf}")
        if info.get("violation"):
            lines.append(f"      VIOLATION: {info['violation']}")
    return "\n".join(lines)
