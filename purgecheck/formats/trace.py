"""The trace format both the model and the C reference write (docs/trace-format.md).

A trace is JSON Lines: a header, one event per line, an `end` event. This module defines the
events, reads traces as a stream (a chunk at a time, bounded memory; each line decoded by
msgspec into a typed event, or by orjson into a dict), writes them, gives the canonical form
that conformance compares, and turns a run of the model into a trace.
"""

from __future__ import annotations

import itertools
import re
import operator
from typing import IO, Any, Iterable, Iterator, Optional, Union

import msgspec
import orjson

from model.geometry import PageKind
from model.world import Options, World
from purgecheck.formats.ops import Op, OpScriptError

FORMAT = "purgecheck-trace"
VERSION = 1

# Every event: its name and the fields it must carry besides "ev". Every field is compared
# except those in UNCOMPARED; an event may carry more fields than listed (they are compared
# too). "page" names a page a `page_new` event introduced earlier in the same trace.
EVENTS: dict[str, tuple[str, ...]] = {
    # what the script did
    "op": ("line", "thread", "op", "args"),
    "error": ("line", "msg"),
    "clock": ("now",),
    # pages, blocks and lists (model/alloc.py, model/heap.py)
    "page_new": ("page", "page_kind", "block_size", "reserved", "unit"),
    "extend": ("page", "first", "count"),
    "malloc": ("page", "block", "zero", "src"),
    # after the malloc of a malloc_aligned op: the aligned address is OFFSET into the block
    "aligned": ("page", "block", "offset"),
    "free": ("page", "block", "thread"),
    "double_free": ("page", "block"),
    "realloc": ("page", "block", "inplace"),
    "retire": ("page",),
    "abandon": ("page",),
    "reclaim": ("page", "thread"),
    # the holes walk and unpurge (model/holes.py)
    "discard": ("page", "k0", "k1", "addr", "size", "ok"),
    "walk": ("page", "complete", "runs", "dropped"),
    "unpurge": ("page", "k0", "k1", "reuse", "blocks"),
    "unpurge_all": ("page", "runs"),
    "discard_tail": ("page", "addr", "size", "ok"),
    "reuse_tail": ("page", "addr", "size"),
    # the stamp, the epoch and the sweeps (model/stamp.py, epoch.py, sweep.py, drivers.py)
    "stamp": ("page", "epoch"),
    "epoch_advance": ("thread", "epoch", "start"),
    "epoch_skip": ("epoch",),
    # a fork (the ops fork, fork_at): what the child holds after the forked-child rule
    "fork": ("thread", "moving", "epoch", "start"),
    # one atomic step of the advance, named by its program counter in model/epoch.py, with
    # the value it read or wrote: only in linearized traces (docs/validation.md)
    "advance_step": ("pc", "value"),
    "sweep_begin": ("thread", "seq", "full", "epoch"),
    "sweep_page": ("page", "outcome"),
    "idle": ("thread", "epoch", "handoff", "deferred", "full"),
    "pending": ("thread", "value"),
    # the park handoff (model/park.py)
    "park": ("thread",),
    "unpark": ("thread",),
    "park_sweep": ("thread", "epoch", "deferred", "done"),
    "scavenge": ("due",),
    # observations after the ops that sweep, walk or move pages, and at the end
    "page_state": ("page", "capacity", "reserved", "used", "free", "local_free",
                   "xthread_free", "purged_units", "unit", "swept_state", "free_is_zero",
                   "discarded_bytes", "discarded_blocks"),
    "resident": ("page", "runs"),
    # the process-wide counters (model/stats.py), after the pages of every observation
    "holes_stats": ("discard_calls", "reuse_calls", "purged_bytes", "purged_bytes_total",
                    "purged_blocks", "blocks_visited", "pages_skipped", "ineligible_pages",
                    "unformed_bytes", "full_sweeps"),
    "end": ("events",),
}
UNCOMPARED: dict[str, tuple[str, ...]] = {"error": ("msg",)}
CONFIG_KEYS = ("page_kinds", "os_page_size", "arch", "first_block_offset", "interval_ms",
               "purge_holes", "full_every", "purge_delay", "variant", "stale_epochs",
               "sweep_ms", "clock", "clock_monotone", "clock_start_ms", "observe")
