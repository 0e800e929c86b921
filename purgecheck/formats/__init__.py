"""The formats the tool reads and writes, each with its parser, writer and checks.

`ops` is the op script of the page model and the C driver (docs/op-script.md), `glibc_ops`
the glibc op script (docs/glibc.md), `trace` the trace both the model and the C reference
write and its streaming reader (docs/trace-format.md), and `tracegen` makes large linearized
traces in that format for the benchmarks and the tests of `validate`.
"""

from __future__ import annotations

EXCERPT_CHARS = 60  # at most this much of a bad line or word is quoted in an error


def excerpt(text: str | bytes, limit: int = EXCERPT_CHARS) -> str:
    """`text` quoted for an error line: at most `limit` characters, and how long it was when
    longer (issue 30: a 50 MB line is not echoed)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"
