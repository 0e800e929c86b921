"""`mp_`, the tunable parameters, and the three ways to set them (digest "Rules").

mallopt, the `MALLOC_*_` environment variables and `GLIBC_TUNABLES=glibc.malloc.*` all reach
the same setters; any of them switches the dynamic threshold off. The dynamic threshold
itself: freeing an mmapped chunk larger than `mmap_threshold` (and at most 32 MiB) raises
`mmap_threshold` to its size and `trim_threshold` to twice that.
"""

from __future__ import annotations

from dataclasses import dataclass

from model.glibc.constants import (DEFAULT_MMAP_MAX, DEFAULT_MMAP_THRESHOLD,
                                   DEFAULT_MMAP_THRESHOLD_MAX, DEFAULT_TOP_PAD,
                                   DEFAULT_TRIM_THRESHOLD)

# The parameters a script or the environment may set, by their tunable names.
PARAMS = ("trim_threshold", "top_pad", "mmap_threshold", "mmap_max")
ENV_ALIASES = {f"MALLOC_{p.upper()}_": p for p in PARAMS}  # MALLOC_TRIM_THRESHOLD_ ...
TUNABLE_PREFIX = "glibc.malloc."


@dataclass
class MallocPar:
    trim_threshold: int = DEFAULT_TRIM_THRESHOLD
    top_pad: int = DEFAULT_TOP_PAD
    mmap_threshold: int = DEFAULT_MMAP_THRESHOLD
    n_mmaps_max: int = DEFAULT_MMAP_MAX
    n_mmaps: int = 0
    no_dyn_threshold: bool = False


def set_param(mp: MallocPar, name: str, value: int, mmap_threshold_cap: int | None) -> bool:
    """do_set_*: set one parameter as mallopt does; False when glibc refuses the value.

    Where the version caps the mmap threshold (2.21, 2.22: HEAP_MAX_SIZE / 2), a larger
    value is refused and leaves everything as it was; glibc 2.36 takes it (measured)."""
    if name == "mmap_threshold":
        if mmap_threshold_cap is not None and value > mmap_threshold_cap:
            return False
        mp.mmap_threshold = value
    elif name == "trim_threshold":
        mp.trim_threshold = value
    elif name == "top_pad":
        mp.top_pad = value
    elif name == "mmap_max":
        mp.n_mmaps_max = value
    else:
        raise ValueError(f"unknown malloc parameter {name!r}; expected one of {', '.join(PARAMS)}")
    mp.no_dyn_threshold = True
    return True


def raise_dynamic_threshold(mp: MallocPar, chunk_size: int) -> None:
    """free() of an mmapped chunk: the dynamic mmap/trim threshold (digest "Dynamic threshold").

    glibc compares the size field with its IS_MMAPPED bit (2) set, so a chunk exactly at the
    threshold also 'raises' it, to the same value."""
    if mp.no_dyn_threshold:
        return
    if (chunk_size | 2) > mp.mmap_threshold and chunk_size <= DEFAULT_MMAP_THRESHOLD_MAX:
        mp.mmap_threshold = chunk_size
        mp.trim_threshold = 2 * mp.mmap_threshold


def settings_from_environ(environ: dict[str, str]) -> dict[str, int]:
    """The parameters an environment sets: `MALLOC_*_` aliases and `GLIBC_TUNABLES`.

    Raises ValueError naming the variable when a value is not a number, or when both forms
    set the same parameter (glibc then depends on the order of the environment)."""
    out: dict[str, int] = {}
    origin: dict[str, str] = {}

    def put(param: str, raw: str, where: str) -> None:
        try:
            value = int(raw, 0)
        except ValueError:
            raise ValueError(f"{where}: expected a number, got {raw!r}") from None
        if value < 0:
            raise ValueError(f"{where}: expected a number >= 0, got {raw!r}")
        if param in out:
            raise ValueError(f"{where} sets {param}, already set by {origin[param]}")
        out[param], origin[param] = value, where

    for var, param in ENV_ALIASES.items():
        if var in environ:
            put(param, environ[var], var)
    for item in filter(None, environ.get("GLIBC_TUNABLES", "").split(":")):
        name, eq, raw = item.partition("=")
        if name.startswith(TUNABLE_PREFIX) and name[len(TUNABLE_PREFIX):] in PARAMS and eq:
            put(name[len(TUNABLE_PREFIX):], raw, f"GLIBC_TUNABLES {name}")
    return out
