"""The workloads of seed 000, generated: what the program calls, when, and how it idles.

A workload is a stream of calls in virtual time (`Call`: the time in ms, the thread, the op,
the allocation's name and size) and a named idle behaviour that says what the threads do
when they have nothing to do (`IDLE_BEHAVIOURS`). The generators are written from the seed's
descriptions of its measurements (seed 000, "Measurements" and "Under sustained load"); every
parameter has the seed's value as its default where the seed gives one, and a seeded random
generator where the seed says "100..500 KiB" or "1 in 12": the same workload every run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Iterator

from purgecheck.formats.calls import Call

KiB = 1024

# What a thread does when its event loop or pool has nothing to do (seed 000 (2) and "Bun"):
IDLE_BEHAVIOURS = {
    "park": "Bun's event loop: parks (mi_on_thread_idle_start) whenever it has nothing to do, "
            "unparks at its next call; the scavenger sweeps a parked thread when due",
    "pool": "Bun's thread pool: calls mi_on_thread_idle once after 100 ms without work, then "
            "blocks without a timeout",
    "inline": "Bun's Windows event loop: calls the inline mi_on_thread_idle from its busy loop "
              "at most every 100 ms; when it is about to block for good, again an interval "
              "after the call before while mi_on_thread_idle_pending says so",
    "none": "nothing sweeps",
}


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    calls: Callable[[], Iterator[Call]]  # a fresh stream each time it is called
    idle: str  # a key of IDLE_BEHAVIOURS
    idle_ms: float  # how long the process stays idle after its last call
    params: dict = field(default_factory=dict)
    # the load ends with a forced collect of the allocator (Bun.gc(true) in Bun 1.4.4:
    # mi_collect(true) after the collector's run; docs/measure.md): kept pages go, the arena purges
    collect_at_end: bool = False
    # the event loop's turns in the idle beyond the park it is in when the load ends, evenly
    # spaced over the idle (Simulation.idle_turn): each a wake (a timer of the runtime) and a
    # park again, or an inline sweep where the loop sweeps inline. The real Bun's loop turns 4
    # to 17 times in 3 s of idle (`loop_turns_idle` of purgecheck measure); 0: one park
    # through the idle
    idle_turns: int = 0


def _small_names(i: int, n: int, first: int) -> list[int]:
    """The names of the `n` small objects that go with the workload's allocation `i`: negative,
    counting down from `first`, apart from the allocations' own names."""
    return [first - i * n - j for j in range(n)]


