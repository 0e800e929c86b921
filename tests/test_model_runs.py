"""The model beside the real Bun as the median of several runs (compare.run_model with
`MachineModel.runs`), as the real figure is the median of its repeats."""

from __future__ import annotations

import pytest

from purgecheck.measure import compare as C


def _fake_runs(monkeypatch, figures: dict[int, float]) -> list[int]:
    """_run_model_once replaced by a run whose one counter is `figures[seed]` under every
    design (before's the seed itself); returns the seeds it was asked for."""
    seeds: list[int] = []

    def once(workload, params, summary, designs, machine, sample_ms, idle):
        seeds.append(machine.seed)
        assert machine.runs == 1  # each run is one run
        return {"before": {"x": float(machine.seed)},
                **{d: {"x": figures[machine.seed]} for d in designs}}

    monkeypatch.setattr(C, "_run_model_once", once)
    return seeds


def test_each_design_is_the_median_of_its_runs_each_with_its_own_seed(monkeypatch):
    """Broken variants: the mean of the runs (8.0 here), or the first run only (1.0), or one
    seed for all the runs (the same figure three times)."""
    seeds = _fake_runs(monkeypatch, {5: 1.0, 6: 20.0, 7: 3.0})
    out = C.run_model("bun-serve", {}, {}, ["epoch"], C.MachineModel(seed=5, runs=3))
    assert seeds == [5, 6, 7]
    assert out["epoch"]["x"] == 3.0
    assert out["before"]["x"] == 6.0


def test_one_run_is_the_model_as_it_was(monkeypatch):
    seeds = _fake_runs(monkeypatch, {0: 4.0})
    assert C.run_model("bun-serve", {}, {}, ["epoch"])["epoch"]["x"] == 4.0
    assert seeds == [0]


@pytest.mark.parametrize("workload", ["bun-serve-nothing-kept", "typed-arrays"])
def test_the_seed_reaches_the_workloads_random_choices(workload):
    """Which bodies are kept (the servers) and the objects' sizes (typed-arrays) follow the
    run's seed; a workload that ignored it (the broken variant) would repeat one run."""
    params = {"body": 262144, "kept": 0, "keep_every": 1000, "connections": 16, "idle_s": 1,
              "lo": 100 * 1024, "hi": 500 * 1024, "lifetime": 8}
    run = {"requests": {"median": 2000}, "load_s": {"median": 1.0}}
    summary = {"before": run}
    calls = [list(C.model_workload(workload, params, summary, C.MachineModel(seed=s))
                  .calls()) for s in (0, 1)]
    assert calls[0] != calls[1]
    assert calls[0] == list(C.model_workload(workload, params, summary, C.MachineModel(seed=0))
                            .calls())


def test_the_jobs_runs_spread_over_processes_give_the_same_figures():
    """run_models (the comparison's: `purgecheck docs`, `measure --seed-tables`) runs every
    job's runs in forked processes: each job's figures must be run_model's, in the jobs'
    order. Broken variant: the runs' results sliced across jobs (the two jobs differ here,
    so a swap or a shift fails)."""
    params = {"body": 262144, "kept": 0, "keep_every": 1000, "connections": 16, "idle_s": 1,
              "lo": 100 * 1024, "hi": 500 * 1024, "lifetime": 8}
    run = {"requests": {"median": 200}, "load_s": {"median": 0.2}}
    summary = {"before": run, "epoch": run}
    machine = C.MachineModel(runs=2)
    jobs = [("typed-arrays", params, summary, ["epoch"], None),
            ("bun-serve-nothing-kept", params, summary, ["epoch"], None)]
    spread = C.run_models(jobs, machine, workers=2)
    one_by_one = [C.run_model(w, p, s, d, machine, idle=i) for w, p, s, d, i in jobs]
    assert spread == one_by_one
    assert spread[0] != spread[1]
