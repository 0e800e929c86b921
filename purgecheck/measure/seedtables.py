"""Seed 000's tables with three columns per figure: the seed's, the real Bun's here, the model's.

The seed's figures are its own (64 cores at load 50 to 110, Bun built from main with the fork
of the time); the real ones come from `purgecheck measure` on this machine; the model's are
its prediction of the real figure: the real `before` plus the excess the simulator computes
for the design over its `off` (purgecheck/measure/compare.py says why: the model holds only
the large-page heap). A figure that a black box cannot show (free memory that is resident,
per large page with mincore; instructions, where perf is not available) is "-" on the real
side; the clock rule has no option in Bun, so it has no real column either.
"""

from __future__ import annotations

from dataclasses import dataclass

from purgecheck.measure.compare import BASE_REAL, COMPARISON_RUNS, MachineModel, run_models
from purgecheck.measure.report import num

MB = 1 << 20
LOAD_S_SEED = 20.0  # the seed's runs under load lasted 20 s: counts are given per 20 s

# The seed's figures ("Numbers"), as (lo, hi); one value is (v, v).
# "at idle": workload -> figure -> the seed's (before, clock, epoch), one run each
_IDLE_ROWS = {
    "typed-arrays": {"rss_mb": (160.3, 89.1, 88.7), "anon_mb": (125.3, 54.3, 53.9),
                     "free_resident_mb": (71.6, 0.5, 0.0)},
    "bun-serve": {"rss_mb": (77.9, 56.7, 55.2), "anon_mb": (38.3, 17.1, 16.6),
                  "free_resident_mb": (21.1, 0.0, 0.0)},
    "bun-serve-nothing-kept": {"rss_mb": (51.8, 45.9, 46.2), "anon_mb": (15.3, 6.5, 6.7),
                               "free_resident_mb": (8.2, 0.0, 0.0)},
}
SEED_IDLE = {  # workload -> figure -> design -> (lo, hi)
    w: {f: {d: (v, v) for d, v in zip(("before", "clock", "epoch"), row)}
        for f, row in figs.items()}
    for w, figs in _IDLE_ROWS.items()}
SEED_LOAD = {  # Bun.serve, 16 connections, 20 s: figure -> design -> (lo, hi)
    "requests_k": {"before": (62.4, 95.9), "clock": (61.4, 100.3), "epoch": (55.1, 95.7)},
    "faults_per_request": {"before": (0.43, 1.18), "clock": (0.49, 1.71),
                           "epoch": (0.27, 1.97)},
    "discards": {"before": (98, 117), "clock": (234, 363), "epoch": (162, 303)},
    "discarded_mb": {"before": (0.2, 0.2), "clock": (90, 177), "epoch": (20, 115)},
}
SEED_NO_HOLD = {  # "(1) without (2)", measured in an earlier session against its own before
    "requests_k": {"before": (80.4, 86.3), "no-hold": (72.9, 82.1)},
    "faults_per_request": {"before": (0.71, 1.03), "no-hold": (7.4, 9.3)},
    "discards": {"before": (92, 127), "no-hold": (4237, 5202)},
    "discarded_mb": {"before": (0.9, 1.1), "no-hold": (2400, 3000)},
}
SEED_LOOP = {  # the loop that frees and takes 256 KiB buffers, 3 s
    "discarded_mb": {"handoff-only": (58, 58), "epoch": (0, 0)},
    "faults_per_request": {"handoff-only": (1.85, 1.85), "epoch": (0.07, 0.07)},
}
IDLE_WORKLOADS = ("typed-arrays", "bun-serve", "bun-serve-nothing-kept")


@dataclass
class Cell:
    figure: str
    design: str
    seed: tuple[float, float] | None
    real: float | None
    model: float | None

    def as_json(self) -> dict:
        return {"figure": self.figure, "design": self.design,
                "seed": list(self.seed) if self.seed else None, "real": self.real,
                "model": self.model}


def _med(summary: dict, design: str, key: str) -> float | None:
    s = summary.get(design, {}).get(key)
    return None if s is None else s["median"]


def model_runs(measured: dict,
               machine: MachineModel = MachineModel(runs=COMPARISON_RUNS)) -> dict[str, dict]:
    """The model's counters per workload, on the measured runs' parameters and pace, for
    every design the seed's tables name (the clock and handoff-only have no real design);
    each the median of `machine.runs` runs (compare.COMPARISON_RUNS, as the real repeats)."""
    designs = ["no-hold", "epoch", "default", "clock", "handoff-only"]
    jobs = [(name, doc["params"], doc["summary"], designs, None) for name, doc in measured.items()]
    if "buffer-loop" in measured:  # the seed's loop swept inline (Bun's Windows event loop)
        doc = measured["buffer-loop"]
        jobs.append(("buffer-loop", doc["params"], doc["summary"], ["handoff-only"], "inline"))
    done = run_models(jobs, machine)
    out = dict(zip(measured, done))
    if "buffer-loop" in measured:
        inline = done[-1]
        out["buffer-loop"]["handoff-only"] = {
            k: v - inline[BASE_REAL][k] + out["buffer-loop"][BASE_REAL][k]
            if isinstance(v, (int, float)) and k in out["buffer-loop"][BASE_REAL] else v
            for k, v in inline["handoff-only"].items()}
    return out