# Ops after which every live page is observed (page_state, resident); with observe "all",
# after every op. The reference_c driver has the same list (driver.c: is_observed).
OBSERVED_OPS = frozenset({"collect", "collect_force", "walk", "heap_destroy", "heap_delete", "idle", "scavenge",
                          "scavenger", "abandon", "reclaim"})
OBSERVE_MODES = ("sweeps", "all")
_REQUIRED = {name: frozenset(fields) for name, fields in EVENTS.items()}


class TraceError(Exception):
    """Malformed trace: names the source, the line and what was expected."""

    def __init__(self, source: str, line: int, msg: str) -> None:
        super().__init__(f"{source}:{line}: {msg}")
        self.source, self.line, self.msg = source, line, msg


# -- canonical form ----------------------------------------------------------------------------

def canonical_event(ev: dict) -> dict:
    """The compared part of an event: every field except those UNCOMPARED for its kind."""
    drop = UNCOMPARED.get(ev.get("ev"))
    if not drop:
        return ev
    return {k: v for k, v in ev.items() if k not in drop}


def canonical_line(ev: dict) -> bytes:
    """One canonical line: the compared fields, keys sorted, no spaces."""
    return orjson.dumps(canonical_event(ev), option=orjson.OPT_SORT_KEYS)


def canonical_config(header: dict) -> dict:
    """The compared part of a header: its configuration (the producer is not compared)."""
    return header.get("config", {})


# -- validation ---------------------------------------------------------------------------------

def clock_reading_error(what: str, last: int | None, now, monotone: bool) -> str | None:
    """What is wrong with a clock reading `now` after the reading `last` (None: the first),
    for the reader and for validate alike; None when nothing is."""
    if type(now) is not int:
        return f"{what}: expected an integer clock reading in ms, got {now!r}"
    if monotone and last is not None and now < last:
        return (f"{what}: the clock went back from {last} to {now} ms, but the header's "
                f"config has clock_monotone true")
    return None


