"""Encode-and-consolidate prompt: one call both writes new episodes' summaries and consolidates them.

An episode ended without a model call (``episodic={"encode": "consolidation"}``) carries a provisional,
extractive summary (its observations, in order). Consolidation then asks this stage, once per batch,
for what the episode encoder and the consolidator would each say: per such episode its summary,
subjects and salience (as :mod:`tiermem.prompts.encode_episode` asks), and the fact operations (and
edges) for the whole batch (as :mod:`tiermem.prompts.consolidate` asks). Its input and outputs extend
the consolidator's, so whatever answers the consolidator answers this stage's fact part too.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from tiermem.memory._records import Episode, Turn, WorkingEntry
from tiermem.memory._stage import ChatMessages, Stage

from . import consolidate

VERSION = "encode-consolidate-v3"


class Input(consolidate.Input):
    """What the stage sees: the consolidator's input, plus the transcripts of the episodes to summarise."""

    encode: list[str] = Field(
        default_factory=list, description="Ids of the episodes whose summary is provisional: write theirs."
    )
    turns: list[Turn] = Field(
        default_factory=list, description="The journaled turns of those episodes not consolidated yet, in order."
    )


class EpisodeOut(BaseModel):
    """One episode as the encoder would write it."""

    id: str = Field(description="The episode's id, as given.")
    summary: str = Field(min_length=1, max_length=4000, description="What happened, 2-6 sentences, third person.")
    subjects: list[str] = Field(default_factory=list, description="Canonical subjects the episode involves.")
    salience: float = Field(default=0.5, ge=0.0, le=1.0, description="How much the session matters later.")


class FactsOutput(consolidate.FactsOutput):
    """The answer: the episodes' summaries and the fact operations."""

    episodes: list[EpisodeOut] = Field(default_factory=list, max_length=100)


class Output(consolidate.Output, FactsOutput):
    """The answer when relations are on: summaries, fact operations and edges."""


ENCODE = """\
Some new episodes are marked "to summarise": their text is provisional (their observations only).
For each of them also write the episode, as "episodes": [{{"id": "<episode id>", "summary": ...,
"subjects": [...], "salience": 0.0-1.0}}]. The summary tells what happened in 2-6 sentences,
third person, concrete (names, places, dates, decisions, feelings); it refers to the primary user
as "the user" and to other people by first name and their relation to the user ("his wife Moni").
Subjects: every subject involved, "user", lowercase first names, or lowercase-hyphenated
organisation names. Salience: how much the session matters later.
"""

TEXT = consolidate.TEXT + "\n" + ENCODE
"""The consolidator's instructions, then the encoder's."""


def _episode(e: Episode, inputs: Input, observed: dict[str, list[WorkingEntry]]) -> str:
    lines = "".join(f"\n    - [{o.subject}] {o.text}" for o in observed.get(e.session_id, []))
    when = e.started_at.date().isoformat()
    if e.id not in inputs.encode:
        return f"- id={e.id} ({when}) {e.summary}{lines}"
    turns = [t for t in inputs.turns if t.session_id == e.session_id]
    said = "".join(f"\n    | {line}" for t in turns for line in t.text.splitlines())
    return (
        f"- id={e.id} ({when} to {e.ended_at.isoformat()}) [to summarise]\n  observations:{lines or ' (none)'}"
        f"\n  transcript:{said or ' (none)'}"
    )


def _render(inputs: Input) -> ChatMessages:
    """The consolidator's instructions, then the encoder's; episodes to summarise come with their transcript."""
    system = consolidate.STAGE.render(inputs)[0]["content"] + "\n" + ENCODE.format()
    facts = "\n".join(f"- id={f.id} [{f.subject}] {f.text}" for f in inputs.existing) or "- (none)"
    observed: dict[str, list[WorkingEntry]] = {}
    for entry in inputs.observations:
        observed.setdefault(entry.session_id, []).append(entry)
    eps = "\n".join(_episode(e, inputs, observed) for e in inputs.episodes)
    content = (
        f"Now: {inputs.now.isoformat()}\n\nExisting facts:\n{facts}\n\nNew episodes (with their observations):\n{eps}"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": content}]


def _output_for(inputs: Input) -> type[FactsOutput]:
    """Edges are asked for only when relations are on; with a policy's labels, operations carry only those."""
    on = inputs.relations is not None and inputs.relations.enabled
    return consolidate.labelled_operations(Output if on else FactsOutput, inputs)  # type: ignore[return-value]


STAGE = Stage(
    name="encode_consolidate",
    version=VERSION,
    input=Input,
    output=FactsOutput,
    text=TEXT,
    renderer=_render,
    narrow=_output_for,
)
"""The combined stage: a batch of episodes (some with provisional summaries) and existing facts in; the
episodes' summaries and the fact operations (and edges when relations are on) out."""
