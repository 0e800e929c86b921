"""Run a command under the recorder (reference_c/recorder.c) and collect its traces.

The recorder is an LD_PRELOAD library, so it sees what the dynamic linker sends to it: a
statically linked program is refused here before it runs (it has no PT_INTERP program header,
so LD_PRELOAD is never read), and a program that defines malloc itself is refused by the
recorder (its START record says why). The command is started through `sh -c 'exec ...'` so
that the recorder knows the pid of the process whose trace is the file named by -o; every
other process (a fork, a program it spawns) writes FILE.PID.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from purgecheck.formats.alloc_trace import REFUSED, Trace, read_trace

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "reference_c" / "build" / "librecord.so"
PT_INTERP = 3
LAUNCH = 'PURGECHECK_RECORD_PID=$$ LD_PRELOAD="$PURGECHECK_RECORD_LIB${LD_PRELOAD:+:$LD_PRELOAD}" ' \
         'exec "$@"'


class RecordError(Exception):
    """The command cannot be recorded faithfully: one line saying why (exit 2)."""


@dataclass
class Recording:
    command: list[str]
    returncode: int
    files: list[Path]
    traces: list[Trace] = field(default_factory=list)


def library() -> Path:
    if not LIBRARY.exists():
        result = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT / "reference_c"),
                                 "build/librecord.so"], capture_output=True, text=True)
        if result.returncode != 0 or not LIBRARY.exists():
            raise RecordError(f"cannot build {LIBRARY.relative_to(ROOT)}: run `make setup`")
    return LIBRARY


def resolve(program: str) -> Path:
    """The file `program` names (a path, or a name on PATH); RecordError tells a missing
    program from one that is there but cannot be run."""
    found = shutil.which(program)
    if found is not None:
        return Path(found)
    if "/" in program:
        candidates = [Path(program)]
    else:
        candidates = [Path(d or ".") / program
                      for d in os.environ.get("PATH", os.defpath).split(os.pathsep)]
    for path in candidates:
        if path.is_dir():
            raise RecordError(f"{path}: a directory, not a program")
        if path.exists():
            raise RecordError(f"{path}: not executable (no execute permission; chmod +x, or "
                              f"name its interpreter: purgecheck record -- sh {path})")
    raise RecordError(f"{program}: no such program (not a file, not on PATH)")


def is_static_elf(path: Path) -> bool:
    """An ELF executable without a PT_INTERP header: the dynamic linker never runs, so
    LD_PRELOAD is never read. Anything else (a dynamic ELF, a script) is not static; an ELF
    whose program headers are cut is RecordError (the kernel would not run it either)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if head[:4] != b"\x7fELF" or len(head) < 5 or head[4] != 2:  # 64-bit ELF only
            return False
        if len(head) < 64:
            raise RecordError(f"{path}: an ELF file cut inside its header ({len(head)} of 64 "
                              f"bytes)")
        phoff, = struct.unpack_from("<Q", head, 32)
        phentsize, phnum = struct.unpack_from("<HH", head, 54)
        if phentsize < 4 or phnum == 0:
            raise RecordError(f"{path}: an ELF file without program headers (entry size "
                              f"{phentsize}, {phnum} entries)")
        try:
            f.seek(phoff)
            table = f.read(phentsize * phnum)
        except (OSError, OverflowError):  # an offset past what a file can have
            table = b""
    if len(table) < phentsize * phnum:
        raise RecordError(f"{path}: an ELF file cut inside its program headers ({len(table)} "
                          f"of {phentsize * phnum} bytes at offset {phoff})")
    types = [struct.unpack_from("<I", table, i * phentsize)[0] for i in range(phnum)]
    return PT_INTERP not in types


def trace_files(out: Path) -> list[Path]:
    """The file named by -o (if written) and the FILE.PID of other processes, by name."""
    extra = sorted(out.parent.glob(out.name + ".*"),
                   key=lambda p: int(p.suffix[1:]) if p.suffix[1:].isdigit() else 0)
    return ([out] if out.exists() else []) + [p for p in extra if p.suffix[1:].isdigit()]


def record(command: list[str], out: Path, env: dict[str, str] | None = None,
           stdout=None, stderr=None) -> Recording:
    """Run `command` with the recorder; RecordError if it cannot be recorded faithfully."""
    if not command:
        raise RecordError("expected a command after --")
    program = resolve(command[0])
    try:
        static = is_static_elf(program)
    except OSError as e:
        raise RecordError(f"{program}: cannot read it: {e.strerror}") from None
    if static:
        raise RecordError(f"{program}: a statically linked program: LD_PRELOAD never reaches "
                          f"it, so its allocations cannot be recorded")
    out = out.resolve()
    for old in trace_files(out):
        old.unlink()
    run_env = dict(os.environ if env is None else env)
    run_env |= {"PURGECHECK_RECORD": str(out), "PURGECHECK_RECORD_LIB": str(library())}
    proc = subprocess.run(["sh", "-c", LAUNCH, "sh", *command], env=run_env, stdout=stdout,
                          stderr=stderr)
    files = trace_files(out)
    rec = Recording(list(command), proc.returncode, files)
    if not files:
        raise RecordError(f"{command[0]}: no trace was written (did the program start?)")
    for f in files:
        trace = read_trace(f)
        rec.traces.append(trace)
        for img in trace.images:
            if img.refused:
                raise RecordError(f"{f}: refused: {REFUSED.get(img.refused, img.refused)}; "
                                  f"its allocations would not reach the recorder")
    return rec
