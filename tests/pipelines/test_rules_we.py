"""Who "we" is in the rules model (issue 32 item 5): the one companion the sentence or its turn names.

Through the rules observer ("we" -> "the user and Moni"), the update table (that sentence is still the
user's move) and the real pipeline (a move said with "we" supersedes the user's old home).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tiermem import MemoryContext, Message, system
from tiermem.memory.testing import FrozenClock, HashingEmbedder
from tiermem.pipelines import _rules as rules
from tiermem.pipelines._updates import claims_of
from tiermem.prompts import observe as observe_prompt

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _texts(*contents: str, name: str | None = None) -> list[str]:
    """The observation texts of one turn whose user messages are ``contents``."""
    messages = [Message(role="user", content=c, name=name) for c in contents]
    inputs = observe_prompt.Input(messages=messages, user_names=["Sam"], now=NOW)
    return [o.text for o in rules.observe(inputs).observations]


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        (["My wife Moni is allergic to shellfish, so we never order paella."], "the user and Moni never order"),
        (["Tom and I went hiking; we loved it."], "; the user and Tom loved it"),
        (["So me and Tom went hiking, and we're going again next month."], "the user and Tom are going again"),
        (["Moni, my wife, hates flying, so we usually take the train."], "the user and Moni usually take"),
        (["Tom and I got engaged.", "We are looking for a flat in Porto."], "The user and Tom are looking"),
        (["I went hiking with my brother Tom.", "We loved the views from the top."], "The user and Tom loved"),
        (["My family loves the beach, so we go every summer."], "the user and their family go every summer"),
        (["Me and my friends went camping, and we had a great time by the lake."], "the user and their friends had"),
        (["My wife and I love Lisbon, and we visit it every year."], "the user and their wife visit"),
    ],
    ids=["relative-in-sentence", "coordinated-in-sentence", "me-and-name", "apposition", "coordinated-in-turn",
         "with-name-in-turn", "family-said", "friends-said", "unnamed-wife"],
)  # fmt: skip
def test_we_names_the_one_companion_given(said: list[str], expected: str) -> None:
    texts = _texts(*said)
    assert any(expected in t for t in texts), texts
    assert not any("and others" in t for t in texts), texts


@pytest.mark.parametrize(
    "said",
    [
        ["We are planning a trip to Lisbon in June."],
        ["Tom, Ann and I went hiking; we loved it."],
        ["My wife Moni and my brother Tom came over, and we ate paella."],
        ["Tom and I went hiking.", "Ann and I went climbing.", "We are exhausted after all that climbing."],
        ["Moni is allergic to shellfish, so we never order paella."],
        ["I met Tom at the gym.", "We are moving to Porto next month."],
        ["We visited my brother Tom in Denver last week."],
        ["We took our son Leo to the zoo on Sunday."],
        ["Our son Leo is five.", "We are moving to Porto next month."],
        ["I work with Python every day.", "We use it for our data pipelines."],
    ],
    ids=["no-name", "two-named-in-sentence", "two-relatives", "two-named-in-turn", "bare-name",
         "name-not-a-companion", "relative-after-we", "ours-after-we", "ours-in-turn", "with-a-bare-name"],
)  # fmt: skip
def test_we_stays_others_without_exactly_one_companion(said: list[str]) -> None:
    texts = [t for t in _texts(*said) if "and others" in t]
    assert texts, _texts(*said)
    assert not any(n in t for t in texts for n in ("and Tom", "and Ann", "and Moni", "and Leo", "and their"))


def test_a_named_speakers_we_is_their_companion_never_themselves() -> None:
    assert _texts("Caroline and I went hiking; we loved the waterfall.", name="Melanie") == [
        "Caroline and Melanie went hiking; Melanie and Caroline loved the waterfall."
    ]
    (text,) = _texts("Melanie and I went hiking; we loved the waterfall.", name="Melanie")
    assert "Melanie and others loved" in text


@pytest.mark.parametrize(
    ("sentence", "attribute", "value"),
    [
        ("The user and Moni moved to Porto.", "residence", "Porto"),
        ("The user and Moni Silva now live in Porto.", "residence", "Porto"),
        ("The user and their family relocated to New York City.", "residence", "New York City"),
        ("The user and Tom got engaged.", "partner", "engaged"),
        ("The user and others are living in Berlin.", "residence", "Berlin"),
        ("The user and Moni have two dogs.", "count:dog", "2"),
        ("Melanie and Caroline moved to Denver.", "residence", "Denver"),
    ],
    ids=["named", "two-word-name", "their-family", "engaged", "plural-be", "plural-have", "named-speaker"],
)
def test_a_sentence_with_a_companion_is_still_its_subjects_claim(sentence: str, attribute: str, value: str) -> None:
    (claim, *_) = claims_of(sentence)
    assert (claim.attribute, claim.value, claim.who) == (attribute, value, sentence.split(" and ")[0])


async def test_we_moved_supersedes_the_users_home(tmp_path: Path) -> None:
    """Said with "we" and a named wife, the move is still the user's: Berlin becomes history, and what
    holds now is stated plainly of the user."""
    clock = FrozenClock(datetime(2026, 3, 2, 18, 0, tzinfo=UTC))
    mem = system(model="rules", store=str(tmp_path / "store"), embedder=HashingEmbedder(256), clock=clock)
    base = MemoryContext(namespace="we", user_id="sam")
    said = ["I live in Berlin.", "My wife Moni got a job in Portugal. We moved to Porto."]
    for i, text in enumerate(said):
        clock.set(clock.now() + timedelta(days=7))
        ctx = base.model_copy(update={"session_id": f"s-{i}"})
        await mem.capture(ctx, [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}])
        await mem.end_session(ctx)
        await mem.consolidate(base)
    facts = await mem.facts(base, include_inactive=True)
    mine = {f.status: f.text for f in facts if f.subject == "user"}
    assert mine == {"superseded": "The user lives in Berlin.", "active": "The user lives in Porto."}