class TraceValidator:
    """Checks one trace, line by line: the header first, known events with their fields, pages
    that exist, clock events that do not go back where the config says the clock is monotone,
    an `end` event last whose count matches."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.header: dict | None = None
        self.pages: set[int | None] = {None}  # None: an event without a page
        self.count = 0
        self.ended = False
        self.monotone = False
        self.clock: int | None = None  # the last `clock` event's reading

    def fail(self, line: int, msg: str) -> TraceError:
        return TraceError(self.source, line, msg)

    def check_header(self, obj: object, line: int) -> dict:
        if not isinstance(obj, dict) or "format" not in obj:
            raise self.fail(line, f"expected the trace header first: "
                                  f'{{"format": "{FORMAT}", "version": {VERSION}, "config": '
                                  f'{{...}}, "producer": {{...}}}}')
        if obj["format"] != FORMAT:
            raise self.fail(line, f"expected format {FORMAT!r}, got {obj['format']!r}")
        version = obj.get("version")
        if version != VERSION:
            raise self.fail(line, f"trace format version {version!r} is not known to this "
                                  f"reader (it reads version {VERSION})")
        config = obj.get("config")
        if not isinstance(config, dict) or any(k not in config for k in CONFIG_KEYS):
            missing = [k for k in CONFIG_KEYS if not isinstance(config, dict) or k not in config]
            raise self.fail(line, f"the header's config lacks {', '.join(missing)}")
        self.header = obj
        self.monotone = config["clock_monotone"] is True
        start = config["clock_start_ms"]  # a virtual clock starts there
        self.clock = start if config["clock"] == "virtual" and type(start) is int else None
        return obj

    def check_event(self, obj: object, line: int) -> dict:
        if self.ended:
            raise self.fail(line, "expected nothing after the end event")
        if type(obj) is not dict:
            raise self.fail(line, "expected an event object {\"ev\": ...}")
        kind = obj.get("ev")
        required = _REQUIRED.get(kind) if type(kind) is str else None
        if required is None:
            raise self.fail(line, f"unknown event {kind!r}; expected one of "
                                  f"{', '.join(sorted(EVENTS))}")
        if not required <= obj.keys():
            missing = sorted(required - obj.keys())
            raise self.fail(line, f"{kind} event lacks {', '.join(missing)}")
        page = obj.get("page")
        if page is not None:
            if type(page) is not int:
                raise self.fail(line, f"{kind} event: expected an integer page, got {page!r}")
            if kind == "page_new":
                self.pages.add(page)
            elif page not in self.pages:
                raise self.fail(line, f"{kind} event for page {page}, which does not exist "
                                      f"(no page_new for it before this line)")
        if kind == "clock":
            now = obj["now"]
            wrong = clock_reading_error("clock", self.clock, now, self.monotone)
            if wrong:
                raise self.fail(line, wrong)
            self.clock = now
        if kind == "end":
            if type(obj["events"]) is not int or obj["events"] != self.count:
                raise self.fail(line, f"the end event counts {obj['events']} events, the trace "
                                      f"has {self.count}")
            self.ended = True
        else:
            self.count += 1
        return obj

    def finish(self, line: int) -> None:
        if self.header is None:
            raise self.fail(line, "empty trace: expected the header line")
        if not self.ended:
            raise self.fail(line, "the trace ends without its end event (truncated?)")


# -- typed events: the reader's fast path ---------------------------------------------------------

# Fields that are not required but that a consumer reads when they are there (validate: the
# clock reading of a sweep, the spins of a wait, where a realloc moved to).
OPTIONAL: dict[str, tuple[str, ...]] = {"sweep_begin": ("now",), "advance_step": ("spins",),
                                        "realloc": ("to_page", "to_block")}


def _event_type(kind: str, fields: tuple[str, ...]) -> type:
    """The msgspec Struct of one kind of event. Decoding a line into the union of them checks,
    in C, what TraceValidator.check_event checks by hand: a known kind, every required field
    there, `page` an integer (on every kind: absent is None); `lin` and `tid` (linearized
    traces) integers where present. Other values are kept as they are: the consumers check
    them and say what they expected. Fields a kind does not list are dropped (diff compares
    the lines themselves)."""
    spec: list[tuple] = [(name, int if name == "page" else Any) for name in fields]
    if "page" not in fields:
        spec.append(("page", Optional[int], None))
    spec += [(name, Any, None) for name in OPTIONAL.get(kind, ())]
    spec += [("lin", Optional[int], None), ("tid", Optional[int], None)]
    return msgspec.defstruct(f"{kind}_event", spec, tag_field="ev", tag=kind, kw_only=True,
                             gc=False, omit_defaults=True)


EVENT_TYPES: dict[str, type] = {kind: _event_type(kind, fields) for kind, fields in EVENTS.items()}
_ANY_EVENT = Union[tuple(EVENT_TYPES.values())]
_decode_event = msgspec.json.Decoder(_ANY_EVENT).decode
_PAGE_NEW, _CLOCK, _END = EVENT_TYPES["page_new"], EVENT_TYPES["clock"], EVENT_TYPES["end"]
_SPECIAL = frozenset({_PAGE_NEW, _CLOCK, _END})
_PAGE_OF = operator.attrgetter("page")


def kind_of(ev) -> str:
    """The kind of a typed event ("ev")."""
    return ev.__struct_config__.tag


def event_dict(ev) -> dict:
    """A typed event as a dict (for reports): "ev" first, the fields it carries."""
    return msgspec.to_builtins(ev)


def _check_typed(v: TraceValidator, evs: list) -> bool:
    """What TraceValidator.check_event checks beyond the decoder, over a batch of typed
    events in one loop: pages that exist, clock readings, the end event last with its count.
    False on anything odd, with the validator as it was; the caller then checks the batch
    again slowly to say what."""
    if v.ended:
        return False
    pages, special, added = v.pages, _SPECIAL, []
    if special.isdisjoint(map(type, evs)) and pages.issuperset(map(_PAGE_OF, evs)):
        v.count += len(evs)  # the common batch, checked in C: no page_new, clock or end
        return True
    clock, monotone = v.clock, v.monotone
    ok = True
    for ev in evs:
        page = ev.page
        if type(ev) in special:
            cls = type(ev)
            if cls is _PAGE_NEW:
                if page not in pages:
                    pages.add(page)
                    added.append(page)
                continue
            if cls is _CLOCK:
                now = ev.now
                if type(now) is not int or (monotone and clock is not None and now < clock):
                    ok = False
                    break
                clock = now
            elif ev is not evs[-1] or type(ev.events) is not int \
                    or ev.events != v.count + len(evs) - 1:
                ok = False
                break
        if page is not None and page not in pages:
            ok = False
            break
    if not ok:
        pages.difference_update(added)
        return False
    if evs and type(evs[-1]) is _END:
        v.ended = True
        evs.pop()  # checked, not handed on
    v.count += len(evs)
    v.clock = clock
    return True


# -- reading --------------------------------------------------------------------------------------

_CHUNK = 1 << 20
_BATCH = 512  # lines per decoder call: small enough that a batch of events stays in cache


def _line_batches(f: IO[bytes], source: str) -> Iterator[tuple[int, list[bytes]]]:
    """(number of the first line, up to _BATCH lines without their newline), reading the
    file a chunk at a time; a last line without its newline is a truncated trace."""
    n = 1
    rest = b""
    while True:
        chunk = f.read(_CHUNK)
        if not chunk:
            break
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        batch = _BATCH
        for at in range(0, len(lines), batch):
            yield n + at, lines[at:at + batch]
        n += len(lines)
    if rest:
        raise TraceError(source, n, "truncated last line (no newline at the end): "
                                    "expected a complete JSON line")


def _bad_json(source: str, n: int, line: bytes, e: orjson.JSONDecodeError) -> TraceError:
    shown = line[:60].decode("utf-8", "replace")
    return TraceError(source, n, f"bad JSON ({e.msg}): expected one JSON object per line, got "
                                 f"{shown!r}")


def parse_lines(first: int, lines: list[bytes], source: str) -> list[dict]:
    """The lines as dicts, with one orjson call; on an error, the bad line."""
    try:
        return orjson.loads(b"[" + b",".join(lines) + b"]")
    except orjson.JSONDecodeError:
        for n, line in enumerate(lines, first):
            try:
                orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise _bad_json(source, n, line, e) from None
        raise TraceError(source, first, "bad JSON in this batch of lines")


# A JSON integer of 19 digits or more outside a string or a number's fraction: the only
# place an integer beyond 64 bits can be (orjson would read it as a float, msgspec as a big
# int that no writer can write back).
_LONG_INT = re.compile(rb"(?<![\w.])-?\d{19,}(?![\w.])")
INT_RANGE = (-(1 << 63), (1 << 64) - 1)  # signed or unsigned 64 bits (swept_state is a uint64)
# A batch's bytes with every digit as "0" and every other byte as " ": a run of 19 digits is
# then one substring search. The regex above, searched over the whole batch, is slow (its
# look-behind is tried at every byte: 2.4 s of CPU on the million-event trace of `make
# bench`, as much as the whole replay); here it is searched only in the lines that hold a run
# of 19 digits or more (in that trace, one line in 250: advance_step's INT64_MIN).
_DIGIT_MASK = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_DIGIT_RUN = b"0" * 19


def _check_int_range(v: TraceValidator, first: int, lines: list[bytes]) -> None:
    """Every integer of the batch fits a 64-bit word, signed or unsigned (docs/trace-format.md),
    else the line that holds the first that does not. The lines with a run of 19 digits are
    found by one substring search over the batch's digit mask, and _LONG_INT is searched in
    each of them: a match cannot span lines, and a line's ends look to it as the newline
    between two lines does, so these are the matches of one search over the batch."""
    blob = b"\n".join(lines)
    mask = blob.translate(_DIGIT_MASK)
    at = mask.find(_DIGIT_RUN)
    while at >= 0:
        start = blob.rfind(b"\n", 0, at) + 1  # the line that holds `at`
        end = blob.find(b"\n", at)
        end = len(blob) if end < 0 else end
        for m in _LONG_INT.finditer(blob[start:end]):
            if not INT_RANGE[0] <= int(m.group()) <= INT_RANGE[1]:
                digits = m.group().decode()
                raise v.fail(first + blob.count(b"\n", 0, start),
                             f"integer {digits[:20]}... ({len(digits)} digits) is outside the "
                             f"64-bit range -2^63..2^64-1 (docs/trace-format.md)")
        at = mask.find(_DIGIT_RUN, end)


def _word_error(v: TraceValidator, first: int, lines: list[bytes]) -> TraceError:
    """The first bad line of a batch the fast path refused, in words: bad JSON, what
    check_event says, else what the typed decoder says."""
    for n, line in enumerate(lines, first):
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            return _bad_json(v.source, n, line, e)
        try:
            v.check_event(obj, n)
            _decode_event(line)
        except TraceError as e:
            return e
        except (msgspec.ValidationError, msgspec.DecodeError) as e:
            return v.fail(n, f"{obj.get('ev')} event: {e} (docs/trace-format.md)")
        except RecursionError:
            return v.fail(n, f"{obj.get('ev')} event: its values nest too deeply "
                             f"(docs/trace-format.md)")
    return v.fail(first, "a bad line in this batch of lines")  # the two decoders disagree


class Trace:
    """A trace being read: `header` is known at once; the events stream, checked, either as
    typed batches (`batches()`, the fast way: first line number, raw lines, typed events) or
    as dicts (`events`). Read it one way only. The `end` event is checked, not handed on."""

    def __init__(self, source: str, header: dict, validator: TraceValidator,
                 lines: Iterator[tuple[int, list[bytes]]]) -> None:
        self.source, self.header = source, header
        self.validator = validator
        self.lines = lines  # (first line number, raw lines), not yet checked
        self.last = 1  # the number of the last line checked
        self.events: Iterator[dict] = self._dicts()

    @property
    def config(self) -> dict:
        return self.header["config"]

    def check(self, first: int, lines: list[bytes]) -> list:
        """Decode and check a batch of raw lines (in file order): its typed events."""
        _check_int_range(self.validator, first, lines)
        try:  # each line on its own (a line is one event, whatever the next one holds)
            evs = list(map(_decode_event, lines))
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            evs = None
        if evs is None or not _check_typed(self.validator, evs):
            raise _word_error(self.validator, first, lines)
        self.last = first + len(lines) - 1
        return evs

    def finish(self) -> None:
        """After the last line: the trace had its end event."""
        self.validator.finish(self.last + 1)

    def caught_up(self, other: "Trace") -> None:
        """This trace's lines so far were byte for byte those of `other`, which were checked
        (so these would check alike, as the configurations agree): the reader takes up the
        state `other`'s has (its pages, count, clock, end)."""
        v, w = self.validator, other.validator
        v.pages, v.count, v.clock, v.ended = set(w.pages), w.count, w.clock, w.ended
        self.last = other.last

    def batches(self) -> Iterator[tuple[int, list[bytes], list]]:
        for first, lines in self.lines:
            yield first, lines, self.check(first, lines)
        self.finish()

    def _dicts(self) -> Iterator[dict]:
        for first, lines, evs in self.batches():
            yield from parse_lines(first, lines[:len(evs)], self.source)


