"""Named scenarios: the cases of the real tests (digest section 11) as op scripts.

Each scenario is an op script plus the options it runs under. The same scripts drive the model
engines, `purgecheck scenario`, and (later) the C driver, so a scenario means one thing
everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from model.geometry import ARCH32, KiB, MiB
from model.world import Options
from purgecheck.ops import Op, parse_script


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    build: Callable[[], str]  # returns the op script text
    options: Options = field(default_factory=Options)
    tags: tuple[str, ...] = ("page",)

    def ops(self) -> list[Op]:
        return parse_script(self.build(), source=f"scenario:{self.name}")


SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str, description: str, options: Options | None = None,
             tags: tuple[str, ...] = ("page",)):
    def wrap(fn: Callable[[], str]) -> Callable[[], str]:
        SCENARIOS[name] = Scenario(name, description, fn, options or Options(), tags)
        return fn
    return wrap


def keep_every_third(thread: int, size: int, count: int, prefix: str) -> list[str]:
    """Allocate `count` blocks, free all but every third."""
    lines = [f"{thread} malloc {prefix}{n} {size}" for n in range(count)]
    lines += [f"{thread} free {prefix}{n}" for n in range(count) if n % 3]
    return lines


LARGE_CLASSES = (96 * KiB, 256 * KiB, 512 * KiB)  # the first, a middle and the largest


@scenario("every-third", "Keep every third block of the first, a middle and the largest "
          "large class; one walk purges every freed block and the survivors keep every byte.")
def _every_third() -> str:
    lines: list[str] = []
    for size in LARGE_CLASSES:
        lines += keep_every_third(1, size, 4 * MiB // size, f"b{size // KiB}_")
    lines.append("1 walk")
    return "\n".join(lines)


@scenario("reuse-after-purge", "After a walk, malloc and zalloc take the purged blocks back "
          "(no block handed out twice, zalloc zero), then they are freed and purged again.")
def _reuse() -> str:
    lines = keep_every_third(1, 128 * KiB, 32, "a")
    lines.append("1 walk")
    lines += [f"1 {'zalloc' if n % 2 else 'malloc'} r{n} {128 * KiB}" for n in range(24)]
    lines += [f"1 free r{n}" for n in range(0, 24, 2)]
    lines.append("1 walk")
    return "\n".join(lines)


@scenario("xthread-frees", "Frees from another thread into a page with holes go through "
          "xthread_free; the walk purges them after a collect, and the last blocks too.")
def _xthread() -> str:
    lines = [f"1 malloc x{n} {160 * KiB}" for n in range(25)]
    lines += [f"2 free x{n}" for n in range(25) if n % 3]
    lines.append("1 walk")
    lines += [f"2 free x{n}" for n in range(0, 24, 3)]
    lines.append("1 walk")
    return "\n".join(lines)


@scenario("realloc-holes", "realloc shrinking in place and moving between classes next to "
          "holes.")
def _realloc() -> str:
    lines = keep_every_third(1, 192 * KiB, 21, "m")
    lines.append("1 walk")
    lines += ["1 realloc m0 m0s 100000", "1 realloc m3 m3g 400000",
              "1 realloc m6 m6m 130000", "1 walk"]
    return "\n".join(lines)


@scenario("heap-destroy", "mi_heap_destroy with holes: the accounting returns to its start.")
def _destroy() -> str:
    lines = keep_every_third(3, 128 * KiB, 32, "d")
    lines += ["3 walk", "3 heap_destroy"]
    return "\n".join(lines)


@scenario("heap-delete", "mi_heap_delete with holes: emptied pages go back to the arena.")
def _delete() -> str:
    lines = [f"3 malloc e{n} {128 * KiB}" for n in range(32)]
    lines += [f"3 free e{n}" for n in range(32) if n % 3]
    lines.append("3 walk")
    lines += [f"3 free e{n}" for n in range(0, 32, 3)]
    lines += ["3 heap_delete"]
    return "\n".join(lines)


@scenario("double-free-purged", "A double free of a purged block is reported, not absorbed.")
def _double_free() -> str:
    lines = keep_every_third(1, 128 * KiB, 12, "f")
    lines += ["1 walk", "1 free f1", "2 free f2"]
    return "\n".join(lines)


@scenario("failed-discard", "A discard that fails un-purges its run again and leaves the walk "
          "incomplete; the next walk purges it.")
def _failed() -> str:
    lines = keep_every_third(1, 128 * KiB, 32, "g")
    lines += ["fail_discard 2", "1 walk", "1 walk"]
    return "\n".join(lines)


@scenario("small-medium", "Small and medium pages purge holes in OS-page units.")
def _small_medium() -> str:
    lines = keep_every_third(1, 8 * KiB, 64, "s")
    lines += keep_every_third(1, 48 * KiB, 10, "m")
    lines.append("1 walk")
    return "\n".join(lines)


@scenario("huge-never", "A huge page (one block) is never purged, even with its block "
          "freed from another thread and collected.")
def _huge() -> str:
    return "\n".join(["1 malloc h0 3000000", "1 malloc h1 3000000", "1 free h0",
                      "2 free h1", "1 walk"])


@scenario("fresh-blocks", "Blocks formed by an extension and never handed out are free and "
          "zero; a walk that purges them clears free_is_zero all the same.")
def _fresh() -> str:
    return "\n".join(["1 malloc z0 131072", "1 walk", "1 zalloc z1 131072"])


@scenario("offset-192", "Small pages whose first block starts 192 bytes in: unit 0 holds the "
          "page meta data and is never discarded; bits count from align_down(page_start).",
          Options(first_block_offset=192))
def _offset() -> str:
    return "\n".join(keep_every_third(1, 4 * KiB, 48, "o") + ["1 walk"])


@scenario("os-page-16k", "A large page on a 16 KiB OS page keeps the OS page as its unit.",
          Options(os_page_size=16 * KiB))
def _os16() -> str:
    return "\n".join(keep_every_third(1, 112 * KiB, 36, "p") + ["1 walk"])


@scenario("os-page-64k", "On a 64 KiB OS page a 96 KiB class shares units with live "
          "neighbours, which keep them.", Options(os_page_size=64 * KiB))
def _os64() -> str:
    return "\n".join(keep_every_third(1, 96 * KiB, 42, "q") + ["1 walk"])


@scenario("arch32-large", "On 32-bit a large page is 1 MiB and its unit is the OS page.",
          Options(arch=ARCH32))
def _arch32() -> str:
    return "\n".join(keep_every_third(1, 64 * KiB, 16, "w") + ["1 walk"])
