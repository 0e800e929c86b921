"""One module per subcommand of `purgecheck`, each with `add_parser(sub)` and `run(args)`.

The command line is the modules of this package: adding a command is adding a module here.
"""

from __future__ import annotations

from purgecheck.discovery import modules_of

# The order `purgecheck --help` lists them in: the main job, what is checked, then one
# engine at a time as the guide introduces them. A module not named here comes after, by name.
HELP_ORDER = ("check", "invariants", "scenario", "prove", "fuzz", "diff", "validate", "glibc",
              "simulate", "mutants", "docs")


def command_names() -> list[str]:
    """Every module of this package, in HELP_ORDER and then by name."""
    import sys
    return modules_of(sys.modules[__name__], HELP_ORDER)
