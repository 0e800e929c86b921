"""The seeds' claims about cost, each as numbers: the seed's figures, the model's figures
computed now, and the comparison between them stated as data, with the verdict it gives.

Seed 000 measured Bun on a busy 64-core machine; seed 001 measured glibc with bench-free
and ebizzy. Each `Claim` carries its `Figure`s (a name, a unit, the seed's value or range as
the seed writes it, the model's value, and `real`: a measurement of the real program when
one is given, None otherwise) and its `Comparison`s (a relation between figures, the band
or margin it uses, and whether it holds). A claim holds when every comparison holds; a claim
that holds by construction of the model says so and why, and is not counted as reproduced.

Bands: a figure is compared within the seed's own spread (its lo..hi over the rounds it
gives); a wider band, or one around a single figure, needs a `reason` on the claim. A ratio
with a zero side reproduces nothing: it fails as "not reproduced: the model's figure is 0".
A claim that a figure is 0 is compared with a tolerance stated in bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from purgecheck.simulate.mimalloc import simulate
from purgecheck.simulate.result import DesignRun
from purgecheck.simulate.workloads import Workload, make_workload

MiB = 1 << 20
GiB = 1 << 30
INF = float("inf")

HOLDS, FAILS, BY_CONSTRUCTION = "holds", "fails", "by construction"
VERDICTS = (HOLDS, FAILS, BY_CONSTRUCTION)
NOT_REPRODUCED = "not reproduced: the model's figure is 0"

# Relations of a comparison (a, b: figures of the claim, their model values):
RELATIONS = {
    "ratio": "a / b within the band [lo, hi]; a zero side is not reproduced",
    "within": "a within the band [lo, hi]",
    "less": "a + margin <= b: a below b by at least the margin",
    "at_most": "a <= b + tolerance (b absent: a <= tolerance, a figure that is 0)",
}

# The seed prints residency to 0.1 MB: its "0.0 MB" is below 0.05 MB.
ZERO_MB_BYTES = 52_428
# A seed figure from one run has no spread: a factor of this either side of it, where a
# claim's `reason` says why that is the band.
ONE_RUN_FACTOR = 2.0


@dataclass
class Figure:
    """One figure of a claim. `seed_lo`..`seed_hi` is the seed's value or spread as the seed
    writes it (None: the seed gives no figure); `model` is computed now; `real` is a
    measurement of the real program (`purgecheck measure`), None when there is none."""
    name: str
    unit: str
    seed_lo: float | None
    seed_hi: float | None
    model: float
    real: float | None = None
    note: str = ""

    def as_json(self) -> dict:
        return {"name": self.name, "unit": self.unit, "seed_lo": self.seed_lo,
                "seed_hi": self.seed_hi, "model": self.model, "real": self.real,
                "note": self.note}


@dataclass
class Comparison:
    """A relation between the model's figures (RELATIONS), its band or margin, and the
    outcome: `value` is what was compared (the ratio, the figure, b - a, a - b)."""
    relation: str
    a: str
    b: str | None = None
    band: tuple[float, float] | None = None  # ratio, within
    margin: float = 0.0  # less: the minimum gap; at_most: the tolerance (in a's unit)
    margin_bytes: int | None = None  # the margin in bytes, where a's unit is MB
    basis: str = ""  # where the band or margin comes from
    value: float | None = None
    holds: bool = False
    note: str = ""

    def as_json(self) -> dict:
        band = None if not self.band else [None if x in (INF, -INF) else x for x in self.band]
        return {"relation": self.relation, "a": self.a, "b": self.b,
                "band": band,  # [lo, hi]; None for a side without a bound "margin": self.margin,
                "margin_bytes": self.margin_bytes, "basis": self.basis, "value": self.value,
                "holds": self.holds, "note": self.note}

    def statement(self) -> str:
        """The comparison in one line, with its numbers."""
        v = "-" if self.value is None else _num(self.value)
        if self.relation == "ratio":
            return f"{self.a} / {self.b} = {v} in {_band(self.band)}"
        if self.relation == "within":
            return f"{self.a} = {v} in {_band(self.band)}"
        if self.relation == "less":
            return f"{self.a} + {_num(self.margin)} <= {self.b} (gap {v})"
        tol = f"{self.margin_bytes:,} B" if self.margin_bytes is not None else _num(self.margin)
        return (f"{self.a} <= {self.b} + {tol} (excess {v})" if self.b else
                f"{self.a} = {v} <= {tol}")


def _num(x: float) -> str:
    if x == INF:
        return "inf"
    if x == 0 or 0.01 <= abs(x) < 1e6:
        return f"{x:,.3g}" if abs(x) < 1000 else f"{x:,.0f}"
    return f"{x:.3g}"


def _band(band) -> str:
    return f"[{_num(band[0])}, {_num(band[1])}]" if band else "-"


@dataclass
class Claim:
    id: str
    seed: str
    claim: str
    workload: str
    figures: list[Figure]
    comparisons: list[Comparison]
    by_construction: bool = False
    reason: str = ""  # why by construction, and why a band is wider than the seed's spread
    verdict: str = ""

    def figure(self, name: str) -> Figure:
        for f in self.figures:
            if f.name == name:
                return f
        raise KeyError(f"claim {self.id}: no figure {name!r}")

    @property
    def holds(self) -> bool:
        """Every comparison holds (by construction or not)."""
        return self.verdict != FAILS

    def with_real(self, real: dict[str, float | None]) -> "Claim":
        """Set the real program's figures by name (measured elsewhere); the verdict is the
        model's and does not change."""
        for name, value in real.items():
            self.figure(name).real = value
        return self

    def judge(self) -> "Claim":
        """Compute each comparison from the figures, then the verdict."""
        for c in self.comparisons:
            _judge(self, c)
        ok = all(c.holds for c in self.comparisons)
        self.verdict = FAILS if not ok else BY_CONSTRUCTION if self.by_construction else HOLDS
        return self

    def as_json(self) -> dict:
        return {"id": self.id, "seed": self.seed, "claim": self.claim,
                "workload": self.workload, "verdict": self.verdict,
                "by_construction": self.by_construction, "reason": self.reason,
                "figures": [f.as_json() for f in self.figures],
                "comparisons": [c.as_json() for c in self.comparisons]}


