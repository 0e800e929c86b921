"""The `purgecheck` command: one subcommand per job, each with --help that shows an example.

Exit codes everywhere: 0 all held / equal / accepted, 1 a check failed (with a replay
command), 2 bad usage or bad input (one line naming what was expected).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from typing import NoReturn

from purgecheck.commands import command_names

# The subcommands: the modules of purgecheck/commands/, each with `add_parser` and `run`.
COMMANDS = command_names()


class UsageError(Exception):
    """Bad usage or bad input: printed as one line, exit 2."""


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line; with `only`, a subcommand's name, that subcommand alone: the other
    modules and what they import are not loaded (a short `purgecheck replay` spent 0.06 s
    of CPU importing them: docs/record.md, fifteenth round)."""
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
    for name in [only] if only else COMMANDS:
        mod = importlib.import_module(f"purgecheck.commands.{name}")
        p = mod.add_parser(sub)
        p.set_defaults(func=mod.run)
    return parser


def _actions(parser: argparse.ArgumentParser, args) -> list[argparse.Action]:
    """The arguments of the command (and subcommand) that `args` chose."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                found += _actions(chosen, args)
        else:
            found.append(action)
    return found


def empty_value(parser: argparse.ArgumentParser, args) -> str | None:
    """The error line for an argument given as '' (or blanks), which no option means: it
    used to stand for the default (`--time ''` a five-minute campaign, `--out ''` the
    project's docs). The words after `record --` are the program's own and may be ''."""
    for action in _actions(parser, args):
        if action.nargs == argparse.REMAINDER or action.dest in (None, argparse.SUPPRESS):
            continue
        value = getattr(args, action.dest, None)
        if any(isinstance(v, str) and not v.strip()
               for v in (value if isinstance(value, list) else [value])):
            what = action.metavar or action.dest.upper()
            what = " ".join(what) if isinstance(what, tuple) else what
            name = "/".join(action.option_strings) or what
            shown = value if isinstance(value, str) else ""
            return f"{name} {shown!r}: expected {what} (see --help), found an empty string"
    return None


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    # the top level has no option that takes a value: a command is the first word
    parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    empty = empty_value(parser, args)
    if empty is not None:
        print(f"purgecheck {args.command}: {empty}", file=sys.stderr)
        return 2
    from purgecheck.inputs import InputError
    try:
        return args.func(args)
    except (UsageError, InputError) as e:
        print(f"purgecheck {args.command}: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


def entry() -> NoReturn:
    """The program (`purgecheck`, `python -m purgecheck`): main's status as the exit code.

    The process ends here, so what a command left in reference cycles is left to the end of
    the process rather than collected at exit (gc.freeze: the collector passes over it): a
    replay's model keeps a chunk for each block, linked to its neighbours, and collecting
    the 348,000 left after the perl hash of 980,528 ops took 0.3 s of CPU, a tenth of the
    replay (docs/record.md, fifteenth round). Files are written in `with` blocks, so none
    waits in a cycle for its flush."""
    status = main()
    gc.freeze()
    sys.exit(status)


if __name__ == "__main__":
    entry()
