"""The C reference's binaries match the sources checked out, and each run says which it ran.

Every command that runs a program of reference_c/build/ asks `ensure_current` for it first:
make's own dependency check (`make -q`, the rules of reference_c/Makefile) says whether the
binary is older than a source it is built from, and `make` rebuilds it when it is (a
reviewer who edits reference_c/ gets results of that edit, not of the previous build). Why
make and not a hash of our own: the Makefile already lists what each binary is built from,
with its flags; a second list here would drift from it.

`BuildInfo` is what a run reports: the binary, a digest of the sources it was built from
(reference_c/*.c, *.h and the Makefile, so two checkouts with the same sources show the same
digest), a digest of the binary itself, and whether this call rebuilt it. `RAN` keeps every
build this process ensured, for the summary of `purgecheck check` and its JSON.
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path


class BuildError(Exception):
    """make could not bring a binary up to date: one line that says what to do."""


@dataclass(frozen=True)
class BuildInfo:
    binary: str  # relative to the project, e.g. reference_c/build/driver
    sources: str  # sha256 of reference_c's sources and Makefile, 12 hex digits
    sha256: str  # of the binary, 12 hex digits
    rebuilt: bool  # this call ran make because a source was newer than the binary

    def line(self) -> str:
        """One line for a summary: which build ran."""
        return (f"{self.binary} (sources {self.sources}, binary {self.sha256}"
                f"{', rebuilt now' if self.rebuilt else ', up to date'})")

    def to_doc(self) -> dict:
        return asdict(self)


RAN: dict[str, BuildInfo] = {}  # binary -> what this process ensured last


def sources_digest(source_dir: Path) -> str:
    """A digest of what the binaries are built from: every .c and .h file and the Makefile,
    by name and content, in name order."""
    h = hashlib.sha256()
    for f in sorted([*source_dir.glob("*.c"), *source_dir.glob("*.h"),
                     source_dir / "Makefile"]):
        if f.is_file():
            h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def _make(source_dir: Path, args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "-C", str(source_dir), *args],
                          capture_output=True, text=True)


def ensure_current(binary: Path) -> BuildInfo:
    """Bring `binary` (a program of <source_dir>/build/) up to date with its sources with
    make, under a lock (the kill matrix's children and parallel tests may ask at once), and
    say which build it is. Raises BuildError when make fails or has no rule for it."""
    source_dir = binary.parent.parent
    if not (source_dir / "Makefile").is_file():
        raise BuildError(f"{binary} is not built and {source_dir} has no Makefile: run "
                         f"`make -C reference_c`")
    target = str(binary.relative_to(source_dir))
    binary.parent.mkdir(parents=True, exist_ok=True)
    with open(binary.parent / ".make.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            check = _make(source_dir, ["-q", target])
        except FileNotFoundError:
            raise BuildError("make is not installed: run `make setup`") from None
        rebuilt = check.returncode != 0
        if rebuilt:
            done = _make(source_dir, ["-s", target])
            if done.returncode != 0 or not binary.exists():
                last = (done.stderr.strip().splitlines() or ["make failed"])[-1]
                raise BuildError(f"cannot bring {target} up to date with its sources: "
                                 f"`make -C reference_c {target}` failed: {last}")
    root = source_dir.parent
    name = str(binary.relative_to(root)) if binary.is_relative_to(root) else str(binary)
    info = BuildInfo(name, sources_digest(source_dir), _file_digest(binary), rebuilt)
    RAN[name] = info
    return info


def summary_lines(width: int = 100) -> list[str]:
    """`C build: ...` for each build this process ran since RAN was last cleared, each within
    `width` columns: a binary outside the project (a mutant's build in a temporary folder)
    keeps the end of its path, which names it, behind an ellipsis."""
    lines = []
    for info in RAN.values():
        line = f"C build: {info.line()}"
        over = len(line) - width
        if over > 0:
            cut = info.binary[over + 1:]
            line = f"C build: …{cut}{info.line()[len(info.binary):]}"
        lines.append(line[:width])
    return lines
