"""The allocation stamp (seed 000, change (2), allocating side; digest section 5).

"a relaxed load of the epoch, and a store of it into page->swept_state, under the tag that no
(capacity,used) state and not MI_PAGE_SWEPT_NONE can have, only when the page does not carry
that value already." No clock is read on this path (in the `epoch` design).
"""

from __future__ import annotations

from model.page import Page, encode_stamp


def is_stamp_gated(page: Page) -> bool:
    """The gate: `block_size > MI_MEDIUM_MAX_OBJ_SIZE && reserved > 1` (large pages)."""
    return page.block_size > page.geom.arch.medium_max_obj_size and page.reserved > 1


def read_epoch_relaxed(current: int, seen: int, stale_epochs: int) -> int:
    """A relaxed load may return an epoch up to `stale_epochs` old, never older than one
    this thread has already seen (its reads are monotone). The model takes the stalest
    allowed value, the worst case for the hold."""
    return max(seen, current - stale_epochs)


def mi_page_stamp(page: Page, epoch: int) -> bool:
    """Write the stamp only when it differs (once per epoch for a busy page)."""
    stamp = encode_stamp(epoch)
    if page.swept_state == stamp:
        return False
    page.version += 1
    page.swept_state = stamp
    page.emit("stamp", epoch=epoch)
    return True