def _predict(model: dict, design: str, key: str, real_before: float | None, scale: float = 1.0,
             sign: int = 1) -> float | None:
    """The model's prediction of a real figure: real before + the model's excess."""
    if real_before is None or design not in model or BASE_REAL not in model:
        return None
    return real_before + sign * (model[design][key] - model[BASE_REAL][key]) / scale


def tables(measured: dict, models: dict | None = None) -> dict[str, list[Cell]]:
    """measured: workload -> the JSON of `purgecheck measure` (summary, params). The seed's
    tables as cells; `models`: the model's counters of `model_runs(measured)`, when the caller
    has them already."""
    models = models if models is not None else model_runs(measured)
    out: dict[str, list[Cell]] = {}
    for w in IDLE_WORKLOADS:
        if w not in measured:
            continue
        s, m = measured[w]["summary"], models[w]
        cells = []
        for design in ("before", "clock", "epoch", "default"):
            seed = SEED_IDLE[w]
            cells += [
                Cell("rss_mb", design, seed["rss_mb"].get(design), _med(s, design, "rss_mb_idle_end"),
                     _predict(m, design, "rss_end", _med(s, BASE_REAL, "rss_mb_idle_end"), MB)),
                Cell("anon_mb", design, seed["anon_mb"].get(design),
                     _med(s, design, "anon_mb_idle_end"),
                     _predict(m, design, "rss_end", _med(s, BASE_REAL, "anon_mb_idle_end"), MB)),
                Cell("free_resident_mb", design, seed["free_resident_mb"].get(design), None,
                     m[design]["free_resident_end"] / MB if design in m else None)]
        out[f"at idle: {w}"] = cells
    for key, seed_table, designs in (("under load: bun-serve", SEED_LOAD,
                                      ("before", "clock", "epoch", "default")),
                                     ("(1) without (2): bun-serve", SEED_NO_HOLD,
                                      ("before", "no-hold"))):
        if "bun-serve" in measured:
            out[key] = _load_cells(measured["bun-serve"]["summary"], models["bun-serve"],
                                   seed_table, designs)
    if "buffer-loop" in measured:
        s, m = measured["buffer-loop"]["summary"], models["buffer-loop"]
        cells = []
        for design in ("before", "handoff-only", "epoch", "default"):
            cells += [
                Cell("discarded_mb", design, SEED_LOOP["discarded_mb"].get(design),
                     _med(s, design, "discarded_mb_load"),
                     _predict(m, design, "all_discarded_bytes_load",
                              _med(s, BASE_REAL, "discarded_mb_load"), MB)),
                Cell("faults_per_request", design, SEED_LOOP["faults_per_request"].get(design),
                     _med(s, design, "faults_per_request"),
                     _predict(m, design, "refaults_per_request",
                              _med(s, BASE_REAL, "faults_per_request")))]
        out["the loop of 256 KiB buffers: buffer-loop (MB over the load, faults per round; "
            "the model's handoff-only sweeps inline, as the seed's loop did)"] = cells
    return out


def _load_cells(s: dict, m: dict, seed: dict, designs) -> list[Cell]:
    load_s = _med(s, BASE_REAL, "load_s") or LOAD_S_SEED
    per20 = LOAD_S_SEED / load_s  # the real runs are load_s long; the seed's 20 s

    def real(design, key, k=1.0):
        v = _med(s, design, key)
        return None if v is None else v * k

    cells = []
    for design in designs:
        cells += [
            Cell("requests_k", design, seed["requests_k"].get(design),
                 real(design, "requests_per_s", LOAD_S_SEED / 1000), None),
            Cell("faults_per_request", design, seed["faults_per_request"].get(design),
                 real(design, "faults_per_request"),
                 _predict(m, design, "refaults_per_request", real(BASE_REAL, "faults_per_request"))),
            Cell("discards", design, seed["discards"].get(design),
                 real(design, "discards_load", per20),
                 _predict(m, design, "all_discards_load", real(BASE_REAL, "discards_load", per20),
                          1 / per20)),
            Cell("discarded_mb", design, seed["discarded_mb"].get(design),
                 real(design, "discarded_mb_load", per20),
                 _predict(m, design, "all_discarded_bytes_load",
                          real(BASE_REAL, "discarded_mb_load", per20), MB / per20)),
            Cell("kernel_us_per_request", design, None, real(design, "sys_us_per_request"),
                 None)]
    return cells


