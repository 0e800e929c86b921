"""`purgecheck validate`: replay a trace on the model; accept it if the model can reproduce it."""

from __future__ import annotations

import argparse
import sys

import orjson

from purgecheck.cli import UsageError

EXAMPLE = """examples:
  reference_c/build/stress --trace run.jsonl     four sweepers and the thread under test, real threads
  purgecheck validate run.jsonl                  accepted, or the first event the model cannot explain
  purgecheck validate run.jsonl --json           the verdict as JSON (CI)
  purgecheck diff my.ops --keep out/ && purgecheck validate out/c.jsonl   a sequential C trace
exit status: 0 accepted, 1 rejected (the event, why, the model's state and what it could do
             there are printed), 2 bad input (one line: file, line, what was expected)
See docs/validation.md for what is checked and how the concurrent C runs are linearized.
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("validate", help="replay a trace on the model: accepted or the first "
                                        "event no transition explains",
                       description="Replay each event of a trace (docs/trace-format.md) as a "
                                   "transition of the model, with what the trace says deciding "
                                   "the model's choices (which sweeper won the CAS, what the "
                                   "clock read, which epoch a read returned). Linearized traces "
                                   "of real threads (reference_c/stress) are replayed in the "
                                   "order of their lin numbers. The trace is read as a stream.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", nargs="+", help="trace file(s), JSON Lines")
    p.add_argument("--json", action="store_true", help="the verdicts as JSON on stdout")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return p


def run(args) -> int:
    from purgecheck.formats.trace import TraceError
    from purgecheck.validate import format_verdict, validate_file, verdict_doc

    verdicts = []
    for path in args.trace:
        def progress(n: int, path=path) -> None:
            if not args.quiet:
                print(f"{path}: {n:,} events replayed ...", file=sys.stderr)
        try:
            verdicts.append(validate_file(path, progress))
        except OSError as e:
            raise UsageError(f"cannot read {path!r}: {e.strerror}")
        except TraceError as e:
            raise UsageError(str(e))
    if args.json:
        doc = {"accepted": all(v.accepted for v in verdicts),
               "verdicts": [verdict_doc(v) for v in verdicts]}
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
    else:
        for v in verdicts:
            print(format_verdict(v))
            if not v.accepted:
                print(f"replay: purgecheck validate {v.source}")
    return 0 if all(v.accepted for v in verdicts) else 1
