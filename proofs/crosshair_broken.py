"""Broken contracts that CrossHair must falsify (the golden bugs beside correct code).

Each states something false about a model function; `purgecheck prove --mutants` fails if
CrossHair does not find the counterexample within its budget.
"""

from __future__ import annotations

from model.epoch import compute_epoch_age


def age_without_modulo(current: int, stamped: int) -> int:
    """Claims the age is the plain difference (false once the epoch passes 2^32).

    pre: 0 <= stamped <= current < 2 ** 64
    post: __return__ == current - stamped
    """
    return compute_epoch_age(current, stamped % 2 ** 32)
