"""The model beside the real Bun: a recorded measurement, the same workload on the model, and
the band within which the two agree (issue 26, item 5: "the model predicts the real system").

The model simulates the large-page heap only; the real process also has JSC's heap and the
arena's own purges. So every figure is compared as its EXCESS OVER BEFORE: discards, MB
discarded and faults per request under load of a design less those of `before` (purging
off), and anonymous memory given back at idle as `before`'s less the design's. The model's
workload takes the real run's parameters (requests and load time give think_ms, connections
give inflight, body, kept); its discards include the arena's purges of retired pages, which
the real strace counts too. A real figure counts only where it stands above its own noise
(the spread of the repeats of the design and of `before`).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from model.world import Options
from purgecheck.simulate import mimalloc
from purgecheck.simulate.workloads import Workload, make_workload

MB = 1 << 20
# the real design -> the model's design (purgecheck/measure/designs.py MODEL_DESIGN)
MODEL_DESIGN = {"before": "off", "no-hold": "no-hold", "epoch": "epoch", "default": "floor"}
# the real design's options that the model takes too (purgecheck/measure/designs.py): no-hold
# sets purge_holes_min_interval=0, which also lifts the handoff's rate limit (digest 8)
DESIGN_OPTIONS = {"no-hold": {"purge_holes_min_interval": 0}}
FIGURES = ("discards", "mb", "faults_per_request", "anon_given_back")
BAND = {"discards": 2.0, "mb": 2.0, "faults_per_request": 2.0, "anon_given_back": 1.25}


@dataclass(frozen=True)
class MachineModel:
    """What the model takes of the machine and of the program beside the allocator rules:
    how late the woken scavenger runs (ms, mean), whether the arena hands retired pages'
    addresses out again, and how many request bodies the collector frees at once."""

    scavenger_late_ms: float = 0.6
    arena_reuse: bool = True
    gc_every: int = 3
    js_gc_every: int = 8  # typed-arrays.js asks for a collection every 8 allocations
    seed: int = 0


SEED_SCHEDULE = MachineModel(scavenger_late_ms=0.0, arena_reuse=False, gc_every=1,
                             js_gc_every=1)


def load_real(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def real_medians(real: dict) -> dict[tuple[str, str], dict]:
    """(workload, design) -> the median of each figure over the repeats, and its spread."""
    by: dict[tuple[str, str], list[dict]] = {}
    for r in real["runs"]:
        by.setdefault((r["workload"], r["design"]), []).append(r["figures"])
    out = {}
    for k, runs in by.items():
        out[k] = {f: statistics.median(x[f] for x in runs) for f in runs[0]}
        out[k]["spread"] = {f: max(x[f] for x in runs) - min(x[f] for x in runs)
                            for f in runs[0]}
    return out


def model_workload(name: str, figures: dict, params: dict, machine: MachineModel) -> Workload:
    """The simulator's workload of the real run's shape: its requests over its load time."""
    load_ms = 1000 * figures["load_s"]
    n = max(1, int(figures["requests"]))
    idle_ms = 1000 * float(params["idle_s"])
    if name in ("bun-serve", "bun-serve-nothing-kept"):
        kept = min(int(params["kept"]), n // int(params["keep_every"]))
        return make_workload(name, idle_ms=idle_ms, requests=n, think_ms=load_ms / n,
                             inflight=int(params["connections"]), body=int(params["body"]),
                             kept=kept, gc_every=machine.gc_every)
    if name == "typed-arrays":
        return make_workload(name, idle_ms=idle_ms, allocations=n, think_ms=load_ms / n,
                             lo=int(params["lo"]), hi=int(params["hi"]),
                             keep_every=int(params["keep_every"]),
                             lifetime=int(params["lifetime"]), gc_every=machine.js_gc_every)
    if name == "buffer-loop":
        w = make_workload(name, idle_ms=idle_ms, seconds=load_ms / 1000, step_ms=load_ms / n,
                          size=int(params["size"]), batch=int(params["batch"]),
                          kept=int(params["kept"]), free_late=1)
        return replace(w, idle="park")  # on Linux Bun's event loop parks between rounds
    raise ValueError(f"no model workload for {name!r}")


def model_figures(run) -> dict[str, float]:
    c = run.counters
    return {"discards": c["discards_load"] + c["arena_purges_load"],
            "mb": (c["discarded_bytes_load"] + c["arena_purged_bytes_load"]) / MB,
            "faults_per_request": c["refaults_per_request"],
            "anon_idle": c["rss_end"] / MB}


def real_figures(f: dict) -> dict[str, float]:
    return {"discards": f["discards_load"], "mb": f["discarded_mb_load"],
            "faults_per_request": f["faults_per_request"], "anon_idle": f["anon_mb_idle_end"]}


def excess(figs: dict, base: dict) -> dict[str, float]:
    """A design's figures as excess over before (anonymous memory: what it gives back)."""
    out = {f: figs[f] - base[f] for f in ("discards", "mb", "faults_per_request")}
    out["anon_given_back"] = base["anon_idle"] - figs["anon_idle"]
    return out


