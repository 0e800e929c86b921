"""Fuzz campaigns (issue 19): a shared Redis example database replays first what an earlier run
found; a batch on a Dask worker is the batch run here; a tiny campaign on a real LocalCluster
finds, shrinks and de-duplicates, and tells a catch from a defect.

A real redis-server (installed by `make setup`) on a free local port, started and stopped here.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import orjson
import pytest

from purgecheck.cluster.campaign import Job, batch, mutants_for, plan_jobs, run_campaign
from purgecheck.cli import main
from purgecheck.cluster.client import dask_client
from purgecheck.fuzz import REDIS_KEY_PREFIX, run_machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    server = shutil.which("redis-server")
    assert server, "redis-server is not installed: `make setup` installs it"
    port = free_port()
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                             "--appendonly", "no", "--dir", str(tmp_path_factory.mktemp("redis"))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import redis
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 20
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            assert time.monotonic() < deadline and proc.poll() is None, "redis did not start"
            time.sleep(0.1)
    yield f"redis://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PURGECHECK_STATE_DIR", str(tmp_path))


def test_a_failure_found_once_is_replayed_first_by_the_next_run(redis_url):
    """The epoch machine under the rejected no-hold design: seed 2 finds HD-YOUNG-KEPT after
    a few examples and stores the shrunk program in Redis; a run with another seed, which on
    its own does not fail at once, fails at its first example with the same program."""
    db = f"{redis_url}/0"
    first = run_machine("epoch", variant="no-hold", examples=50, seed=2, database=db)
    assert first.failure is not None and first.found_after > 1
    import redis
    assert redis.Redis.from_url(db).keys(REDIS_KEY_PREFIX + b"*")  # it was saved there
    alone = run_machine("epoch", variant="no-hold", examples=50, seed=7, shrink=False,
                        database=f"{redis_url}/1")  # an empty database
    assert alone.found_after is None or alone.found_after > 1
    after = run_machine("epoch", variant="no-hold", examples=50, seed=7, database=db)
    assert after.found_after == 1
    assert after.failure.program == first.failure.program


def test_a_bad_database_address_is_one_line_of_bad_usage(capsys):
    port = free_port()  # nothing listens there
    assert main(["fuzz", "--machine", "page", "--examples", "1",
                 "--db", f"redis://127.0.0.1:{port}/0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"purgecheck fuzz: --db redis://127.0.0.1:{port}")


def test_jobs_cover_machines_designs_and_the_mutants_of_their_model():
    jobs = plan_jobs(["page", "glibc"], ["epoch", "no-hold"],
                     ["unit-os-page", "rfc-ratio-le", "epoch-plain-read"])
    assert jobs[:3] == [Job("page", "epoch", None), Job("page", "no-hold", None),
                        Job("glibc", None, None)]
    assert set(jobs[3:]) == {Job("page", "epoch", "unit-os-page"),
                             Job("page", "no-hold", "unit-os-page"),
                             Job("glibc", None, "rfc-ratio-le")}
    assert mutants_for("page", ["epoch-plain-read"]) == []  # the C side's alone: nothing here
    assert Job("page", "epoch", None).expected_to_fail is False
    assert Job("page", "no-hold", None).expected_to_fail and \
        Job("page", "epoch", "unit-os-page").expected_to_fail


@pytest.fixture(scope="module")
def client():
    with dask_client(workers=2) as c:
        yield c


@pytest.mark.slow
def test_a_batch_on_a_worker_is_the_batch_run_here(client, tmp_path):
    job = Job("page", "epoch", "unit-os-page")
    there = client.submit(batch, job, 11, "dev", str(tmp_path / "a"), 20, pure=False).result()
    here = batch(job, 11, "dev", str(tmp_path / "b"), 20)
    assert there.failure is not None
    assert (there.examples, there.steps, there.failure.invariant, there.failure.program) == \
        (here.examples, here.steps, here.failure.invariant, here.failure.program)


def test_a_tiny_campaign_shares_its_findings_through_redis(client, redis_url):
    db = f"{redis_url}/2"
    jobs = [Job("page", "epoch", None), Job("page", "epoch", "unit-os-page")]
    # 0.1 s: the batches queued at the start (two a worker, the jobs in turn) and no more; a
    # campaign's workers fuzz for as long as it lasts (6 s here cost 12 s of CPU), and what
    # it found then depended on the machine's load
    camp = run_campaign(client, jobs, seconds=0.1, base_seed=3, database=db, examples=20,
                        database_label=db)
    clean, broken = camp.totals[jobs[0]], camp.totals[jobs[1]]
    assert clean.batches >= 1 and broken.batches >= 1 and not camp.errors
    assert clean.findings == 0  # the seed's design holds
    found = {f.invariant for f in camp.findings.values()}
    assert "PG-UNIT" in found and not camp.defects()  # a catch, not a defect
    # de-duplicated: every failing batch of the mutant is one of these findings
    assert len(camp.findings) <= broken.findings
    for f in camp.findings.values():
        assert f.replay.startswith("purgecheck fuzz --machine page --mutant unit-os-page")
    doc = camp.as_dict()
    assert doc["ok"] and doc["examples"] == clean.examples + broken.examples


def test_a_defect_on_the_clean_model_fails_the_campaign(client, monkeypatch, capsys):
    """A campaign command whose clean model under the epoch design breaks (here the mutant
    is applied behind its back, as a defect would be): exit 1, the finding named DEFECT."""
    import purgecheck.cluster.campaign as campaign

    def broken_batch(job, seed, profile, database, examples, malloc_env=None):
        from purgecheck.fuzz import run_machine
        run = run_machine(job.machine, variant=job.variant, mutant="unit-os-page",
                          profile=profile, examples=examples, seed=seed, database=database)
        run.mutant = None
        return run

    monkeypatch.setattr(campaign, "batch", broken_batch)
    address = client.scheduler_info()["address"]
    code = main(["fuzz", "--campaign", "--time", "0.1s", "--machine", "page", "--variant",
                 "epoch", "--mutant", "unit-os-page", "--scheduler", address, "--json"])
    doc = orjson.loads(capsys.readouterr().out)
    assert code == 1 and not doc["ok"]
    assert any(not f["expected"] and f["invariant"] == "PG-UNIT" for f in doc["findings"])