def _seed(v) -> str:
    if v is None:
        return "-"
    return num(v[0]) if v[0] == v[1] else f"{num(v[0])}..{num(v[1])}"


def grid(cells: list[Cell], sep: str = " | ") -> tuple[list[str], list[list[str]]]:
    """One table's designs, and a row per figure: its name, then seed, real and model per
    design joined by `sep` ("" where the table has no such cell)."""
    designs = list(dict.fromkeys(c.design for c in cells))
    by = {(c.figure, c.design): c for c in cells}
    rows = []
    for f in dict.fromkeys(c.figure for c in cells):
        cs = [by.get((f, d)) for d in designs]
        rows.append([f, *("" if c is None else sep.join((_seed(c.seed), num(c.real),
                                                         num(c.model))) for c in cs)])
    return designs, rows


def render(tabs: dict[str, list[Cell]]) -> str:
    """Each table as text: a row per figure, seed | real | model per design."""
    out = []
    for title, cells in tabs.items():
        designs, body = grid(cells)
        rows = [["", *[f"{d}: seed | real | model" for d in designs]], *body]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        out.append(title)
        out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        out.append("")
    return "\n".join(out)


def claim_reals(record: dict) -> dict[str, dict[str, float]]:
    """The real Bun's figures for the claims of `purgecheck simulate --seeds`
    (purgecheck/simulate/claims.py), by claim id and figure name, from a recorded
    `--seed-tables` measurement; counts per 20 s of load as the seed's. Figures that a black
    box cannot show (free resident memory) and designs that Bun has no option for (the clock,
    deferring in the handoff only) stay None."""
    measured = record.get("workloads", {})
    out: dict[str, dict[str, float]] = {}
    if "bun-serve" in measured:
        s = measured["bun-serve"]["summary"]
        per20 = LOAD_S_SEED / (_med(s, BASE_REAL, "load_s") or LOAD_S_SEED)
        real = {
            "no-hold discards": _med(s, "no-hold", "discards_load"),
            "epoch discards": _med(s, "epoch", "discards_load"),
            "no-hold discarded": _med(s, "no-hold", "discarded_mb_load"),
            "epoch discarded": _med(s, "epoch", "discarded_mb_load"),
            "no-hold faults/request": _med(s, "no-hold", "faults_per_request"),
            "epoch faults/request": _med(s, "epoch", "faults_per_request")}
        for k in ("no-hold discards", "epoch discards", "no-hold discarded", "epoch discarded"):
            if real[k] is not None:
                real[k] *= per20
        if real["no-hold discarded"] is not None:
            real["no-hold discarded"] /= 1024  # the claim gives it in GB
        out["load-no-hold"] = {k: v for k, v in real.items() if v is not None}
        out["load-epoch-vs-clock"] = {k: real[k] for k in ("epoch discards", "epoch discarded")
                                      if real[k] is not None}
    if "buffer-loop" in measured:
        s = measured["buffer-loop"]["summary"]
        out["inline-handoff"] = {k: v for k, v in (
            ("epoch discards", _med(s, "epoch", "discards_load")),
            ("epoch faults/request", _med(s, "epoch", "faults_per_request"))) if v is not None}
    return out


def recorded() -> dict:
    """The recorded measurement of `purgecheck measure --seed-tables --record`
    (docs/data/real-bun.json), or {} when there is none."""
    import orjson

    from purgecheck.reports import store
    path = store.project_root() / "docs" / "data" / "real-bun.json"
    return orjson.loads(path.read_bytes()) if path.is_file() else {}


def claim_inputs(record: dict) -> dict[str, dict]:
    """What the load claims of `purgecheck simulate --seeds` take from a recorded measurement
    of bun-serve, per design with an option in Bun (epoch, no-hold): the collector's batch and
    the requests per turn of the loop (compare.model_workload), the scavenger's reach, the
    real design's options (no-hold's interval 0) and mimalloc's arena reuse and page queues,
    as the comparison of `measure --compare` takes them. Empty without a bun-serve record."""
    from dataclasses import asdict

    from purgecheck.measure.compare import DESIGN_OPTIONS, MachineModel, model_workload, \
        scavenger_reach
    serve = record.get("workloads", {}).get("bun-serve")
    if not serve:
        return {}
    machine = MachineModel()
    out = {}
    for design in ("epoch", "no-hold"):
        if design not in serve["summary"]:
            continue
        w = model_workload("bun-serve", serve["params"], serve["summary"], machine, design)
        reach = scavenger_reach(serve["summary"], design, machine)
        options = {k: v for k, v in asdict(machine).items()
                   if k in ("arena_reuse", "page_queue_order")}
        out[design] = {"params": {k: w.params[k] for k in ("gc_every", "per_turn")},
                       "machine": () if reach is None else (("scavenger_reach", reach),),
                       "options": {**options, **DESIGN_OPTIONS.get(design, {})}}
    return out

