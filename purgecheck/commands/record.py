"""`purgecheck record`: run a program with the allocation recorder and write its trace."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from purgecheck.cli import UsageError

EXAMPLE = """examples:
  purgecheck record -o py.rec -- python3 -c 'import json; json.dumps(list(range(10**5)))'
  purgecheck record -o sql.rec -- sqlite3 :memory: '.read script.sql'
  purgecheck record -o cc.rec -- gcc -O2 -c model.c     cc1 and as write cc.rec.PID
  purgecheck replay py.rec                     the predicted system calls of every glibc version
  purgecheck replay py.rec --real              and this machine's glibc, compared
Every process writes its own file: the command's is TRACE, a child's (fork, spawn) TRACE.PID;
an exec continues the same file with a new image. The format is in docs/record.md.
exit status: 0 recorded (the program's own status is printed), 2 bad usage, or a program
that cannot be recorded faithfully (static, or it replaces malloc)
"""


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("record", help="record a program's malloc/free/realloc/... calls "
                                      "(LD_PRELOAD) into a trace for `replay`",
                       description="Run CMD with the recorder preloaded; every call of the "
                                   "malloc family, thread start and exit, fork and exec is "
                                   "written to TRACE in 32-byte records, numbered in call order.",
                       epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--output", default="trace.rec", metavar="TRACE",
                   help="the trace file (default trace.rec)")
    p.add_argument("--json", action="store_true", help="the summary as JSON on stdout")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS...]",
                   help="the program to record and its arguments")
    return p


def run(args) -> int:
    from purgecheck.formats.alloc_trace import AllocTraceError
    from purgecheck.record.run import RecordError, record

    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not command:
        raise UsageError("expected a command: purgecheck record -o TRACE -- CMD [ARGS...]")
    from purgecheck.inputs import output_file
    output_file(args.output, "-o")  # before the program runs, not after
    try:
        rec = record(command, Path(args.output), stdout=2 if args.json else None)  # fd 2
    except (RecordError, AllocTraceError) as e:
        raise UsageError(str(e))
    doc = {"command": rec.command, "status": rec.returncode, "files": []}
    for trace in rec.traces:
        doc["files"].append({
            "file": trace.source, "records": trace.records,
            "images": [{"pid": img.pid, "calls": len(img), "ended": img.ended,
                        "execed": img.execed, "cut_at": img.cut, "counts": img.counts()}
                       for img in trace.images]})
    if args.json:
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
        return 0
    print(f"recorded {' '.join(command)} (exit status {rec.returncode})")
    for f in doc["files"]:
        for n, img in enumerate(f["images"]):
            how = ("exited" if img["ended"] else "exec'ed" if img["execed"]
                   else f"cut at call {img['cut_at']}" if img["cut_at"] is not None
                   else "no exit record (killed?)")
            counts = ", ".join(f"{k} {v}" for k, v in sorted(img["counts"].items())
                               if k not in ("start", "end"))
            print(f"  {f['file']} image {n} (pid {img['pid']}): {img['calls']:,} records, "
                  f"{how}; {counts}")
    print(f"replay: purgecheck replay {doc['files'][0]['file']}")
    return 0
