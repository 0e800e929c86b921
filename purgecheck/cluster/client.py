"""Where the long runs go: a Dask cluster (the `distributed` package), embedded or the user's.

By default a command that spreads its runs starts a `LocalCluster` of its own, one worker
process per core with one thread each, and stops it when done: nothing for a new user to set
up. `--scheduler ADDRESS`, or the environment variable PURGECHECK_SCHEDULER, sends the runs to
an existing cluster instead (`dask scheduler` on one machine, `dask worker ADDRESS` on the
others; each worker needs this project installed, as `make setup` does). The address is
checked before any work (issue 30): its form (parse_scheduler_address), then one connect and
Dask's handshake, each with a deadline (reach_scheduler), so that a typo, a dead scheduler
or a port that accepts and never answers is one line within seconds.

A worker that dies while it runs a task is replaced and the task is given to another worker,
at most ALLOWED_FAILURES times on the embedded cluster (Dask's `allowed-failures`); after that
the task's future raises `KilledWorker`, which the callers report, never drop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import warnings
from typing import Iterator

SCHEDULER_ENV = "PURGECHECK_SCHEDULER"
ALLOWED_FAILURES = 2  # deaths of a worker running the same task before it is reported
CONNECT_TIMEOUT = 10  # seconds the Dask client waits for the scheduler's first answers
CONNECT_S = 3  # seconds a TCP connect to the scheduler may take: one try, no retries
HANDSHAKE_S = 5  # seconds for Dask's handshake on a port that accepted the connection
# The transports of `distributed` that reach a scheduler in another process (its registry
# also has inproc, inside one process, and ucx, which needs ucx-py); no scheme is tcp.
NETWORK_SCHEMES = ("tcp", "tls", "ws", "wss")
ADDRESS_EXAMPLE = "expected SCHEME://HOST:PORT with SCHEME tcp, tls, ws or wss, e.g. " \
                  "tcp://host:8786"


class ClusterError(Exception):
    """No scheduler answered at the address given, or it is no address: one line."""


def add_scheduler_option(group, what: str) -> None:
    """`--scheduler ADDRESS`, the same for every command that sends work to Dask."""
    group.add_argument("--scheduler", metavar="ADDRESS",
                       help=f"a running Dask scheduler (e.g. tcp://host:8786) to send {what} "
                            f"to; default ${SCHEDULER_ENV}, else a cluster started here")


def scheduler_address(given: str | None) -> str | None:
    """The address asked for, checked (parse_scheduler_address): the option, else
    $PURGECHECK_SCHEDULER (empty: not set), else None (a cluster started here)."""
    if given is not None:
        return parse_scheduler_address(given, "--scheduler")
    env = os.environ.get(SCHEDULER_ENV, "")
    return parse_scheduler_address(env, f"${SCHEDULER_ENV}") if env.strip() else None


def parse_scheduler_address(text: str, origin: str) -> str:
    """`text` as Dask's address of a scheduler in another process, SCHEME://HOST:PORT (no
    scheme: tcp, as Dask reads it); ClusterError naming `origin` otherwise."""
    def bad(why: str) -> ClusterError:
        return ClusterError(f"{origin} {text!r}: {why}; {ADDRESS_EXAMPLE}")

    if not text.strip():
        raise bad("an empty string")
    scheme, sep, loc = text.strip().partition("://")
    if not sep:
        scheme, loc = "tcp", text.strip()
    if scheme not in NETWORK_SCHEMES:
        raise bad(f"the scheme {scheme!r} is not one Dask reaches a scheduler by")
    if loc.startswith("["):  # IPv6: [addr]:port
        host, close, rest = loc[1:].partition("]")
        port = rest[1:] if close and rest.startswith(":") else ""
    else:  # host:port; a bare host is a host without its port
        host, sep, port = loc.rpartition(":")
        if not sep:
            host, port = loc, ""
    if not host or any(c in host for c in "/?#@ []") or (":" in host and
                                                        not loc.startswith("[")):
        raise bad("no host" if not host else f"{host!r} is not a host name")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise bad("no port" if not port else f"port {port!r} is not 1..65535")
    return f"{scheme}://{loc}"


def reach_scheduler(address: str) -> None:
    """ClusterError in one line, within CONNECT_S + HANDSHAKE_S seconds, unless a Dask
    scheduler answers at `address`: one TCP connect (Dask's own connect retries a refused
    port for its whole timeout), then Dask's handshake with a deadline (Dask waits for the
    answer without one, so a port that accepts and says nothing would hang the run)."""
    import asyncio
    import socket

    from distributed.comm import connect
    from distributed.comm.addressing import get_address_host_port
    from distributed.security import Security

    host, port = get_address_host_port(address)
    try:
        socket.create_connection((host, port), timeout=CONNECT_S).close()
    except socket.gaierror as e:
        raise ClusterError(f"{address}: no such host {host!r} ({e.strerror})") from None
    except TimeoutError:
        raise ClusterError(f"{address}: no answer to a connect within {CONNECT_S} s; "
                           f"expected a running `dask scheduler` there") from None
    except OSError as e:
        raise ClusterError(f"{address}: nothing answers there ({e.strerror or e}); expected "
                           f"a running `dask scheduler`") from None

    async def handshake():
        args = Security().get_connection_args("client")
        comm = await asyncio.wait_for(connect(address, timeout=HANDSHAKE_S, **args),
                                      HANDSHAKE_S)
        await comm.close()
    try:
        asyncio.run(handshake())
    except (TimeoutError, asyncio.TimeoutError):
        raise ClusterError(f"{address}: the port accepted a connection but gave no Dask "
                           f"handshake within {HANDSHAKE_S} s: is a `dask scheduler` "
                           f"listening there?") from None
    except Exception as e:  # noqa: BLE001 - whatever the peer did, one line
        raise ClusterError(f"{address}: not a Dask scheduler's answer "
                           f"({type(e).__name__}: {str(e)[:120]})") from None


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
        with foreign_random_allowed():
            return fn(*args)
    finally:
        use_malloc_environment(before)


# Hypothesis warns when the global `random` moves while it draws an example (a strategy that
# uses it would not replay). In a Dask worker the worker's own threads draw from it (its
# heartbeats' and retries' jitter, `distributed.utils_comm.retry`), so the warning there says
# nothing of the strategy: `make check` printed it (stop 38). The strategies themselves are
# checked without other threads in tests/test_reference_c_fuzz.py, where the warning is an
# error.
RANDOM_IN_STRATEGY = "Do not use the `random` module inside strategies"


@contextlib.contextmanager
def foreign_random_allowed() -> Iterator[None]:
    from hypothesis.errors import HypothesisDeprecationWarning
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=re.escape(RANDOM_IN_STRATEGY),
                                category=HypothesisDeprecationWarning)
        yield


def worker_addresses(client) -> list[str]:
    """The addresses of the cluster's workers, asked of the scheduler now. Not from
    `client.scheduler_info()`: it answers from the client's copy, which a periodic update
    (of totals only, no workers) may have replaced by the time it returns, or which it keeps
    when its own query fails; under load `make test` saw the explorer's partitions pinned
    to no worker at all."""
    return sorted(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


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
        reach_scheduler(address)
        try:
            client = Client(address, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as e:
            raise ClusterError(f"no Dask scheduler answered at {address!r} within "
                               f"{CONNECT_TIMEOUT} s ({type(e).__name__}); expected the "
                               f"address of a running `dask scheduler`, e.g. tcp://host:8786")
        with client:
            yield client
        return
    # The embedded cluster is quiet (no port but the loopback) and gives up on a task that
    # killed ALLOWED_FAILURES workers. Its scheduler serves HTTP (health, metrics) even with
    # no dashboard; dashboard_address=None still binds it to 8787, and a second run beside
    # this one then warns that the port is taken: a free loopback port instead. Worker
    # processes are not daemons, so that a task may start the child process that isolates its
    # run. Dask's nanny would set MALLOC_TRIM_THRESHOLD_=65536 in each worker: that changes
    # the very glibc behaviour the glibc engine compares with its model (its baseline fails),
    # so nothing is set. Each worker's statistical profiler (a stack sample every 10 ms, for a
    # dashboard nobody reads here) is off: 6.3 -> 5.8 s of the workers' CPU in the tiny cluster
    # benchmark (docs/guide.md section 8, the thirteenth round).
    with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES,
                          "distributed.worker.daemon": False,
                          "distributed.nanny.pre-spawn-environ": {},
                          "distributed.admin.system-monitor.gil.enabled": False,
                          "distributed.worker.profile.enabled": False}):
        cluster = LocalCluster(n_workers=workers or default_workers(), threads_per_worker=1,
                               processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0",
                               silence_logs=logging.ERROR)
        try:
            with Client(cluster) as client:
                yield client
        finally:
            cluster.close()
