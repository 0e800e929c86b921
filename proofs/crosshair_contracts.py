"""CrossHair contracts on the model's pure functions (plain docstring lines, CrossHair style).

Each wrapper states, in `pre:`/`post:` lines, what the model's function must do, and calls
the model. CrossHair searches for an input that breaks a post-condition within a count of
paths per condition (proofs/crosshair_run.py: no time limit, so the verdict does not move
with the machine's load); a contract it cannot break is reported as bounded, never as proved
(the Z3 proofs prove the same arithmetic). The model's functions are called at run time, so a
mutant of them is what CrossHair checks: the twins contracts-unit-os-page and
contracts-age-no-modulo. The broken
contracts in proofs/crosshair_broken.py must be falsified: that shows the search can fail.
"""

from __future__ import annotations

from model.epoch import compute_epoch_age, compute_interval, is_epoch_due, is_epoch_young
from model.geometry import ARCH64, KiB, PageGeometry, PageKind, UnitMap, align_down
from model.page import encode_stamp, is_stamp, stamp_epoch


def unit_of_large_page(offset: int, block_size: int, os_page_kib: int) -> int:
    """The purge unit of a 64-bit large page.

    pre: 0 <= offset <= 65536
    pre: 98304 <= block_size <= 524288
    pre: os_page_kib in (4, 16, 64)
    post: __return__ >= os_page_kib * 1024
    post: __return__ & (__return__ - 1) == 0
    post: UnitMap.of(_geom(offset, block_size, os_page_kib)).bits <= 256
    """
    return UnitMap.of(_geom(offset, block_size, os_page_kib)).unit


def _geom(offset: int, block_size: int, os_page_kib: int) -> PageGeometry:
    return PageGeometry(PageKind.LARGE, block_size, os_page_kib * KiB, ARCH64, offset,
                        slice_start=1 << 32)


def first_unit_of_block(offset: int, block_size: int, i: int) -> int:
    """units_of_block(i) starts at the unit that holds the block's first byte.

    pre: 0 <= offset <= 65536
    pre: 98304 <= block_size <= 524288
    pre: 0 <= i < (4194304 - offset) // block_size
    post: _unit_start(offset, block_size, __return__) <= _block_start(offset, block_size, i)
    post: _block_start(offset, block_size, i) < _unit_start(offset, block_size, __return__ + 1)
    """
    return UnitMap.of(_geom(offset, block_size, 4)).units_of_block(i).start


def _unit_start(offset: int, block_size: int, k: int) -> int:
    return UnitMap.of(_geom(offset, block_size, 4)).unit_range(k)[0]


def _block_start(offset: int, block_size: int, i: int) -> int:
    return _geom(offset, block_size, 4).block_addr(i)


def aligned_down(x: int, a: int) -> int:
    """model.geometry.align_down.

    pre: x >= 0 and a >= 1
    post: __return__ % a == 0
    post: __return__ <= x < __return__ + a
    """
    return align_down(x, a)


def age(current: int, stamped: int) -> int:
    """The age of a stamp: (uint32)(epoch - stamp).

    pre: 0 <= stamped <= current < 2 ** 64
    post: 0 <= __return__ < 2 ** 32
    post: (__return__ < 2) == ((current - stamped) % 2 ** 32 in (0, 1))
    """
    return compute_epoch_age(current, stamp_epoch(encode_stamp(stamped)))


def young(current: int, stamped: int) -> bool:
    """is_epoch_young over what the page stores.

    pre: 0 <= stamped <= current <= stamped + 1
    post: __return__
    """
    state = encode_stamp(stamped)
    return is_stamp(state) and is_epoch_young(current, stamp_epoch(state))


def due(start: int, now: int, interval_ms: int) -> bool:
    """The compare of the advance.

    pre: 0 <= start <= now
    pre: interval_ms >= 1
    post: __return__ == (now - start >= interval_ms)
    """
    return is_epoch_due(start, now, interval_ms)


def interval(option_ms: int) -> int:
    """purge_holes_min_interval, clamped.

    post: 0 <= __return__ <= 3600000
    post: (__return__ == option_ms) == (0 <= option_ms <= 3600000)
    """
    return compute_interval(option_ms)


# -- running crosshair --------------------------------------------------------------------

# Paths per condition (proofs/crosshair_run.py: a count, not seconds). The contracts on the
# unit, the block map, align_down, the compare and the interval exhaust their paths well
# within it ("confirmed over all paths"); the age and young ones do not, and are bounded.
PATHS, PATHS_QUICK = 200, 50


def contract_names(path: str) -> list[str]:
    import ast
    from pathlib import Path

    tree = ast.parse(Path(path).read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef)
            and not n.name.startswith("_") and "post:" in (ast.get_docstring(n) or "")]


def _contracts(module) -> list:
    return [getattr(module, n) for n in contract_names(module.__file__)]


def run_contracts(quick: bool):
    import sys

    from proofs.crosshair_run import check_functions
    return check_functions(_contracts(sys.modules[__name__]), PATHS_QUICK if quick else PATHS)


def run_broken(quick: bool):
    from proofs import crosshair_broken
    from proofs.crosshair_run import check_functions
    return check_functions(_contracts(crosshair_broken), PATHS_QUICK)


def _proof_and_twins():
    from proofs.core import Proof, Twin
    proof = Proof("contracts", ("PG-UNIT", "PF-UNIT-MAP", "EP-AGE-MOD"), "crosshair",
                  run_contracts, "CrossHair contracts on the unit, block map, age and compare")
    twins = [Twin("contract-age-without-modulo", "contracts", ("EP-AGE-MOD",), "crosshair",
                  run_broken, "a contract that claims the age is the plain difference"),
             # the model's own functions broken: the contracts call them, so they fail
             Twin("contracts-unit-os-page", "contracts", ("PG-UNIT",), "crosshair",
                  run_contracts, "mutant unit-os-page: the model's unit never doubles",
                  mutant="unit-os-page"),
             Twin("contracts-age-no-modulo", "contracts", ("EP-AGE-MOD",), "crosshair",
                  run_contracts, "mutant age-no-modulo: the model's age without the modulo",
                  mutant="age-no-modulo")]
    return proof, twins


PROOF, TWINS = _proof_and_twins()