def _judge(claim: Claim, c: Comparison) -> None:
    if c.relation not in RELATIONS:
        raise ValueError(f"claim {claim.id}: unknown relation {c.relation!r}")
    a = claim.figure(c.a)
    b = claim.figure(c.b).model if c.b else 0.0
    c.note = ""
    if c.relation == "ratio":
        if a.model == 0 or b == 0:
            c.value, c.holds, c.note = None, False, NOT_REPRODUCED
            return
        c.value = a.model / b
        c.holds = c.band[0] <= c.value <= c.band[1]
    elif c.relation == "within":
        if (a.seed_lo is None or c.band[0] < a.seed_lo or c.band[1] > a.seed_hi) \
                and not claim.reason:
            raise ValueError(f"claim {claim.id}: the band {_band(c.band)} of {a.name} is wider "
                             f"than the seed's spread; give the claim a reason")
        c.value = a.model
        c.holds = c.band[0] <= c.value <= c.band[1]
    elif c.relation == "less":
        c.value = b - a.model
        c.holds = c.value >= c.margin
    else:  # at_most
        c.value = a.model - b
        c.holds = c.value <= c.margin


def one_run_band(value: float) -> tuple[float, float]:
    """The band around a figure the seed gives from one run (ONE_RUN_FACTOR)."""
    return (value / ONE_RUN_FACTOR, value * ONE_RUN_FACTOR)