def read_trace(f: IO[bytes], source: str = "<trace>") -> Trace:
    """Start reading a trace from a binary file: checks the header now and each event as
    the trace's iterators reach it (raising TraceError)."""
    v = TraceValidator(source)
    lines = _line_batches(f, source)
    first = next(lines, None)
    if first is None:
        raise TraceError(source, 1, "empty file: expected the trace header line")
    _, batch = first
    try:
        header = orjson.loads(batch[0])
    except orjson.JSONDecodeError as e:
        raise TraceError(source, 1, f"bad JSON ({e.msg}): expected the trace header") from None
    v.check_header(header, 1)
    rest = [(2, batch[1:])] if len(batch) > 1 else []
    return Trace(source, header, v, itertools.chain(rest, lines))


def open_trace(path: str) -> tuple[IO[bytes], Trace]:
    """Open a trace file; the caller closes the file. OSError for a file that cannot be read."""
    f = open(path, "rb")
    try:
        return f, read_trace(f, path)
    except BaseException:
        f.close()
        raise


def read_stream_trace(readline, source: str) -> tuple[dict, list[dict]]:
    """Read one whole trace from a stream of traces (the persistent C driver): lines until
    the `end` event. Raises TraceError, or EOFError when the stream ends first."""
    v = TraceValidator(source)
    n = 0
    events: list[dict] = []
    while True:
        raw = readline()
        if not raw:
            raise EOFError(f"{source}: the stream ended after {n} lines, before the end event")
        n += 1
        if not raw.endswith(b"\n"):
            raise TraceError(source, n, "truncated last line: expected a complete JSON line")
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise TraceError(source, n, f"bad JSON ({e.msg})") from None
        if v.header is None:
            v.check_header(obj, n)
            continue
        v.check_event(obj, n)
        if obj["ev"] == "end":
            return v.header, events
        events.append(obj)


