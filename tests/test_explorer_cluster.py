"""The explorer split over Dask workers by state hash (issue 19): the same states, transitions,
depth, verdicts and counterexample paths as the single-process run, and the manifest's counts.
One LocalCluster of 2 workers for the module; bare-1 and a broken twin of bare-2 here,
bare-2 and the park configuration (the scavenger, the owner, the world invariants) in the
slow tier."""

from __future__ import annotations

import pytest

from proofs.explorer import explore
from proofs.explorer_configs import CONFIGS, compare_with_manifest
from purgecheck.cluster import dask_client
from purgecheck.explorer_cluster import explore_on, owner_of
from purgecheck.mutants import MUTANTS, applied


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


@pytest.mark.parametrize("name", ["bare-1", pytest.param("bare-2", marks=pytest.mark.slow),
                                  pytest.param("park-1-short", marks=pytest.mark.slow)])
def test_a_split_run_matches_the_manifest_and_the_single_process_run(client, name):
    split = explore_on(client, CONFIGS[name], parts=3)  # more parts than workers: any works
    assert compare_with_manifest(split) is None and split.ok
    same(split, explore(CONFIGS[name]))


def test_a_broken_twin_gives_the_same_counterexample_path(client):
    """bare-2 under no-cas-exclusion (the twin explore-no-cas-exclusion): the violations and
    their shortest paths are the single-process run's."""
    split = explore_on(client, CONFIGS["bare-2"], mutant="no-cas-exclusion")
    with applied(MUTANTS["no-cas-exclusion"]):
        alone = explore(CONFIGS["bare-2"])
    assert alone.violations and "EP-NO-SHORT-EPOCH" in split.violations
    same(split, alone)
    # the workers are clean again: the next split run holds
    assert explore_on(client, CONFIGS["bare-1"]).ok


def test_the_partition_of_a_state_is_the_same_in_every_process(client):
    s = ("idle", 3, (1, None, "x"))
    here = owner_of(s, 7)
    there = client.submit(owner_of, s, 7, pure=False).result()
    assert here == there
