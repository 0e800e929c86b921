"""Differential conformance: the same op script through the model and the C reference.

The C driver (reference_c/build/driver) runs as one persistent process that takes script
after script on stdin and answers each with a whole trace; the model's trace comes from
purgecheck.formats.trace. `compare` walks two traces in step and reports the first event where they
differ, with the events before it and the model's state there.
"""

from __future__ import annotations

import collections
import itertools
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import orjson

from model.world import Options
from purgecheck.cbuild import BuildError, BuildInfo, ensure_current
from purgecheck.formats.ops import Op, parse_script
from purgecheck.formats.trace import (EVENT_TYPES, Trace, TraceError, canonical_config, canonical_line,
                              model_trace, options_of, parse_lines, read_stream_trace)

ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = ROOT / "reference_c" / "build"
OP_EVENT = EVENT_TYPES["op"]
BUILDS = {"release": "driver", "asan": "driver_asan", "tsan": "driver_tsan",
          "nostamp": "driver_nostamp"}


class DriverError(Exception):
    """The C driver is missing, or stopped without answering: one line that says what to do."""


def driver_path(build: str = "release") -> Path:
    """The driver binary of `build`, brought up to date with reference_c's sources first
    (purgecheck/cbuild.py: make's dependency check; the build is recorded in cbuild.RAN)."""
    return ensure_driver(build)[0]


def ensure_driver(build: str = "release") -> tuple[Path, BuildInfo]:
    """The driver binary of `build`, up to date, and which build it is."""
    if build not in BUILDS:
        raise DriverError(f"unknown build {build!r}; expected one of {', '.join(BUILDS)}")
    path = BUILD_DIR / BUILDS[build]
    try:
        info = ensure_current(path)
    except BuildError as e:
        raise DriverError(str(e)) from None
    if not os.access(path, os.X_OK):
        raise DriverError(f"{path} is not built: run `make -C reference_c`")
    return path, info


def c_switch(mutant: str) -> str:
    """The C driver's switch for a mutant named either way: `age-lt-1` or `age_lt_1`."""
    from purgecheck.mutants import MUTANTS
    m = MUTANTS.get(mutant)
    if m is not None:
        if not m.c_switch:
            raise DriverError(f"mutant {mutant!r} has no C switch (c_switch is None)")
        return m.c_switch
    if mutant in {m.c_switch for m in MUTANTS.values()}:
        return mutant
    raise DriverError(f"unknown mutant {mutant!r}; expected one of "
                      f"{', '.join(n for n, m in MUTANTS.items() if m.c_switch)}")


def options_line(options: Options, observe: str = "sweeps", mutant: str | None = None,
                 clock: str = "virtual") -> str:
    """The `%options` line that tells the driver the model's Options (docs/trace-format.md)."""
    o = options
    words = [f"interval={o.purge_holes_min_interval}", f"os_page={o.os_page_size}",
             f"arch={o.arch.bits}", f"offset={o.first_block_offset}",
             f"full_every={o.purge_holes_full_every}", f"purge_delay={o.purge_delay}",
             f"purge_holes={int(o.purge_holes)}", f"variant={o.variant}",
             f"stale_epochs={o.stale_epochs}", f"sweep_ms={o.sweep_ms}",
             f"monotone={int(o.clock_monotone)}", f"clock_start={o.clock_start_ms}",
             f"observe={observe}", f"clock={clock}"]
    if mutant:
        words.append(f"mutant={c_switch(mutant)}")
    return "%options " + " ".join(words)