# -- writing ----------------------------------------------------------------------------------

class TraceWriter:
    """Writes a trace to a binary file: header, events, and the end event on close."""

    def __init__(self, f: IO[bytes], header: dict) -> None:
        self.f = f
        self.count = 0
        f.write(orjson.dumps(header) + b"\n")

    def event(self, ev: dict) -> None:
        self.f.write(orjson.dumps(ev) + b"\n")
        self.count += 1

    def close(self) -> None:
        self.f.write(orjson.dumps({"ev": "end", "events": self.count}) + b"\n")


def write_trace(f: IO[bytes], header: dict, events: Iterable[dict]) -> int:
    w = TraceWriter(f, header)
    for ev in events:
        w.event(ev)
    w.close()
    return w.count


# -- the model's side ---------------------------------------------------------------------------

def config_of(options: Options, observe: str = "sweeps", clock: str = "virtual") -> dict:
    """The header's config for a run of the model (or of the C driver) under `options`."""
    arch = options.arch
    return {
        "page_kinds": {k.value: arch.page_size(k) for k in (PageKind.SMALL, PageKind.MEDIUM,
                                                            PageKind.LARGE)},
        "os_page_size": options.os_page_size, "arch": arch.bits,
        "first_block_offset": options.first_block_offset,
        "interval_ms": options.purge_holes_min_interval, "purge_holes": options.purge_holes,
        "full_every": options.purge_holes_full_every, "purge_delay": options.purge_delay,
        "variant": options.variant, "stale_epochs": options.stale_epochs,
        "sweep_ms": options.sweep_ms, "clock": clock,
        "clock_monotone": options.clock_monotone, "clock_start_ms": options.clock_start_ms,
        "observe": observe,
    }


