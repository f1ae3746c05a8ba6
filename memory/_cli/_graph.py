"""``tiermem graph``: a user's relations graph as Graphviz DOT, and rendered by Graphviz's ``dot``.

Subjects are the nodes, edges are labelled with their relation; an edge that no longer holds is
drawn dashed. The DOT text is written here (quoted and escaped, no Graphviz library needed);
SVG and PNG need the ``dot`` program, found on ``PATH``.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Sequence
from typing import Any, Literal, cast

from .._errors import ConfigurationError
from .._items import MemoryItem
from .._read import graph_data
from .._subjects import USER

__all__ = ["GRAPHVIZ_MISSING", "graph_dot", "render_dot"]

GRAPHVIZ_MISSING = (
    "--format {fmt} needs Graphviz's `dot` program, which is not on PATH: install Graphviz "
    "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz) or use --format dot"
)


def _quoted(text: str) -> str:
    """A DOT double-quoted string: backslashes and quotes escaped, no raw newlines."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def graph_dot(name: str, subjects: Iterable[str], edges: Sequence[MemoryItem]) -> str:
    """DOT text of a directed graph: ``subjects`` and the endpoints of ``edges`` (relation items) as nodes."""
    data = graph_data(subjects, edges)
    nodes, drawn = cast(list[str], data["nodes"]), cast(list[dict[str, Any]], data["edges"])
    lines = [
        f"digraph {_quoted(name)} {{",
        "  rankdir=LR;",
        '  node [shape=ellipse, fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    for node in nodes:
        style = ", style=filled, fillcolor=lightblue" if node == USER else ""
        lines.append(f"  {_quoted(node)} [label={_quoted(node)}{style}];")
    for edge in drawn:
        closed = ', style=dashed, color=gray, fontcolor=gray, tooltip="no longer holds"'
        style = "" if edge["current"] else closed
        lines.append(
            f"  {_quoted(edge['source'])} -> {_quoted(edge['target'])} [label={_quoted(edge['relation'])}{style}];"
        )
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_dot(dot: str, fmt: Literal["svg", "png"]) -> bytes:
    """``dot -T<fmt>`` over the text; ConfigurationError (one line) when Graphviz is missing or fails."""
    program = shutil.which("dot")
    if program is None:
        raise ConfigurationError(GRAPHVIZ_MISSING.format(fmt=fmt))
    done = subprocess.run([program, f"-T{fmt}"], input=dot.encode(), capture_output=True, timeout=120, check=False)
    if done.returncode != 0:
        reason = (done.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[0]
        raise ConfigurationError(f"Graphviz `dot -T{fmt}` failed: {reason}")
    return done.stdout
