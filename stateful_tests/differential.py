"""Differential fuzzing: Hypothesis writes op scripts, the model and the C reference run them.

`differential_examples()` draws the options of a run (a design of the seed, the OS page, the
target, the interval, ...) and an op script over several pages and threads on the virtual
clock: allocations of every page kind, owner and cross-thread frees, double frees, walks,
inline sweeps, parks and scavenger passes, abandoned and reclaimed pages, failed discards.
`check_example` runs one through both sides and fails with the first divergence and a command
that replays it; the traces include which OS pages are resident after every sweep.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hypothesis import strategies as st

from model.geometry import ARCH32, ARCH64
from model.variants import VARIANTS
from model.world import Options
from model.epoch import ADVANCE_PCS as ADVANCE_STEPS
from stateful_tests.world_machine import request_sizes

THREADS = (1, 2, 3)
CLOCK_STEPS_MS = (1, 10, 50, 99, 100, 101, 250)
# Op kinds, most common first (Hypothesis shrinks toward the front of the list).
KINDS = ("malloc",) * 4 + ("burst",) * 3 + ("free",) * 4 + ("free_some",) * 2 + (
    "idle",) * 3 + ("clock",) * 3 + ("walk", "walk", "zalloc", "realloc", "collect", "pending",
    "park", "unpark", "scavenge", "scavenger", "abandon", "reclaim", "double_free",
    "fail_discard", "heap_destroy", "heap_delete", "epoch_skip", "fork",
    # issue 20: holes between live small blocks (the walk's kept blocks, in order), names and
    # pages used again on purpose, and the rare paths inside an advance
    "holes", "holes", "rebind", "refill", "stale_free", "fork_at", "clock_at", "clock_back")
# The strategies are made once: a strategy made anew for every draw costs Hypothesis more
# than the draw. A choice among what the script has so far is an index modulo its length
# (it shrinks toward the first).
# Each is also kept as the values it draws from (CHOICES), so that a random source can draw
# the same alphabet without Hypothesis (RandomDraw: the long campaigns).
CHOICES: dict[int, tuple] = {}


def _choice(values: tuple):
    strategy = st.sampled_from(values)
    CHOICES[id(strategy)] = values
    return strategy


def _between(lo: int, hi: int):
    strategy = st.integers(lo, hi)
    CHOICES[id(strategy)] = range(lo, hi + 1)
    return strategy


KIND = _choice(KINDS)
THREAD = _choice(THREADS)
CLOCK_STEP = _choice(CLOCK_STEPS_MS)
INDEX = _between(0, 1 << 16)
BOOL = _choice((False, True))
BURST = _between(2, 8)
PARK_PASSES = _between(0, 3)
SCAVENGER_MS = _choice((50, 100, 400))
FAILURES = _between(1, 2)
# one epoch, the wraparound of the 32-bit stamp, and half of it (an age of 2^31: a signed
# 32-bit difference reads it as negative, i.e. young)
SKIP = _choice((1, (1 << 32) - 1, 1 << 31))
STEP = _choice((2, 3))
ADVANCE_STEP = _choice(ADVANCE_STEPS)
AT_CLOCK_MS = _choice((1, 5, 50, 100, -1, -20, -150))
HOLES = _between(8, 24)


def _pick(draw, items):
    """One of `items` (a sequence the script built so far)."""
    return items[draw(INDEX) % len(items)]


@dataclass
class ScriptState:
    """What the generator knows of the script so far, to write ops that mostly make sense
    (a free names a live block, a reclaim an abandoned page)."""

    owner: dict[str, int] = field(default_factory=dict)  # live name -> thread of its heap
    freed: list[str] = field(default_factory=list)
    abandoned: set[str] = field(default_factory=set)
    parked: set[int] = field(default_factory=set)
    bursts: list[list[str]] = field(default_factory=list)  # names allocated together
    lines: list[str] = field(default_factory=list)
    monotone: bool = True  # the options' clock: a step back only when it is not


def _draw_op(draw, s: ScriptState, n: int, sizes: tuple[int, ...]) -> None:
    kind = draw(KIND)
    t = draw(THREAD)
    live = sorted(s.owner)
    if kind == "unpark" and s.parked:
        t = _pick(draw, sorted(s.parked))
    if t in s.parked and kind not in ("unpark", "pending", "scavenge", "scavenger", "clock"):
        kind = "unpark"  # a parked thread comes back before it does anything else
    if kind == "burst":
        # several blocks of one size: pages with live neighbours, where holes can open
        size, count = _pick(draw, sizes), draw(BURST)
        names = [f"n{n}_{k}" for k in range(count)]
        s.lines += [f"{t} malloc {name} {size}" for name in names]
        s.owner.update({name: t for name in names})
        s.bursts.append(names)
    elif kind == "free_some" and s.bursts:
        # every other (or every third) block of a burst, by its owner or another thread
        names = _pick(draw, s.bursts)
        step, by_owner = draw(STEP), draw(BOOL)
        for name in names[1::step]:
            if name in s.owner:
                s.lines.append(f"{s.owner[name] if by_owner else t} free {name}")
                del s.owner[name]
                s.abandoned.discard(name)
                s.freed.append(name)
    elif kind in ("malloc", "zalloc", "burst", "free_some") or (
            kind in ("free", "realloc") and not live):
        name = f"n{n}"
        size = _pick(draw, sizes)
        if kind == "malloc" and len(s.lines) % 5 == 4:  # issue 21: one in five at 16 KiB
            # alignment (JSC's MarkedBlock), chosen without a draw as collect_force is
            s.lines.append(f"{t} malloc_aligned {name} {size} 16384")
        else:
            s.lines.append(f"{t} {'zalloc' if kind == 'zalloc' else 'malloc'} {name} {size}")
        s.owner[name] = t
    elif kind == "free":
        name = _pick(draw, live)
        by = s.owner[name] if draw(BOOL) else t  # the owner, or maybe another thread
        s.lines.append(f"{by} free {name}")
        del s.owner[name]
        s.abandoned.discard(name)
        s.freed.append(name)
    elif kind == "realloc":
        name = _pick(draw, live)
        s.lines.append(f"{t} realloc {name} n{n} {_pick(draw, sizes)}")
        del s.owner[name]
        s.abandoned.discard(name)
        s.owner[f"n{n}"] = t
    elif kind == "double_free" and s.freed:
        s.lines.append(f"{t} free {_pick(draw, s.freed)}")
    elif kind == "holes":
        # a burst of small blocks, then a run inside it and one block beside it freed: units
        # that lie in free blocks only go, the blocks next to live ones stay on the free list
        # (the walk's rebuild decides their order)
        size = min(sizes)
        count = draw(HOLES)
        names = [f"n{n}_{k}" for k in range(count)]
        s.lines += [f"{t} malloc {name} {size}" for name in names]
        s.owner.update({name: t for name in names})
        s.bursts.append(names)
        lo = draw(INDEX) % (count // 2)
        for name in names[lo + 1:lo + 1 + count // 2] + names[lo:lo + 1:]:
            s.lines.append(f"{t} free {name}")
            del s.owner[name]
            s.freed.append(name)
        s.lines.append(f"{t} {'walk' if draw(BOOL) else 'idle'}")
    elif kind == "rebind" and s.freed:
        # a freed name is given to a new block (a name used again is a new allocation)
        name = s.freed.pop(draw(INDEX) % len(s.freed))
        s.lines.append(f"{t} malloc {name} {_pick(draw, sizes)}")
        s.owner[name] = t
    elif kind == "refill" and s.bursts:
        # as many blocks again as a burst had, of its size: they take the blocks (and the
        # purged units) the burst's frees left on its pages
        names = _pick(draw, s.bursts)
        size_line = next(line for line in s.lines if line.split()[2:3] == [names[0]]
                         and line.split()[1] in ("malloc", "zalloc"))
        size = size_line.split()[3]
        for k in range(len(names)):
            name = f"n{n}_r{k}"
            s.lines.append(f"{t} malloc {name} {size}")
            s.owner[name] = t
    elif kind == "stale_free" and s.freed:
        # a free through a freed name, after mallocs that may have been handed its block
        # again (docs/op-script.md, "Stale names")
        for k in range(draw(BURST)):
            name = f"n{n}_s{k}"
            s.lines.append(f"{t} malloc {name} {_pick(draw, sizes)}")
            s.owner[name] = t
        s.lines.append(f"{t} free {_pick(draw, s.freed)}")
    elif kind == "fork_at":
        s.lines.append(f"{t} fork_at {draw(ADVANCE_STEP)}")
    elif kind == "clock_at":
        ms = draw(AT_CLOCK_MS)
        s.lines.append(f"clock_at {draw(ADVANCE_STEP)} {ms if ms > 0 or not s.monotone else -ms}")
    elif kind == "clock_back":
        ms = draw(CLOCK_STEP)
        s.lines.append(f"clock {-ms if not s.monotone else ms}")
    elif kind == "clock":
        s.lines.append(f"clock {draw(CLOCK_STEP)}")
    elif kind == "scavenger":
        s.lines.append(f"scavenger {draw(SCAVENGER_MS)}")
    elif kind == "fail_discard":
        s.lines.append(f"fail_discard {draw(FAILURES)}")
    elif kind == "epoch_skip":
        s.lines.append(f"epoch_skip {draw(SKIP)}")
    elif kind == "scavenge":
        s.lines.append("scavenge")
    elif kind == "abandon":
        s.lines.append(f"{t} abandon")
        s.abandoned |= {name for name, o in s.owner.items() if o == t}
    elif kind == "reclaim" and s.abandoned:
        name = _pick(draw, sorted(s.abandoned))
        s.lines.append(f"{t} reclaim {name}")
        s.abandoned.clear()  # other names may have shared that page: forget them all
    elif kind == "heap_destroy":
        s.lines.append(f"{t} heap_destroy")
        for name in [name for name, o in s.owner.items() if o == t]:
            del s.owner[name]
            s.abandoned.discard(name)
    elif kind == "heap_delete":
        s.lines.append(f"{t} heap_delete")
        s.owner.update({name: 0 for name, o in s.owner.items() if o == t})
    elif kind == "park":
        # park, and let the scavenger sweep the park a few times as time goes by
        s.lines.append(f"{t} park")
        s.parked.add(t)
        for _ in range(draw(PARK_PASSES)):
            s.lines += [f"clock {draw(CLOCK_STEP)}", "scavenge"]
        if draw(BOOL):
            s.lines.append(f"scavenger {draw(SCAVENGER_MS)}")
    elif kind == "unpark":
        s.lines.append(f"{t} unpark")
        s.parked.discard(t)
    elif kind == "collect":  # mi_collect(false), or every other time mi_collect(true) (issue
        # 21; chosen without a draw, so that the scripts a seed gives stay the same otherwise)
        s.lines.append(f"{t} {'collect_force' if len(s.lines) % 2 else 'collect'}")
    elif kind in ("walk", "idle", "pending", "fork"):
        s.lines.append(f"{t} {kind}")


# The options of a run: mostly the defaults, sometimes a rejected design of the seed, another
# OS page, 32-bit, an offset first block, the hold off, full sweeps often, a clock that may go
# back.
OPTION_CHOICES = {
    "variant": _choice(VARIANTS),
    "os_page_size": _choice((4096, 4096, 4096, 16384, 65536)),
    "arch": _choice((ARCH64, ARCH64, ARCH64, ARCH32)),
    "first_block_offset": _choice((0, 0, 192)),
    "purge_holes_min_interval": _choice((100, 100, 50, 0)),
    "purge_holes_full_every": _choice((64, 64, 2, 3)),
    "sweep_ms": _choice((0, 0, 30)),
    "stale_epochs": _choice((0, 0, 0, 1)),
    "clock_monotone": _choice((True, True, True, False)),
}


def draw_options(draw) -> Options:
    return Options(**{name: draw(strategy) for name, strategy in OPTION_CHOICES.items()})


@st.composite
def differential_options(draw) -> Options:
    """The configuration of one run (OPTION_CHOICES)."""
    return draw_options(draw)


@st.composite
def op_scripts(draw, options: Options, max_ops: int = 40) -> str:
    """An op script for `options`: up to `max_ops` ops over THREADS."""
    # a few sizes per script, so that blocks share pages
    sizes = tuple(draw(st.lists(st.sampled_from(request_sizes(options.arch)), min_size=1,
                                max_size=3, unique=True)))
    return build_script(draw, options, sizes, draw(st.integers(1, max_ops)))


def build_script(draw, options: Options, sizes: tuple[int, ...], ops: int) -> str:
    s = ScriptState(monotone=options.clock_monotone)
    for n in range(ops):
        _draw_op(draw, s, n, sizes)
    return "".join(line + "\n" for line in s.lines)


class RandomDraw:
    """`draw` for the generator's own strategies from a random.Random, without Hypothesis
    (no shrinking, no bookkeeping: several times the scripts per second). The campaign's
    script number `index` of `seed` is rebuilt by `random_example(seed, index)`."""

    def __init__(self, rng) -> None:
        self.rng = rng

    def __call__(self, strategy):
        return self.rng.choice(CHOICES[id(strategy)])


def random_example(seed: int, index: int, max_ops: int = 40) -> tuple[Options, str]:
    """(options, script) number `index` of a campaign with `seed`: the same every time."""
    import random

    rng = random.Random(f"{seed}:{index}")
    draw = RandomDraw(rng)
    options = draw_options(draw)
    pool = request_sizes(options.arch)
    sizes = tuple(rng.sample(pool, rng.randint(1, min(3, len(pool)))))
    return options, build_script(draw, options, sizes, rng.randint(1, max_ops))


@st.composite
def differential_examples(draw, max_ops: int = 40, variant: str | None = None
                          ) -> tuple[Options, str]:
    """(options, script): one differential example. `variant` fixes the design."""
    options = draw(differential_options())
    if variant is not None:
        options = replace(options, variant=variant)
    return options, draw(op_scripts(options, max_ops))


def check_example(driver, options: Options, text: str, observe: str = "sweeps",
                  mutant: str | None = None, coverage=None) -> int:
    """Run one script on the model and the C driver; AssertionError (with the divergence
    and a replay command) when their traces differ. Returns the number of events; counts
    what the script reached in `coverage` (purgecheck.conformance.Coverage) when given."""
    from purgecheck.conformance import diff_script, format_divergence, save_failure

    result = diff_script(text, options, driver, mutant=mutant, observe=observe)
    if coverage is not None:
        coverage.add(text, result.model[1])
    if not result.equal:
        path, replay = save_failure(text, options, mutant, observe)
        raise AssertionError(f"model and C differ on {path}:\n"
                             f"{format_divergence(result.divergence)}\nreplay: {replay}")
    return len(result.model[1])


@dataclass
class FuzzRun:
    examples: int = 0
    events: int = 0
    failure: str | None = None  # the first divergence, with its replay command
    coverage: object = None  # purgecheck.conformance.Coverage: the ops and event kinds reached
    divergences: int = 0  # a campaign goes on after one: how many scripts diverged
    failures: list = field(default_factory=list)  # a campaign's first few, with replays
    seconds: float = 0.0


def run_fuzz(driver, examples: int, seed: int = 0, max_ops: int = 40,
             observe: str = "sweeps", mutant: str | None = None,
             progress=None) -> FuzzRun:
    """Run `examples` differential examples (Hypothesis, seeded: the same examples for the
    same seed) through the model and `driver`; stop at the first divergence, shrunk."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as hypothesis_seed
    from purgecheck.conformance import Coverage

    run = FuzzRun(coverage=Coverage())

    @hypothesis_seed(seed)
    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(differential_examples(max_ops=max_ops))
    def one(example):
        options, text = example
        run.examples += 1
        run.events += check_example(driver, options, text, observe, mutant, run.coverage)
        if progress is not None:
            progress(run)

    try:
        one()
    except AssertionError as e:
        run.failure = str(e)
    return run