def script_payload(text: str) -> str:
    """The script as the driver reads it: lines split at "\n" only, as parse_script splits
    them (so line numbers agree), no `---` inside (a valid script has none: it would not
    parse)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "".join(line + "\n" for line in lines)


class CDriver:
    """One persistent C driver process: `run` sends a script and returns its trace."""

    def __init__(self, build: str = "release", extra_args: tuple[str, ...] = ()) -> None:
        self.build = build
        self.path, self.info = ensure_driver(build)
        self.extra_args = extra_args
        self.scripts = 0
        self.crashes = 0
        self._start()

    def _start(self) -> None:
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([str(self.path), *self.extra_args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.stderr, bufsize=1 << 16)
        self.stdout = self.proc.stdout

    def run(self, text: str, options: Options, observe: str = "sweeps",
            mutant: str | None = None, clock: str = "virtual") -> tuple[dict, list[dict]]:
        """Run one script; its trace (header, events)."""
        self.send(text, options, observe, mutant, clock)
        return self.receive()

    def send(self, text: str, options: Options, observe: str = "sweeps",
             mutant: str | None = None, clock: str = "virtual") -> None:
        """Hand the driver a script; it runs while the caller does something else (the
        model's run of the same script), and `receive` collects the trace."""
        payload = (options_line(options, observe, mutant, clock) + "\n" + script_payload(text)
                   + "---\n")
        self.scripts += 1
        if self.proc.poll() is not None:  # it crashed on an earlier script: start it again
            self.close()
            self._start()
        try:
            self.proc.stdin.write(payload.encode())
            self.proc.stdin.flush()
        except BrokenPipeError as e:
            self._crashed(e)

    def receive(self) -> tuple[dict, list[dict]]:
        try:
            return read_stream_trace(self._readline, self._source())
        except EOFError as e:
            self._crashed(e)

    def _source(self) -> str:
        return f"{self.path.name} (script {self.scripts})"

    def _crashed(self, e: Exception):
        self.crashes += 1
        try:
            status = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            status = self.proc.wait()
        raise DriverError(f"{self._source()} stopped: {e}; exit status {status}; "
                          f"stderr: {self._stderr_tail()}") from None

    def _readline(self) -> bytes:
        return self.stdout.readline()

    def _stderr_tail(self) -> str:
        self.stderr.seek(0)
        return self.stderr.read()[-2000:].decode("utf-8", "replace").strip() or "(empty)"

    def close(self) -> str:
        """Stop the driver; returns what it wrote on stderr (sanitizer reports land there).
        Closing twice is harmless."""
        if self.stderr.closed:
            return ""
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        self.proc.wait(timeout=60)
        self.stdout.close()
        tail = self._stderr_tail()
        self.stderr.close()
        return "" if tail == "(empty)" else tail

    def __enter__(self) -> "CDriver":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- comparing two traces -----------------------------------------------------------------------

@dataclass
class Divergence:
    """Where two traces first differ. `index` counts events after the header from 0 (-1: the
    headers' configurations differ); an event is None where that trace had already ended."""

    index: int
    a: dict | None
    b: dict | None
    before: list[dict] = field(default_factory=list)
    op: dict | None = None  # the last `op` event before the divergence
    state: str = ""  # the model's state before that op (filled in by `explain`)


def compare(a_header: dict, a_events: Iterable[dict], b_header: dict,
            b_events: Iterable[dict], context: int = 5) -> Divergence | None:
    """Compare two traces in canonical form, streaming; the first divergence or None. Both
    iterators are read to their end (so a malformed tail is still reported)."""
    if canonical_config(a_header) != canonical_config(b_header):
        return Divergence(-1, {"config": canonical_config(a_header)},
                          {"config": canonical_config(b_header)})
    window: collections.deque = collections.deque(maxlen=context)
    op = None
    ia, ib = iter(a_events), iter(b_events)
    index = 0
    while True:
        ea, eb = next(ia, None), next(ib, None)
        if ea is None and eb is None:
            return None
        if ea is None or eb is None or (ea != eb and canonical_line(ea) != canonical_line(eb)):
            for _ in itertools.chain(ia, ib):  # read both to the end: a bad tail is reported
                pass
            return Divergence(index, ea, eb, list(window), op)
        if ea["ev"] == "op":
            op = ea
        window.append(ea)
        index += 1


def compare_traces(ta: Trace, tb: Trace, context: int = 5) -> tuple[Divergence | None, int]:
    """`compare` for two traces being read (purgecheck.formats.trace.read_trace), streaming: the
    first divergence or None, and how many events trace A has. A batch of lines that is byte
    for byte the same in both (the model and the C write alike) holds events equal in
    canonical form that would check alike: they are decoded and checked once, for A, and B's
    reader takes up A's state before it next reads a line itself. Elsewhere each side is
    checked and the events are compared in canonical form, as `compare` does. Both traces
    are read to their end (so a malformed tail is still reported)."""
    if canonical_config(ta.header) != canonical_config(tb.header):
        return Divergence(-1, {"config": canonical_config(ta.header)},
                          {"config": canonical_config(tb.header)}), 0
    window: collections.deque = collections.deque(maxlen=context)  # raw lines before
    op = None  # the raw line of the last op event
    index = 0  # events compared equal
    cut: list[TraceError] = []  # B's last line is cut short: said once its lines are checked
    b_lines = _until_error(tb.lines, cut)
    pending: list[bytes] = []  # B's lines read but not yet paired with A's
    b_next = 2  # the number of B's next line
    b_behind = False  # B's reader has not read lines A's has checked for both
    div = None
    for first, la in ta.lines:
        while len(pending) < len(la):
            more = next(b_lines, None)
            if more is None:
                break
            pending += more[1]
        lb = pending[:len(la)]
        del pending[:len(la)]
        b_next += len(lb)
        if la == lb:
            evs = ta.check(first, la)
            b_behind = True
        else:
            if b_behind:
                tb.caught_up(ta)
                b_behind = False
            evs = ta.check(first, la)
            div = _first_difference(index, la[:len(evs)], lb[:len(tb.check(first, lb))],
                                    first, (ta.source, tb.source), window, op)
            if div is not None:
                break
        n = len(evs)
        index += n
        window.extend(la[max(0, n - context):n])
        if OP_EVENT in map(type, evs):
            op = la[next(i for i in range(n - 1, -1, -1) if type(evs[i]) is OP_EVENT)]
    for first, la in ta.lines:  # after a divergence: the rest of A
        ta.check(first, la)
    ta.finish()
    if b_behind:
        tb.caught_up(ta)
    for first, lb in itertools.chain([(b_next, pending)] if pending else [],
                                     b_lines):  # the rest of B
        evs = tb.check(first, lb)
        if evs and div is None:  # B goes on where A has ended
            div = _first_difference(index, [], lb[:len(evs)], first, (ta.source, tb.source),
                                    window, op)
    if cut:
        raise cut[0]
    tb.finish()
    return div, ta.validator.count


def _until_error(lines, errors: list) -> Iterator:
    """The batches of lines, then the error that ended them (a truncated last line) is put in
    `errors` instead of raised, so that the lines before it are checked first."""
    try:
        yield from lines
    except TraceError as e:
        errors.append(e)


def _first_difference(index: int, la: list[bytes], lb: list[bytes], first: int,
                      sources: tuple[str, str], window: collections.deque,
                      op: bytes | None) -> Divergence | None:
    """The first of two runs of checked event lines (`index` events before them were equal,
    the last of them in `window`, the last op before them `op`) whose events differ in
    canonical form; one run may be shorter (its trace ended)."""
    da, db = parse_lines(first, la, sources[0]), parse_lines(first, lb, sources[1])
    for i in range(max(len(da), len(db))):
        ea = da[i] if i < len(da) else None
        eb = db[i] if i < len(db) else None
        if ea is None or eb is None or (la[i] != lb[i] and ea != eb
                                        and canonical_line(ea) != canonical_line(eb)):
            before = [orjson.loads(line) for line in window] + da[:i]
            ops = [ev for ev in da[:i] if ev["ev"] == "op"]
            last_op = ops[-1] if ops else orjson.loads(op) if op else None
            keep = window.maxlen or 0
            return Divergence(index + i, ea, eb, before[max(0, len(before) - keep):], last_op)
    return None


def explain(div: Divergence, ops: list[Op], options: Options) -> str:
    """The model's state just before the op in which the traces diverge: the epoch, the
    clock, and each live page's lists and bitmap."""
    from purgecheck.runner import HANDLERS, Run
    from model.world import World

    stop = div.op["line"] if div.op else None
    run = Run(World(options))
    for op in ops:
        if op.line == stop:
            break
        try:
            HANDLERS[op.name](run, op)
        except Exception as e:  # the state before a failing op is still worth showing
            return f"(the model stopped at line {op.line}: {e})"
    w = run.world
    lines = [f"epoch {w.epoch.epoch} (began {w.epoch.start} ms), clock {w.clock.read()} ms, "
             f"abandoned pages {w.abandoned}"]
    for t in sorted(w.threads.values(), key=lambda t: t.id):
        lines.append(f"thread {t.id}: park {t.park_state} swept {t.park_swept}, sweeps "
                     f"{t.holes_sweep_seq}, deferred {t.holes_sweep_deferred}, last sweep "
                     f"{t.holes_sweep_last} ms, sweep epoch {t.holes_sweep_epoch}")
    for page in w.live_pages():
        s = page.snapshot()
        lines.append(
            f"page {page.id} ({page.geom.kind.value}, blocks of {page.block_size} B, unit "
            f"{page.unit} B, owner {page.owner}{', abandoned' if page.abandoned else ''}): "
            f"capacity {s['capacity']}/{s['reserved']} used {s['used']} "
            f"swept_state {describe_swept_state(s['swept_state'])}")
        lines.append(f"    free {s['free']} local_free {s['local_free']} "
                     f"xthread_free {s['xthread_free']}")
        lines.append(f"    purged units {compact_runs(s['purged_units'])}")
    return "\n".join(lines)


def describe_swept_state(state: int) -> str:
    from model.page import MI_PAGE_SWEPT_NONE, is_stamp, stamp_epoch
    if state == MI_PAGE_SWEPT_NONE:
        return "NONE"
    if is_stamp(state):
        return f"stamp({stamp_epoch(state)})"
    return f"walked(capacity={state >> 32}, used={state & 0xFFFFFFFF})"


def compact_runs(units: list[int]) -> str:
    from model.holes import compute_runs
    runs = compute_runs(units)
    return "[" + ", ".join(f"{a}" if b == a + 1 else f"{a}-{b - 1}" for a, b in runs) + "]"


def _show(ev: dict | None) -> str:
    return "(the trace ended here)" if ev is None else orjson.dumps(ev).decode()


def format_divergence(div: Divergence, names: tuple[str, str] = ("model", "C")) -> str:
    w = max(len(n) for n in names)
    if div.index < 0:
        return (f"the traces were made under different configurations:\n"
                f"  {names[0]:<{w}}  {_show(div.a)}\n  {names[1]:<{w}}  {_show(div.b)}")
    where = f" (in the op at line {div.op['line']}: " \
            f"{op_text(div.op)})" if div.op else ""
    out = [f"first divergence at event {div.index}{where}:",
           f"  {names[0]:<{w}}  {_show(div.a)}", f"  {names[1]:<{w}}  {_show(div.b)}"]
    if div.before:
        out.append(f"the {len(div.before)} events before it (equal in both):")
        first = div.index - len(div.before)
        out += [f"  {first + i:>6}  {_show(ev)}" for i, ev in enumerate(div.before)]
    if div.state:
        at = f"line {div.op['line']}" if div.op else "the start"
        out.append(f"the model's state before {at}:")
        out += ["  " + line for line in div.state.splitlines()]
    return "\n".join(out)


def op_text(op: dict) -> str:
    head = [] if op["thread"] is None else [str(op["thread"])]
    return " ".join(head + [op["op"]] + [str(a) for a in op["args"]])


# -- one script, both sides ---------------------------------------------------------------------

@dataclass
class DiffResult:
    divergence: Divergence | None
    model: tuple[dict, list[dict]]
    c: tuple[dict, list[dict]]

    @property
    def equal(self) -> bool:
        return self.divergence is None


def diff_script(text: str, options: Options, driver: CDriver, mutant: str | None = None,
                observe: str = "sweeps", source: str = "<script>", context: int = 5,
                model_cached: tuple[dict, list[dict]] | None = None) -> DiffResult:
    """Run the script on the model and on the C driver; compare. Raises OpScriptError for a
    script that does not parse. `model_cached`: the model's trace when already known."""
    ops = parse_script(text, source)
    driver.send(text, options, observe, mutant)  # the C side runs meanwhile
    model = model_cached or model_trace(ops, options, observe, source)
    c = driver.receive()
    div = compare(model[0], model[1], c[0], c[1], context)
    if div is not None and div.index >= 0:
        div.state = explain(div, ops, options)
    return DiffResult(div, model, c)


def explain_traces(div: Divergence, a_events: list[dict], header: dict) -> None:
    """Fill in the model state for a divergence between two trace files, replaying the ops
    that trace A records under its header's configuration."""
    from purgecheck.formats.trace import ops_of_events
    try:
        div.state = explain(div, ops_of_events(a_events), options_of(header["config"]))
    except Exception as e:  # a trace of a configuration the model cannot take
        div.state = f"(not replayable on the model: {e})"


# -- what a differential run reached -------------------------------------------------------------

# Event kinds a sequential run on the virtual clock never writes: the steps of a linearized
# trace, and the error of a bad script (generated scripts are good ones).
NOT_SEQUENTIAL = frozenset({"advance_step", "error"})


@dataclass
class Coverage:
    """Which ops a differential run ran and which event kinds its traces had, counted, so a
    run says what it reached and what it never did (docs/conformance.md)."""

    ops: collections.Counter = field(default_factory=collections.Counter)
    events: collections.Counter = field(default_factory=collections.Counter)

    def add(self, text: str, events: Iterable[dict]) -> None:
        """A script (its text) and the model's events of it."""
        self.ops.update(op.name for op in parse_script(text))
        self.events.update(ev["ev"] for ev in events)

    def missing(self) -> tuple[list[str], list[str]]:
        """The ops never run and the event kinds never seen (of those a sequential run can
        write)."""
        from purgecheck.formats.ops import SPECS
        return (sorted(set(SPECS) - set(self.ops)),
                sorted(set(EVENT_TYPES) - NOT_SEQUENTIAL - {"end"} - set(self.events)))

    def summary(self) -> str:
        from purgecheck.formats.ops import SPECS
        ops, events = self.missing()
        kinds = len(set(EVENT_TYPES) - NOT_SEQUENTIAL - {"end"})
        text = (f"ops {len(SPECS) - len(ops)}/{len(SPECS)}, "
                f"event kinds {kinds - len(events)}/{kinds}")
        never = ops + events
        return text + (f" (never: {', '.join(never)})" if never else "")

    def to_doc(self) -> dict:
        ops, events = self.missing()
        return {"ops": dict(sorted(self.ops.items())), "events": dict(sorted(self.events.items())),
                "ops_never": ops, "events_never": events}


# -- stress scripts for the real-clock, concurrent mode (the sanitizer runs) -----------------

STRESS_SIZES = (64, 3000, 40_000, 131_072, 262_144, 400_000)


def stress_script(seed: int, threads: int = 4, ops: int = 400) -> str:
    """A script whose threads run at the same time in the driver's concurrent mode: they
    allocate, free their own blocks and each other's (a cross-thread free waits only for the
    allocation it names), sweep inline, park and leave the park while the scavenger thread
    sweeps, and at the end some exit and leave their pages to the others' sweeps."""
    import random

    rng = random.Random(seed)
    live: dict[int, list[str]] = {t: [] for t in range(1, threads + 1)}
    lines: list[str] = []
    for n in range(ops):
        t = rng.randint(1, threads)
        r = rng.random()
        if r < 0.35 or not any(live.values()):
            name = f"s{n}"
            lines.append(f"{t} {'zalloc' if rng.random() < 0.2 else 'malloc'} {name} "
                         f"{rng.choice(STRESS_SIZES)}")
            live[t].append(name)
        elif r < 0.70:
            owner = rng.choice([u for u in live if live[u]])
            name = live[owner].pop(rng.randrange(len(live[owner])))
            lines.append(f"{t} free {name}")  # the owner's free, or a cross-thread one
        elif r < 0.78:
            lines.append(f"{t} idle")
        elif r < 0.84:
            lines += [f"{t} park", f"{t} pending", f"{t} unpark"]
        elif r < 0.88 and live[t]:
            old = live[t].pop(rng.randrange(len(live[t])))
            lines.append(f"{t} realloc {old} r{n} {rng.choice(STRESS_SIZES)}")
            live[t].append(f"r{n}")
        elif r < 0.92:
            lines.append(f"{t} {rng.choice(['walk', 'collect'])}")
        elif r < 0.96:
            lines.append(f"clock {rng.randint(1, 3)}")
        else:
            lines.append("scavenge")
    for t in range(1, threads + 1):
        if t % 2 == 0:
            lines.append(f"{t} abandon")
    lines += [f"{t} idle" for t in range(1, threads + 1) if t % 2]
    return "\n".join(lines) + "\n"


def stress_options_line(interval_ms: int = 2) -> str:
    """Real clock, threads at the same time, a short interval so epochs move during a run."""
    return f"%options clock=real concurrent=1 interval={interval_ms} full_every=3"


LINEARIZED_OPTIONS = "%options clock=real concurrent=1 linearize=1 interval=2 full_every=3"


def abandon_window_script(delay_us: int = 2000, pages: int = 6, idles: int = 1000) -> str:
    """Thread 2 makes `pages` large pages and exits (`abandon`), sleeping `delay_us` between
    putting each page in the abandoned map and its `abandon` event (the driver's test hook
    abandon_delay_us, reference_c/linearize.c mi_abandon_delay); threads 1 and 3 sweep
    (`idle`) meanwhile, each from the moment thread 2's last allocations exist (a
    cross-thread free waits for the allocation it names). A sweep that takes a page from the
    map before its event is traced before the abandon: the trace validates only if the two
    are one lin step. Whether a run's sweeps overlap the exit is the scheduler's
    (abandon_overlaps counts it)."""
    lines = [f"{LINEARIZED_OPTIONS} abandon_delay_us={delay_us}"]
    lines += [f"2 malloc a{i} {262144 * (i + 1)}" for i in range(pages)]
    lines += ["2 malloc go1 64", "2 malloc go3 64", "1 malloc m1 300000", "3 malloc m3 300000",
              "1 free go1", "3 free go3"]
    lines += ["1 idle", "3 idle"] * idles
    lines.append("2 abandon")
    return "\n".join(lines) + "\n"


def linearized_script(name: str, ops: int = 1500) -> str:
    """A script of the validate engine's op-script part by name: `abandon-window`
    (abandon_window_script) or a stress seed (stress_script of `ops` ops)."""
    if name == "abandon-window":
        return abandon_window_script()
    try:
        seed = int(name)
    except ValueError:
        raise ValueError(f"expected a seed or abandon-window, got {name!r}") from None
    return LINEARIZED_OPTIONS + "\n" + stress_script(seed, ops=ops)


def abandon_overlaps(path: Path) -> int:
    """In a trace of abandon_window_script: the sweeps, by a thread other than the page's
    maker, of a page abandoned before the exit's last `abandon` event, i.e. sweeps that ran
    while the exit was putting pages in the map (the window a broken order shows in)."""
    maker: dict[int, int] = {}
    abandoned: set[int] = set()
    sweeps: list[tuple[int, int]] = []
    last = -1
    with open(path, "rb") as f:
        next(f)
        for line in f:
            e = orjson.loads(line)
            ev = e.get("ev")
            if ev == "page_new":
                maker[e["page"]] = e["tid"]
            elif ev == "abandon":
                abandoned.add(e["page"])
                last = e["lin"]
            elif ev == "sweep_page" and e["page"] in abandoned and e["tid"] != maker.get(e["page"]):
                sweeps.append((e["lin"], e["page"]))
    return sum(lin < last for lin, _ in sweeps)


def run_linearized(text: str, out: Path, build: str = "release", mutant: str | None = None,
                   timeout: float = 120) -> subprocess.CompletedProcess:
    """Run one script (its first line the `%options` of a linearized concurrent run) through
    the driver of `build`, under the C switch `mutant` if given, its trace into `out`."""
    if mutant:
        first, _, rest = text.partition("\n")
        text = f"{first} mutant={mutant}\n{rest}"
    with open(out, "wb") as f:
        return subprocess.run([str(driver_path(build)), "-"], input=text.encode(), stdout=f,
                              stderr=subprocess.PIPE, timeout=timeout)


# -- replay commands ------------------------------------------------------------------------------

# Options field -> the `purgecheck diff` flag that sets it.
DIFF_FLAGS = {"variant": "--variant", "purge_holes_min_interval": "--interval",
              "os_page_size": "--os-page", "first_block_offset": "--offset",
              "purge_holes_full_every": "--full-every", "sweep_ms": "--sweep-ms",
              "stale_epochs": "--stale-epochs"}


def option_flags(options: Options, base: Options | None = None) -> list[str]:
    """The `purgecheck diff` flags that turn `base` (default Options) into `options`."""
    base = base or Options()
    flags = [f"{flag} {getattr(options, f)}" for f, flag in DIFF_FLAGS.items()
             if getattr(options, f) != getattr(base, f)]
    if options.arch != base.arch:
        flags.append(f"--arch {options.arch.bits}")
    if not options.clock_monotone and base.clock_monotone:
        flags.append("--non-monotone")
    return flags


def replay_command(target: str, options: Options, base: Options | None = None,
                   mutant: str | None = None, observe: str = "sweeps") -> str:
    """One command that replays a diff: `target` is a script file or `--scenario NAME`."""
    words = ["purgecheck diff", target, *option_flags(options, base)]
    if mutant:
        words.append(f"--mutant {mutant}")
    if observe != "sweeps":
        words.append(f"--observe {observe}")
    return " ".join(words)


def save_failure(text: str, options: Options, mutant: str | None = None,
                 observe: str = "sweeps") -> tuple[Path, str]:
    """Keep a script whose traces differ under the state directory; returns the file and
    the command that replays it."""
    import hashlib
    from purgecheck.reports.store import state_dir

    folder = state_dir() / "failures"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"diff-{hashlib.sha1(text.encode()).hexdigest()[:12]}.ops"
    path.write_text(text)
    return path, replay_command(str(path), options, mutant=mutant, observe=observe)


def run_stress(build: str, text: str, interval_ms: int = 2, timeout: float = 120) -> tuple[bool, str]:
    """Run one stress script through a sanitizer build in the concurrent real-clock mode;
    (clean, the first line of the report or of the problem)."""
    path = driver_path(build)
    proc = subprocess.run([str(path)], input=(stress_options_line(interval_ms) + "\n" + text
                                              + "---\n").encode(),
                          capture_output=True, timeout=timeout)
    report = proc.stderr.decode("utf-8", "replace")
    if proc.returncode != 0 or "WARNING: ThreadSanitizer" in report or "ERROR:" in report:
        first = next((l for l in report.splitlines() if "WARNING" in l or "ERROR" in l),
                     report.strip()[:200] or f"exit status {proc.returncode}")
        return False, first.strip()
    if b'"ev":"error"' in proc.stdout:
        return False, "the driver reported an error event: " + next(
            l for l in proc.stdout.decode().splitlines() if '"ev":"error"' in l)
    return True, ""
