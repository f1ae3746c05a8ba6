"""Facts are written of the user in the third person ("The user was laid off."), cues are asked in the first
("did I lose my job?"): recall by meaning embeds what is written of the user in the user's own voice.

Real LanceDB, the default embedder, facts written through the capability's own write path; the control
stores the same facts with the vectors of their written text, as embedding recipe 2 did.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tiermem import MemoryCapability, MemoryContext, create_memory_capability
from tiermem.memory._embed._names import resolve_embedder
from tiermem.pipelines import _sentences as sentences

DATA = Path(__file__).resolve().parents[1] / "data"
FILLER: list[str] = json.loads((DATA / "filler.json").read_text())["memories"][:40]
CTX = MemoryContext(user_id="u-voice")
# (the user's words, a cue sharing no content word with them)
PAIRS = [
    ("I was laid off from the startup in October.", "did I lose my job?"),
    ("I broke up with my girlfriend in February.", "am I single now?"),
    ("I am doing a part-time MBA in the evenings.", "what degree am I pursuing after work?"),
    ("I cycled from London to Paris for charity.", "did I ever do a long bike ride for a good cause?"),
]


def written(text: str) -> str:
    """``text`` as an observer writes it of the user."""
    third = sentences.rewrite_first_person(text)
    return third[:1].upper() + third[1:]


@pytest.fixture(scope="module")
def embedder() -> Any:
    return resolve_embedder(None)


def _store(folder: Path, embedder: Any, *, voiced: bool) -> MemoryCapability:
    cap = create_memory_capability(store=str(folder), embedder=embedder, working=False)
    for text in [*FILLER, *(memory for memory, _ in PAIRS)]:
        cap.tiers.add_semantic_fact(CTX, written(text))
    if not voiced:  # the control: each fact's vector made from its written text
        facts = cap.tiers.facts(CTX)
        cap.store.upsert("facts", facts, embedder.embed([f.text for f in facts]))
    return cap


@pytest.mark.parametrize(("memory", "cue"), PAIRS, ids=["laid-off", "single", "mba", "bike-ride"])
def test_a_fact_written_of_the_user_is_recalled_by_a_cue_in_their_voice(
    tmp_path: Path, embedder: Any, memory: str, cue: str
) -> None:
    voiced = _store(tmp_path / "voiced", embedder, voiced=True)
    control = _store(tmp_path / "control", embedder, voiced=False)

    first = [item.text for item in voiced.search.recall(CTX, cue, limit=3, tiers=None, subject=None)]
    as_written = [item.text for item in control.search.recall(CTX, cue, limit=3, tiers=None, subject=None)]

    assert written(memory) in first
    assert written(memory) not in as_written  # embedded as written, "The user" holds it under the gate
