"""The `purgecheck` command: one subcommand per job, each with --help that shows an example.

Exit codes everywhere: 0 all held / equal / accepted, 1 a check failed (with a replay
command), 2 bad usage or bad input (one line naming what was expected).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from purgecheck.commands import command_names

# The subcommands: the modules of purgecheck/commands/, each with `add_parser` and `run`.
COMMANDS = command_names()


class UsageError(Exception):
    """Bad usage or bad input: printed as one line, exit 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="purgecheck",
        description="Formal models and property checks for the rules by which allocators give "
                    "free memory back to the OS (mimalloc hole purging with the epoch hold; "
                    "glibc heap trimming).",
        epilog="Start with `purgecheck check` (every engine, a summary table) or "
               "`purgecheck invariants` (what is checked). `purgecheck COMMAND --help` "
               "explains each command with an example.",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    from purgecheck import __version__
    parser.add_argument("--version", action="version", version=f"purgecheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        mod = importlib.import_module(f"purgecheck.commands.{name}")
        p = mod.add_parser(sub)
        p.set_defaults(func=mod.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from purgecheck.inputs import InputError
    try:
        return args.func(args)
    except (UsageError, InputError) as e:
        print(f"purgecheck {args.command}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
