"""What every command checks of its inputs before any work (issue 30): the files it reads and
writes (the readers quote a bad line's excerpt: purgecheck/formats' `excerpt`).

DESIGN.md: "Bad input gets a clear one-line error naming the file, the line and what was
expected, and a non-zero exit; never a traceback, never a partial result that looks
complete." Each check here raises InputError with that line; the commands turn it into their
exit 2. An option that names a place is checked where it is, before a run that would find
out only at its end (a recording written into a directory after the program ran).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


class InputError(ValueError):
    """A bad input or option value: the one line that says which and what was expected."""


def given(value: str | None, option: str, what: str) -> str | None:
    """`value` unless it is the empty string, which says nothing (`--time ''` is no duration,
    not the default one); None (the option not given) passes."""
    if value is not None and not value.strip():
        raise InputError(f"{option} {value!r}: expected {what}, found an empty string")
    return value


def input_file(path: str | Path, what: str) -> Path:
    """A file to read: it exists and is a regular file. Otherwise says which it is: missing,
    a directory, a device (/dev/null is not an empty trace)."""
    p = Path(path)
    if not str(path):
        raise InputError(f"'': expected {what}, found an empty path")
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{p}: no such file (expected {what})") from None
    except OSError as e:
        raise InputError(f"{p}: cannot read it: {e.strerror} (expected {what})") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"{p}: a directory (expected {what})")
    if not stat.S_ISREG(mode):
        raise InputError(f"{p}: not a regular file (a device or a pipe; expected {what})")
    if not os.access(p, os.R_OK):
        raise InputError(f"{p}: not readable (expected {what})")
    return p


def output_file(path: str | Path, option: str) -> Path:
    """A file to be written: a path that is not '' nor a directory, in a directory that
    exists and takes a new file (checked by making one there and removing it)."""
    text = str(path)
    if not text.strip():
        raise InputError(f"{option} {text!r}: expected a file name, found an empty string")
    p = Path(text)
    if text.endswith(os.sep) or p.is_dir():
        raise InputError(f"{option} {p}: a directory (expected a file name)")
    if p.exists() and not p.is_file():
        raise InputError(f"{option} {p}: not a regular file (expected a file to write)")
    parent = p.parent
    if not parent.is_dir():
        raise InputError(f"{option} {p}: no directory {parent} to write it in")
    _probe(parent, option, p)
    return p


def output_dir(path: str | Path, option: str) -> Path:
    """A directory to write into: made if missing (its parents too) and tried with a file;
    not '' (which would be the working directory, or the project's default)."""
    text = str(path)
    if not text.strip():
        raise InputError(f"{option} {text!r}: expected a directory, found an empty string")
    p = Path(text)
    if p.exists() and not p.is_dir():
        raise InputError(f"{option} {p}: not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"{option} {p}: cannot make that directory: {e.strerror or e}") \
            from None
    _probe(p, option, p)
    return p


def _probe(directory: Path, option: str, named: Path) -> None:
    """A file made in `directory` and removed: what a later write there will need."""
    try:
        fd, name = tempfile.mkstemp(prefix=".purgecheck-probe-", dir=directory)
    except OSError as e:
        raise InputError(f"{option} {named}: cannot write in {directory}: "
                         f"{e.strerror or e}") from None
    os.close(fd)
    os.unlink(name)
