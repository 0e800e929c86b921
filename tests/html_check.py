"""Checks of a generated HTML page: balanced tags, no script, no external URL, and every
anchor and file it links to exists. Shared by the docs and the mutants-report tests."""

import re
from html.parser import HTMLParser
from pathlib import Path

from purgecheck.reports.store import project_root

DOCS = project_root() / "docs"


class _Checker(HTMLParser):
    VOID = {"meta", "img", "br", "hr", "input", "link", "col", "area", "base", "source", "wbr"}

    def __init__(self):
        super().__init__()
        self.stack, self.errors, self.ids, self.refs = [], [], set(), []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        for key in ("href", "src"):
            if a.get(key):
                self.refs.append(a[key])
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):  # <img ... />: opens nothing
        self.handle_starttag(tag, attrs)
        if tag not in self.VOID:
            self.stack.pop()

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def check_html(text: str, here: Path, known_docs: set[str]):
    """Balanced tags, no script, no external URL, every anchor and file it links exists
    (sources, "../...", from the project's docs/; pictures from `here`)."""
    p = _Checker()
    p.feed(text)
    p.close()
    assert not p.errors and not p.stack, (p.errors[:5], p.stack)
    assert "<script" not in text
    for ref in p.refs:
        assert not re.match(r"^([a-z]+:|//)", ref), f"external URL {ref}"
        path, _, frag = ref.partition("#")
        if not path:
            assert frag in p.ids, f"dangling anchor #{frag}"
        elif path.endswith(".html"):
            assert path in known_docs, ref
        else:
            base = DOCS if path.startswith("../") else here
            assert (base / path).exists(), f"{ref} does not exist"