def bun_serve(requests: int = 20_000, body: int = 256 * KiB, kept: int = 40,
              inflight: int = 16, think_ms: float = 0.36, threads: int = 1, seed: int = 0,
              pause_every: int = 0, pause_ms: float = 0.0, gc_every: int = 1,
              per_turn: float = 1, survivors: float = 0.0,
              major_every: int = 0, small: int = 0,
              small_per_request: int = 0, park_share: float = 0.0) -> Iterator[Call]:
    """Bun.serve with `body`-byte request bodies (seed: 256 KiB), `inflight` requests open at
    once (the seed's 16 connections), one request finished every `think_ms` (seed: 55 k
    requests in 20 s, 0.36 ms each); `kept` bodies (seed: 40) are kept to the end, spread
    over the run; the loop has nothing to do between two requests, where it parks. With
    `pause_every`, the load stops for `pause_ms` after every so many requests (a busy
    machine's stalls, the seed's interleaved rounds). With `gc_every` above 1 a finished
    body is freed by the garbage collector, which frees the bodies of `gc_every` requests
    at once (a JS ArrayBuffer goes at a collection, not when its request ends). With
    `per_turn` above 1 the event loop serves that many finished requests per turn (on
    average: a fraction spreads the turns evenly) and parks once after them: Bun 1.4.4's
    loop parks (mi_on_thread_idle_start) on every tick, before its epoll_pwait2, and under
    load one tick serves the requests whose data arrived meanwhile, 2 to 11 of them with 16
    connections on 2 cores (the more CPU a request costs, the more per tick).
    `purgecheck measure` counts the real turns (purgecheck/measure/turns.py) and the
    comparison passes them here. With `survivors` and `major_every`, a collection passes over
    the body dropped last before it (`survivors` of them per collection, on average) and a
    fuller collection every `major_every` requests frees those: what js/collections.js counts
    of Bun's collector (the body after each run that a collection frees stays, up to a
    thousand requests). With `small` and `small_per_request`, each request also takes that
    many objects of `small` bytes beside its body (the request and response objects, headers
    and strings of Bun and JavaScriptCore, in small and medium pages), which the collection
    that frees the request's body frees too, kept body or not (docs/measure.md derives them
    from the measurement). With `park_share` (and `per_turn` above 1), the park after a turn
    lasts that share of the turn (a turn is `per_turn` requests of `think_ms`) and the
    requests of the turn share the rest; without it each request takes `think_ms` and a park
    lasts until the next request, `think_ms`: how long a park lasts decides whether a
    scavenger that comes late still finds the thread parked (purgecheck/measure/compare.py
    derives the share from the measured CPU)."""
    rng = random.Random(seed)
    # the park after a turn lasts park_share of the turn; the turn's requests share the rest
    park_ms = park_share * per_turn * think_ms if per_turn > 1 else think_ms
    step_ms = (think_ms - park_ms / per_turn) / (1 - 1 / per_turn) if per_turn > 1 else think_ms
    def objects(i: int) -> list[int]:  # the small objects' names of request i
        return _small_names(i, small_per_request if small else 0, -1)

    served = [0] * threads
    turns = [0] * threads
    finished = [0] * threads
    keep = set(rng.sample(range(requests), min(kept, requests)))
    t = 0.0
    open_: list[list[int]] = [[] for _ in range(threads)]
    garbage: list[list[int]] = [[] for _ in range(threads)]
    survived: list[list[int]] = [[] for _ in range(threads)]
    loose: list[list[int]] = [[] for _ in range(threads)]  # small objects a collection frees
    owed = [0.0] * threads  # survivors due, a fraction carried from one collection to the next
    per_request = small_per_request if small else 0
    open_most = max(1, inflight // threads)
    # a Call without the Python-level __new__ of a named tuple (all six fields given): the
    # generator's calls were a sixth of a bun-serve simulation
    make = tuple.__new__
    for i in range(requests):
        k = i % threads  # each thread's lists read once a request
        th = k + 1
        opened, dropped, left = open_[k], garbage[k], loose[k]
        parked = False
        yield make(Call, (t, th, "malloc", i, body, False))
        if per_request:
            for name in objects(i):
                yield make(Call, (t, th, "malloc", name, small, False))
        opened.append(i)
        if len(opened) > open_most:
            done = opened.pop(0)
            if per_request:
                left.extend(objects(done))
            if done not in keep:
                dropped.append(done)
            if len(dropped) >= gc_every:
                owed[k] += survivors if major_every else 0.0
                if owed[k] >= 1:
                    owed[k] -= 1
                    survived[k].append(dropped.pop())
                for name in [*dropped, *left]:
                    yield make(Call, (t, th, "free", name, 0, False))
                dropped.clear()
                left.clear()
            served[k] += 1
            finished[k] += 1
            turns_due = int(finished[k] / per_turn)  # turns ended by this request
            if turns_due > turns[k]:
                turns[k] = turns_due
                yield make(Call, (t, th, "loop", 0, 0, served[k]))
                served[k] = 0
                parked = True
        if major_every and (i + 1) % major_every == 0:
            for name in survived[k]:
                yield Call(t, th, "free", name)
            survived[k].clear()
        t += (park_ms if parked else step_ms) if park_share else think_ms
        if pause_every and (i + 1) % pause_every == 0:
            t += pause_ms
    for th, names in enumerate(open_, start=1):
        if served[th - 1]:
            yield Call(t, th, "loop", request=served[th - 1])
        for name in [*loose[th - 1], *(o for name in names for o in objects(name))]:
            yield Call(t, th, "free", name)
        for done in [*survived[th - 1], *garbage[th - 1], *names]:
            if done not in keep:
                yield Call(t, th, "free", done)
            yield Call(t, th, "loop", request=True)


def typed_arrays(allocations: int = 2_000, lo: int = 100 * KiB, hi: int = 500 * KiB,
                 keep_every: int = 12, lifetime: int = 8, think_ms: float = 0.5,
                 seed: int = 0, gc_every: int = 1, per_turn: int = 0,
                 temp_every: int = 0, small: int = 0,
                 small_per_allocation: int = 0) -> Iterator[Call]:
    """Typed arrays, strings and Buffers of `lo`..`hi` bytes (seed: 100..500 KiB), one in
    `keep_every` kept (seed: 1 in 12), the others dropped `lifetime` allocations later; the loop
    has nothing to do after each allocation. With `gc_every` above 1, what was dropped is
    freed at a collection every `gc_every` allocations (the measured program asks for one
    every 8; Bun's collector collected every 150 to 170, purgecheck measure's
    `requests_per_collection`), and the loop comes to its idle point then, or with
    `per_turn` every so many allocations (the measured program: every 8). With `temp_every`,
    every so many allocations take a temporary of the same size first, dropped at once (the
    measured program's strings: `Buffer.alloc(size).toString("latin1")`, one in three). With
    `small` and `small_per_allocation`, each allocation also takes that many objects of
    `small` bytes beside it (the runtime's own objects, in small and medium pages), freed
    with it by the collection that frees it, kept with it when it is kept (docs/measure.md:
    why the comparison does not use them)."""
    rng = random.Random(seed)
    def objects(i: int) -> list[int]:  # the small objects' names of allocation i
        return _small_names(i, small_per_allocation if small else 0, -(1 << 40))

    t = 0.0
    live: list[int] = []
    dropped: list[int] = []
    for i in range(allocations):
        size = rng.randrange(lo, hi + 1, 16)
        if temp_every and i % temp_every == temp_every - 1:
            yield Call(t, 1, "malloc", -1 - i, size)
            dropped.append(-1 - i)
        yield Call(t, 1, "malloc", i, size, request=gc_every > 1)
        for name in objects(i):
            yield Call(t, 1, "malloc", name, small)
        if rng.randrange(keep_every) != 0:
            live.append(i)
        if len(live) > lifetime:
            dropped.append(live.pop(0))
        if (i + 1) % gc_every == 0:
            for name in dropped:
                yield Call(t, 1, "free", name)
                yield from (Call(t, 1, "free", o) for o in objects(name) if name >= 0)
            dropped.clear()
            if gc_every > 1 and not per_turn:
                yield Call(t, 1, "loop")
        if per_turn and (i + 1) % per_turn == 0:
            yield Call(t, 1, "loop")
        if gc_every == 1 and not per_turn:
            yield Call(t, 1, "loop", request=True)
        t += think_ms
    live.extend(dropped)
    for name in live:
        yield Call(t, 1, "free", name)
        yield from (Call(t, 1, "free", o) for o in objects(name) if name >= 0)


def buffer_loop(seconds: float = 3.0, size: int = 256 * KiB, batch: int = 8,
                step_ms: float = 1.0, kept: int = 1, free_late: int = 0,
                gc_every: int = 1) -> Iterator[Call]:
    """A loop that frees and takes `size`-byte buffers (seed: 256 KiB, 3 s): each round frees
    the `batch` buffers of the round before, comes to its idle point (where it sweeps
    inline, at most every 100 ms), and takes `batch` new ones; a round every `step_ms`.
    `kept` buffers taken first live to the end (the rest of the program: the page stays in
    use). The case that broke "deferring in the handoff only" (seed: 58 MB discarded in 3 s).
    With `free_late` the buffers of the round before are freed after the new ones are taken
    (a collector that frees them once the round has allocated: the measured Bun program),
    and the loop comes to its idle point at the end of the round; with `gc_every` above 1
    the collector frees the buffers of that many rounds at once (Bun's: every 5 rounds or
    so, purgecheck measure's `requests_per_collection`)."""
    t, n = 0.0, kept
    for name in range(kept):
        yield Call(t, 1, "malloc", name, size)
    held: list[int] = []
    garbage: list[int] = []
    rounds = 0
    while t < seconds * 1000:
        if not free_late:
            for name in held:
                yield Call(t, 1, "free", name)
            yield Call(t, 1, "loop", request=True)
        old, held = held, list(range(n, n + batch))
        for name in held:
            yield Call(t, 1, "malloc", name, size)
        rounds += 1
        if free_late:
            garbage.extend(old)
            if rounds % gc_every == 0:
                for name in garbage:
                    yield Call(t, 1, "free", name)
                garbage.clear()
            yield Call(t, 1, "loop", request=True)
        n += batch
        t += step_ms
    held.extend(garbage)
    for name in held:  # the kept buffers live on through the idle (buffer-loop.js keeps them)
        yield Call(t, 1, "free", name)


def make_workload(name: str, idle_ms: float | None = None, **overrides) -> Workload:
    """The named workload with its parameters (overrides replace the defaults; `idle_ms` the
    length of the idle after the load); a ValueError names the known workloads or
    parameters."""
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}; expected one of {', '.join(WORKLOADS)}")
    gen, description, idle, default_idle_ms, defaults = WORKLOADS[name]
    known = _parameters(gen)
    for k in overrides:
        if k not in known:
            raise ValueError(f"workload {name} has no parameter {k!r}; it has "
                             f"{', '.join(known)}, idle_ms")
    for k, v in overrides.items():
        check_parameter(name, k, v)
    params = {**known, **defaults, **overrides}
    if "lo" in params and params["lo"] > params["hi"]:
        raise ValueError(f"workload {name}: lo ({params['lo']}) must not be above hi "
                         f"({params['hi']})")
    if "step_ms" in params:  # a round every step_ms: its count comes from two times
        rounds = -(-params["seconds"] * 1000 // params["step_ms"])
        if rounds * params["batch"] > MAX_ALLOCATIONS:
            raise ValueError(f"workload {name}: seconds / step_ms x batch is "
                             f"{rounds * params['batch']:,.0f} allocations, more than "
                             f"{MAX_ALLOCATIONS:,} (a longer step_ms or a smaller batch)")
    if idle_ms is not None:
        check_parameter(name, "idle_ms", idle_ms)
    return Workload(name, description, lambda: gen(**params), idle,
                    default_idle_ms if idle_ms is None else idle_ms, params)


GiB = 1 << 30
MAX_ALLOCATIONS = 10_000_000  # what `requests` and `allocations` allow, for every workload
# Every parameter's range (lo, hi, integer only): a size up to 1 GiB, since residency is per
# OS page and a block costs its size / 4 KiB; counts up to ten million calls.
PARAMETER_RANGES = {
    "requests": (0, MAX_ALLOCATIONS, True), "allocations": (0, MAX_ALLOCATIONS, True),
    "kept": (0, 10_000_000, True), "inflight": (1, 100_000, True), "threads": (1, 1024, True),
    "batch": (1, 100_000, True), "gc_every": (1, 100_000, True), "per_turn": (1, 100_000, False), "free_late": (0, 1, True), "keep_every": (1, 1_000_000, True),
    "temp_every": (0, 1_000_000, True), "survivors": (0, 1_000, False),
    "major_every": (0, 10_000_000, True), "small": (0, GiB, True),
    "small_per_request": (0, 100_000, True), "small_per_allocation": (0, 100_000, True),
    "park_share": (0, 0.99, False),
    "lifetime": (0, 1_000_000, True), "pause_every": (0, 10_000_000, True),
    "seed": (-(1 << 63), (1 << 63) - 1, True),
    "body": (1, GiB, True), "size": (1, GiB, True), "lo": (1, GiB, True), "hi": (1, GiB, True),
    "think_ms": (0, 1e7, False), "pause_ms": (0, 1e7, False), "step_ms": (0.001, 1e7, False),
    "seconds": (0, 36_000, False), "idle_ms": (0, 1e9, False),
}


def check_parameter(workload: str, name: str, value) -> None:
    """A ValueError naming the parameter and its range when `value` is outside it."""
    lo, hi, integer = PARAMETER_RANGES.get(name, (-1e12, 1e12, False))
    if integer and (not isinstance(value, int) or isinstance(value, bool)):
        raise ValueError(f"workload {workload}: {name} must be an integer in {lo}..{hi}, "
                         f"found {value!r}")
    if not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise ValueError(f"workload {workload}: {name} must be in {lo:g}..{hi:g}, found "
                         f"{value!r}")


def _parameters(gen) -> dict:
    """A generator's parameters with their defaults."""
    import inspect
    return {k: p.default for k, p in inspect.signature(gen).parameters.items()}


# name -> (generator, what it is, idle behaviour, idle after the load in ms, parameters that
# differ from the generator's defaults)
WORKLOADS: dict[str, tuple] = {
    "bun-serve": (bun_serve, "Bun.serve, 256 KiB request bodies, 40 kept; the event loop parks "
                             "between requests; then 15 s idle", "park", 15_000, {}),
    "bun-serve-nothing-kept": (bun_serve, "the same server with no body kept (4 live to the "
                                          "end: the seed's 1.1 MB still live), then 15 s idle",
                               "park", 15_000, {"kept": 4}),
    "typed-arrays": (typed_arrays, "100..500 KiB typed arrays, strings and Buffers, 1 in 12 "
                                   "kept, then 2 s idle", "park", 2_000, {}),
    "buffer-loop": (buffer_loop, "a loop that frees and takes 256 KiB buffers for 3 s, "
                                 "sweeping inline at most every 100 ms", "inline", 1_000, {}),
}
