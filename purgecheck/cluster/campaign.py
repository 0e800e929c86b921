"""A fuzz campaign: many seeds over every machine, design and mutant, spread over Dask workers
until the time is up (issue 19).

The campaign's jobs are (machine, design, mutant) triples, the clean model first; it runs a
batch of BATCH_EXAMPLES examples of one job per task, each with a new seed, going round the
jobs until `seconds` have passed (the batches still running then are waited for). A failure
is a finding: shrunk by Hypothesis in its batch, then de-duplicated by (invariant, shrunk
program), each with the command that replays it. A mutant applies only to the machines whose
model it patches (glibc's to the glibc machine, the page model's to the others); a mutant of
the C side alone has nothing to break in a machine and is left out.

All batches share one example database (`--db`): the local directory by default, or Redis, so
that what one worker or one night found is what the next batch tries first.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator

from model.variants import EPOCH

BATCH_EXAMPLES = 50  # examples per task: a few seconds of work, a new seed each


@dataclass(frozen=True)
class Job:
    machine: str
    variant: str | None
    mutant: str | None

    @property
    def label(self) -> str:
        return f"{self.machine} [{self.variant or '-'}] {self.mutant or '(clean)'}"

    @property
    def expected_to_fail(self) -> bool:
        """A finding here is a catch, not a defect: a mutant, or a rejected design."""
        return self.mutant is not None or self.variant not in (None, EPOCH)


@dataclass
class Finding:
    invariant: str
    program: str
    reason: str
    replay: str
    jobs: list[str] = field(default_factory=list)  # where it was found (labels)
    expected: bool = True  # every job that found it is expected to fail

    def as_dict(self) -> dict:
        return {"invariant": self.invariant, "reason": self.reason, "program": self.program,
                "replay": self.replay, "found_in": self.jobs, "expected": self.expected}


@dataclass
class JobTotals:
    job: Job
    batches: int = 0
    examples: int = 0
    steps: int = 0
    seconds: float = 0.0
    findings: int = 0  # batches that failed


@dataclass
class Campaign:
    seconds: float
    workers: int
    totals: dict[Job, JobTotals]
    findings: dict[tuple[str, str], Finding]
    errors: list[str] = field(default_factory=list)  # batches that could not run

    @property
    def examples(self) -> int:
        return sum(t.examples for t in self.totals.values())

    @property
    def examples_per_s(self) -> float:
        return self.examples / self.seconds if self.seconds else 0.0

    def defects(self) -> list[Finding]:
        """Findings on the clean model under the seed's design: these fail the campaign."""
        return [f for f in self.findings.values() if not f.expected]

    def as_dict(self) -> dict:
        return {"ok": not self.defects() and not self.errors, "command": "fuzz --campaign",
                "seconds": round(self.seconds, 1), "workers": self.workers,
                "examples": self.examples, "examples_per_s": round(self.examples_per_s, 1),
                "jobs": [{"machine": t.job.machine, "variant": t.job.variant,
                          "mutant": t.job.mutant, "batches": t.batches,
                          "examples": t.examples, "steps": t.steps,
                          "seconds": round(t.seconds, 2), "failed_batches": t.findings}
                         for t in self.totals.values()],
                "findings": [f.as_dict() for f in self.findings.values()],
                "errors": self.errors}


def mutants_for(machine: str, names: list[str]) -> list[str]:
    """The mutants of `names` that patch the model this machine runs (see the module doc)."""
    from purgecheck.mutants import MUTANTS

    def applies(name: str) -> bool:
        modules = [p.module for p in MUTANTS[name].patches if p.module.startswith("model.")]
        return bool(modules) and \
            any(m.startswith("model.glibc") == (machine == "glibc") for m in modules)
    return [n for n in names if applies(n)]


def plan_jobs(machines: list[str], variants: list[str], mutants: list[str]) -> list[Job]:
    """Every (machine, design, mutant) triple, the clean model's first."""
    from purgecheck.fuzz import takes_variant

    clean, broken = [], []
    for m in machines:
        designs = variants if takes_variant(m) else [None]
        clean += [Job(m, v, None) for v in designs]
        broken += [Job(m, v, x) for x in mutants_for(m, mutants) for v in designs]
    return clean + broken


def batch(job: Job, seed: int, profile: str, database: str | None, examples: int,
          malloc_env: dict[str, str] | None = None):
    """A task: one batch of `job` (a FuzzRun; its failure shrunk)."""
    from purgecheck.cluster.client import call_with_malloc_environment, foreign_random_allowed
    from purgecheck.fuzz import run_machine

    def go():
        return run_machine(job.machine, variant=job.variant or EPOCH, mutant=job.mutant,
                           profile=profile, examples=examples, seed=seed, database=database)
    with foreign_random_allowed():  # (call_with_malloc_environment's too: it nests)
        return go() if malloc_env is None else call_with_malloc_environment(malloc_env, go)


def rounds(jobs: list[Job], base_seed: int) -> Iterator[tuple[Job, int]]:
    """The jobs round and round, each batch with the next seed."""
    for n, job in enumerate(itertools.cycle(jobs)):
        yield job, base_seed + n


def run_campaign(client, jobs: list[Job], seconds: float, base_seed: int, profile: str = "dev",
                 database: str | None = None, examples: int = BATCH_EXAMPLES,
                 progress: Callable[[Campaign, JobTotals], None] | None = None,
                 database_label: str | None = None) -> Campaign:
    """Run `jobs` on the Dask `client`'s workers for `seconds` (two batches queued per
    worker, so that none waits for the next)."""
    from distributed import as_completed

    from purgecheck.cluster.client import malloc_environment, worker_addresses

    workers = max(1, len(worker_addresses(client)))
    camp = Campaign(0.0, workers, {j: JobTotals(j) for j in jobs}, {})
    todo = rounds(jobs, base_seed)
    env = malloc_environment()
    which: dict = {}

    def submit():
        job, seed = next(todo)
        f = client.submit(batch, job, seed, profile, database, examples, env, pure=False)
        which[f] = (job, seed)
        return f

    t0 = time.monotonic()
    pending = as_completed([submit() for _ in range(2 * workers)])
    for future in pending:
        job, seed = which.pop(future)
        try:
            run = future.result()
        except Exception as e:  # noqa: BLE001 - a batch that could not run is reported
            camp.errors.append(f"{job.label} seed {seed}: {type(e).__name__}: {e}"[:300])
            run = None
        if run is not None:
            _count(camp, job, run, database_label)
        if time.monotonic() - t0 < seconds:
            pending.add(submit())
        if progress:
            progress(camp, camp.totals[job])
    camp.seconds = time.monotonic() - t0
    return camp


def _count(camp: Campaign, job: Job, run, database_label: str | None) -> None:
    t = camp.totals[job]
    t.batches += 1
    t.examples += run.examples
    t.steps += run.steps
    t.seconds += run.seconds
    if run.failure is None:
        return
    t.findings += 1
    key = (run.failure.invariant, run.failure.program)
    found = camp.findings.get(key)
    if found is None:
        replay = run.replay_command()
        if not run.failure.blob and database_label:
            replay += f" --db {database_label}"
        found = camp.findings[key] = Finding(run.failure.invariant, run.failure.program,
                                             run.failure.reason, replay)
    if job.label not in found.jobs:
        found.jobs.append(job.label)
    found.expected = found.expected and job.expected_to_fail