def summary(claims: list[Claim]) -> dict:
    """Counts per verdict; `reproduced` is the claims that hold and are not by construction."""
    counts = {v: sum(c.verdict == v for c in claims) for v in VERDICTS}
    return {"claims": len(claims), "reproduced": counts[HOLDS], "fails": counts[FAILS],
            "by_construction": counts[BY_CONSTRUCTION]}


def _mb(n: float) -> float:
    return n / MiB


class Runs:
    """Each (workload, design) simulated once, however many claims read it. `inputs`: what a
    measurement of the real Bun gives the load claims' server, per design
    (purgecheck.measure.seedtables.claim_inputs: the collector's batch, the requests per turn
    of the loop, the scavenger's reach and the options of the real design); none: the
    workload's defaults (a park after every request, every body freed at once)."""

    def __init__(self, scale: float = 1.0, inputs: dict[str, dict] | None = None) -> None:
        self.scale = scale
        self.inputs = inputs or {}
        self.cache: dict[tuple, DesignRun] = {}

    def serve(self, design: str, **extra) -> DesignRun:
        """The load claims' bun-serve under `design`, on the measured inputs where there are
        some (a design Bun has no option for, the clock rule, takes the epoch rule's)."""
        got = self.inputs.get(design) or self.inputs.get("epoch") or {}
        params = {**got.get("params", {}), **extra}
        # a claim that states its own machine (a late scavenger, another sweeper) keeps it
        machine = params.pop("machine", got.get("machine", ()))
        return self.get("bun-serve", design, machine=machine,
                        options=tuple(sorted(got.get("options", {}).items())), **params)

    def get(self, workload: str, design: str, idle: str | None = None,
            machine: tuple = (), options: tuple = (), **params) -> DesignRun:
        """`machine`: (name, value) pairs for simulate() (the scavenger's lateness, another
        sweeper), apart from the workload's parameters; `options`: (name, value) pairs of the
        model's Options (model.world)."""
        key = (workload, design, idle, machine, options, tuple(sorted(params.items())))
        if key not in self.cache:
            sized = dict(params)
            for size_param in ("requests", "allocations"):
                if size_param in SIZES.get(workload, {}):
                    sized.setdefault(size_param,
                                     max(200, int(SIZES[workload][size_param] * self.scale)))
            w = make_workload(workload, **sized)
            if idle:  # the same calls with another idle behaviour
                w = Workload(w.name, w.description, w.calls, idle, w.idle_ms, w.params)
            from model.world import Options
            opts = Options(**dict(options)) if options else None
            self.cache[key] = simulate(w, design, opts, sample_ms=5, **dict(machine))
        return self.cache[key]


# The load of each workload in the claims (the seed's 20 s of Bun.serve are 55 k to 100 k
# requests; the model's counts scale with it, so the claims compare counts only as ratios).
SIZES = {"bun-serve": {"requests": 20_000}, "bun-serve-nothing-kept": {"requests": 20_000},
         "typed-arrays": {"allocations": 2_000}}

# Seed 000, "Under sustained load" (20 s rounds; the spread over the four rounds) and "(1)
# without (2)" (an earlier session against its own baseline).
LOAD_SEED = {
    "epoch discards": (162, 303), "clock discards": (234, 363),
    "no-hold discards": (4237, 5202),
    "epoch discarded": (20, 115), "clock discarded": (90, 177),  # MB, over the rounds
    "no-hold discarded": (2.4, 3.0),  # GB
    "epoch faults/request": (0.27, 1.97), "no-hold faults/request": (7.4, 9.3),
}


