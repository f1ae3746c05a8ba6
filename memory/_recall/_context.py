"""The per-turn ``<memory>`` block: a section per tier, within a token budget.

What no longer holds is shown marked ``(past, until DATE)``, below what replaced it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from xml.sax.saxutils import escape

from .._items import MemoryItem

__all__ = ["SECTION_TITLES", "TokenCounter", "approx_tokens", "citation", "render_context"]

TokenCounter = Callable[[str], int]

SECTION_TITLES: Mapping[str, str] = {
    "procedures": "How this agent works",
    "digest": "About the user",
    "working": "This conversation",
    "semantic": "Known facts",
    "relation": "Relations",
    "episodic": "Past conversations",
    "document": "Documents",
}


def approx_tokens(text: str) -> int:
    """About four characters per token: the usual rule for English with BPE tokenisers."""
    return math.ceil(len(text) / 4)


def citation(item: MemoryItem) -> str:
    """Where a passage of a document is: its title, section and page ("Handbook: Leave / Sick leave, p. 3")."""
    meta = item.metadata
    title, section = str(meta.get("title") or "document"), str(meta.get("section") or "")
    if section == title or section.startswith(f"{title} / "):  # a Markdown title is also its first heading
        section = section[len(title) :].removeprefix(" / ")
    where = f"{title}: {section}" if section else title
    return f"{where}, p. {meta['page']}" if meta.get("page") else where


def _line(item: MemoryItem) -> str:
    if item.tier == "document":
        return f"- [{escape(citation(item))}] {escape(item.text)}"
    when = ""
    if item.tier == "episodic":
        when = f"{item.metadata.get('started_at', item.created_at.isoformat())[:10]} "
    past = item.past_mark()  # shown rather than left out: it answers "where did I work before?"
    scope = item.metadata.get("scope")
    whose = f"{scope} / " if scope and scope != "user" else ""  # a shared memory says whose it is
    return f"- {when}{past + ' ' if past else ''}[{escape(whose)}{item.subject}] {escape(item.text)}"


def render_context(
    sections: Mapping[str, Sequence[MemoryItem]],
    *,
    order: Sequence[str],
    max_tokens: int,
    count: TokenCounter = approx_tokens,
) -> str:
    """Render sections in ``order``, best item first in each, stopping at ``max_tokens``.

    Items are admitted round-robin across sections so one long tier cannot starve the others.
    """
    head, tail = "<memory>", "</memory>"
    budget = max_tokens - count(head + "\n") - count(tail)
    chosen: dict[str, list[str]] = {name: [] for name in order}
    queues = {name: [_line(i) for i in sections.get(name, ())] for name in order}
    headers = {name: f'<section tier="{name}" title="{SECTION_TITLES.get(name, name)}">' for name in order}
    spent = 0
    progressed = True
    while progressed:
        progressed = False
        for name in order:
            if not queues[name]:
                continue
            line = queues[name][0]
            # Count what is really emitted: each line with its newline, a section's frame once.
            cost = count(line + "\n") + (0 if chosen[name] else count(headers[name] + "\n") + count("</section>\n"))
            if spent + cost > budget:
                queues[name] = []
                continue
            chosen[name].append(queues[name].pop(0))
            spent += cost
            progressed = True
    body = [f"{headers[n]}\n" + "\n".join(chosen[n]) + "\n</section>" for n in order if chosen[n]]
    if not body:
        return f"{head}\n(no relevant memories)\n{tail}"
    return head + "\n" + "\n".join(body) + "\n" + tail