def options_of(config: dict) -> Options:
    """The model Options a header's config stands for (to replay a trace on the model)."""
    from model.geometry import ARCH32, ARCH64
    return Options(purge_holes=config["purge_holes"],
                   purge_holes_min_interval=config["interval_ms"],
                   purge_holes_full_every=config["full_every"],
                   purge_delay=config["purge_delay"], os_page_size=config["os_page_size"],
                   arch=ARCH32 if config["arch"] == 32 else ARCH64,
                   first_block_offset=config["first_block_offset"], variant=config["variant"],
                   stale_epochs=config["stale_epochs"], sweep_ms=config["sweep_ms"],
                   clock_monotone=config["clock_monotone"],
                   clock_start_ms=config["clock_start_ms"])


def model_header(options: Options, observe: str = "sweeps", mutant: str | None = None) -> dict:
    return {"format": FORMAT, "version": VERSION, "config": config_of(options, observe),
            "producer": {"name": "model", "mutant": mutant}}


_ADDR_EVENTS = frozenset({"discard", "discard_tail", "reuse_tail"})


def op_event(op: Op) -> dict:
    return {"ev": "op", "line": op.line, "thread": op.thread, "op": op.name,
            "args": list(op.args)}


def convert_event(world: World, ev: dict) -> dict:
    """A model log event as a trace event: addresses relative to the page's region start
    (the C reference's regions lie elsewhere); page_new drops its absolute address."""
    kind = ev["ev"]
    if kind in _ADDR_EVENTS:
        ev = dict(ev)
        ev["addr"] -= world.pages[ev["page"]].geom.slice_start
    elif kind == "page_new":
        ev = {k: v for k, v in ev.items() if k != "addr"}
    return ev