def load_claims(runs: Runs) -> list[Claim]:
    out = []
    epoch, nohold, clock = (runs.serve(d).counters for d in ("epoch", "no-hold", "clock"))
    s = LOAD_SEED
    out.append(Claim(
        "load-no-hold", "000",
        "under sustained load, the unit without the hold discards an order of magnitude more "
        "than the epoch rule, and refaults what it discards",
        "bun-serve",
        [Figure("no-hold discards", "discards", *s["no-hold discards"],
                nohold["discards_load"], note=f"model: {nohold['requests']:.0f} requests; "
                "seed: a 20 s round, 72.9 k to 82.1 k requests"),
         Figure("epoch discards", "discards", *s["epoch discards"], epoch["discards_load"],
                note="seed: a 20 s round, 55.1 k to 95.7 k requests"),
         Figure("no-hold discarded", "GB", *s["no-hold discarded"],
                nohold["discarded_bytes_load"] / GiB),
         Figure("epoch discarded", "MB", *s["epoch discarded"],
                _mb(epoch["discarded_bytes_load"])),
         Figure("no-hold faults/request", "page faults/request", *s["no-hold faults/request"],
                nohold["refaults_per_request"], note="model: refaults only"),
         Figure("epoch faults/request", "page faults/request", *s["epoch faults/request"],
                epoch["refaults_per_request"], note="model: refaults only")],
        [Comparison("ratio", "no-hold discards", "epoch discards",
                    band=(round(4237 / 303, 2), INF),
                    basis="the seed's smallest ratio, 4,237 / 303"),
         Comparison("less", "epoch faults/request", "no-hold faults/request",
                    margin=round(7.4 - 1.97, 2),
                    basis="the seed's smallest gap, 7.4 - 1.97 page faults a request")]))
    stalls = dict(threads=4, pause_every=400, pause_ms=150)
    busy = dict(pause_every=500, pause_ms=150, gc_every=25, per_turn=4,
                machine=(("scavenger_late_ms", 60.0), ("sweeper_every_ms", 50.0)))
    for cid, text, (e, c) in (
            ("load-epoch-vs-clock",
             "under sustained load, the epoch rule discards a quarter to a half of what the "
             "clock rule discards", (epoch, clock)),
            ("load-epoch-vs-clock-stalls",
             "the same, with four sweeping threads and 150 ms stalls every 400 requests "
             "(sweeps more often than once an interval: where the two rules can differ)",
             tuple(runs.serve(d, **stalls).counters for d in ("epoch", "clock"))),
            ("load-epoch-vs-clock-busy",
             "the same on a machine as busy as the seed's (load 50 to 110): the scavenger "
             "60 ms late on average, another thread sweeping every 50 ms at a phase of its "
             "own, 150 ms stalls every 500 requests, the collector freeing 25 bodies at once "
             "and 4 requests a turn (measured here); sweeps off the epoch grid",
             tuple(runs.serve(d, **busy).counters for d in ("epoch", "clock")))):
        out.append(Claim(
            cid, "000", text, "bun-serve",
            [Figure("epoch discards", "discards", *s["epoch discards"], e["discards_load"]),
             Figure("clock discards", "discards", *s["clock discards"], c["discards_load"]),
             Figure("epoch discarded", "MB", *s["epoch discarded"],
                    _mb(e["discarded_bytes_load"])),
             Figure("clock discarded", "MB", *s["clock discarded"],
                    _mb(c["discarded_bytes_load"]))],
            [Comparison("ratio", "epoch discarded", "clock discarded", band=(0.25, 0.5),
                        basis="the seed's words: \"a quarter to a half of it\"")]))
    return out


# Seed 000, "at idle": free resident at the end of the load (epoch) and of the idle, MB.
IDLE_SEED = {
    "typed-arrays": {"load end": None, "epoch": 0.0, "clock": 0.5, "before": 71.6},
    "bun-serve": {"load end": 20.9, "epoch": 0.0, "clock": 0.0, "before": 21.1},
    "bun-serve-nothing-kept": {"load end": 8.1, "epoch": 0.0, "clock": 0.0, "before": 8.2},
}
IDLE_WORKLOADS = tuple(IDLE_SEED)
SOMETHING_MB = 1.0  # "there was free memory to give back": a floor, not the seed's figure


def _seed(v: float | None) -> tuple[float | None, float | None]:
    return (v, v)


