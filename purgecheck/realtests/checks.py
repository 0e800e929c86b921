"""The assertions of the fork's real tests, as checks over a trace (model or C reference).

Each check reads one trace (docs/trace-format.md) and returns what it found wrong. A trace is
the same on both sides, so one check judges the model's run and the C reference's run of a
named scenario alike: a scenario declares the checks its real test asserts
(`Scenario.checks`), and `purgecheck/realtests/cases.py` computes from them how much of each real
test case is reproduced. The real tests are test/test-purge-holes.c and
test/test-purge-holes-large.c of oven-sh/mimalloc (digest section 11); only what they assert is
taken from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

MI_MAX_ALIGN_SIZE = 16  # every block the allocator hands out is aligned to this at least
SWEEP_OPS = frozenset({"idle", "scavenge", "scavenger", "collect"})  # the idle path


@dataclass
class PageGeom:
    """What a `page_new` event says about a page, and where its blocks lie in its region."""

    block_size: int
    reserved: int
    unit: int
    kind: str
    offset: int  # first_block_offset of the configuration

    def block_bytes(self, i: int) -> tuple[int, int]:
        lo = self.offset + i * self.block_size
        return lo, lo + self.block_size

    def unit_base(self) -> int:
        return self.offset - self.offset % self.unit

    def units_of_block(self, i: int) -> range:
        lo, hi = self.block_bytes(i)
        base = self.unit_base()
        return range((lo - base) // self.unit, (hi - 1 - base) // self.unit + 1)


@dataclass
class Observation:
    """One observation point: after the op at `line` (0: the final one), every live page's
    state and resident OS pages."""

    line: int
    op: str
    states: dict[int, dict] = field(default_factory=dict)
    resident: dict[int, set[int]] = field(default_factory=dict)
    stats: dict | None = None  # the `holes_stats` event, when the producer writes one
    # the script's live names whose bytes the program wrote (a zalloc's are zero pages)
    live: dict[str, tuple[int, int]] = field(default_factory=dict)


class TraceView:
    """A trace read once for the checks: pages, the script's names bound to blocks as the
    trace shows them, and the observations."""

    def __init__(self, header: dict, events: list[dict]) -> None:
        self.config = header["config"]
        self.os_page = self.config["os_page_size"]
        self.events = events
        self.pages: dict[int, PageGeom] = {}
        self.observations: list[Observation] = []
        self.live: dict[str, tuple[int, int]] = {}  # name -> (page, block), as the script has it
        self.freed: dict[str, tuple[int, int]] = {}
        self.problems: list[str] = []  # found while reading: aliasing, sizes, alignment
        self.unwritten: set[str] = set()  # live names from a zalloc: the program wrote nothing
        self.ops: list[dict] = []
        self._read()

    def _read(self) -> None:
        live_blocks: set[tuple[int, int]] = set()
        op: dict | None = None
        obs: Observation | None = None
        for ev in self.events:
            kind = ev["ev"]
            if kind == "op":
                op, obs = ev, None
                self.ops.append(ev)
                continue
            if kind == "page_new":
                self.pages[ev["page"]] = PageGeom(ev["block_size"], ev["reserved"], ev["unit"],
                                                  ev["page_kind"], self.config["first_block_offset"])
            elif kind in ("page_state", "resident", "holes_stats"):
                if obs is None:
                    obs = Observation(op["line"] if op else 0, op["op"] if op else "",
                                      live={n: b for n, b in self.live.items()
                                            if n not in self.unwritten})
                    self.observations.append(obs)
                if kind == "page_state":
                    obs.states[ev["page"]] = ev
                elif kind == "resident":
                    obs.resident[ev["page"]] = {p for a, b in ev["runs"] for p in range(a, b)}
                else:
                    obs.stats = ev
                continue
            elif kind == "malloc" and op is not None:
                blk = (ev["page"], ev["block"])
                if blk in live_blocks:
                    self.problems.append(f"line {op['line']}: block {blk[1]} of page {blk[0]} "
                                         f"handed out while it is live (aliasing)")
                live_blocks.add(blk)
                if op["op"] in ("malloc", "zalloc", "malloc_aligned"):
                    name, size = op["args"][:2]
                    self._bind(name, blk, size, op)
                    if op["op"] == "zalloc":
                        self.unwritten.add(name)
            elif kind == "aligned" and op is not None and op["op"] == "malloc_aligned":
                room = self.pages[ev["page"]].block_size - ev["offset"]
                if room < op["args"][1]:
                    self.problems.append(f"line {op['line']}: {op['args'][0]}: usable size "
                                         f"{room} < requested {op['args'][1]}")
            elif kind == "realloc" and op is not None:
                name, new, size = op["args"]
                old = (ev["page"], ev["block"])
                to = (ev.get("to_page", ev["page"]), ev.get("to_block", ev["block"]))
                if to != old:
                    live_blocks.discard(old)
                self.live.pop(name, None)
                self._bind(new, to, size, op)
            elif kind == "free":
                blk = (ev["page"], ev["block"])
                live_blocks.discard(blk)
                if op is not None and op["op"] == "free":
                    name = op["args"][0]
                    if self.live.get(name) == blk:
                        self.freed[name] = self.live.pop(name)
            elif kind == "retire":
                gone = [n for n, (p, _) in self.live.items() if p == ev["page"]]
                for n in gone:
                    del self.live[n]
                live_blocks = {b for b in live_blocks if b[0] != ev["page"]}
            obs = None

    def _bind(self, name: str, blk: tuple[int, int], size: int, op: dict) -> None:
        geom = self.pages[blk[0]]
        if geom.block_size < size:
            self.problems.append(f"line {op['line']}: {name}: usable size {geom.block_size} < "
                                 f"requested {size}")
        lo, _ = geom.block_bytes(blk[1])
        if lo % MI_MAX_ALIGN_SIZE:
            self.problems.append(f"line {op['line']}: {name} at offset {lo} is not aligned to "
                                 f"{MI_MAX_ALIGN_SIZE}")
        self.live[name] = blk
        self.freed.pop(name, None)
        self.unwritten.discard(name)

    # -- what a block is at an observation ------------------------------------------------

    def is_purged(self, obs: Observation, page: int, block: int) -> bool:
        units = set(obs.states[page]["purged_units"])
        return any(k in units for k in self.pages[page].units_of_block(block))

    def os_pages_of(self, page: int, block: int) -> range:
        lo, hi = self.pages[page].block_bytes(block)
        return range(lo // self.os_page, (hi - 1) // self.os_page + 1)

    def os_pages_inside(self, page: int, block: int) -> range:
        lo, hi = self.pages[page].block_bytes(block)
        return range(-(-lo // self.os_page), hi // self.os_page)

    def final(self) -> Observation:
        """The final observation; empty when no page was left to observe at the end."""
        last = next((e for e in reversed(self.events) if e["ev"] != "end"), None)
        if last is None or last["ev"] not in ("page_state", "resident", "holes_stats"):
            return Observation(0, "", live=dict(self.live))
        return self.observations[-1]

    def events_in_ops(self, names: frozenset[str]) -> list[tuple[dict, dict]]:
        """(op, event) for every event caused by an op named in `names`."""
        out, op = [], None
        for ev in self.events:
            if ev["ev"] == "op":
                op = ev
            elif op is not None and op["op"] in names:
                out.append((op, ev))
        return out


Check = Callable[[TraceView], list[str]]


@dataclass(frozen=True)
class CaseCheck:
    name: str
    statement: str  # what the real test asserts, in this project's words
    fn: Check


CHECKS: dict[str, CaseCheck] = {}


def case_check(name: str, statement: str):
    def wrap(fn: Check) -> Check:
        CHECKS[name] = CaseCheck(name, statement, fn)
        return fn
    return wrap


# -- data integrity ------------------------------------------------------------------------------

@case_check("no-aliasing", "no block is handed out while it is live (no block handed out "
            "twice, a live block never handed out again)")
def _no_aliasing(v: TraceView) -> list[str]:
    return [p for p in v.problems if "aliasing" in p]


@case_check("usable-size", "the usable size of every block is at least what was asked for")
def _usable(v: TraceView) -> list[str]:
    return [p for p in v.problems if "usable size" in p]


@case_check("aligned", f"every block is aligned to MI_MAX_ALIGN_SIZE ({MI_MAX_ALIGN_SIZE}), and "
            "a block of an aligned size class keeps its alignment when it is taken back")
def _aligned(v: TraceView) -> list[str]:
    return [p for p in v.problems if "not aligned" in p]


ALIGN_16K = 16 * 1024  # JSC's MarkedBlock: 16 KiB at 16 KiB alignment


@case_check("aligned-16k", "every block handed out for a request of 16 KiB at 16 KiB alignment "
            "(malloc_aligned, mi_malloc_aligned) is 16 KiB aligned, the ones an allocation takes "
            "back from a purged run included")
def _aligned_16k(v: TraceView) -> list[str]:
    out, op, seen, taken = [], None, 0, None
    for ev in v.events:
        if ev["ev"] == "op":
            op, taken = ev, None
        elif ev["ev"] == "malloc" and op is not None and op["op"] == "malloc_aligned" \
                and op["args"][1:] == [ALIGN_16K, ALIGN_16K]:
            taken = ev
        elif ev["ev"] == "aligned" and taken is not None:
            seen += 1
            lo = v.pages[ev["page"]].block_bytes(ev["block"])[0] + ev["offset"]
            if lo % ALIGN_16K:
                out.append(f"line {op['line']}: {op['args'][0]} at offset {lo} "
                           f"({taken['src']}) is not 16 KiB aligned")
    if not seen:
        out.append("no 16 KiB request at 16 KiB alignment: the check would hold vacuously")
    return out[:5]


@case_check("survivors-intact", "at every observation every live block keeps every byte: "
            "none of its units is discarded and every OS page of it is resident")
def _survivors(v: TraceView) -> list[str]:
    out = []
    for obs in v.observations:
        for name, (page, block) in obs.live.items():
            if page not in obs.states:
                continue
            if v.is_purged(obs, page, block):
                out.append(f"after line {obs.line}: live block {name} overlaps a discarded unit")
            missing = [p for p in v.os_pages_of(page, block) if p not in obs.resident[page]]
            if missing:
                out.append(f"after line {obs.line}: live block {name} has OS pages {missing[:3]} "
                           f"not resident")
    return out[:5]


@case_check("zalloc-zero", "a zalloc that takes a purged block back zeroes all of it (a "
            "discard never sets free_is_zero): every OS page of the block is written")
def _zalloc_zero(v: TraceView) -> list[str]:
    out, pending, op = [], [], None
    for ev in v.events:
        kind = ev["ev"]
        if kind == "op":
            op = ev
        elif kind == "malloc" and op is not None and op["op"] == "zalloc" \
                and ev["src"] == "unpurge":
            pending.append((op["args"][0], ev["page"], ev["block"]))
        elif kind == "resident" and pending:
            runs = {p for a, b in ev["runs"] for p in range(a, b)}
            for name, page, block in [x for x in pending if x[1] == ev["page"]]:
                if any(p not in runs for p in v.os_pages_of(page, block)):
                    out.append(f"zalloc {name} (block {block} of page {page}, a purged one) "
                               f"was not zeroed in full")
                pending.remove((name, page, block))
    if not any(e["ev"] == "malloc" and e["src"] == "unpurge" and e["zero"] for e in v.events):
        out.append("no zalloc took a purged block: the check would hold vacuously")
    return out[:5]


@case_check("unit-rule", "the unit of a small or medium page is the OS page; a large page's "
            "is a power-of-two multiple of it for which the block area needs at most 256 bits "
            "and half of which would need more; the bitmap's base covers the first block")
def _unit_rule(v: TraceView) -> list[str]:
    out = []
    for pid, g in v.pages.items():
        if g.reserved <= 1:
            continue  # a huge page has no bitmap to speak of
        end = g.offset + g.reserved * g.block_size

        def bits(unit: int) -> int:
            return -(-(end - (g.offset - g.offset % unit)) // unit)

        unit = g.unit
        if g.kind in ("small", "medium") and unit != v.os_page:
            out.append(f"page {pid} ({g.kind}): unit {unit}, the OS page is {v.os_page}")
        if unit % v.os_page or unit & (unit - 1) or bits(unit) > 256:
            out.append(f"page {pid}: unit {unit} needs {bits(unit)} bits")
        elif unit > v.os_page and bits(unit // 2) <= 256:
            out.append(f"page {pid}: unit {unit}, but {unit // 2} would do")
        if g.unit_base() > g.offset or g.offset - g.unit_base() >= unit:
            out.append(f"page {pid}: the base does not cover the first block")
    if not any(g.kind == "large" for g in v.pages.values()):
        out.append("no large page in the run: the check would hold vacuously")
    return out


@case_check("purged-grows", "each sweep after more frees discards more: the bytes discarded "
            "now (holes_stats) rise at every idle sweep")
def _purged_grows(v: TraceView) -> list[str]:
    out, last = [], 0
    for obs in v.observations:
        if obs.op != "idle" or obs.stats is None:
            continue
        if obs.stats["purged_bytes"] <= last:
            out.append(f"after line {obs.line}: {obs.stats['purged_bytes']} bytes discarded now, "
                       f"{last} at the sweep before")
        last = obs.stats["purged_bytes"]
    if not any(o.op == "idle" for o in v.observations):
        out.append("no idle sweep was observed")
    return out


# -- the hold: a large page in use keeps its free blocks (seed 000, change (2)) ---------------------

@case_check("hold-first-keeps", "nothing of a large page goes at a sweep in the epoch of its "
            "last allocation or the one after (the first sweep after the allocations and a "
            "second right after take nothing); a page left alone for a whole epoch goes at "
            "the next sweep that can walk it")
def _hold_first_keeps(v: TraceView) -> list[str]:
    out: list[str] = []
    stamp: dict[int, int] = {}  # page -> epoch of its last allocation (its stamp)
    epoch, in_sweep = None, False
    if v.config["interval_ms"] <= 0:
        return ["the hold is off (interval 0): the check would hold vacuously"]
    for ev in v.events:
        kind = ev["ev"]
        if kind == "op":
            in_sweep = ev["op"] in SWEEP_OPS
        elif kind == "stamp":
            stamp[ev["page"]] = ev["epoch"]
        elif kind in ("sweep_begin", "park_sweep"):
            epoch = ev["epoch"]
        elif kind == "walk" and in_sweep:
            stamp.pop(ev["page"], None) if ev["complete"] else None
        elif kind == "discard" and in_sweep and ev["page"] in stamp and epoch is not None \
                and (epoch - stamp[ev["page"]]) % (1 << 32) < 2:
            out.append(f"page {ev['page']} (allocated from in epoch {stamp[ev['page']]}) lost "
                       f"units [{ev['k0']}, {ev['k1']}) at a sweep in epoch {epoch}")
        elif kind == "sweep_page" and ev["outcome"] == "held" and ev["page"] in stamp \
                and epoch is not None and (epoch - stamp[ev["page"]]) % (1 << 32) >= 2:
            out.append(f"page {ev['page']} held at epoch {epoch}, two or more after its last "
                       f"allocation in epoch {stamp[ev['page']]}")
    if not any(e["ev"] == "sweep_page" and e["outcome"] == "held" for e in v.events):
        out.append("no sweep held a page: the check would hold vacuously")
    return out[:5]


@case_check("held-says-pending", "_pending says so after a sweep that left free blocks of a "
            "held page, and not after one that left none")
def _held_pending(v: TraceView) -> list[str]:
    out: list[str] = []
    left: dict[int, bool] = {}  # thread -> its last idle sweep held a page with free blocks
    held: set[int] = set()
    thread = None
    for ev in v.events:
        kind = ev["ev"]
        if kind == "op":
            thread = ev["thread"] if ev["op"] == "idle" else None
            held = set()
        elif kind == "sweep_page" and thread is not None and ev["outcome"] == "held":
            held.add(ev["page"])
        elif kind == "page_state" and thread is not None and ev["page"] in held:
            if ev["free"] or ev["local_free"] or ev["xthread_free"]:
                left[thread] = True
        elif kind == "pending":
            want = left.get(ev["thread"], False)
            if ev["value"] != want:
                out.append(f"pending of thread {ev['thread']} is {ev['value']}; its last sweep "
                           f"{'held' if want else 'held no'} free blocks")
        if kind == "op" and ev["op"] == "idle":
            left[ev["thread"]] = False
    if not any(e["ev"] == "pending" and e["value"] for e in v.events):
        out.append("no pending was true: the check would hold vacuously")
    return out[:5]


@case_check("park-first-keeps", "the first sweep of a park, right after the allocations, takes "
            "nothing of a large page and does not mark the park done")
def _park_first(v: TraceView) -> list[str]:
    out: list[str] = []
    parked: dict[int, bool] = {}  # thread -> its first park sweep is still to come
    large = {p for p, g in v.pages.items() if g.kind == "large"}
    waiting_discards: list[dict] = []
    for ev in v.events:
        kind = ev["ev"]
        if kind == "park":
            parked[ev["thread"]] = True
        elif kind == "unpark":
            parked.pop(ev["thread"], None)
        elif kind == "discard" and ev["page"] in large and any(parked.values()):
            waiting_discards.append(ev)
        elif kind == "park_sweep":
            if parked.get(ev["thread"]):
                if ev["done"]:
                    out.append(f"the first sweep of thread {ev['thread']}'s park marked it done")
                if waiting_discards:
                    out.append(f"the first sweep of thread {ev['thread']}'s park discarded "
                               f"units of page {waiting_discards[0]['page']}")
                parked[ev["thread"]] = False
            waiting_discards = []
    if not any(e["ev"] == "park_sweep" for e in v.events):
        out.append("no park was swept: the check would hold vacuously")
    return out[:5]


@case_check("park-done-in-2-3", "a park is swept two or three times, then it is done and not "
            "swept again while the thread stays parked")
def _park_done(v: TraceView) -> list[str]:
    out: list[str] = []
    sweeps: dict[int, int] = {}
    done: dict[int, bool] = {}
    for ev in v.events:
        kind = ev["ev"]
        if kind == "park":
            sweeps[ev["thread"]], done[ev["thread"]] = 0, False
        elif kind == "park_sweep":
            t = ev["thread"]
            if done.get(t):
                out.append(f"thread {t}'s park was swept after it was done")
            sweeps[t] = sweeps.get(t, 0) + 1
            if ev["done"]:
                done[t] = True
                if not 2 <= sweeps[t] <= 3:
                    out.append(f"thread {t}'s park was done after {sweeps[t]} sweeps")
        elif kind == "unpark" and not done.get(ev["thread"]):
            out.append(f"thread {ev['thread']} left its park before it was done")
    if not any(done.values()):
        out.append("no park was done: the check would hold vacuously")
    return out[:5]


# -- what a sweep discards -------------------------------------------------------------------------

@case_check("freed-purged", "after the last sweep every block the script freed (and did not "
            "take again) in a page that was walked is purged and none of its OS pages is "
            "resident, where the block size is a multiple of the unit")
def _freed_purged(v: TraceView) -> list[str]:
    obs = v.final()
    walked = {e["page"] for e in v.events if e["ev"] == "walk"}
    out = []
    for name, (page, block) in v.freed.items():
        geom = v.pages[page]
        if page not in obs.states or page not in walked or geom.block_size % geom.unit:
            continue
        if not v.is_purged(obs, page, block):
            out.append(f"at the end: freed block {name} (page {page}, block {block}) is not purged")
        elif any(p in obs.resident[page] for p in v.os_pages_inside(page, block)):
            out.append(f"at the end: freed block {name} is purged but still resident")
    if not walked:
        out.append("no page was walked: the check would hold vacuously")
    return out[:5]


@case_check("something-purged", "the sweep discarded something (bytes and discard calls rose), "
            "so the case cannot pass vacuously")
def _something(v: TraceView) -> list[str]:
    ok = [e for e in v.events if e["ev"] == "discard" and e["ok"]]
    out = [] if ok else ["no discard succeeded in the whole run"]
    stats = v.final().stats
    if stats is not None and (stats["purged_bytes_total"] <= 0 or stats["discard_calls"] <= 0):
        out.append(f"holes_stats: {stats['purged_bytes_total']} bytes discarded in "
                   f"{stats['discard_calls']} calls")
    return out


@case_check("nothing-discarded", "with purging off nothing is discarded: no discard call, no "
            "purged block, no discarded unformed tail")
def _nothing(v: TraceView) -> list[str]:
    out = [f"{e['ev']} of page {e['page']}" for e in v.events
           if e["ev"] in ("discard", "discard_tail")]
    for obs in v.observations:
        out += [f"after line {obs.line}: page {p} has purged units" for p, s in obs.states.items()
                if s["purged_units"] or s["discarded_bytes"]]
    return out[:5]


@case_check("reuse-rises", "a purged hole is taken back by an allocation: an unpurge that "
            "reuses memory, and a block handed out from it")
def _reuse(v: TraceView) -> list[str]:
    reuses = [e for e in v.events if e["ev"] == "unpurge" and e["reuse"] and e["blocks"]]
    taken = [e for e in v.events if e["ev"] == "malloc" and e["src"] == "unpurge"]
    return [] if reuses and taken else ["no purged hole was taken back by an allocation"]


@case_check("nothing-left-at-end", "at the end nothing is left discarded: no live page has a "
            "purged unit, discarded bytes or blocks, or a discarded unformed tail")
def _at_end(v: TraceView) -> list[str]:
    obs = v.final()
    out = [f"at the end: page {p} still has {s['discarded_bytes']} bytes in "
           f"{len(s['purged_units'])} units discarded" for p, s in obs.states.items()
           if s["purged_units"] or s["discarded_bytes"] or s["discarded_blocks"]]
    if obs.stats is not None and (obs.stats["purged_bytes"] or obs.stats["unformed_bytes"]):
        out.append(f"at the end: holes_stats still counts {obs.stats['purged_bytes']} bytes and "
                   f"{obs.stats['unformed_bytes']} unformed bytes discarded")
    return out


@case_check("double-free-reported", "a free of a block that is not live (a purged one "
            "included) is reported as a double free and changes nothing")
def _double_free(v: TraceView) -> list[str]:
    out: list[str] = []
    freed: set[str] = set()
    again: dict | None = None  # the op that frees a name freed before, until its events end
    reported = False

    def close() -> None:
        if again is not None and not reported:
            out.append(f"line {again['line']}: a second free of {again['args'][0]} was not "
                       f"reported")

    for ev in v.events:
        if ev["ev"] == "op":
            close()
            again, reported = None, False
            if ev["op"] == "free" and ev["args"][0] in freed:
                again = ev
            elif ev["op"] in ("malloc", "zalloc"):
                freed.discard(ev["args"][0])
            elif ev["op"] == "free":
                freed.add(ev["args"][0])
        elif ev["ev"] == "double_free":
            reported = True
        elif ev["ev"] == "free" and again is not None:
            out.append(f"line {again['line']}: a second free of {again['args'][0]} was taken")
    close()
    if not any(e["ev"] == "double_free" for e in v.events):
        out.append("no double free in the run: the check would hold vacuously")
    return out


@case_check("idle-never-unpurges", "the collect and the sweeps of the idle path never take a "
            "purged hole back (only the allocation path unpurges)")
def _idle_unpurge(v: TraceView) -> list[str]:
    return [f"line {op['line']} ({op['op']}): unpurge of units [{ev['k0']}, {ev['k1']}) of page "
            f"{ev['page']}" for op, ev in v.events_in_ops(SWEEP_OPS)
            if ev["ev"] == "unpurge" and ev["reuse"]]


@case_check("stats-agree", "the process-wide counters (holes_stats) agree with what the trace "
            "shows: discard calls, reuse calls, bytes discarded now, unformed bytes, skipped "
            "and ineligible pages, full sweeps")
def _stats(v: TraceView) -> list[str]:
    out: list[str] = []
    want = {"discard_calls": 0, "reuse_calls": 0, "pages_skipped": 0, "ineligible_pages": 0,
            "unformed_bytes": 0, "full_sweeps": 0}
    tail: dict[int, int] = {}
    units: dict[int, int] = {}  # discarded units per page, as page_state shows them
    retired: set[int] = set()
    for ev in v.events:
        kind = ev["ev"]
        if kind in ("discard", "discard_tail"):
            want["discard_calls"] += 1
            if kind == "discard_tail" and ev["ok"]:
                want["unformed_bytes"] += ev["size"] - tail.get(ev["page"], 0)
                tail[ev["page"]] = ev["size"]
        elif kind == "unpurge" and ev["reuse"]:
            want["reuse_calls"] += 1
        elif kind == "reuse_tail":
            want["reuse_calls"] += 1
            want["unformed_bytes"] -= tail.pop(ev["page"], 0)
        elif kind == "unpurge_all":
            gone = tail.pop(ev["page"], 0)
            want["reuse_calls"] += len(ev["runs"]) + (gone > 0)
            want["unformed_bytes"] -= gone
        elif kind == "retire":
            retired.add(ev["page"])
            units.pop(ev["page"], None)
        elif kind == "sweep_begin" and ev["full"]:
            want["full_sweeps"] += 1
        elif kind == "sweep_page" and ev["outcome"] in ("unchanged", "ineligible"):
            want["pages_skipped" if ev["outcome"] == "unchanged" else "ineligible_pages"] += 1
        elif kind == "page_state":
            units[ev["page"]] = len(ev["purged_units"]) * ev["unit"]
        elif kind == "holes_stats":
            for key, value in want.items():
                if ev[key] != value:
                    out.append(f"holes_stats says {key} {ev[key]}, the trace shows {value}")
            shown = sum(units.values())
            if ev["purged_bytes"] != shown:
                out.append(f"holes_stats says {ev['purged_bytes']} bytes discarded now, the "
                           f"pages' discarded units make {shown}")
            if ev["purged_bytes_total"] < ev["purged_bytes"]:
                out.append("holes_stats: fewer bytes ever discarded than discarded now")
    if not any(e["ev"] == "holes_stats" for e in v.events):
        out.append("the trace has no holes_stats event")
    return out[:5]


# -- the sweep's skip and the full sweep -------------------------------------------------------------

@case_check("skip-unchanged", "a sweep that is not a full one skips a page whose state is as "
            "its last complete walk left it, (capacity, used) (no blocks visited, no discard), "
            "and walks a page that changed; a full sweep skips nothing")
def _skip(v: TraceView) -> list[str]:
    out: list[str] = []
    seen: dict[int, dict] = {}  # each page's state at the last observation
    touched: set[int] = set()  # pages something happened to since then
    full, sweeping = False, {}
    for ev in v.events:
        kind = ev["ev"]
        if kind == "op":
            sweeping = {}
        elif kind == "sweep_begin":
            full = ev["full"]
        elif kind in ("malloc", "free", "extend", "unpurge", "realloc", "reuse_tail"):
            touched.add(ev["page"])
        elif kind == "sweep_page" and ev["outcome"] in ("unchanged", "walked", "incomplete"):
            page, before = ev["page"], seen.get(ev["page"])
            sweeping[page] = ev["outcome"]
            if ev["outcome"] == "unchanged" and full:
                out.append(f"page {page}: a full sweep skipped it")
            elif ev["outcome"] != "unchanged" and not full and page not in touched \
                    and before is not None and before["swept_state"] == _walked(before):
                out.append(f"page {page}: walked again although nothing changed since its "
                           f"last walk")
        elif kind in ("discard", "walk") and sweeping.get(ev["page"]) == "unchanged":
            out.append(f"page {ev['page']}: a skipped page was walked")
        elif kind == "page_state":
            if sweeping.get(ev["page"]) == "unchanged" and ev["swept_state"] != _walked(ev):
                out.append(f"page {ev['page']}: skipped although its state is not the walked "
                           f"(capacity, used)")
            seen[ev["page"]] = ev
            touched.discard(ev["page"])
    if not any(e["ev"] == "sweep_page" and e["outcome"] == "unchanged" for e in v.events):
        out.append("no sweep skipped a page: the check would hold vacuously")
    return out[:5]


def _walked(state: dict) -> int:
    """Digest 3, step 5: the swept_state a complete walk leaves, (capacity << 32) | used."""
    return (state["capacity"] << 32) | state["used"]


@case_check("full-sweep-finds-hole", "a full sweep (every purge_holes_full_every-th) walks a "
            "page the skip left alone and discards the hole the skip hid")
def _full(v: TraceView) -> list[str]:
    full, found = False, False
    for ev in v.events:
        if ev["ev"] == "sweep_begin":
            full = ev["full"]
        elif ev["ev"] == "discard" and full and ev["ok"]:
            found = True
    return [] if found else ["no full sweep discarded anything"]


# -- the unformed tail ------------------------------------------------------------------------------

@case_check("tail-life", "the unformed tail is discarded strictly inside [capacity, reserved), "
            "brought back before a block is formed in it, and none is left once the page is "
            "fully formed or gone")
def _tail(v: TraceView) -> list[str]:
    out, capacity, tail = [], {}, {}
    for ev in v.events:
        kind = ev["ev"]
        if kind == "extend":
            if tail.get(ev["page"]):
                out.append(f"page {ev['page']}: blocks formed in a discarded tail without a reuse")
            capacity[ev["page"]] = ev["first"] + ev["count"]
        elif kind == "discard_tail" and ev["ok"]:
            g = v.pages[ev["page"]]
            lo = g.block_bytes(capacity.get(ev["page"], 0))[0]
            hi = g.block_bytes(g.reserved)[0]
            if ev["addr"] < lo or ev["addr"] + ev["size"] > hi or ev["addr"] % v.os_page:
                out.append(f"page {ev['page']}: tail discard [{ev['addr']}, "
                           f"{ev['addr'] + ev['size']}) outside the unformed [{lo}, {hi})")
            tail[ev["page"]] = True
        elif kind in ("reuse_tail", "retire"):
            tail[ev["page"]] = False
    if not any(e["ev"] == "discard_tail" and e["ok"] for e in v.events):
        out.append("no unformed tail was discarded: the check would hold vacuously")
    final = v.final()
    for p, s in final.states.items():
        if s["capacity"] == s["reserved"] and tail.get(p):
            out.append(f"page {p} is fully formed and still has a discarded tail")
    return out[:5]


@case_check("pages-freed-with-holes", "a forced collect (mi_collect(true)) gives back the pages "
            "that other threads' frees emptied, holes and all: each goes back to the arena with "
            "its discarded runs reused (unpurge all), and no page is left with no live block")
def _pages_freed(v: TraceView) -> list[str]:
    out: list[str] = []
    with_holes = 0
    for op, ev in v.events_in_ops(frozenset({"collect_force"})):
        if ev["ev"] == "unpurge_all" and ev["runs"]:
            with_holes += 1
    retired = {ev["page"] for op, ev in v.events_in_ops(frozenset({"collect_force"}))
               if ev["ev"] == "retire"}
    if not with_holes:
        out.append("no page with holes went back at a forced collect: the check would hold "
                   "vacuously")
    for page in retired:
        runs = [ev for op, ev in v.events_in_ops(frozenset({"collect_force"}))
                if ev["ev"] == "unpurge_all" and ev["page"] == page]
        if not runs:
            out.append(f"page {page} went back at a forced collect without an unpurge all")
    final = v.final()
    out += [f"at the end: page {p} has no live block but did not go back" for p, s in
            final.states.items() if s["capacity"] and s["used"] == 0]
    return out[:5]


@case_check("each-size-purged", "every block size of the run purges: for each, a discard "
            "succeeded in a page of that size (the later test-purge-holes.c: 16, 64, 256 and "
            "1024-byte blocks are eligible, whatever their number per page)")
def _each_size(v: TraceView) -> list[str]:
    purged = {v.pages[e["page"]].block_size for e in v.events if e["ev"] == "discard" and e["ok"]}
    sizes = sorted({g.block_size for g in v.pages.values()})
    out = [f"nothing was discarded in the pages of {bs}-byte blocks" for bs in sizes
           if bs not in purged]
    if not sizes:
        out.append("no page in the run: the check would hold vacuously")
    return out[:5]


# -- sweepers at the same time (test-purge-holes-large.c), on the virtual clock ---------------------

SHAPE_INTERVALS, SHAPE_EPOCH_MOVES = 12, 4  # the real test runs this long at least


@case_check("epoch-not-shorter", "no epoch is shorter than the interval: each advance begins an "
            "epoch at least purge_holes_min_interval after the one before began, and moves the "
            "epoch by one; the run lasts 12 intervals and sees 4 epoch moves at least (the real "
            "test's shape)")
def _epoch_not_shorter(v: TraceView) -> list[str]:
    out: list[str] = []
    interval = v.config["interval_ms"]
    last: dict | None = None  # the last advance
    moves, now = 0, v.config.get("clock_start_ms", 0)
    start = now
    for ev in v.events:
        kind = ev["ev"]
        if kind == "clock":
            now = ev["now"]
        elif kind == "epoch_skip":
            last = None  # the skipped epochs are the script's, not an advance's
        elif kind == "epoch_advance":
            moves += 1
            if last is not None:
                if ev["epoch"] != last["epoch"] + 1:
                    out.append(f"an advance moved the epoch from {last['epoch']} to "
                               f"{ev['epoch']}")
                elif ev["start"] - last["start"] < interval:
                    out.append(f"epoch {last['epoch']} began at {last['start']} and lasted "
                               f"{ev['start'] - last['start']} ms, less than the interval of "
                               f"{interval} ms")
            last = ev
    span = now - start
    if interval <= 0 or moves < SHAPE_EPOCH_MOVES or span < SHAPE_INTERVALS * interval:
        out.append(f"the run saw {moves} epoch moves in {span} ms at an interval of {interval} "
                   f"ms: less than the real test's {SHAPE_EPOCH_MOVES} moves in "
                   f"{SHAPE_INTERVALS} intervals")
    return out[:5]


@case_check("busy-page-keeps", "a large page allocated from less than the interval before a "
            "sweep keeps its free blocks in that sweep (the busy page's purged count does not "
            "change), on the virtual clock to the millisecond")
def _busy_page_keeps(v: TraceView) -> list[str]:
    out: list[str] = []
    interval = v.config["interval_ms"]
    large = {p for p, g in v.pages.items() if g.kind == "large"}
    allocated_at: dict[int, int] = {}  # page -> clock of its last allocation
    now, busy_sweeps = v.config.get("clock_start_ms", 0), 0
    for ev in v.events:
        kind = ev["ev"]
        if kind == "clock":
            now = ev["now"]
        elif kind == "malloc" and ev["page"] in large:
            allocated_at[ev["page"]] = now
        elif kind == "sweep_page" and now - allocated_at.get(ev["page"], -interval) < interval:
            busy_sweeps += 1
        elif kind == "discard" and ev["ok"] and ev["page"] in allocated_at \
                and now - allocated_at[ev["page"]] < interval:
            out.append(f"page {ev['page']}, allocated from at {allocated_at[ev['page']]}, lost "
                       f"units [{ev['k0']}, {ev['k1']}) at {now}, less than the interval of "
                       f"{interval} ms later")
    if interval <= 0 or not busy_sweeps:
        out.append("no sweep came upon a large page allocated from less than the interval "
                   "before: the check would hold vacuously")
    return out[:5]


# -- the unit arithmetic over the real tests' grids (purgecheck/arith.py) ---------------------------

def _grid_problems(v: TraceView, grid: str) -> list[str]:
    """Each `unit_blocks` line of the grid against the definition: unit k of base
    align_down(offset, unit) lies inside when [lo, hi) is within [offset, offset + capacity *
    block_size); then [first, last] is exactly the blocks that overlap [lo, hi), else first =
    last = 0. Blocks are consecutive intervals, so the blocks over an interval are one run:
    [first, last] is exactly that run when first and last overlap it, first is block 0 or its
    left neighbour does not overlap, and last is the last block or its right neighbour does
    not (which is what the real test's enumeration of every block finds)."""
    out: list[str] = []
    seen = 0
    for ev in v.events:
        if ev["ev"] != "unit_blocks" or ev["grid"] != grid:
            continue
        seen += 1
        unit, bs, off, cap, k = (ev[x] for x in ("unit", "block_size", "offset", "capacity", "k"))
        lo = off - off % unit + k * unit
        hi = lo + unit

        def overlaps(i: int) -> bool:
            return off + i * bs < hi and lo < off + (i + 1) * bs

        where = f"unit {unit}, block {bs}, offset {off}, capacity {cap}, k {k}"
        want_inside = lo >= off and hi <= off + cap * bs
        first, last = ev["first"], ev["last"]
        if ev["inside"] != want_inside:
            out.append(f"{where}: inside is {ev['inside']}, the unit [{lo}, {hi}) says "
                       f"{want_inside}")
        elif not want_inside:
            if first or last:
                out.append(f"{where}: outside the blocks but [{first}, {last}], not [0, 0]")
        elif not (0 <= first <= last < cap and overlaps(first) and overlaps(last)
                  and (first == 0 or not overlaps(first - 1))
                  and (last == cap - 1 or not overlaps(last + 1))):
            out.append(f"{where}: blocks [{first}, {last}] are not exactly the blocks over "
                       f"[{lo}, {hi})")
    if not seen:
        out.append(f"no line of the {grid} grid: the check would hold vacuously")
    return out[:5]


@case_check("unit-blocks-grid", "over the large-page grid (units of 8, 16 and 64 KiB; blocks of "
            "80 to 512 KiB; offsets 0, 4 KiB and 192 B; a full 4 MiB capacity) a unit is "
            "inside exactly when it lies wholly inside the formed blocks, and its first and last "
            "block are exactly the blocks that overlap it")
def _unit_grid(v: TraceView) -> list[str]:
    return _grid_problems(v, "large")


@case_check("os-page-blocks-grid", "over the small-page grid (OS pages of 4 and 16 KiB as the "
            "unit; blocks of 16 B to 64 KiB; seven offsets; capacities 0, 1, 64 and 512 KiB "
            "worth) the same, and a unit outside the blocks gives first = last = 0")
def _os_page_grid(v: TraceView) -> list[str]:
    return _grid_problems(v, "small")


# -- each check is an invariant of the registry (issue 28): its clause, its id -----------------

CLAUSES = {
    "no-aliasing": "seed 000 tests: \"reuse after a purge (mi_malloc and mi_zalloc, no block "
                   "handed out twice ...)\"; digest 11: churn, no aliasing",
    "usable-size": "digest 11: churn of 20k random operations (test-purge-holes.c: usable size "
                   "at least the request)",
    "aligned": "digest 11: churn (test-purge-holes.c: every block aligned to "
               "MI_MAX_ALIGN_SIZE)",
    "aligned-16k": "test-purge-holes.c (later form): aligned-16k, JSC's MarkedBlock blocks stay "
                   "16 KiB aligned after an unpurge",
    "survivors-intact": "seed 000 tests: \"the survivors keep every byte\"",
    "zalloc-zero": "seed 000 (1): \"mi_zalloc of a block that was purged zeroes it like any "
                   "reused block and never sees stale bytes\"",
    "unit-rule": "seed 000 (1): \"mi_page_purge_unit(page) is the OS page where the block area "
                 "... needs at most MI_PAGE_PURGE_BITS bits, and else the smallest power-of-two "
                 "multiple\"; seed 000 tests: the unit of small, medium and large pages",
    "purged-grows": "seed 000 tests: \"frees from another thread into pages with holes, and the "
                    "last blocks freed from there\"",
    "hold-first-keeps": "seed 000 (2): \"a large page whose epoch is the current one or the one "
                        "before keeps its free blocks\"; tests: \"nothing of a large page goes "
                        "at the first sweep after the allocations, nor at a second one right "
                        "after it\"",
    "held-says-pending": "seed 000 (2): \"mi_on_thread_idle_pending(): true when the last sweep "
                         "of this thread's heaps left such blocks\"",
    "park-first-keeps": "seed 000 tests: \"the first sweep of a park takes nothing of the large "
                        "pages and does not mark the park as done\"",
    "park-done-in-2-3": "seed 000 tests: \"the park is swept two or three times, each an "
                        "interval after the one before, which takes every free block; then it "
                        "is done and not swept again\"",
    "freed-purged": "seed 000 tests: \"the free blocks of the first, a middle and the largest "
                    "large-page class are all purged at an idle sweep and ... not resident after "
                    "it (mincore)\"",
    "something-purged": "digest 11: every test that depends on a purge asserts one actually "
                        "happened (mi_purge_holes_stats_get)",
    "nothing-discarded": "digest 11: option off is a no-op (test-purge-holes.c: "
                         "option-off-is-noop)",
    "reuse-rises": "seed 000 tests: \"reuse after a purge ... the purged blocks come back\"",
    "nothing-left-at-end": "seed 000 (1): \"mi_heap_destroy, mi_heap_delete and a page that "
                           "becomes free all go through _mi_page_unpurge_all, so the "
                           "discarded-bytes accounting returns to where it was\"; digest 11: at "
                           "exit nothing is left discarded",
    "double-free-reported": "seed 000 tests: \"a double free of a purged block\"",
    "idle-never-unpurges": "digest 4: _mi_page_unpurge_run is \"called only from the "
                           "allocation path ...; collects on the idle path never unpurge\"",
    "stats-agree": "digest 11 (mi_purge_holes_stats_get) and seed 000 (1): \"the counters and "
                   "the sweep's rate limit\" as before",
    "skip-unchanged": "digest 6, step 4: \"skip when this is not a full sweep and swept_state == "
                      "(capacity, used)\"; digest 11: a sweep skips unchanged pages",
    "full-sweep-finds-hole": "digest 6, step 4: \"Every purge_holes_full_every (64)-th sweep is "
                             "a full sweep that walks every page anyway\"; digest 11",
    "tail-life": "seed 000 (1): \"the blocks that are not formed yet (discarded by their own "
                 "OS-page-granular mechanism ...)\"; digest 3: brought back before "
                 "mi_page_extend_free writes into it",
    "pages-freed-with-holes": "seed 000 (1): \"a page that becomes free ... go[es] through "
                              "_mi_page_unpurge_all\"; tests: cross-thread frees, "
                              "mi_collect(true)",
    "each-size-purged": "test-purge-holes.c (later form): small-blocks-are-eligible; digest 2: "
                        "mi_page_can_purge_holes has no cap on the blocks of a page",
    "epoch-not-shorter": "seed 000 (2): \"No epoch is shorter than the interval, whoever looks "
                         "and wherever a sweeper is preempted\"; tests: sweepers at the same "
                         "time (a)",
    "busy-page-keeps": "seed 000 tests: sweepers at the same time (b): \"a page it allocated "
                       "from before a sweep keeps its blocks in that sweep\"",
    "unit-blocks-grid": "seed 000 (1): test_unit_arithmetic \"checks the arithmetic for 8, 16 "
                        "and 64 KiB units under block sizes that are and are not multiples of "
                        "them, with and without an offset of the first block\"",
    "os-page-blocks-grid": "test-purge-holes.c: os-page-arithmetic (the OS page as the unit; "
                           "outside the block area first = last = 0)",
}
TRACE_SCOPE = "trace"  # judged on a scenario's trace, the model's and the C reference's


def invariant_id(check: str) -> str:
    """The registry id of a case check: RT- and its name."""
    return "RT-" + check.upper()


def register_invariants() -> None:
    """Each case check as an invariant of the registry (once per process)."""
    from model.invariants import REGISTRY, Invariant, register

    for name, ch in CHECKS.items():
        if invariant_id(name) not in REGISTRY:
            register(Invariant(invariant_id(name), ch.statement[0].upper() + ch.statement[1:] +
                               ".", CLAUSES[name], f"purgecheck.realtests.checks.{ch.fn.__name__}",
                               scope=TRACE_SCOPE))


# Which mutant of the catalogue each check catches, on which scenario (model and C):
# tests/test_realtests.py shows each; the invariants page lists them.
KILLS = [
    ("no-aliasing", "churn", "malloc-head-kept"),
    ("freed-purged", "discard-idle-320", "unit-os-page"),
    ("something-purged", "discard-idle-320", "unit-os-page"),
    ("purged-grows", "xthread-idle", "unit-os-page"),
    ("unit-rule", "unit-sizes", "unit-os-page"),
    ("nothing-discarded", "option-off", "option-off-ignored"),
    ("reuse-rises", "reuse-idle", "unpurge-without-reuse"),
    ("zalloc-zero", "reuse-idle", "zalloc-clears-link-only"),
    ("idle-never-unpurges", "idle-no-unpurge", "collect-unpurges"),
    ("skip-unchanged", "sweep-skip", "walk-keeps-stamp"),
    ("full-sweep-finds-hole", "full-sweep", "full-sweep-never"),
    ("tail-life", "unformed-tail", "tail-from-last-block"),
    ("hold-first-keeps", "inline-hold", "age-lt-1"),
    ("held-says-pending", "inline-hold", "no-hold-inline"),
    ("park-first-keeps", "park-handoff", "age-lt-1"),
    ("park-done-in-2-3", "park-handoff", "park-done-first"),
    ("double-free-reported", "double-free-purged", "double-free-absorbed"),
    ("survivors-intact", "double-free-purged", "unit-next-to-live"),
    ("nothing-left-at-end", "heap-destroy", "unpurge-all-skipped"),
    ("pages-freed-with-holes", "xthread-idle", "unpurge-all-skipped"),
    ("each-size-purged", "survivors-sizes", "purge-max-blocks-cap"),
    ("aligned-16k", "aligned-16k-offset", "aligned-at-block-start"),
    ("usable-size", "churn", "size-class-word-less"),
    ("aligned", "churn", "size-class-word-less"),
    ("stats-agree", "every-third", "accounting-skipped"),
]
# Broken elsewhere, on the model and on C: the grid checks by unit-last-block-short
# (tests/test_arith.py), the sweepers' by age-lt-1, epoch-not-rate-limited and double-increment
# (tests/test_sweepers_real.py).
KILLED_ELSEWHERE = {"unit-blocks-grid": "unit-last-block-short",
                    "os-page-blocks-grid": "unit-last-block-short",
                    "epoch-not-shorter": "epoch-not-rate-limited",
                    "busy-page-keeps": "age-lt-1"}


def caught_by(mutant: str) -> list[str]:
    """The invariant ids of the case checks that catch `mutant`."""
    pairs = [(c, m) for c, _, m in KILLS] + list(KILLED_ELSEWHERE.items())
    return [invariant_id(c) for c, m in pairs if m == mutant]


def run_checks(names: tuple[str, ...], header: dict, events: list[dict]) -> dict[str, list[str]]:
    """{check: what it found wrong} for the named checks over one trace."""
    view = TraceView(header, events)
    return {name: CHECKS[name].fn(view) for name in names}


register_invariants()