def real_noise(med: dict, base: dict) -> dict[str, float]:
    s, b = med["spread"], base["spread"]
    keys = {"discards": "discards_load", "mb": "discarded_mb_load",
            "faults_per_request": "faults_per_request", "anon_given_back": "anon_mb_idle_end"}
    return {f: s[k] + b[k] for f, k in keys.items()}


@dataclass
class Row:
    workload: str
    design: str
    figure: str
    real: float
    model: float
    noise: float

    @property
    def above_noise(self) -> bool:
        return abs(self.real) > self.noise

    @property
    def in_band(self) -> bool:
        band = BAND[self.figure]
        if not self.above_noise:
            return abs(self.model) <= max(self.noise, abs(self.real))  # both within the noise
        if self.real * self.model <= 0:
            return False
        ratio = self.model / self.real
        return 1 / band <= ratio <= band


def compare(real: dict, machine: MachineModel = MachineModel(),
            workloads: tuple[str, ...] | None = None,
            designs: tuple[str, ...] = ("no-hold", "epoch", "default")) -> list[Row]:
    """Every (workload, design, figure) of the recorded `real` beside the model's."""
    med = real_medians(real)
    params = {r["workload"]: r["params"] for r in real["runs"]}
    rows = []
    for w in workloads or tuple(dict.fromkeys(r["workload"] for r in real["runs"])):
        base = med[(w, "before")]
        wl = model_workload(w, base, params[w], machine)
        opts = Options(arena_reuse=machine.arena_reuse)
        base_model = model_figures(mimalloc.simulate(
            wl, "off", opts, scavenger_late_ms=machine.scavenger_late_ms, seed=machine.seed))
        for d in designs:
            if (w, d) not in med:
                continue
            dopts = replace(opts, **DESIGN_OPTIONS.get(d, {}))
            run = mimalloc.simulate(wl, MODEL_DESIGN[d], dopts,
                                    scavenger_late_ms=machine.scavenger_late_ms,
                                    seed=machine.seed)
            mx = excess(model_figures(run), base_model)
            rx = excess(real_figures(med[(w, d)]), real_figures(base))
            noise = real_noise(med[(w, d)], base)
            rows.extend(Row(w, d, f, rx[f], mx[f], noise[f]) for f in FIGURES)
    return rows


def format_rows(rows: list[Row]) -> str:
    lines = [f"{'workload':13} {'design':8} {'figure':18} {'real':>9} {'noise':>8} "
             f"{'model':>9} {'ratio':>6} band"]
    for r in rows:
        ratio = f"{r.model / r.real:6.2f}" if r.real else "   n/a"
        mark = "in" if r.in_band else "OUT"
        lines.append(f"{r.workload:13} {r.design:8} {r.figure:18} {r.real:9.2f} "
                     f"{r.noise:8.2f} {r.model:9.2f} {ratio} {mark}"
                     f"{'' if r.above_noise else ' (real within noise)'}")
    return "\n".join(lines)
