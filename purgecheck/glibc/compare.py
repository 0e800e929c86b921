"""The model's predicted system calls for every version beside the installed glibc's real ones.

`predict` runs a script on the model of each version; `measure` runs it under strace;
`conformance` says, category by category, where the model of the installed version and the
real library disagree.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from model.glibc.params import settings_from_environ
from model.glibc.syscalls import CATEGORIES
from model.glibc.versions import VERSIONS, version_for_release
from purgecheck.glibc.modelrun import run_model
from purgecheck.formats.glibc_ops import parse_script
from purgecheck.glibc.trace import (TraceResult, installed_release, may_shrink_heap,
                                    run_traced)

# The seed's own subject first; the rest in the order of CATEGORIES.
HEADLINE = ("heap_madvise", "brk_shrink", "chunk_mmap", "chunk_munmap")


@dataclass
class Comparison:
    source: str
    env: dict[str, str]
    predicted: dict[str, dict[str, int]]  # version -> category -> count
    release: str | None = None  # the installed glibc, when measured
    installed: str | None = None  # the modelled version standing for it
    measured: TraceResult | None = None
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def categories(self) -> list[str]:
        """Headline categories always; the others where some count is not zero."""
        seen = set()
        for counts in self.predicted.values():
            seen |= {k for k, v in counts.items() if v}
        if self.measured:
            seen |= {k for k, v in self.measured.counts.items() if v}
        return list(HEADLINE) + [c for c in CATEGORIES if c in seen and c not in HEADLINE]

    def to_dict(self) -> dict:
        doc = {"source": self.source, "env": self.env, "ok": self.ok,
               "predicted": self.predicted}
        if self.measured is not None:
            doc |= {"glibc": self.release, "installed_model": self.installed,
                    "measured": self.measured.counts,
                    "unclassified": self.measured.unclassified, "mismatches": self.mismatches}
        return doc


def predict(text: str, source: str, env: dict[str, str],
            versions: list[str] | None = None, overcommit_2: bool = False) -> dict:
    """Counts per category for each version's model (OpScriptError, ValueError on bad input)."""
    ops = parse_script(text, source)
    settings = settings_from_environ(env)
    out = {}
    for name in (list(VERSIONS) if versions is None else versions):
        p = run_model(ops, VERSIONS[name], settings, overcommit_2, source=source)
        out[name] = p.count()
    return out


def compare(text: str, source: str, env: dict[str, str], measure: bool = True,
            versions: list[str] | None = None) -> Comparison:
    """Predict for every version; with `measure`, trace the installed glibc and compare."""
    overcommit_2 = may_shrink_heap() if measure else False
    cmp = Comparison(source, dict(env), predict(text, source, env, versions, overcommit_2))
    if not measure:
        return cmp
    cmp.release = installed_release()
    cmp.installed = version_for_release(cmp.release).name
    if cmp.installed not in cmp.predicted:
        cmp.predicted |= predict(text, source, env, [cmp.installed], overcommit_2)
    with tempfile.NamedTemporaryFile("w", suffix=".ops", delete=False) as f:
        f.write(text)
    try:
        cmp.measured = run_traced(f.name, env)
    finally:
        Path(f.name).unlink()
    cmp.mismatches = mismatches(cmp.predicted[cmp.installed], cmp.measured, cmp.release)
    return cmp


def mismatches(model: dict[str, int], measured: TraceResult, release: str) -> list[str]:
    """Each category where the model's count differs from the real one, and each call the
    classifier could not place."""
    out = [f"{cat}: model {model[cat]}, glibc {release} {measured.counts[cat]}"
           for cat in CATEGORIES if model[cat] != measured.counts[cat]]
    return out + [f"unclassified call: {line}" for line in measured.unclassified]