def run_campaign(driver, scripts: int, seed: int = 0, max_ops: int = 40,
                 seconds: float | None = None, mutant: str | None = None,
                 progress=None, keep: int = 5, stop: bool = False) -> FuzzRun:
    """A long differential campaign: scripts `random_example(seed, i)` for i = 0, 1, ...
    (no Hypothesis: no shrinking, several times the scripts per second), until `scripts` or
    `seconds` run out. It goes on after a divergence (unless `stop`); the first `keep` are
    saved, each with the command that replays it, and all are counted."""
    import time

    from purgecheck.conformance import Coverage

    run = FuzzRun(coverage=Coverage())
    t0 = time.perf_counter()
    for i in range(scripts):
        if seconds is not None and time.perf_counter() - t0 > seconds:
            break
        options, text = random_example(seed, i, max_ops)
        run.examples += 1
        try:
            run.events += check_example(driver, options, text, mutant=mutant,
                                        coverage=run.coverage)
        except AssertionError as e:
            run.divergences += 1
            if len(run.failures) < keep:
                run.failures.append(f"campaign seed {seed} script {i}: {e}")
            run.failure = run.failure or run.failures[0]
            if stop:
                break
        if progress is not None:
            progress(run)
    run.seconds = time.perf_counter() - t0
    return run
