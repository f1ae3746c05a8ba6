"""Markdown, parsed by markdown-it-py (CommonMark): the only module that imports it.

Headings set the section (their path, outermost first); every other top-level block (a paragraph, a
list, a table, a code fence, a quote) is one block, kept as its Markdown source so lists, tables and
code read as written. The first level-1 heading is the title.
"""

from __future__ import annotations

from collections.abc import Iterator

from markdown_it import MarkdownIt

from ._parsed import Parsed, assembled

__all__ = ["parse_markdown"]

_PARSER = MarkdownIt("commonmark").enable("table")


def parse_markdown(text: str) -> Parsed:
    """A Markdown document: blocks under the headings they stand below."""
    lines = text.replace("\r\n", "\n").split("\n")
    headings: list[tuple[int, str]] = []  # (level, text) from the outermost down
    title: list[str] = []

    def pieces() -> Iterator[tuple[str, str, int | None]]:
        tokens = _PARSER.parse("\n".join(lines))  # CommonMark never raises on input: any text is Markdown
        i = 0
        while i < len(tokens):
            token = tokens[i]
            if token.level != 0 or token.nesting == -1 or token.map is None or token.type == "hr":
                i += 1
                continue
            if token.type == "heading_open":
                level, words = int(token.tag[1:]), " ".join(tokens[i + 1].content.split())
                headings[:] = [h for h in headings if h[0] < level] + [(level, words)]
                if level == 1 and not title:
                    title.append(words)
            else:
                first, last = token.map
                yield "\n".join(lines[first:last]).strip(), " / ".join(h for _, h in headings), None
            i += 1

    blocks = list(pieces())
    return assembled(blocks, title=title[0] if title else None)
