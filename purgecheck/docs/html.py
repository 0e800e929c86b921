"""Static HTML from the generated Markdown: one file, its style inline, readable from disk.

The page needs no server and fetches nothing: no script, no web font, no external URL. The
pictures are the SVG files beside it (docs/img/), linked by relative path.
"""

from __future__ import annotations

from markdown_it import MarkdownIt

CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #222;
       max-width: 72rem; margin: 2rem auto; padding: 0 1.5rem; }
h1, h2, h3 { line-height: 1.25; } h2 { border-bottom: 1px solid #ddd; padding-top: 1rem; }
code, pre { font: 13px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; }
pre { background: #f6f6f4; padding: .75rem; overflow-x: auto; }
blockquote { margin: .5rem 0; padding: .25rem 1rem; border-left: 4px solid #c9b458;
             background: #fbfaf3; color: #444; }
table { border-collapse: collapse; margin: .75rem 0; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: .25rem .5rem; vertical-align: top; text-align: left; }
th { background: #f2f2f2; } img { max-width: 100%; }
nav { font-size: 13px; color: #666; }
"""


def render(title: str, markdown_text: str, nav: list[tuple[str, str]]) -> str:
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    body = md.render(markdown_text)
    links = " · ".join(f'<a href="{href}">{text}</a>' for text, href in nav)
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{title}</title>\n<style>{CSS}</style>\n</head>\n<body>\n"
            f"<nav>{links}</nav>\n{body}</body>\n</html>\n")
