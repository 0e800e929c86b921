"""How the tool finds its parts: the modules of a package, in a declared order, then by name.

The engines, the subcommands and the parts of the mutant catalogue are each the modules of
one package; adding one is adding a module there (DESIGN.md, "a package's folders name its
architecture").
"""

from __future__ import annotations

import pkgutil


def modules_of(package, order: tuple[str, ...]) -> list[str]:
    """The names of `package`'s modules (not `_private`), those in `order` first in that
    order, then the others by name."""
    found = [m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_")]
    return sorted(found, key=lambda m: (order.index(m) if m in order else len(order), m))
