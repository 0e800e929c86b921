"""The C binaries a command runs match the sources checked out (purgecheck/cbuild.py), and the
command says which build it ran. Built in a copy of reference_c/ under tmp_path, so the
project's own build/ is never touched by these edits."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from purgecheck.cbuild import RAN, BuildError, ensure_current, sources_digest
from purgecheck.conformance import BUILD_DIR

REF = BUILD_DIR.parent


@pytest.fixture
def copy(tmp_path) -> Path:
    """reference_c's sources and Makefile, without build/."""
    dst = tmp_path / "reference_c"
    dst.mkdir()
    for f in [*REF.glob("*.c"), *REF.glob("*.h"), REF / "Makefile"]:
        shutil.copy2(f, dst / f.name)
    return dst


def usage_line(binary: Path) -> str:
    return subprocess.run([str(binary)], capture_output=True, text=True).stderr.strip()


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    later = time.time() + 2  # newer than the binary, whatever the file system's resolution
    os.utime(path, (later, later))


def test_an_edited_source_is_rebuilt_before_it_runs(copy):
    binary = copy / "build" / "glibc_driver"
    first = ensure_current(binary)
    assert first.rebuilt and binary.exists() and usage_line(binary).startswith("usage: glibc_driver")
    again = ensure_current(binary)
    assert not again.rebuilt and again.sha256 == first.sha256 and again.sources == first.sources
    edit(copy / "glibc_driver.c", "usage: glibc_driver", "usage (edited): glibc_driver")
    # what a run without the check would have run: the binary of the previous sources
    assert usage_line(binary).startswith("usage: glibc_driver")
    after = ensure_current(binary)
    assert after.rebuilt and after.sources != first.sources and after.sha256 != first.sha256
    assert usage_line(binary).startswith("usage (edited): glibc_driver")
    assert RAN[after.binary] == after


def test_the_sources_digest_sees_content_not_times(copy):
    before = sources_digest(copy)
    os.utime(copy / "page.c", (time.time() + 5, time.time() + 5))
    assert sources_digest(copy) == before
    edit(copy / "page.c", "#include", "/* edited */\n#include")
    assert sources_digest(copy) != before


def test_a_source_that_does_not_build_is_one_line(copy):
    binary = copy / "build" / "glibc_driver"
    edit(copy / "glibc_driver.c", "int main(", "int main(}")
    with pytest.raises(BuildError) as e:
        ensure_current(binary)
    assert "\n" not in str(e.value) and "make -C reference_c build/glibc_driver" in str(e.value)


def test_diff_says_which_build_it_ran_and_refuses_one_that_does_not_build(copy, tmp_path,
                                                                         monkeypatch, capsys):
    import purgecheck.conformance as conformance
    from purgecheck.cli import main

    script = tmp_path / "s.ops"
    script.write_text("1 malloc a 131072\n1 free a\n")
    assert main(["diff", str(script), "--json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["c_build"]["binary"] == "reference_c/build/driver"
    assert doc["c_build"]["sources"] == sources_digest(REF)
    assert main(["diff", str(script)]) == 0
    assert f"C build: reference_c/build/driver (sources {sources_digest(REF)}" in \
        capsys.readouterr().out
    edit(copy / "page.c", "#include", "#error edited\n#include")
    monkeypatch.setattr(conformance, "BUILD_DIR", copy / "build")
    assert main(["diff", str(script)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "make -C reference_c build/driver" in err
