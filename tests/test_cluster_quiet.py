"""The embedded Dask cluster takes no fixed port: two runs side by side (a `make check` beside a
`make test`) must not collide on the scheduler's HTTP port, 8787 by default, which Dask binds
even when the dashboard is off (purgecheck/cluster/client.py). Broken variant it catches:
`dashboard_address=None`, which binds 8787 (the test holds that port, and the scheduler then
warns "Port 8787 is already in use" and serves on another port of its choosing)."""

from __future__ import annotations

import errno
import socket
import warnings

from purgecheck.cluster.client import dask_client

DASK_DEFAULT_HTTP_PORT = 8787


def _hold(port: int) -> socket.socket | None:
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError as e:
        s.close()
        assert e.errno == errno.EADDRINUSE
        return None  # another run holds it: the test's point holds either way
    s.listen()
    return s


def test_the_embedded_cluster_binds_no_fixed_port():
    held = _hold(DASK_DEFAULT_HTTP_PORT)
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            with dask_client(None, 1) as client:
                port = client.cluster.scheduler.http_server.port
                assert client.submit(sum, [1, 2]).result() == 3
        assert port != DASK_DEFAULT_HTTP_PORT
        assert not [w for w in seen if str(DASK_DEFAULT_HTTP_PORT) in str(w.message)], \
            [str(w.message) for w in seen]
    finally:
        if held is not None:
            held.close()
