"""The designs of seed 000 that the real Bun's options express, as MIMALLOC_* settings.

Bun 1.4.4 reads every mimalloc option from the environment (`MIMALLOC_<NAME>`;
`MIMALLOC_VERBOSE=1 bun -e 1` lists them with their values). Its defaults are the seed's
epoch rule plus a floor of later versions (digest 6.3): `purge_holes_large_floor` 4096 KiB
and `purge_holes_large_floor_epochs` 256. The clock rule of the PR's first version and the
other rejected designs have no option: only the model can run them.
"""

from __future__ import annotations

import re

# design -> (what it is, the options it sets); every other option stays Bun's default.
DESIGNS: dict[str, tuple[str, dict[str, str]]] = {
    "before": ("hole purging off: the seed's before (bun-dev3-v2)", {"purge_holes": "0"}),
    "no-hold": ("the unit without the hold, (1) without (2): no epoch hold, no floor",
                {"purge_holes_min_interval": "0", "purge_holes_large_floor": "0"}),
    "epoch": ("the seed's rule: the epoch hold, no floor", {"purge_holes_large_floor": "0"}),
    "default": ("Bun 1.4.4 as shipped: the epoch hold and the floor of later versions", {}),
}
# The seed's and the model's name of each design (purgecheck simulate --design).
MODEL_DESIGN = {"before": "off", "no-hold": "no-hold", "epoch": "epoch", "default": "floor"}

# The options of the fork that a design may set (MIMALLOC_VERBOSE=1 bun -e 1); values are
# non-negative integers (KiB for the floor, ms for intervals and delays).
OPTIONS = ("purge_holes", "purge_holes_min_interval", "purge_holes_full_every",
           "purge_holes_large_floor", "purge_holes_large_floor_epochs", "purge_delay",
           "scavenger", "purge_holes_eager_zero", "allow_thp", "arena_purge_mult",
           "purge_decommits")


def parse_option(text: str) -> tuple[str, str]:
    """NAME=VALUE of --option, checked: a ValueError names what was expected."""
    name, eq, value = text.partition("=")
    name = name.strip().lower().removeprefix("mimalloc_")
    if not eq or name not in OPTIONS:
        raise ValueError(f"--option {text!r}: expected NAME=VALUE with NAME one of "
                         f"{', '.join(OPTIONS)}")
    if not re.fullmatch(r"\d{1,10}", value.strip()):
        raise ValueError(f"--option {text!r}: the value must be a non-negative integer")
    return name, value.strip()


def design_env(design: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a run: this process's, without any MIMALLOC_* (a user's setting
    must not leak into every design), plus the design's options and `extra`."""
    import os
    if design not in DESIGNS:
        raise ValueError(f"unknown design {design!r}; expected one of {', '.join(DESIGNS)}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MIMALLOC_")}
    for name, value in {**DESIGNS[design][1], **(extra or {})}.items():
        env[f"MIMALLOC_{name.upper()}"] = value
    return env