def resident_runs(world: World, page) -> list[list[int]]:
    """The page's resident OS pages as runs [a, b) counted from its region start: exactly
    what mincore reports on the C side (model/memory.py predicts it)."""
    os_page = world.mem.os_page_size
    first = page.geom.slice_start // os_page
    n = -(-page.geom.area_size // os_page)
    # the set intersection runs in C: the page's OS pages are a thousand or more, few resident
    runs: list[list[int]] = []
    for p in sorted(world.mem.resident.intersection(range(first, first + n))):
        j = p - first
        if runs and runs[-1][1] == j:
            runs[-1][1] = j + 1
        else:
            runs.append([j, j + 1])
    return runs


def observe_pages(world: World) -> Iterator[dict]:
    """The observation of every page still in use: its state, then its residency."""
    for pid, page in world.pages.items():
        if page.retired:
            continue
        yield {"ev": "page_state", **page.snapshot()}
        yield {"ev": "resident", "page": pid, "runs": resident_runs(world, page)}
    yield {"ev": "holes_stats", **world.mem.holes.as_fields(world.mem.discard_calls)}


def model_events(ops: Iterable[Op], options: Options, observe: str = "sweeps",
                 source: str = "<script>", run=None) -> Iterator[dict]:
    """Run `ops` on the model and yield the trace events (without header and end): each
    op, the events it caused, the observations after the ops that sweep and at the end.
    A script error ends the trace with an `error` event, as on the C side."""
    from purgecheck.runner import HANDLERS, Run

    run = run or Run(World(options), source)
    world = run.world
    log = world.log
    every = observe == "all"
    for op in ops:
        yield op_event(op)
        handler = HANDLERS.get(op.name)
        try:
            if handler is None:
                raise OpScriptError(source, op.line, f"the model has no handler for {op.name!r}")
            handler(run, op)
        except OpScriptError as e:
            for ev in log:
                yield convert_event(world, ev)
            log.clear()
            yield {"ev": "error", "line": op.line, "msg": e.msg}
            return
        for ev in log:
            yield convert_event(world, ev)
        log.clear()  # the trace holds them now; the log stays bounded
        if every or op.name in OBSERVED_OPS:
            yield from observe_pages(world)
    yield from observe_pages(world)


def model_trace(ops: Iterable[Op], options: Options, observe: str = "sweeps",
                source: str = "<script>", mutant: str | None = None) -> tuple[dict, list[dict]]:
    """The model's whole trace of a script: (header, events)."""
    return model_header(options, observe, mutant), list(model_events(ops, options, observe,
                                                                      source))


def ops_of_events(events: Iterable[dict]) -> list[Op]:
    """The op script a trace records in its `op` events (to replay it on the model)."""
    return [Op(ev["thread"], ev["op"], tuple(ev["args"]), ev["line"])
            for ev in events if ev["ev"] == "op"]
