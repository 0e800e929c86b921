"""The glibc op script: one op per line, run by the model and by reference_c/glibc_driver.

    T malloc ID SIZE        thread T: ptrs[ID] = malloc(SIZE)
    T free ID               thread T: free(ptrs[ID]) (free(NULL) when ID holds nothing)
    T mallopt PARAM VALUE   thread T: mallopt(M_<PARAM>, VALUE); PARAM is trim_threshold,
                            top_pad, mmap_threshold or mmap_max
    T calloc ID SIZE        thread T: ptrs[ID] = calloc(1, SIZE)
    T realloc ID SIZE       thread T: ptrs[ID] = realloc(ptrs[ID], SIZE) (SIZE 0 frees it)
    T memalign ID ALIGN SIZE  ptrs[ID] = memalign(ALIGN, SIZE) (also aligned_alloc, posix_memalign)
    T valloc ID SIZE | T pvalloc ID SIZE
    T trim PAD              thread T: malloc_trim(PAD)
    T start | T join        create thread T (T >= 1) / let it return and join it
    repeat N ... end        the lines between, N times (nesting up to 8 deep)

Thread 0 is the main thread. `#` starts a comment. The grammar is in docs/glibc.md.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

from model.glibc.params import PARAMS
from purgecheck.formats.ops import OpScriptError
from purgecheck.formats import excerpt

MAX_THREADS = 64
MAX_IDS = 1 << 24  # live blocks at once: the driver maps its pointer table at this size
MAX_SIZE = 1 << 40
MAX_MALLOPT = 2**31 - 1
MAX_DEPTH = 8
MAX_LINES = 1 << 18  # the driver's static op table

SHAPES = {  # op: argument names; each is an integer except PARAM
    "malloc": ("ID", "SIZE"),
    "free": ("ID",),
    "mallopt": ("PARAM", "VALUE"),
    "calloc": ("ID", "SIZE"),
    "realloc": ("ID", "SIZE"),
    "memalign": ("ID", "ALIGN", "SIZE"),
    "valloc": ("ID", "SIZE"),
    "pvalloc": ("ID", "SIZE"),
    "trim": ("PAD",),
    "start": (),
    "join": (),
}


class GlibcOp(NamedTuple):
    """One op. A named tuple (not a frozen dataclass): a replay makes one per recorded call,
    and a tuple is made several times faster."""

    thread: int | None  # None for repeat / end
    name: str
    args: tuple
    line: int

    def render(self) -> str:
        head = [] if self.thread is None else [str(self.thread)]
        return " ".join(head + [self.name] + [str(a) for a in self.args])


def _int(source: str, line: int, raw: str, lo: int, hi: int, what: str) -> int:
    try:
        value = int(raw, 0)
    except ValueError:
        value = None
    if value is None or not lo <= value <= hi:
        raise OpScriptError(source, line, f"expected {what} ({lo}..{hi}), got {excerpt(raw)}")
    return value


def parse_line(text: str, line: int, source: str) -> GlibcOp | None:
    words = text.split("#", 1)[0].split()
    if not words:
        return None
    if words[0] == "repeat":
        if len(words) != 2:
            raise OpScriptError(source, line, "expected 'repeat N'")
        return GlibcOp(None, "repeat", (_int(source, line, words[1], 0, 10**8,
                                             "a repeat count"),), line)
    if words[0] == "end":
        if len(words) != 1:
            raise OpScriptError(source, line, "expected 'end' alone on its line")
        return GlibcOp(None, "end", (), line)
    thread = _int(source, line, words[0], 0, MAX_THREADS - 1, "a thread number, repeat or end")
    if len(words) < 2 or words[1] not in SHAPES:
        got = excerpt(words[1]) if len(words) > 1 else "nothing"
        raise OpScriptError(source, line, f"expected an operation ({', '.join(SHAPES)}) after "
                                          f"the thread number, got {got}")
    name, raw = words[1], words[2:]
    shape = SHAPES[name]
    if len(raw) != len(shape):
        want = " ".join(shape) or "no arguments"
        raise OpScriptError(source, line, f"{name} takes {want}, got {len(raw)} argument(s)")
    if name in ("start", "join") and thread == 0:
        raise OpScriptError(source, line, "thread 0 is the main thread: it is never started "
                                          "or joined")
    if name in ("malloc", "calloc", "realloc", "valloc", "pvalloc"):
        args = (_int(source, line, raw[0], 0, MAX_IDS - 1, "a block id"),
                _int(source, line, raw[1], 0, MAX_SIZE, "a size in bytes"))
    elif name == "memalign":
        args = (_int(source, line, raw[0], 0, MAX_IDS - 1, "a block id"),
                _int(source, line, raw[1], 0, MAX_SIZE, "an alignment in bytes"),
                _int(source, line, raw[2], 0, MAX_SIZE, "a size in bytes"))
    elif name == "trim":
        args = (_int(source, line, raw[0], 0, MAX_SIZE, "a pad in bytes"),)
    elif name == "free":
        args = (_int(source, line, raw[0], 0, MAX_IDS - 1, "a block id"),)
    elif name == "mallopt":
        if raw[0] not in PARAMS:
            raise OpScriptError(source, line, f"mallopt: expected one of {', '.join(PARAMS)}, "
                                              f"got {excerpt(raw[0])}")
        args = (raw[0], _int(source, line, raw[1], 0, MAX_MALLOPT, "a mallopt value"))
    else:
        args = ()
    return GlibcOp(thread, name, args, line)


def parse_script(text: str, source: str = "<script>") -> list[GlibcOp]:
    """Parse and check the block structure; raises OpScriptError naming source:line."""
    ops: list[GlibcOp] = []
    open_repeats: list[GlibcOp] = []
    for n, raw in enumerate(text.splitlines(), 1):
        op = parse_line(raw, n, source)
        if op is None:
            continue
        if op.name == "repeat":
            if len(open_repeats) == MAX_DEPTH:
                raise OpScriptError(source, n, f"repeat blocks nested too deep (at most "
                                               f"{MAX_DEPTH})")
            open_repeats.append(op)
        elif op.name == "end":
            if not open_repeats:
                raise OpScriptError(source, n, "end without repeat")
            open_repeats.pop()
        ops.append(op)
    if open_repeats:
        raise OpScriptError(source, open_repeats[-1].line, "repeat without end")
    if len(ops) > MAX_LINES:
        raise OpScriptError(source, ops[MAX_LINES].line, f"more than {MAX_LINES} ops: use "
                                                         f"repeat blocks")
    return ops


def expand(ops: list[GlibcOp]) -> Iterator[GlibcOp]:
    """The ops in the order they run, repeat blocks unrolled (lazily: counts may be large)."""
    def block(i: int) -> tuple[list, int]:
        body = []
        while i < len(ops) and ops[i].name != "end":
            if ops[i].name == "repeat":
                inner, j = block(i + 1)
                body.append((ops[i].args[0], inner))
                i = j + 1
            else:
                body.append(ops[i])
                i += 1
        return body, i

    def run(body: list) -> Iterator[GlibcOp]:
        for item in body:
            if isinstance(item, GlibcOp):  # an op (also a tuple) before a (count, block) pair
                yield item
            else:
                for _ in range(item[0]):
                    yield from run(item[1])

    tree, _ = block(0)
    yield from run(tree)


def render_script(ops: list[GlibcOp]) -> str:
    out, depth = [], 0
    for op in ops:
        if op.name == "end":
            depth -= 1
        out.append("  " * depth + op.render())
        if op.name == "repeat":
            depth += 1
    return "\n".join(out) + "\n"
