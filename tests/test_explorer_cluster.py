"""The explorer split over Dask workers by state hash (issue 19): the same states, transitions,
depth, verdicts and counterexample paths as the single-process run, and the manifest's counts.
One LocalCluster of 2 workers for the module; bare-1, a broken twin of bare-2 and a run cut by
its time limit on it; a park configuration with a broken park rule split in this process
(explore_local, the same partitions without Dask), and the same with owners that admit in the
wrong order, which the comparison catches. In the slow tier: every manifest configuration but
park-3, and the park mutant on Dask."""

from __future__ import annotations

import pytest

import purgecheck.cluster.explorer as xc
from proofs.explorer import explore
from proofs.explorer_configs import CONFIGS, compare_with_manifest
from purgecheck.cluster.client import dask_client
from purgecheck.cluster.explorer import explore_local, explore_on, owner_of
from purgecheck.mutants import MUTANTS, applied

# park-1-short with the end of a park's last sweep written before its work: PK-SPACING, a
# world invariant (the owner, the page and the park records), found at depth 20-odd
PARK_MUTANT = ("park-1-short", "sweep-last-before-work", "PK-SPACING")


@pytest.fixture(scope="module")
def client():
    with dask_client(workers=2) as c:
        yield c


def same(a, b):
    assert (a.states, a.transitions, a.depth, a.graph_nodes) == \
        (b.states, b.transitions, b.depth, b.graph_nodes)
    assert {k: (v.reason, v.path) for k, v in a.violations.items()} == \
        {k: (v.reason, v.path) for k, v in b.violations.items()}
    assert a.checked == b.checked and a.not_applicable == b.not_applicable


def alone(name: str, mutant: str | None = None):
    with applied(MUTANTS[mutant] if mutant else None):
        return explore(CONFIGS[name])


@pytest.mark.parametrize("name", ["bare-1", pytest.param("bare-2", marks=pytest.mark.slow),
                                  pytest.param("park-1-short", marks=pytest.mark.slow)])
def test_a_split_run_matches_the_manifest_and_the_single_process_run(client, name):
    split = explore_on(client, CONFIGS[name], parts=3)  # more parts than workers: any works
    assert compare_with_manifest(split) is None and split.ok
    same(split, explore(CONFIGS[name]))


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in CONFIGS if n != "park-3"])
def test_every_manifest_configuration_split_has_the_manifest_counts(client, name):
    split = explore_on(client, CONFIGS[name])
    assert compare_with_manifest(split) is None
    assert split.ok and split.complete


def test_a_broken_twin_gives_the_same_counterexample_path(client):
    """bare-2 under no-cas-exclusion (the twin explore-no-cas-exclusion): the violations and
    their shortest paths are the single-process run's."""
    split = explore_on(client, CONFIGS["bare-2"], mutant="no-cas-exclusion")
    single = alone("bare-2", "no-cas-exclusion")
    assert single.violations and "EP-NO-SHORT-EPOCH" in split.violations
    same(split, single)
    # the workers are clean again: the next split run holds
    assert explore_on(client, CONFIGS["bare-1"]).ok


def test_a_broken_park_rule_split_in_one_process_gives_the_same_path():
    """The partitions without Dask (3 of them, one after the other): a world invariant's
    violation on the park configuration, with its path through the scavenger's and the
    owner's steps, is the single-process run's."""
    name, mutant, inv = PARK_MUTANT
    split = explore_local(CONFIGS[name], parts=3, mutant=mutant)
    single = alone(name, mutant)
    assert inv in single.violations and len(single.violations[inv].path) > 10
    same(split, single)
    assert explore_local(CONFIGS["bare-1"]).ok  # the mutant is undone here


@pytest.mark.slow
def test_a_broken_park_rule_split_over_dask_gives_the_same_path(client):
    name, mutant, inv = PARK_MUTANT
    split = explore_on(client, CONFIGS[name], mutant=mutant)
    assert inv in split.violations
    same(split, alone(name, mutant))


def test_admitting_in_another_order_than_the_sequential_run_changes_the_paths(monkeypatch):
    """The check above can fail: an owner that admits the greatest key first keeps other
    parents, and so other shortest paths, than the sequential run (the same state counts)."""
    monkeypatch.setattr(xc, "admission_order", lambda keys: sorted(
        range(len(keys)), key=keys.__getitem__, reverse=True))
    single = alone("bare-2", "no-cas-exclusion")
    split = explore_local(CONFIGS["bare-2"], parts=2, mutant="no-cas-exclusion")
    assert (split.states, split.transitions) == (single.states, single.transitions)
    with pytest.raises(AssertionError):
        same(split, single)


def test_the_partition_of_a_state_is_the_same_in_every_process(client):
    s = ("idle", 3, (1, None, "x"))
    here = owner_of(s, 7)
    there = client.submit(owner_of, s, 7, pure=False).result()
    assert here == there


def test_a_split_run_past_its_time_limit_stops_every_partition_at_one_level(client):
    """Every partition hears that one is late with the same level's batches, so all stop
    after that level: a report that says not complete, with fewer states than the manifest."""
    rep = explore_on(client, CONFIGS["bare-3"], time_limit=1e-6)
    assert not rep.complete and 1 < rep.states < 10_872 and 0 < rep.depth < 36
