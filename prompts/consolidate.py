"""Consolidator prompt: episodes + existing facts -> fact operations (and edges when relations are on)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from tiermem.memory._options import RelationsOptions
from tiermem.memory._policy import MemoryPolicy
from tiermem.memory._records import Episode, Fact, WorkingEntry
from tiermem.memory._retrieval_keys import MAX_KEYS, ModelKeys
from tiermem.memory._stage import ChatMessages, Stage

from ._policy import Categories, categories_field, labelled, policy_rules

VERSION = "consolidate-v4"


class Input(BaseModel):
    """What the consolidator sees."""

    model_config = ConfigDict(frozen=True)

    episodes: list[Episode] = Field(description="Unconsolidated episodes, oldest first.")
    observations: list[WorkingEntry] = Field(
        default_factory=list, description="The episodes' observations, each with the subject the observer gave it."
    )
    existing: list[Fact] = Field(description="Active facts of the same subjects, with their ids.")
    user_names: list[str] = Field(default_factory=list, description="Display names of the primary user.")
    relations: RelationsOptions | None = Field(default=None, description="Edge extraction options; None = off.")
    now: datetime = Field(description="Consolidation time.")
    policy: MemoryPolicy | None = Field(default=None, description="What to remember and what to leave out.")


class Operation(BaseModel):
    """One change to the semantic tier. There is no delete."""

    op: Literal["add", "reinforce", "update", "noop"] = Field(description="What to do.")
    subject: str = Field(description="Subject of the fact: 'user', 'moni', 'acme-corp'.")
    text: str = Field(default="", max_length=1000, description="The fact (new text for add and update).")
    target_id: str | None = Field(
        default=None,
        description='Existing fact id for reinforce and update, or "#N": the N-th operation of this answer (from 1).',
    )
    confidence: float = Field(default=0.8, ge=0.0, le=1.0, description="Confidence in the fact.")
    source_episode_ids: list[str] = Field(default_factory=list, description="Episodes it was said in.")
    keys: ModelKeys = Field(default_factory=list)
    categories: Categories = categories_field()


_REF = re.compile(r"\s*#(\d{1,4})\s*")


def operation_ref(target_id: str | None) -> int | None:
    """N when ``target_id`` is "#N" (an earlier operation of the same answer, counted from 1), else None."""
    m = _REF.fullmatch(target_id or "")
    return int(m[1]) if m and int(m[1]) > 0 else None


class EdgeOut(BaseModel):
    """A typed relation between two subjects."""

    source: str = Field(description="Subject the relation starts at.")
    relation: str = Field(min_length=1, max_length=64, description="Relation type, lowercase, e.g. 'married to'.")
    target: str = Field(description="Subject the relation ends at.")
    confidence: float = Field(default=0.8, ge=0.0, le=1.0, description="Confidence.")


class FactsOutput(BaseModel):
    """The consolidator's answer: fact operations only."""

    operations: list[Operation] = Field(default_factory=list, max_length=100)


class Output(FactsOutput):
    """The consolidator's answer when relations are on."""

    edges: list[EdgeOut] = Field(default_factory=list, max_length=100)


TEXT = """\
You maintain the semantic memory of one user: durable facts, each about exactly one subject.
Subjects: "user" (the primary user, display names: {user_names}), lowercase first names for
other people ("moni"), lowercase-hyphenated names for organisations ("acme-corp").

For each durable fact in the new episodes choose one operation:
- add: a new fact. {{"op": "add", "subject": "moni", "text": "Moni, the user's wife, is allergic to shellfish."}}
- reinforce: an existing fact said again. {{"op": "reinforce", "target_id": "<id>", "subject": "user"}}
- update: an existing fact changed; give the new text, the old one is kept as history.
  {{"op": "update", "target_id": "<id>", "subject": "user", "text": "The user now works at Globex."}}
- noop: nothing durable.
One fact per statement: "I live in Porto and work at Farfetch" is two facts (where the user lives,
where the user works). Give each add, update and reinforce the ids of the episodes it was said in
("source_episode_ids"): facts are dated by them. Episodes are listed oldest first: when a later
episode changes what an earlier one of these episodes said (a move, a new job), give the earlier
fact as an add and the change as an update whose target_id is "#N", N being that add's position
in your operations (1 = the first), so the earlier version is kept as history.
An add or update may carry up to {max_keys} "keys": short lowercase broader terms and synonyms a
later question may use instead of the fact's words (peanuts -> "nuts", "food allergy"), never words
already in the text; keep the keys of the observations it came from when they still fit.
Never delete. Never move a fact to another subject and never merge facts of different subjects:
a fact about Moni stays under "moni" even when the user said it.
{relations}"""

RELATIONS = """
Also extract typed relations between subjects as edges, e.g.
{{"source": "user", "relation": "married to", "target": "moni"}},
{{"source": "user", "relation": "works at", "target": "acme-corp"}}.
{vocabulary}
"""


def _render(inputs: Input) -> ChatMessages:
    """The relations paragraph appears only when relations are on."""
    rel = ""
    relations = inputs.relations
    if relations is not None and relations.enabled:
        vocab = (
            f"Use only these relation types: {', '.join(relations.vocabulary)}."
            if relations.vocabulary
            else "Relation types are short lowercase phrases."
        )
        rel = RELATIONS.format(vocabulary=vocab)
    system = TEXT.format(user_names=", ".join(inputs.user_names) or "unknown", relations=rel, max_keys=MAX_KEYS)
    system += policy_rules(inputs.policy)
    facts = "\n".join(f"- id={f.id} [{f.subject}] {f.text}" for f in inputs.existing) or "- (none)"
    by_session: dict[str, list[WorkingEntry]] = {}
    for entry in inputs.observations:
        by_session.setdefault(entry.session_id, []).append(entry)
    eps = "\n".join(
        f"- id={e.id} ({e.started_at.date().isoformat()}) {e.summary}"
        + "".join(f"\n    - [{o.subject}] {o.text}{_keyed(o.keys)}" for o in by_session.get(e.session_id, []))
        for e in inputs.episodes
    )
    return [
        {"role": "system", "content": system},
        {
            "role": "user",
            "content": (
                f"Now: {inputs.now.isoformat()}\n\nExisting facts:\n{facts}\n\n"
                f"New episodes (with their observations):\n{eps}"
            ),
        },
    ]


def _keyed(keys: tuple[str, ...]) -> str:
    return f" (keys: {', '.join(keys)})" if keys else ""


def _output_for(inputs: Input) -> type[FactsOutput]:
    """Edges are asked for only when relations are on; with a policy's labels, operations carry only those."""
    on = inputs.relations is not None and inputs.relations.enabled
    return labelled_operations(Output if on else FactsOutput, inputs)


def labelled_operations(output: type[FactsOutput], inputs: Input) -> type[FactsOutput]:
    """``output`` whose operations' categories are among the policy's labels (``output`` without labels)."""
    labels = inputs.policy.labels if inputs.policy is not None else ()
    return labelled(output, "operations", Operation, labels)


STAGE = Stage(
    name="consolidate",
    version=VERSION,
    input=Input,
    output=FactsOutput,
    text=TEXT,
    renderer=_render,
    narrow=_output_for,
)
"""The consolidator stage: episodes and existing facts in, fact operations (and :class:`Output`'s edges
when relations are on) out."""
