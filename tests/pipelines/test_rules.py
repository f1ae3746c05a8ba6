"""The offline rules model: deterministic stand-ins for the four prompts, judged on their outputs."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from tiermem import Edge, Episode, Fact, Message, RelationsOptions, Turn, WorkingEntry
from tiermem.memory._stage import Stage
from tiermem.pipelines import _rules as rules
from tiermem.prompts import STAGES
from tiermem.prompts import consolidate as consolidate_prompt
from tiermem.prompts import digest as digest_prompt
from tiermem.prompts import encode_episode as encode_prompt
from tiermem.prompts import observe as observe_prompt

NOW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
NS, USER_ID = "default", "u-1"


def observe(content: str, name: str | None = None, user_names: tuple[str, ...] = ()) -> observe_prompt.Output:
    message = Message(role="user", content=content, name=name)
    return rules.observe(observe_prompt.Input(messages=[message], user_names=list(user_names), now=NOW))


def fact(fact_id: str, subject: str, text: str, confidence: float = 0.8) -> Fact:
    return Fact(
        id=fact_id, subject=subject, text=text, confidence=confidence,
        created_at=NOW, updated_at=NOW, reinforced_at=NOW, namespace=NS, user_id=USER_ID,
    )  # fmt: skip


def episode(summary: str, subjects: tuple[str, ...] = ("user",), episode_id: str = "ep-1") -> Episode:
    return Episode(
        id=episode_id, session_id="s-1", summary=summary, subjects=subjects, salience=0.8,
        started_at=NOW, ended_at=NOW, created_at=NOW, updated_at=NOW, namespace=NS, user_id=USER_ID,
    )  # fmt: skip


def entry(seq: int, subject: str, text: str, salience: float) -> WorkingEntry:
    return WorkingEntry(
        id=f"w-{seq}", session_id="s-1", subject=subject, text=text, salience=salience, seq=seq,
        created_at=NOW, updated_at=NOW, namespace=NS, user_id=USER_ID,
    )  # fmt: skip


def edge(source: str, relation: str, target: str) -> Edge:
    return Edge(
        id=f"e-{source}-{target}", source=source, relation=relation, target=target,
        created_at=NOW, updated_at=NOW, namespace=NS, user_id=USER_ID,
    )  # fmt: skip


def consolidate(
    summary: str,
    existing: list[Fact] | None = None,
    relations: RelationsOptions | None = None,
    subjects: tuple[str, ...] = ("user",),
) -> consolidate_prompt.Output:
    inputs = consolidate_prompt.Input(
        episodes=[episode(summary, subjects)], existing=existing or [], relations=relations, now=NOW
    )
    return rules.consolidate(inputs)


# --- observe -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("I love hiking in the mountains.", "The user loves hiking in the mountains."),
        ("I'm allergic to peanuts.", "The user is allergic to peanuts."),
        ("I've been learning Spanish for two years.", "The user has been learning Spanish for two years."),
        ("My dog is called Rex.", "The user's dog is called Rex."),
        ("I was at the gym yesterday.", "The user was at the gym on 28 February 2026."),  # said on 1 March
        ("I work at Acme Corp.", "The user works at Acme Corp."),
    ],
    ids=["love", "im", "ive", "my", "was", "works-at-org"],
)
def test_first_person_becomes_the_user_in_third_person(content: str, expected: str) -> None:
    (obs,) = observe(content).observations
    assert (obs.subject, obs.text) == ("user", expected)


@pytest.mark.parametrize(
    "content",
    [
        "I really love painting landscapes with watercolors.",
        "We visited my grandmother in Lisbon last summer.",
        "My favorite band is playing downtown on Friday.",
    ],
    ids=["adverb", "we-my", "possessive-plan"],
)
def test_rewriting_keeps_every_content_word(content: str) -> None:
    (obs,) = observe(content).observations
    words = {w for w in re.findall(r"[a-z]+", content.lower()) if len(w) > 3}
    assert {w for w in words if w not in obs.text.lower()} == set()


@pytest.mark.parametrize(
    ("content", "subject", "relation"),
    [
        ("My wife Moni is allergic to shellfish.", "moni", "wife"),
        ("My brother Tom just moved to Denver.", "tom", "brother"),
        ("My friend Anna's dog is called Rex.", "anna", "friend"),
        ("Moni, my wife, hates cilantro.", "moni", "wife"),
    ],
    ids=["wife", "brother", "friend-possessive", "apposition"],
)
def test_relatives_are_their_own_subject_in_relation_to_the_user(content: str, subject: str, relation: str) -> None:
    (obs,) = observe(content).observations
    assert obs.subject == subject
    assert f"the user's {relation}" in obs.text.lower()
    assert subject.capitalize() in obs.text


def test_wife_sentence_keeps_its_facts_and_is_never_the_users() -> None:
    (obs,) = observe("My wife Moni is allergic to shellfish.").observations
    assert obs.text == "Moni, the user's wife, is allergic to shellfish."
    assert obs.subject != "user"
    assert obs.kind == "relationship"
    assert obs.salience >= 0.8


@pytest.mark.parametrize(
    ("content", "name", "user_names", "subject", "text"),
    [
        ("I love camping with the kids.", "Melanie", ("Caroline",), "melanie", "Melanie loves camping with the kids."),
        ("I painted my first sunset.", "Melanie", ("Caroline",), "melanie", "Melanie painted Melanie's first sunset."),
        ("I went to a support group.", "Caroline", ("Caroline",), "user", "The user went to a support group."),
        ("I went to a support group.", "caroline", ("Caroline",), "user", "The user went to a support group."),
    ],
    ids=["other-speaker", "other-speaker-possessive", "user-by-name", "user-name-case-insensitive"],
)
def test_speaker_names_pick_the_subject(
    content: str, name: str, user_names: tuple[str, ...], subject: str, text: str
) -> None:
    (obs,) = observe(content, name=name, user_names=user_names).observations
    assert (obs.subject, obs.text) == (subject, text)


@pytest.mark.parametrize(
    ("content", "subject"),
    [
        ("Acme Corp is opening an office in Berlin.", "acme-corp"),
        ("I work at Acme Corp.", "user"),
    ],
    ids=["org-is-subject", "job-is-users"],
)
def test_organisations(content: str, subject: str) -> None:
    (obs,) = observe(content).observations
    assert obs.subject == subject


@pytest.mark.parametrize(
    "content",
    ["Hi!", "Hello there.", "Thanks so much for the help!", "Good morning!", "What should I cook tonight?", "Ok."],
    ids=["hi", "hello", "thanks", "good-morning", "pure-question", "ok"],
)
def test_small_talk_and_pure_questions_are_dropped(content: str) -> None:
    assert observe(content).observations == []


def test_greeting_prefix_is_stripped_and_the_rest_kept() -> None:
    (obs,) = observe("Hey, I just adopted a puppy named Biscuit.").observations
    assert obs.text == "The user just adopted a puppy named Biscuit."


def test_only_user_messages_are_observed() -> None:
    messages = [
        Message(role="assistant", content="I love recommending pasta recipes to everyone."),
        Message(role="user", content="I prefer spicy Thai food."),
    ]
    out = rules.observe(observe_prompt.Input(messages=messages, now=NOW))
    assert [o.text for o in out.observations] == ["The user prefers spicy Thai food."]


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        ("I love sushi and ramen.", "preference"),
        ("I'm going to visit Japan next month.", "plan"),
        ("I went to the Louvre with friends.", "event"),
        ("My sister Ella lives in Oslo.", "relationship"),
        ("I have two cats and a parrot.", "fact"),
    ],
    ids=["preference", "plan", "event", "relationship", "fact"],
)
def test_kinds(content: str, kind: str) -> None:
    (obs,) = observe(content).observations
    assert obs.kind == kind


def test_observations_are_capped_at_twenty_most_salient() -> None:
    content = " ".join(f"I collected {n} vintage stamps from Peru." for n in range(30)) + " I'm allergic to bees."
    out = observe(content)
    assert len(out.observations) == 20
    assert out.observations[-1].text == "The user is allergic to bees."


# --- encode_episode --------------------------------------------------------------------------


def encode(entries: list[WorkingEntry]) -> encode_prompt.Output:
    return rules.encode_episode(encode_prompt.Input(entries=entries, turns=[], started_at=NOW, ended_at=NOW))


def test_episode_is_extractive_salient_first_and_chronological() -> None:
    entries = [entry(i, "user", f"The user mentioned minor topic number {i}.", 0.3) for i in range(8)]
    entries.insert(2, entry(2, "moni", "Moni, the user's wife, is allergic to shellfish.", 0.9))
    entries.append(entry(9, "user", "The user works at Acme Corp.", 0.8))
    entries.append(entry(10, "user", "The user works at Acme Corp.", 0.8))
    out = encode(entries)
    sentences = re.split(r"(?<=\.) ", out.summary)
    assert len(sentences) == 6
    assert sentences.index("Moni, the user's wife, is allergic to shellfish.") < sentences.index(
        "The user works at Acme Corp."
    )
    assert out.summary.count("Acme") == 1
    assert out.subjects == ["user", "moni"]
    assert out.salience == pytest.approx((0.9 + 0.8 + 0.8) / 3)  # the repeated entry counts


@pytest.mark.parametrize(
    ("subjects", "expected"),
    [(["tom", "acme-corp", "user", "tom"], ["user", "acme-corp", "tom"]), (["moni"], ["moni"])],
    ids=["user-first-sorted-unique", "no-user"],
)
def test_episode_subjects(subjects: list[str], expected: list[str]) -> None:
    out = encode([entry(i, s, f"Something about {s} happened.", 0.5) for i, s in enumerate(subjects)])
    assert out.subjects == expected


def test_episode_without_entries_falls_back_to_the_turns() -> None:
    turn = Turn(
        id="t-0", session_id="s-1", seq=0, created_at=NOW, namespace=NS, user_id=USER_ID,
        messages=(Message(role="user", content="Hi! My brother Tom is a pilot."),),
    )  # fmt: skip
    out = rules.encode_episode(encode_prompt.Input(entries=[], turns=[turn], started_at=NOW, ended_at=NOW))
    assert out.summary == "Tom, the user's brother, is a pilot."
    assert out.subjects == ["tom"]
    assert out.salience == 0.5


# --- consolidate -----------------------------------------------------------------------------


def test_new_facts_are_added_with_their_subject_and_episode() -> None:
    summary = "Moni, the user's wife, is allergic to shellfish. The user loves hiking."
    out = consolidate(summary, subjects=("user", "moni"))
    assert [(o.op, o.subject, o.text) for o in out.operations] == [
        ("add", "moni", "Moni, the user's wife, is allergic to shellfish."),
        ("add", "user", "The user loves hiking."),
    ]
    assert all(o.source_episode_ids == ["ep-1"] and o.target_id is None for o in out.operations)


@pytest.mark.parametrize(
    ("summary", "existing_subject", "existing_text", "op", "target_id"),
    [
        ("The user loves hiking in the Alps.", "user", "The user loves hiking in the Alps!", "reinforce", "f-1"),
        ("The user works at Globex.", "user", "The user works at Acme Corp.", "update", "f-1"),
        ("The user now lives in Lisbon.", "user", "The user lives in Berlin.", "update", "f-1"),
        ("The user's favourite color is green.", "user", "The user's favourite color is blue.", "update", "f-1"),
        ("The user is allergic to peanuts.", "user", "The user is allergic to shellfish.", "add", None),
        ("The user loves hiking in the Alps.", "moni", "The user loves hiking in the Alps.", "add", None),
    ],
    ids=["reinforce", "update-job", "update-home", "update-favourite", "multi-valued-adds", "never-cross-subject"],
)
def test_operations_against_existing_facts(
    summary: str, existing_subject: str, existing_text: str, op: str, target_id: str | None
) -> None:
    (operation,) = consolidate(summary, [fact("f-1", existing_subject, existing_text)]).operations
    assert (operation.op, operation.target_id, operation.subject) == (op, target_id, "user")


def test_no_operation_targets_a_fact_of_another_subject() -> None:
    existing = [
        fact("f-user", "user", "The user is allergic to shellfish."),
        fact("f-moni", "moni", "Moni, the user's wife, works at Globex."),
    ]
    summary = "Moni, the user's wife, is allergic to shellfish. The user works at Globex. Moni works at Initech."
    out = consolidate(summary, existing, subjects=("user", "moni"))
    by_id = {f.id: f for f in existing}
    targeted = [o for o in out.operations if o.target_id is not None]
    assert [(o.op, o.target_id, o.subject) for o in targeted] == [("update", "f-moni", "moni")]
    assert all(by_id[o.target_id].subject == o.subject for o in targeted if o.target_id)


def test_repeated_sentences_across_episodes_fold_into_one_operation() -> None:
    episodes = [
        episode("The user loves hiking.", episode_id="ep-1"),
        episode("The user loves hiking!", episode_id="e-2"),
    ]
    out = rules.consolidate(consolidate_prompt.Input(episodes=episodes, existing=[], now=NOW))
    (operation,) = out.operations
    assert (operation.op, operation.source_episode_ids) == ("add", ["ep-1", "e-2"])


RELATIONAL = (
    "Moni, the user's wife, is allergic to shellfish. Tom, the user's brother, is a pilot. "
    "The user works at Acme Corp. The user lives in Berlin."
)


@pytest.mark.parametrize(
    ("relations", "expected"),
    [
        (None, set()),
        (RelationsOptions(enabled=False), set()),
        (
            RelationsOptions(),
            {
                ("user", "married to", "moni"),
                ("tom", "brother of", "user"),
                ("user", "works at", "acme-corp"),
                ("user", "lives in", "berlin"),
            },
        ),
        (
            RelationsOptions(vocabulary=("married to", "lives in")),
            {("user", "married to", "moni"), ("user", "lives in", "berlin")},
        ),
    ],
    ids=["off", "disabled", "on", "vocabulary"],
)
def test_edges_only_when_relations_are_on(
    relations: RelationsOptions | None, expected: set[tuple[str, str, str]]
) -> None:
    out = consolidate(RELATIONAL, relations=relations, subjects=("user", "moni", "tom"))
    assert {(e.source, e.relation, e.target) for e in out.edges} == expected


def test_first_person_relation_in_an_episode_gives_an_edge() -> None:
    out = consolidate("The user had dinner with the user's wife Moni.", relations=RelationsOptions())
    assert [(e.source, e.relation, e.target) for e in out.edges] == [("user", "married to", "moni")]


# --- digest ----------------------------------------------------------------------------------


DIGEST_FACTS = [
    fact("f-1", "user", "The user works at Acme Corp.", 0.9),
    fact("f-2", "moni", "Moni, the user's wife, is allergic to shellfish.", 0.95),
    fact("f-3", "user", "The user loves hiking in the Alps.", 0.7),
    fact("f-4", "anna", "Anna loves orchids.", 0.6),
]


@pytest.mark.parametrize(
    ("user_names", "name"), [(["Caroline"], "Caroline"), (["caroline"], "Caroline"), ([], "The user")],
    ids=["display-name", "capitalised", "no-name"],
)  # fmt: skip
def test_digest_narrates_the_user_and_others_in_relation(user_names: list[str], name: str) -> None:
    text = rules.digest(digest_prompt.Input(facts=DIGEST_FACTS, user_names=user_names)).text
    assert text.startswith(f"{name} works at Acme Corp.")
    assert f"{name}'s wife Moni is allergic to shellfish." in text
    assert f"{name} knows Anna: Anna loves orchids." in text
    assert f"{name} is allergic" not in text


@pytest.mark.parametrize(
    ("facts", "edges", "expected"),
    [
        ([("moni", "Moni, the user's wife, is a chef."), ("tom", "Tom, Moni's brother, plays the cello.")],
         [], "Tom, the brother of Caroline's wife Moni, plays the cello."),
        ([("ana", "Ana, my sister, is a nurse."), ("lena", "Lena, Ana's daughter, studies law.")],
         [], "Lena, the daughter of Caroline's sister Ana, studies law."),
        ([("moni", "Moni is a chef."), ("tom", "Tom plays the cello.")],
         [("user", "married to", "moni"), ("tom", "brother of", "moni")],
         "Tom, the brother of Caroline's spouse Moni, plays the cello."),
        ([("lena", "Lena, Ana's daughter, studies law.")], [], "Lena, Ana's daughter, studies law."),
    ],
    ids=["apposition", "relation-of-a-relation", "edges", "other-not-related-to-the-user"],
)  # fmt: skip
def test_digest_narrates_a_relation_through_the_user(
    facts: list[tuple[str, str]], edges: list[tuple[str, str, str]], expected: str
) -> None:
    given = [fact(f"f-{i}", subject, text) for i, (subject, text) in enumerate(facts)]
    inputs = digest_prompt.Input(facts=given, edges=[edge(*e) for e in edges], user_names=["Caroline"])

    text = rules.digest(inputs).text

    assert expected in text
    assert "knows" not in text


def test_digest_uses_edges_for_the_relation_and_for_unmentioned_links() -> None:
    facts = [fact("f-1", "user", "The user loves jazz."), fact("f-2", "tom", "Tom is a pilot.")]
    edges = [edge("tom", "brother of", "user"), edge("user", "lives in", "berlin")]
    text = rules.digest(digest_prompt.Input(facts=facts, edges=edges, user_names=["Caroline"])).text
    assert text == "Caroline loves jazz. Caroline's brother Tom is a pilot. Caroline lives in Berlin."


def test_digest_without_facts() -> None:
    out = rules.digest(digest_prompt.Input(facts=[], user_names=["Caroline"]))
    assert out.text == "Caroline has no recorded facts yet."


def test_digest_is_capped() -> None:
    facts = [fact(f"f-{i}", "user", f"The user collected {i} rare stamps.") for i in range(30)]
    text = rules.digest(digest_prompt.Input(facts=facts, user_names=["Caroline"])).text
    assert text.count(".") == 12


# --- contract ----------------------------------------------------------------------------------


def _turn_input() -> observe_prompt.Input:
    content = "Hi! My wife Moni is allergic to shellfish. I work at Acme Corp. Acme Corp is moving to Berlin."
    return observe_prompt.Input(messages=[Message(role="user", content=content)], user_names=["Caroline"], now=NOW)


ENTRIES = [entry(0, "user", "The user works at Acme.", 0.8), entry(1, "moni", "Moni loves orchids.", 0.7)]
CASES: list[tuple[Stage[Any, Any], BaseModel, type[BaseModel]]] = [
    (observe_prompt.STAGE, _turn_input(), observe_prompt.Output),
    (
        encode_prompt.STAGE,
        encode_prompt.Input(entries=ENTRIES, turns=[], started_at=NOW, ended_at=NOW),
        encode_prompt.Output,
    ),
    (
        consolidate_prompt.STAGE,
        consolidate_prompt.Input(
            episodes=[episode(RELATIONAL)], existing=DIGEST_FACTS, relations=RelationsOptions(), now=NOW
        ),
        consolidate_prompt.Output,
    ),
    (
        digest_prompt.STAGE,
        digest_prompt.Input(facts=DIGEST_FACTS, edges=[edge("user", "married to", "moni")]),
        digest_prompt.Output,
    ),
]


@pytest.mark.parametrize(("stage", "inputs", "output"), CASES, ids=[c[0].name for c in CASES])
def test_outputs_validate_and_are_deterministic(
    stage: Stage[Any, Any], inputs: BaseModel, output: type[BaseModel]
) -> None:
    first, second = rules.RULES[stage](inputs), rules.RULES[stage](inputs)
    assert isinstance(first, output)
    assert output.model_validate(first.model_dump()) == first
    assert first == second


def test_rules_cover_every_stage() -> None:
    assert set(rules.RULES) == set(STAGES)
