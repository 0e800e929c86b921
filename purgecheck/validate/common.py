"""What the replay's parts share: the words of the trace (outcomes, steps, ops), the
rejection, and how the model's values are shown in a report."""

from __future__ import annotations

from typing import Any

from model.epoch import (MOVING, PC_CAS, PC_INCREMENT, PC_LOAD, PC_READ_CLOCK, PC_READ_CLOCK2,
                         PC_STORE, PC_WAIT)
from model.page import MI_PAGE_SWEPT_NONE, is_stamp, stamp_epoch
from purgecheck.formats.trace import EVENT_TYPES


STEP_PCS = (PC_LOAD, PC_READ_CLOCK, PC_CAS, PC_INCREMENT, PC_READ_CLOCK2, PC_STORE, PC_WAIT)
OUTCOMES = ("off", "all-free", "held", "ineligible", "unchanged", "walked", "incomplete")
KNOWN_OUTCOMES = frozenset(OUTCOMES)
HANDOFF_OPS = frozenset({"scavenge", "scavenger"})
# Ops that collect their heap's pages with no event of their own (runner.py; `walk` then walks
# those that can purge holes, with events), and one that drops its heap's lists unseen.
COLLECT_OPS = frozenset({"collect", "walk"})
LIST_OPS = frozenset({"heap_destroy"})
SCAVENGER_TID = -1  # the label of the scavenger thread in linearized traces (linearize.c)
# The header's config as the replay reads it (purgecheck/formats/trace.py CONFIG_KEYS).
CONFIG_TYPES = {"page_kinds": dict, "os_page_size": int, "arch": int, "first_block_offset": int,
                "interval_ms": int, "purge_holes": bool, "full_every": int, "purge_delay": int,
                "variant": str, "stale_epochs": int, "sweep_ms": int, "clock": str,
                "clock_monotone": bool, "clock_start_ms": int, "observe": str}
TYPE_WORDS = {dict: "an object", int: "an integer", bool: "true or false", str: "a string"}
MAIN_TID = 0
Event = Any  # a typed event: an instance of one of purgecheck.formats.trace.EVENT_TYPES
OP, STAMP, WALK = EVENT_TYPES["op"], EVENT_TYPES["stamp"], EVENT_TYPES["walk"]


class Rejection(Exception):
    """The first event no transition of the model explains."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def show_start(start) -> str:
    return "MOVING" if start == MOVING else f"{start!r}"


def describe_blocks(blocks: list[int]) -> str:
    shown = ", ".join(map(str, blocks[:8]))
    return f"[{shown}{', ...' if len(blocks) > 8 else ''}]" if blocks else "nothing"


def describe_swept_state(state) -> str:
    if state == MI_PAGE_SWEPT_NONE:
        return "NONE"
    if type(state) is not int:
        return repr(state)
    if is_stamp(state):
        return f"the stamp of epoch {stamp_epoch(state)}"
    return f"walked(capacity={state >> 32})"
