"""The seeds' claims about cost, each beside what the simulator computes now, and whether it
holds (direction and order of magnitude: the model is not the machine).

Seed 000 measured Bun on a busy 64-core machine; seed 001 measured glibc with bench-free
and ebizzy. Every model figure below is computed when `seed_claims` runs; the seeds'
figures are quoted as text. A claim that does not reproduce is reported with its figures.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

from purgecheck.simulate.mimalloc import simulate
from purgecheck.simulate.result import DesignRun
from purgecheck.simulate.workloads import Workload, make_workload

MiB = 1 << 20


@dataclass
class Claim:
    seed: str
    claim: str
    seed_figures: str
    model_figures: str
    holds: bool
    workload: str = ""

    def as_json(self) -> dict:
        return asdict(self)


def _mb(n: float) -> str:
    return f"{n / MiB:.1f} MB"


class Runs:
    """Each (workload, design) simulated once, however many claims read it."""

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale
        self.cache: dict[tuple, DesignRun] = {}

    def get(self, workload: str, design: str, idle: str | None = None, **params) -> DesignRun:
        key = (workload, design, idle, tuple(sorted(params.items())))
        if key not in self.cache:
            sized = dict(params)
            for size_param in ("requests", "allocations"):
                if size_param in SIZES.get(workload, {}):
                    sized.setdefault(size_param,
                                     max(200, int(SIZES[workload][size_param] * self.scale)))
            w = make_workload(workload, **sized)
            if idle:  # the same calls with another idle behaviour
                w = Workload(w.name, w.description, w.calls, idle, w.idle_ms, w.params)
            self.cache[key] = simulate(w, design, sample_ms=5)
        return self.cache[key]


# The load of each workload in the claims (the seed's 20 s of Bun.serve are about 55 k
# requests; the model's figures scale with it, the directions do not).
SIZES = {"bun-serve": {"requests": 20_000}, "bun-serve-nothing-kept": {"requests": 20_000},
         "typed-arrays": {"allocations": 2_000}}


def load_claims(runs: Runs) -> list[Claim]:
    out = []
    epoch, nohold, clock = (runs.get("bun-serve", d) for d in ("epoch", "no-hold", "clock"))
    e, n = epoch.counters, nohold.counters
    ratio = (n["discards_load"] + 1) / (e["discards_load"] + 1)
    out.append(Claim(
        "000", "under sustained load, the unit without the hold discards orders of magnitude "
               "more than the epoch rule, and refaults what it discards",
        "4,237-5,202 discards and 2.4-3.0 GB against 162-303 and 115 MB; page faults 7.4-9.3 "
        "against 0.27-1.97 per request",
        f"{n['discards_load']:.0f} discards, {_mb(n['discarded_bytes_load'])}, "
        f"{n['refaults_per_request']:.2f} refaults/request against {e['discards_load']:.0f}, "
        f"{_mb(e['discarded_bytes_load'])}, {e['refaults_per_request']:.2f} "
        f"({e['requests']:.0f} requests)",
        ratio >= 10 and n["refaults_per_request"] > e["refaults_per_request"], "bun-serve"))
    c = clock.counters
    out.append(Claim(
        "000", "under sustained load, the epoch rule discards less than the clock rule (a "
               "quarter to a half of it)",
        "162-303 discards, 115 MB against 234-363, 177 MB",
        f"{e['discards_load']:.0f} discards, {_mb(e['discarded_bytes_load'])} against "
        f"{c['discards_load']:.0f}, {_mb(c['discarded_bytes_load'])}",
        e["discarded_bytes_load"] < c["discarded_bytes_load"], "bun-serve"))
    stalls = dict(threads=4, pause_every=400, pause_ms=150)
    es, cs = (runs.get("bun-serve", d, **stalls).counters for d in ("epoch", "clock"))
    out.append(Claim(
        "000", "the same, with four sweeping threads and 150 ms stalls every 400 requests "
               "(sweeps more often than once an interval: where the two rules can differ)",
        "162-303 discards, 115 MB against 234-363, 177 MB",
        f"{es['discards_load']:.0f} discards, {_mb(es['discarded_bytes_load'])} against "
        f"{cs['discards_load']:.0f}, {_mb(cs['discarded_bytes_load'])}",
        es["discarded_bytes_load"] < cs["discarded_bytes_load"], "bun-serve"))
    return out


def idle_claims(runs: Runs) -> list[Claim]:
    out = []
    for w in ("typed-arrays", "bun-serve", "bun-serve-nothing-kept"):
        epoch, clock, off = (runs.get(w, d).counters for d in ("epoch", "clock", "off"))
        same = abs(epoch["free_resident_end"] - clock["free_resident_end"]) <= \
            max(0.1 * clock["free_resident_load_end"], 64 * 1024)
        out.append(Claim(
            "000", f"at idle ({w}), the epoch rule gives back what the clock rule gives back, "
                   f"and without hole purging the free memory stays resident",
            {"typed-arrays": "free resident 71.6 MB before, 0.5 clock, 0.0 epoch",
             "bun-serve": "free resident 21.1 MB before, 0.0 clock, 0.0 epoch",
             "bun-serve-nothing-kept": "free resident 8.2 MB before, 0.0, 0.0"}[w],
            f"free resident at the end of the idle: {_mb(off['free_resident_end'])} off, "
            f"{_mb(clock['free_resident_end'])} clock, {_mb(epoch['free_resident_end'])} epoch "
            f"(at the end of the load: {_mb(epoch['free_resident_load_end'])})",
            same and off["free_resident_end"] > 10 * max(epoch["free_resident_end"], 4096)
            and off["free_resident_end"] > 0, w))
    epoch = runs.get("typed-arrays", "epoch").counters
    interval = 100
    out.append(Claim(
        "000", "free resident memory reaches its floor between one and two intervals after the "
               "last allocation",
        "105-215 ms at 100 ms (sampled every 50 ms)",
        f"{epoch['ms_to_floor']:.0f} ms at {interval} ms (sampled every 5 ms)",
        interval <= epoch["ms_to_floor"] <= 2 * interval + 15, "typed-arrays"))
    return out


def inline_claims(runs: Runs) -> list[Claim]:
    handoff, epoch = (runs.get("buffer-loop", d).counters for d in ("handoff-only", "epoch"))
    return [Claim(
        "000", "in a loop that frees and takes 256 KiB buffers and sweeps inline, deferring in "
               "the handoff only keeps discarding, where the epoch rule discards nothing",
        "58 MB in 3 s, 1.85 page faults per request against 0 discards, 0.07",
        f"{_mb(handoff['discarded_bytes_load'])} in 3 s, {handoff['refaults_per_request']:.2f} "
        f"refaults/request against {epoch['discards_load']:.0f} discards, "
        f"{epoch['refaults_per_request']:.2f}",
        handoff["discarded_bytes_load"] > 10 * MiB and epoch["discards_load"] == 0,
        "buffer-loop")]


def pool_claims(runs: Runs) -> list[Claim]:
    """Bun's thread pool sweeps once after 100 ms without work, then blocks."""
    clock, epoch, two = (runs.get("typed-arrays", d, idle="pool").counters
                         for d in ("clock", "epoch", "two-untouched"))
    return [Claim(
        "000", "a caller that sweeps once and then blocks (Bun's thread pool, 100 ms after its "
               "last work): that one call gave the large pages back under the clock rule; "
               "under the epoch rule, and taking them at the second untouched sweep, it never "
               "does",
        "the clock rule gave them back when the last allocation was 100 ms ago; now it never "
        "does; the second untouched sweep never takes them",
        f"free resident at the end of the idle: {_mb(clock['free_resident_end'])} clock, "
        f"{_mb(epoch['free_resident_end'])} epoch, {_mb(two['free_resident_end'])} "
        f"two-untouched (at the end of the load: {_mb(epoch['free_resident_load_end'])})",
        clock["free_resident_end"] < 0.1 * epoch["free_resident_end"]
        and two["free_resident_end"] > 0.5 * epoch["free_resident_load_end"], "typed-arrays")]


def glibc_claims(scale: float = 1.0) -> list[Claim]:
    """Seed 001's claims, from the glibc simulator (purgecheck/simulate/glibc.py)."""
    from purgecheck.simulate import glibc_simulator
    glibc = glibc_simulator()
    return [Claim(c["seed"], c["claim"], c["seed_figures"], c["model_figures"], c["holds"],
                  c.get("workload", "")) for c in glibc.glibc_claims(scale)]


CLAIM_GROUPS: dict[str, Callable] = {"load": load_claims, "idle": idle_claims,
                                     "inline": inline_claims, "pool": pool_claims}


def seed_claims(scale: float = 1.0, glibc: bool = True, runs: Runs | None = None) -> list[Claim]:
    """Every claim, computed now; `scale` shrinks the loads (the tests run them small);
    `runs`: simulations to share with another reader (the docs' tables)."""
    runs = runs or Runs(scale)
    out: list[Claim] = []
    for group in CLAIM_GROUPS.values():
        out += group(runs)
    if glibc:
        out += glibc_claims(scale)
    return out