def idle_claims(runs: Runs) -> list[Claim]:
    out = []
    for w in IDLE_WORKLOADS:
        epoch, clock = (runs.get(w, d).counters for d in ("epoch", "clock"))
        seed = IDLE_SEED[w]
        out.append(Claim(
            f"idle-{w}", "000",
            f"at idle ({w}), the epoch rule gives back what the clock rule gives back: free "
            f"resident 0.0 MB at the end of the idle", w,
            [Figure("epoch free at load end", "MB", *_seed(seed["load end"]),
                    _mb(epoch["free_resident_load_end"])),
             Figure("epoch free at idle end", "MB", *_seed(seed["epoch"]),
                    _mb(epoch["free_resident_end"])),
             Figure("clock free at idle end", "MB", *_seed(seed["clock"]),
                    _mb(clock["free_resident_end"]))],
            [Comparison("at_most", "epoch free at idle end", margin=ZERO_MB_BYTES / MiB,
                        margin_bytes=ZERO_MB_BYTES,
                        basis="the seed's 0.0 MB, printed to 0.1 MB: below 0.05 MB"),
             Comparison("at_most", "epoch free at idle end", "clock free at idle end",
                        margin=ZERO_MB_BYTES / MiB, margin_bytes=ZERO_MB_BYTES,
                        basis="what the clock rule gives back, to the seed's 0.05 MB"),
             Comparison("less", "epoch free at idle end", "epoch free at load end",
                        margin=SOMETHING_MB,
                        basis="there was free memory to give back (1 MB: a floor; the "
                              "model's heap is not Bun's, so its MB are not the seed's)")]))
    figures, comparisons = [], []
    for w in IDLE_WORKLOADS:
        epoch, off = (runs.get(w, d).counters for d in ("epoch", "off"))
        figures += [Figure(f"off free at idle end ({w})", "MB",
                           *_seed(IDLE_SEED[w]["before"]), _mb(off["free_resident_end"]),
                           note="seed: before (bun-dev3-v2)"),
                    Figure(f"epoch free at idle end ({w})", "MB", *_seed(IDLE_SEED[w]["epoch"]),
                           _mb(epoch["free_resident_end"]))]
        comparisons.append(Comparison("less", f"epoch free at idle end ({w})",
                                      f"off free at idle end ({w})", margin=SOMETHING_MB,
                                      basis="off keeps at least 1 MB more resident"))
    out.append(Claim(
        "idle-off", "000", "without hole purging (before) the free memory stays resident at "
        "idle, in all three workloads", "typed-arrays, bun-serve, bun-serve-nothing-kept",
        figures, comparisons, by_construction=True,
        reason="the model's `off` never purges a hole: the free blocks of a page in use stay "
               "resident whatever the workload; only pages that are wholly free go (in every "
               "design alike)"))
    epoch = runs.get("typed-arrays", "epoch").counters
    out.append(Claim(
        "idle-floor", "000", "free resident memory reaches its floor between one and two "
        "intervals (100 ms) after the last allocation", "typed-arrays",
        [Figure("ms to the floor", "ms", 105, 215, epoch["ms_to_floor"],
                note="seed: sampled every 50 ms; model: every 5 ms")],
        [Comparison("within", "ms to the floor", band=(105, 215),
                    basis="the seed's readings, 105 .. 215 ms")]))
    return out


