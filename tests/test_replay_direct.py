"""The replay's direct path (issue 29, seventh round): `replay.run_model` lets the conversion
make the short path's ops on the process as it converts them (fromtrace.to_ops with a
process) instead of yielding each op to its loop, and name each block by its address in the
process's own dict of blocks instead of by the lowest free id. The process must get the same
calls, in the same order, with the same results and the same number of live blocks, as from
the ops one by one; and a model error met on the direct path must be named as the op-by-op
run names it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from model.glibc.malloc import OutOfMemory
from model.glibc.process import Process
from model.glibc.versions import VERSIONS
from purgecheck.bench.record import PERL_HASH
from purgecheck.formats.alloc_trace import encode
from purgecheck.glibc import replay
from purgecheck.glibc.modelrun import OPS
from purgecheck.record.run import record
from test_replay import race_trace, start

DATA = Path(__file__).parent / "data"


def logging_process(log: list, fail_at: int | None = None) -> type:
    """A Process that logs every op's call with what it left (the block's chunk, the system
    calls so far, the resident counters) and, with `fail_at`, runs out of memory at that
    call."""

    class Logged(Process):
        made = 0  # calls made on this process

    def wrap(name):
        def op(self, tid, *args):
            if self.made == fail_at:
                raise OutOfMemory("the test's limit")
            self.made += 1
            got = getattr(Process, name)(self, tid, *args)
            block = name in BLOCK_OPS  # the first argument names a block: an id, or an
            # address on the direct path, so it is left out; its chunk is compared
            c = self.blocks.get(args[0]) if block else None
            r = self.resident
            log.append((name, tid, args[block:], c and (c.addr, c.size, c.state),
                        len(self.calls), r.pages, r.faults, r.refaults, len(self.blocks)))
            return got
        return op

    for name in OPS:
        setattr(Logged, name, wrap(name))
    return Logged


BLOCK_OPS = ("malloc", "free", "calloc", "realloc", "valloc", "pvalloc", "memalign")


def logged_run(monkeypatch, img, version: str, direct: bool | None,
               fail_at: int | None = None):
    """`direct` True: the direct path; False: op by op, blocks by id; None: the PyPy
    engine's way, every op yielded and run, blocks by address (run_model(direct=False))."""
    log: list = []
    monkeypatch.setattr(replay, "Process", logging_process(log, fail_at))
    after = (lambda i, op, p: False) if direct is False else None
    p = replay.run_model(img, VERSIONS[version], {}, False, after_op=after,
                         direct=direct is not None)
    return log, p


@pytest.fixture(scope="module")
def perl_hash(tmp_path_factory) -> list[Path]:
    """The bench's perl hash workload at 2,000 keys (reallocs that move, frees in every
    order), recorded; none where perl is missing."""
    if shutil.which("perl") is None:
        return []
    path = tmp_path_factory.mktemp("perl") / "perl.rec"
    return record(["perl", "-e", PERL_HASH.format(n=2000)], path,
                  stdout=subprocess.DEVNULL).files[:1]


@pytest.mark.parametrize("version", ["2.21", "2.23+"])
def test_the_direct_path_makes_the_calls_of_the_ops_one_by_one(monkeypatch, tmp_path, version,
                                                               perl_hash):
    """Every call, its arguments and what it left, in order, and the system calls at the end,
    on a threaded recording (xz -T2: starts, joins, reallocs, the general path between the
    short path's calls), on the realloc race the conversion settles and on a perl hash
    workload. By hand: a direct free that is counted but not made, a direct realloc made
    with the size as the block, or a moving realloc that names the block by its old address
    (no re-keying), fails here. The same for the PyPy engine's way (every op yielded, blocks
    by address: fourteenth round); by hand, a yielded malloc that names the block by the
    size, or a yielded free counted but not yielded, fails here."""
    for path in (DATA / "xz-T2.rec", race_trace(tmp_path / "race.rec"), *perl_hash):
        img, _ = replay.load_stream(path)
        by_op, p_op = logged_run(monkeypatch, img, version, direct=False)
        for way in (True, None):
            log, p = logged_run(monkeypatch, img, version, direct=way)
            assert len(by_op) > 8 and log == by_op, (path, way)
            assert p.calls == p_op.calls and p.count() == p_op.count(), (path, way)


def test_a_model_error_on_the_direct_path_names_the_op_the_op_by_op_run_names(monkeypatch):
    """A model error inside an op the conversion made on the process (not one the loop ran)
    is named by the record and op where the op-by-op run fails. By hand: without the run op
    by op after the error, the message names the last op yielded (here a start or a calloc),
    or fails on `op` being None."""
    img, _ = replay.load_stream(DATA / "xz-T2.rec")
    messages = []
    for direct in (False, True, None):
        with pytest.raises(replay.ReplayError) as e:
            logged_run(monkeypatch, img, "2.23+", direct, fail_at=100)
        messages.append(str(e.value))
    assert "the test's limit" in messages[0] and messages[2] == messages[1] == messages[0]


def test_the_replay_hash_is_stable_and_sees_a_changed_rule(monkeypatch, tmp_path):
    """purgecheck/bench/predictions.py's hash of replay.run_model's own run (the direct
    path, which the op-by-op hash does not drive): the same run gives the same hash, another
    version or a changed rule (a tcache bin of 6 chunks, not 7) another, on a trace of 50
    mallocs of one size freed in turn."""
    from model.glibc import malloc
    from purgecheck.bench.predictions import replay_hash

    blocks = [0x5000 + 32 * n for n in range(50)]
    calls = [("malloc", 24, b) for b in blocks] + [("free", b, 0) for b in blocks]
    (tmp_path / "same.rec").write_bytes(start() + b"".join(
        encode(n + 1, 0, kind, a, r) for n, (kind, a, r) in enumerate(calls)))
    img, _ = replay.load_stream(tmp_path / "same.rec")
    first = replay_hash(img, "2.23+")
    assert replay_hash(img, "2.23+") == first and replay_hash(img, "2.21") != first
    monkeypatch.setattr(malloc, "TCACHE_FILL_COUNT", 6)
    assert replay_hash(img, "2.23+") != first
