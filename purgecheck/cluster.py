"""Where the long runs go: a Dask cluster (the `distributed` package), embedded or the user's.

By default a command that spreads its runs starts a `LocalCluster` of its own, one worker
process per core with one thread each, and stops it when done: nothing for a new user to set
up. `--scheduler ADDRESS`, or the environment variable PURGECHECK_SCHEDULER, sends the runs to
an existing cluster instead (`dask scheduler` on one machine, `dask worker ADDRESS` on the
others; each worker needs this project installed, as `make setup` does).

A worker that dies while it runs a task is replaced and the task is given to another worker,
at most ALLOWED_FAILURES times on the embedded cluster (Dask's `allowed-failures`); after that
the task's future raises `KilledWorker`, which the callers report, never drop.
"""

from __future__ import annotations

import contextlib
import logging
import os
from typing import Iterator

SCHEDULER_ENV = "PURGECHECK_SCHEDULER"
ALLOWED_FAILURES = 2  # deaths of a worker running the same task before it is reported
CONNECT_TIMEOUT = 10  # seconds to wait for an existing scheduler


class ClusterError(Exception):
    """No scheduler answered at the address given: bad usage, one line."""


def add_scheduler_option(group, what: str) -> None:
    """`--scheduler ADDRESS`, the same for every command that sends work to Dask."""
    group.add_argument("--scheduler", metavar="ADDRESS",
                       help=f"a running Dask scheduler (e.g. tcp://host:8786) to send {what} "
                            f"to; default ${SCHEDULER_ENV}, else a cluster started here")


def scheduler_address(given: str | None) -> str | None:
    """The address asked for: the option, else $PURGECHECK_SCHEDULER, else None (embedded)."""
    return given or os.environ.get(SCHEDULER_ENV) or None


def malloc_environment() -> dict[str, str]:
    """This process's glibc malloc settings (MALLOC_* and GLIBC_TUNABLES), to be given to a
    run on a worker whose own may differ (Dask's nanny sets MALLOC_TRIM_THRESHOLD_)."""
    return {k: v for k, v in os.environ.items() if k.startswith("MALLOC_") or
            k == "GLIBC_TUNABLES"}


def use_malloc_environment(env: dict[str, str]) -> None:
    """Make this process's glibc malloc settings `env` exactly (in a run's own child)."""
    for k in [k for k in os.environ if k.startswith("MALLOC_") or k == "GLIBC_TUNABLES"]:
        del os.environ[k]
    os.environ.update(env)


def call_with_malloc_environment(env: dict[str, str], fn, *args):
    """`fn(*args)` with the glibc malloc settings `env`, this process's own put back after (a
    task on a worker, for runs that are not forked off)."""
    before = malloc_environment()
    use_malloc_environment(env)
    try:
        return fn(*args)
    finally:
        use_malloc_environment(before)


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def dask_client(address: str | None = None, workers: int | None = None) -> Iterator:
    """A Dask client: to the scheduler at `address` (or $PURGECHECK_SCHEDULER), else to a
    LocalCluster of `workers` single-threaded processes (default: one per core) started here
    and closed on exit, with whatever ran on it."""
    import dask
    from distributed import Client, LocalCluster

    address = scheduler_address(address)
    if address:
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as e:
            raise ClusterError(f"no Dask scheduler answered at {address!r} within "
                               f"{CONNECT_TIMEOUT} s ({type(e).__name__}); expected the "
                               f"address of a running `dask scheduler`, e.g. tcp://host:8786")
        with client:
            yield client
        return
    # The embedded cluster is quiet (no dashboard, no port but the loopback) and gives up on a
    # task that killed ALLOWED_FAILURES workers; worker processes are not daemons, so that a
    # task may start the child process that isolates its run. Dask's nanny would set
    # MALLOC_TRIM_THRESHOLD_=65536 in each worker: that changes the very glibc behaviour the
    # glibc engine compares with its model (its baseline fails), so nothing is set.
    with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
                          "distributed.worker.daemon": False,
                          "distributed.nanny.pre-spawn-environ": {},
                          "distributed.admin.system-monitor.gil.enabled": False}):
        cluster = LocalCluster(n_workers=workers or default_workers(), threads_per_worker=1,
                               processes=True, host="127.0.0.1", dashboard_address=None,
                               silence_logs=logging.ERROR)
        try:
            with Client(cluster) as client:
                yield client
        finally:
            cluster.close()