def inline_claims(runs: Runs) -> list[Claim]:
    handoff, epoch = (runs.get("buffer-loop", d).counters for d in ("handoff-only", "epoch"))
    return [Claim(
        "inline-handoff", "000",
        "in a loop that frees and takes 256 KiB buffers and sweeps inline, deferring in the "
        "handoff only keeps discarding (58 MB in 3 s, 1.85 page faults per request), where "
        "the epoch rule discards nothing", "buffer-loop",
        [Figure("handoff-only discarded in 3 s", "MB", 58, 58,
                _mb(handoff["discarded_bytes_load"])),
         Figure("handoff-only faults/request", "page faults/request", 1.85, 1.85,
                handoff["refaults_per_request"], note="model: refaults only"),
         Figure("epoch discards", "discards", 0, 0, epoch["discards_load"]),
         Figure("epoch faults/request", "page faults/request", 0.07, 0.07,
                epoch["refaults_per_request"],
                note="seed: every page fault (0.06 without hole purging); model: refaults "
                     "only, so not compared")],
        [Comparison("within", "handoff-only discarded in 3 s", band=one_run_band(58),
                    basis="one run: a factor of 2 either side"),
         Comparison("within", "handoff-only faults/request", band=one_run_band(1.85),
                    basis="one run: a factor of 2 either side"),
         Comparison("at_most", "epoch discards", margin=0, basis="the seed's 0 discards")],
        reason="the seed gives one run of this loop, no spread: a factor of 2 either side of "
               "its figure")]


def pool_claims(runs: Runs) -> list[Claim]:
    """Bun's thread pool sweeps once after 100 ms without work, then blocks."""
    clock, epoch, two = (runs.get("typed-arrays", d, idle="pool").counters
                         for d in ("clock", "epoch", "two-untouched"))
    return [Claim(
        "pool-once", "000",
        "a caller that sweeps once and then blocks (Bun's thread pool, 100 ms after its last "
        "work): that one call gave the large pages back under the clock rule; under the epoch "
        "rule, and taking them at the second untouched sweep, it never does", "typed-arrays",
        [Figure("clock free at idle end", "MB", None, None, _mb(clock["free_resident_end"])),
         Figure("epoch free at idle end", "MB", None, None, _mb(epoch["free_resident_end"])),
         Figure("two-untouched free at idle end", "MB", None, None,
                _mb(two["free_resident_end"])),
         Figure("epoch free at load end", "MB", None, None,
                _mb(epoch["free_resident_load_end"]))],
        [Comparison("at_most", "clock free at idle end", margin=ZERO_MB_BYTES / MiB,
                    margin_bytes=ZERO_MB_BYTES, basis="gave them back: 0 to 0.05 MB"),
         Comparison("less", "clock free at idle end", "epoch free at idle end",
                    margin=SOMETHING_MB, basis="the epoch rule keeps at least 1 MB more"),
         Comparison("less", "clock free at idle end", "two-untouched free at idle end",
                    margin=SOMETHING_MB, basis="the second untouched sweep: the same")],
        by_construction=True,
        reason="the pool's one sweep comes exactly 100 ms after its last work in virtual time, "
               "so every clock stamp is old enough; one sweep can neither end two epochs nor "
               "be a second untouched sweep. The seed gives no figures, only the rule")]


# Seed 001: ebizzy's records a second, 2.21 against the patch, per thread count.
SEED_RATES = {1: (10230, 43271), 2: (19153, 85562), 4: (34295, 157634), 8: (51007, 183901)}
ONE_RUN_REASON = ("the seed ran each once (\"the variation is insignificant\"), and the "
                  "model's kernel cost of a madvise was measured on another machine and glibc "
                  "(28 us, docs/glibc.md): a factor of 2 either side of its figure")


