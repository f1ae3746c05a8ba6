"""HTML, parsed by the standard library's ``html.parser``: a lenient tokenizer (it reads broken markup
the way browsers do), no dependency to install.

Headings set the section; the text of each block element (paragraph, list item, cell, preformatted
text, quote) is one block; scripts, styles and the head (but its ``<title>``) are left out.
"""

from __future__ import annotations

from html.parser import HTMLParser

from ._parsed import Parsed, assembled, paragraphs

__all__ = ["parse_html"]

_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = frozenset(
    {"p", "li", "dt", "dd", "td", "th", "pre", "blockquote", "div", "section", "article", "main", "header",
     "footer", "aside", "nav", "figcaption", "caption", "tr", "ul", "ol", "dl", "table", "br", "hr", "body", "form"}
)  # fmt: skip
_SKIPPED = frozenset({"script", "style", "noscript", "template", "svg", "head"})
# An unclosed <head> ends, as browsers parse it, at the first tag that cannot stand in a head (or text);
# an unclosed <svg> at an HTML tag that breaks out of foreign content (the HTML standard's list).
_HEAD_CONTENT = frozenset({"title", "meta", "link", "style", "script", "base", "noscript", "template"})
_BREAKS_OUT_OF_SVG = frozenset(
    {"b", "big", "blockquote", "body", "br", "center", "code", "dd", "div", "dl", "dt", "em", "embed", "h1", "h2",
     "h3", "h4", "h5", "h6", "head", "hr", "i", "img", "li", "listing", "menu", "meta", "nobr", "ol", "p", "pre",
     "ruby", "s", "small", "span", "strong", "strike", "sub", "sup", "table", "tt", "u", "ul", "var"}
)  # fmt: skip


class _Blocks(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[tuple[str, str, int | None]] = []
        self.headings: list[tuple[int, str]] = []
        self.title = ""
        self.first_h1 = ""
        self._buffer: list[str] = []
        self._heading: tuple[int, list[str]] | None = None
        self._skipping: list[str] = []
        self._in_title = False
        self._pre = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._leave_implied(tag)
        if tag in _SKIPPED:
            self._skipping.append(tag)
        elif tag == "title":
            self._in_title = True
        elif tag in _HEADINGS:
            self._flush()
            self._heading = (_HEADINGS[tag], [])
        elif tag in _BLOCKS:
            self._flush()
            self._pre += tag == "pre"

    def handle_endtag(self, tag: str) -> None:
        if self._skipping and tag == self._skipping[-1]:
            self._skipping.pop()
        elif tag == "title":
            self._in_title = False
        elif tag in _HEADINGS and self._heading is not None:
            level, words = self._heading[0], " ".join("".join(self._heading[1]).split())
            self._heading = None
            if words:
                self.headings = [h for h in self.headings if h[0] < level] + [(level, words)]
                self.first_h1 = self.first_h1 or (words if level == 1 else "")
        elif tag in _BLOCKS:
            self._flush()
            self._pre -= tag == "pre" and self._pre > 0

    def handle_data(self, data: str) -> None:
        if self._skipping == ["head"] and data.strip() and not self._in_title:  # text: the body has begun
            self._skipping.pop()
        if self._in_title:
            self.title += data
        elif self._skipping:
            return
        elif self._heading is not None:
            self._heading[1].append(data)
        else:
            self._buffer.append(data)

    def _leave_implied(self, tag: str) -> None:
        """End the skipped elements that ``tag`` closes without an end tag (a page's unclosed head or svg)."""
        while self._skipping and (
            (self._skipping[-1] == "head" and tag not in _HEAD_CONTENT)
            or (self._skipping[-1] == "svg" and tag in _BREAKS_OUT_OF_SVG)
        ):
            self._skipping.pop()

    def _flush(self) -> None:
        text = "".join(self._buffer)
        self._buffer = []
        section = " / ".join(h for _, h in self.headings)
        parts = [text.strip("\n")] if self._pre else [" ".join(p.split()) for p in paragraphs(text)]
        self.pieces += [(p, section, None) for p in parts if p.strip()]

    def close(self) -> None:
        super().close()
        self._flush()


def parse_html(text: str) -> Parsed:
    """An HTML document: blocks under the headings they stand below; titled by ``<title>`` or its first h1."""
    parser = _Blocks()
    parser.feed(text)
    parser.close()
    return assembled(parser.pieces, title=" ".join(parser.title.split()) or parser.first_h1 or None)
