"""Run an op script with the installed glibc under `strace -f` and classify every call.

The driver (reference_c/glibc_driver) marks the start and the end of the ops with getppid(2);
the calls between the marks are classified by address into the model's categories
(model.glibc.syscalls): a madvise inside a 64 MiB thread heap is `heap_madvise`, inside a
thread stack `stack_madvise`; a brk is a grow or a shrink by where the break moves; an
anonymous read-write mmap is a chunk; the munmaps that align a heap reservation are dropped.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from model.glibc.constants import HEAP_MAX_SIZE
from model.glibc.syscalls import CATEGORIES

ROOT = Path(__file__).resolve().parents[2]
DRIVER = ROOT / "reference_c" / "build" / "glibc_driver"
TRACED = "brk,mmap,munmap,mremap,mprotect,madvise,getppid"

_DONE = re.compile(r"^(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\w+)")
_UNFINISHED = re.compile(r"^(\d+)\s+(\w+)\((.*) <unfinished \.\.\.>$")
_RESUMED = re.compile(r"^(\d+)\s+<\.\.\. (\w+) resumed>(.*)\)\s+=\s+(-?\w+)")


class TraceError(Exception):
    """strace or the driver is missing or failed: one line saying what to do."""


@dataclass
class Call:
    pid: int
    name: str
    args: list[str]
    ret: str
    text: str


@dataclass
class TraceResult:
    counts: dict[str, int]
    unclassified: list[str] = field(default_factory=list)
    ignored: int = 0  # calls that align heap reservations or reserve them
    calls: int = 0  # calls between the marks


def installed_release() -> str:
    """gnu_get_libc_version() of the glibc this Python runs on (the driver links the same)."""
    try:
        fn = ctypes.CDLL("libc.so.6").gnu_get_libc_version
        fn.restype = ctypes.c_char_p
        return fn().decode()
    except (OSError, AttributeError):
        value = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
        if not value:
            raise TraceError("cannot tell the installed glibc version (is this glibc?)")
        return value.split()[-1]


def may_shrink_heap() -> bool:
    """check_may_shrink_heap: overcommit mode 2 makes shrink_heap remap instead of madvise."""
    try:
        return Path("/proc/sys/vm/overcommit_memory").read_text().strip() == "2"
    except OSError:
        return False


def driver_path() -> Path:
    """The glibc driver, brought up to date with its source first (purgecheck/cbuild.py)."""
    from purgecheck.cbuild import BuildError, ensure_current

    try:
        ensure_current(DRIVER)
    except BuildError as e:
        raise TraceError(f"{e}; run `make setup`") from None
    return DRIVER


def parse_strace(text: str) -> list[Call]:
    calls, pending = [], {}
    for line in text.splitlines():
        m = _DONE.match(line)
        if m:
            pid, name, args, ret = m.groups()
        elif (m := _UNFINISHED.match(line)):
            pending[m.group(1)] = (m.group(2), m.group(3))
            continue
        elif (m := _RESUMED.match(line)) and m.group(1) in pending:
            pid, name, rest, ret = m.groups()
            args = pending.pop(pid)[1] + rest
        else:
            continue
        calls.append(Call(int(pid), name, [a.strip() for a in args.split(",")], ret, line))
    return calls


def _num(s: str) -> int:
    return 0 if s == "NULL" else int(s, 0)


class Classifier:
    """Keeps the map of stacks, heap reservations, heaps and chunk mappings from the calls."""

    def __init__(self) -> None:
        self.stacks: list[tuple[int, int]] = []
        self.reserved: list[tuple[int, int]] = []
        self.heaps: set[int] = set()
        self.chunks: dict[int, int] = {}
        self.brk: int | None = None
        self.brk_start: int | None = None  # the first break seen: the main arena lies above

    @staticmethod
    def _inside(regions, addr: int) -> bool:
        return any(lo <= addr < hi for lo, hi in regions)

    def _in_heap(self, addr: int) -> bool:
        return addr - addr % HEAP_MAX_SIZE in self.heaps

    def _unreserve(self, lo: int, hi: int) -> None:
        out = []
        for a, b in self.reserved:
            out += [(a, min(b, lo))] if a < lo else []
            out += [(max(a, hi), b)] if b > hi else []
        self.reserved = [(a, b) for a, b in out if a < b]

    def classify(self, c: Call) -> str | None:
        """The category of one call; "" for calls that are bookkeeping (ignored)."""
        if c.ret.startswith("-"):
            return None
        if c.name == "brk":
            new, old = _num(c.ret), self.brk
            self.brk = new
            if self.brk_start is None:
                self.brk_start = new
            if c.args[0] == "NULL":
                return "brk_query"
            return "brk_grow" if old is not None and new > old else \
                "brk_shrink" if old is not None and new < old else None
        addr = _num(c.ret) if c.name == "mmap" else _num(c.args[0])
        length = int(c.args[1], 0)
        if c.name == "mremap":  # realloc of an mmapped chunk (mremap_chunk)
            if self.chunks.get(addr) != length:
                return None
            del self.chunks[addr]
            self.chunks[_num(c.ret)] = int(c.args[2], 0)
            return "chunk_mremap"
        if c.name == "mmap":
            prot, flags = c.args[2], c.args[3]
            if "MAP_STACK" in flags:
                self.stacks.append((addr, addr + length))
                return "stack_mmap"
            if "MAP_FIXED" in flags and prot == "PROT_NONE" and self._in_heap(addr):
                return "heap_remap"
            if prot == "PROT_NONE" and "MAP_NORESERVE" in flags:
                self.reserved.append((addr, addr + length))
                return ""
            if c.args[4] == "-1" and "PROT_WRITE" in prot:
                self.chunks[addr] = length
                return "chunk_mmap"
            return None
        if c.name == "munmap":
            if self.chunks.get(addr) == length:
                del self.chunks[addr]
                return "chunk_munmap"
            if addr in self.heaps and length == HEAP_MAX_SIZE:
                self.heaps.discard(addr)
                self._unreserve(addr, addr + length)
                return "heap_delete"
            if self._inside(self.reserved, addr):
                self._unreserve(addr, addr + length)
                return ""
            if self._inside(self.stacks, addr):
                self.stacks = [s for s in self.stacks if not s[0] <= addr < s[1]]
                return "stack_munmap"
            return None
        if c.name == "mprotect":
            if self._inside(self.stacks, addr):
                return "stack_mprotect"
            if addr % HEAP_MAX_SIZE == 0 and self._inside(self.reserved, addr):
                self.heaps.add(addr)
                return "heap_new"
            return "heap_mprotect" if self._in_heap(addr) else None
        if c.name == "madvise":
            if self._inside(self.stacks, addr):
                return "stack_madvise"
            if self._in_heap(addr):
                return "heap_madvise"
            if self.brk_start is not None and self.brk_start <= addr < (self.brk or 0):
                return "main_madvise"  # malloc_trim's mtrim of the main arena
            return None
        return None


def classify(calls: list[Call]) -> TraceResult:
    """Counts per category of the calls between the driver's two getppid marks."""
    result = TraceResult({k: 0 for k in CATEGORIES})
    cl = Classifier()
    marks = 0
    for c in calls:
        if c.name == "getppid":
            marks += 1
            continue
        category = cl.classify(c)
        if marks != 1:
            continue
        result.calls += 1
        if category == "":
            result.ignored += 1
        elif category is None:
            result.unclassified.append(c.text)
        else:
            result.counts[category] += 1
    if marks < 2:
        raise TraceError(f"the driver's marks were not both seen ({marks} of 2): did it fail?")
    return result


def run_traced(script_path: str | Path, env: dict[str, str], driver_args: tuple = (),
               traced: str = TRACED, strace_args: tuple = (), raw: bool = False):
    """The driver on `script_path` under `strace -f`, the environment `env` added. With
    `raw`, the parsed calls instead of their classification (purgecheck/glibc/replay.py)."""
    strace = shutil.which("strace")
    if strace is None:
        raise TraceError("strace is not installed: run `make setup` (apt-get install strace)")
    driver = driver_path()
    with tempfile.TemporaryDirectory(prefix="purgecheck-glibc-") as tmp:
        out = Path(tmp) / "strace.txt"
        cmd = [strace, "-f", "-qq", *strace_args, "-o", str(out), "-e", f"trace={traced}"]
        for k, v in env.items():
            cmd += ["-E", f"{k}={v}"]
        cmd += ["--", str(driver), *driver_args, str(script_path)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            msg = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            raise TraceError(f"the traced driver failed: {msg}")
        calls = parse_strace(out.read_text())
        return calls if raw else classify(calls)