def glibc_claims(scale: float = 1.0) -> list[Claim]:
    """Seed 001's claims, from the glibc simulator's figures (purgecheck/simulate/glibc.py)."""
    from purgecheck.simulate import glibc_simulator
    g = glibc_simulator()
    f = g.claim_figures(scale)
    bench, eb, seconds = f["bench-free"], f["ebizzy"], f["seconds"]
    old, rfc, today = eb["2.21"], eb["rfc-2015"], eb["2.23+"]
    seed_run = g.SEED_RUN_S
    out = [Claim(
        "glibc-bench-free", "001", "bench-free (1024 x free(malloc(48 pages)) in a thread): "
        "2.21 calls madvise at every free, the patch twice in the run", "bench-free",
        [Figure("2.21 madvise", "calls", 1024, 1024, bench["2.21"]["madvise"],
                note=f"model: {bench['2.21']['heap_madvise']:.0f} of the heap, the rest the "
                     f"stack's"),
         Figure("patch madvise", "calls", 2, 2, bench["rfc-2015"]["madvise"]),
         Figure("2.22 madvise", "calls", None, None, bench["2.22"]["madvise"]),
         Figure("2.23+ madvise", "calls", None, None, bench["2.23+"]["madvise"],
                note="the digest measured 0 heap + 1 on 2.36")],
        [Comparison("within", "2.21 madvise", band=(1024, 1024), basis="the seed's count"),
         Comparison("within", "patch madvise", band=(2, 2), basis="the seed's count")])]
    out.append(Claim(
        "glibc-ebizzy-madvise", "001", "ebizzy, 1 thread: 2.21 calls madvise about 9,000 times "
        "a second; with the patch twice in the whole run (0.06 a second)", "ebizzy",
        [Figure("2.21 madvise/s", "calls/s", 9000, 9000, old["madvise_per_s"]),
         Figure("patch madvise in 30 s", "calls", 2, 2, rfc["madvise_in_seed_run"],
                note=f"model: {rfc['madvise']:.0f} in {seconds:g} s, none after "
                     f"{rfc['madvise_quiet_after_ms']:.1f} ms, carried over to 30 s"),
         Figure("2.23+ madvise", "calls", None, None, today["madvise"],
                note=f"in {seconds:g} s")],
        [Comparison("within", "2.21 madvise/s", band=one_run_band(9000),
                    basis="\"approximately 9000\", one run: a factor of 2"),
         Comparison("within", "patch madvise in 30 s", band=(2, 2), basis="the seed's count")],
        reason=ONE_RUN_REASON))
    per_record_seed = 2 / 1_298_133
    rfc_per_record = rfc["madvise_in_seed_run"] / (rfc["records_per_s"] * seed_run)
    out.append(Claim(
        "glibc-ebizzy-per-free", "001", "ebizzy: 2.21 calls madvise at nearly every free, the "
        "patch almost never", "ebizzy",
        [Figure("2.21 heap madvise per free", "calls/free", round(9000 / 10230, 2), 1.0,
                old["heap_madvise"] / old["allocations"],
                note="seed: about 9,000 a second for 10,230 records a second, and \"every "
                     "time\""),
         Figure("patch madvise per record", "calls/record", per_record_seed, per_record_seed,
                rfc_per_record, note="seed: 2 calls in 1,298,133 records; model: its calls "
                                     "in 30 s over its records in 30 s")],
        [Comparison("within", "2.21 heap madvise per free", band=(round(9000 / 10230, 2), 1.0),
                    basis="the seed's two statements"),
         Comparison("within", "patch madvise per record", band=one_run_band(per_record_seed),
                    basis="one run: a factor of 2")],
        reason=ONE_RUN_REASON))
    ratio_seed = SEED_RATES[1][1] / SEED_RATES[1][0]
    out.append(Claim(
        "glibc-ebizzy-records", "001", "ebizzy, 1 thread: the patch roughly quadruples the "
        "records processed a second", "ebizzy",
        [Figure("2.21 records/s", "records/s", 10230, 10230, old["records_per_s"],
                note="model: follows from its madvise calls and refaults"),
         Figure("patch records/s", "records/s", 43271, 43271, rfc["records_per_s"],
                note="model: the user time per record is the seed's own (an input, so not "
                     "compared)")],
        [Comparison("ratio", "patch records/s", "2.21 records/s",
                    band=one_run_band(round(ratio_seed, 2)),
                    basis="the seed's x4.23, one run: a factor of 2"),
         Comparison("within", "2.21 records/s", band=one_run_band(10230),
                    basis="one run: a factor of 2")],
        reason=ONE_RUN_REASON))
    share_old = old["sys_ms"] / (old["sys_ms"] + old["user_ms"])
    share_rfc = rfc["sys_ms"] / (rfc["sys_ms"] + rfc["user_ms"])
    out.append(Claim(
        "glibc-ebizzy-sys", "001", "ebizzy, 1 thread: on 2.21 most of the time goes to the "
        "kernel (22.49 s of 30); with the patch none (0.00 s)", "ebizzy",
        [Figure("2.21 kernel s in 30 s", "s", 22.49, 22.49, seed_run * share_old),
         Figure("patch kernel s in 30 s", "s", 0.0, 0.0, seed_run * share_rfc,
                note="seed: printed to 0.01 s")],
        [Comparison("within", "2.21 kernel s in 30 s", band=one_run_band(22.49),
                    basis="one run: a factor of 2"),
         Comparison("at_most", "patch kernel s in 30 s", margin=0.005,
                    basis="the seed's 0.00 s, printed to 0.01 s: below 0.005 s")],
        reason=ONE_RUN_REASON))
    KiB = 1024
    out.append(Claim(
        "glibc-ebizzy-rss", "001", "the patch reduces the overhead \"at that cost of slightly "
        "higher RSS\"", "ebizzy",
        [Figure("2.21 mean RSS", "KiB", None, None, old["rss_mean"] / KiB),
         Figure("patch mean RSS", "KiB", None, None, rfc["rss_mean"] / KiB),
         Figure("2.23+ mean RSS", "KiB", None, None, today["rss_mean"] / KiB)],
        [Comparison("ratio", "patch mean RSS", "2.21 mean RSS", band=(1.01, 2.0),
                    basis="\"slightly higher\": more than 1 % higher, at most twice")],
        reason="the seed gives no figure, only \"slightly higher\""))
    threads = f["threads"]
    figures, comparisons = [], []
    for n in (1, 2, 4):
        a, b = SEED_RATES[n]
        figures.append(Figure(f"x at {n} threads", "ratio", round(b / a, 2), round(b / a, 2),
                              threads[n]["rfc-2015"] / threads[n]["2.21"],
                              note=f"seed: {a:,} against {b:,} records/s"))
        comparisons.append(Comparison("within", f"x at {n} threads",
                                      band=one_run_band(round(b / a, 2)),
                                      basis="one run: a factor of 2"))
    out.append(Claim(
        "glibc-ebizzy-threads", "001", "ebizzy at 1, 2, 4 threads: the patch gives about four "
        "times the records a second at every thread count (8 threads: more arenas than the "
        "model has)", "ebizzy", figures, comparisons, by_construction=True,
        reason="the model has no contention between threads: each thread's rate is the one "
               "thread's, so the ratio at 2 and 4 threads is the ratio at 1 "
               "(glibc-ebizzy-records); a factor of 2 either side of the seed's one run"))
    return [c.judge() for c in out]


CLAIM_GROUPS: dict[str, Callable] = {"load": load_claims, "idle": idle_claims,
                                     "inline": inline_claims, "pool": pool_claims}


def seed_claims(scale: float = 1.0, glibc: bool = True, runs: Runs | None = None,
                real: dict[str, dict[str, float | None]] | None = None,
                inputs: dict[str, dict] | None = None) -> list[Claim]:
    """Every claim, computed and judged now; `scale` shrinks the loads (the tests run them
    small); `runs`: simulations to share with another reader (the docs' tables); `real`:
    {claim id: {figure name: a measurement of the real program}}, None where there is none;
    `inputs`: the measured inputs of the load claims' server (Runs)."""
    runs = runs or Runs(scale, inputs)
    out: list[Claim] = []
    for group in CLAIM_GROUPS.values():
        out += [c.judge() for c in group(runs)]
    if glibc:
        out += glibc_claims(scale)
    for c in out:
        c.with_real((real or {}).get(c.id, {}))
    return out
