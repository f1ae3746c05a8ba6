"""Records (keyword-only, frozen, UTC), MemoryContext ids, canonical subjects and option resolution."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from tiermem import (
    Alias,
    ConfigurationError,
    Digest,
    DigestOptions,
    Edge,
    Episode,
    EpisodicOptions,
    Fact,
    HashingEmbedder,
    InvalidSubjectError,
    MemoryContext,
    MemoryItem,
    Message,
    RankedMemoryItem,
    RelationsOptions,
    SemanticOptions,
    Turn,
    WorkingEntry,
    WorkingOptions,
    canonical_subject,
    create_memory_capability,
    is_canonical_subject,
)
from tiermem.memory._options import resolve_tier

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
SCOPE: dict[str, Any] = {"namespace": "default", "user_id": "u-1"}

RECORD_FACTORIES: dict[str, Callable[[], dict[str, Any]]] = {
    "MemoryContext": lambda: {"user_id": "u-1", "session_id": "s-1"},
    "Message": lambda: {"role": "user", "content": "hi"},
    "Turn": lambda: {
        **SCOPE,
        "id": "t1",
        "session_id": "s-1",
        "seq": 0,
        "messages": (Message(role="user", content="hi"),),
        "created_at": T0,
    },
    "WorkingEntry": lambda: {
        **SCOPE,
        "id": "w1",
        "session_id": "s-1",
        "subject": "user",
        "text": "likes tea",
        "created_at": T0,
        "updated_at": T0,
    },
    "Episode": lambda: {
        **SCOPE,
        "id": "e1",
        "session_id": "s-1",
        "summary": "talked about tea",
        "started_at": T0,
        "ended_at": T0,
        "created_at": T0,
        "updated_at": T0,
    },
    "Fact": lambda: {
        **SCOPE,
        "id": "f1",
        "subject": "user",
        "text": "The user likes tea.",
        "created_at": T0,
        "updated_at": T0,
        "reinforced_at": T0,
    },
    "Digest": lambda: {**SCOPE, "id": "d1", "text": "A tea drinker.", "created_at": T0, "updated_at": T0},
    "Edge": lambda: {
        **SCOPE,
        "id": "g1",
        "source": "user",
        "relation": "married to",
        "target": "moni",
        "created_at": T0,
        "updated_at": T0,
    },
    "Alias": lambda: {**SCOPE, "id": "a1", "name": "caroline", "subject": "user", "created_at": T0},
    "MemoryItem": lambda: {
        "id": "f1",
        "tier": "semantic",
        "subject": "user",
        "text": "The user likes tea.",
        "confidence": 0.8,
        "created_at": T0,
        "updated_at": T0,
    },
    "RankedMemoryItem": lambda: {
        "id": "f1",
        "tier": "semantic",
        "subject": "user",
        "text": "The user likes tea.",
        "confidence": 0.8,
        "created_at": T0,
        "updated_at": T0,
        "score": 0.5,
    },
}
RECORD_CLASSES: dict[str, type[BaseModel]] = {
    "MemoryContext": MemoryContext,
    "Message": Message,
    "Turn": Turn,
    "WorkingEntry": WorkingEntry,
    "Episode": Episode,
    "Fact": Fact,
    "Digest": Digest,
    "Edge": Edge,
    "Alias": Alias,
    "MemoryItem": MemoryItem,
    "RankedMemoryItem": RankedMemoryItem,
}
NAMES = sorted(RECORD_CLASSES)


def _build(name: str) -> BaseModel:
    return RECORD_CLASSES[name](**RECORD_FACTORIES[name]())


# -- records ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_records_build_from_keywords(name: str) -> None:
    assert isinstance(_build(name), RECORD_CLASSES[name])


@pytest.mark.parametrize("name", NAMES)
def test_records_refuse_positional_arguments(name: str) -> None:
    values = list(RECORD_FACTORIES[name]().values())
    with pytest.raises(TypeError):
        RECORD_CLASSES[name](*values)


@pytest.mark.parametrize("name", NAMES)
def test_records_are_frozen(name: str) -> None:
    record = _build(name)
    field = next(iter(RECORD_FACTORIES[name]()))
    with pytest.raises(ValidationError):
        setattr(record, field, getattr(record, field))


@pytest.mark.parametrize("name", NAMES)
def test_records_refuse_unknown_fields(name: str) -> None:
    with pytest.raises(ValidationError):
        RECORD_CLASSES[name](**RECORD_FACTORIES[name](), bogus=1)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (datetime(2026, 3, 1, 9, 0), datetime(2026, 3, 1, 9, 0, tzinfo=UTC)),
        (datetime(2026, 3, 1, 11, 0, tzinfo=timezone(timedelta(hours=2))), datetime(2026, 3, 1, 9, 0, tzinfo=UTC)),
        (datetime(2026, 3, 1, 9, 0, tzinfo=UTC), datetime(2026, 3, 1, 9, 0, tzinfo=UTC)),
    ],
    ids=["naive", "plus-two-hours", "utc"],
)
def test_datetimes_become_utc(given: datetime, expected: datetime) -> None:
    fact = Fact(**{**RECORD_FACTORIES["Fact"](), "created_at": given, "valid_from": given})
    assert fact.created_at == expected
    assert fact.created_at.utcoffset() == timedelta(0)
    assert fact.valid_from is not None and fact.valid_from.utcoffset() == timedelta(0)


def _datetime_fields(cls: type[BaseModel]) -> list[str]:
    return [name for name, f in cls.model_fields.items() if "datetime" in str(f.annotation)]


def test_every_record_class_has_its_datetime_fields_found() -> None:
    # Guards the test below: it covers every datetime field of every record class.
    assert {n: _datetime_fields(c) for n, c in RECORD_CLASSES.items() if _datetime_fields(c)} == {
        "Turn": ["created_at", "retry_at"],
        "WorkingEntry": ["created_at", "updated_at"],
        "Episode": ["started_at", "ended_at", "created_at", "updated_at", "retry_at", "stored_at"],
        "Fact": ["created_at", "updated_at", "reinforced_at", "valid_from", "valid_to", "stored_at"],
        "Digest": ["created_at", "updated_at"],
        "Edge": ["created_at", "updated_at", "valid_from", "valid_to"],
        "Alias": ["created_at"],
        "MemoryItem": ["created_at", "updated_at"],
        "RankedMemoryItem": ["created_at", "updated_at"],
    }


@pytest.mark.parametrize("name", NAMES)
def test_every_datetime_field_becomes_utc_built_or_parsed(name: str) -> None:
    # Only datetime fields carry the UTC validator (a validator on every field cost half a fact's parse):
    # none may be left out, whether the record is built or parsed from its JSON.
    cls = RECORD_CLASSES[name]
    given = datetime(2026, 3, 1, 11, 0, tzinfo=timezone(timedelta(hours=2)))
    values = {**RECORD_FACTORIES[name](), **dict.fromkeys(_datetime_fields(cls), given)}
    naive = {
        k: v.replace(tzinfo=None) - timedelta(hours=2) if isinstance(v, datetime) else v for k, v in values.items()
    }
    built = [cls(**values), cls(**naive)]
    parsed = cls.model_validate_json(cls.model_construct(**values).model_dump_json())
    for record in [*built, parsed]:
        for field in _datetime_fields(cls):
            value = getattr(record, field)
            assert value == datetime(2026, 3, 1, 9, 0, tzinfo=UTC) and value.tzinfo is UTC, (name, field)


def test_naive_and_aware_records_compare() -> None:
    naive = Fact(**{**RECORD_FACTORIES["Fact"](), "created_at": datetime(2026, 3, 1, 9, 0)})
    aware = Fact(**RECORD_FACTORIES["Fact"]())
    assert naive == aware


def test_optional_datetimes_stay_none() -> None:
    fact = _build("Fact")
    assert isinstance(fact, Fact)
    assert fact.valid_from is None and fact.valid_to is None


# -- MemoryContext ids --------------------------------------------------------------------------

BAD_IDS = ["", "a\x00b", "x" * 257, "line\nbreak", "tab\there", "\x7f"]
BAD_ID_NAMES = ["empty", "nul", "257-chars", "newline", "tab", "del"]


@pytest.mark.parametrize("field", ["user_id", "namespace", "session_id"])
@pytest.mark.parametrize("value", BAD_IDS, ids=BAD_ID_NAMES)
def test_memory_context_rejects_bad_ids(field: str, value: str) -> None:
    with pytest.raises(ValueError):
        MemoryContext(**{"user_id": "u-1", field: value})


@pytest.mark.parametrize(
    "value",
    ["użytkownik-😀", "o'brien", 'say "hi"', "' OR '1'='1", "x" * 256, "名前", "a b", "u-1;--"],
    ids=["unicode-emoji", "quote", "double-quote", "sql-ish", "256-chars", "cjk", "space", "semicolon"],
)
def test_memory_context_accepts_opaque_ids(value: str) -> None:
    ctx = MemoryContext(namespace=value, user_id=value, session_id=value)
    assert (ctx.namespace, ctx.user_id, ctx.session_id) == (value, value, value)


def test_memory_context_defaults() -> None:
    ctx = MemoryContext(user_id="u-1")
    assert ctx.namespace == "default"
    assert ctx.session_id is None


def test_memory_context_requires_a_user() -> None:
    with pytest.raises(ValidationError):
        MemoryContext()  # type: ignore[call-arg]


# -- subjects -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("I", "user"),
        ("me", "user"),
        ("Myself", "user"),
        ("the user", "user"),
        ("user", "user"),
        ("Moni", "moni"),
        ("Acme Corp", "acme-corp"),
        ("Acme   Corp", "acme-corp"),
        ("acme-corp", "acme-corp"),
        ("  José  ", "jose"),
        ("Zoë", "zoe"),
        ("AT&T", "at-and-t"),
        ("Procter & Gamble", "procter-and-gamble"),
        ("O'Brien", "obrien"),
        ("Jean-Luc", "jean-luc"),
        ("Dr. Smith", "dr-smith"),
    ],
    ids=lambda v: v if isinstance(v, str) and v.strip() else repr(v),
)
def test_canonical_subject(raw: str, expected: str) -> None:
    assert canonical_subject(raw) == expected
    assert is_canonical_subject(expected)
    assert canonical_subject(expected) == expected  # idempotent


@pytest.mark.parametrize(
    ("raw", "aliases", "expected"),
    [
        ("Caroline", {"caroline": "user"}, "user"),
        ("CAROLINE", {"caroline": "user"}, "user"),
        ("Mrs. Caroline", {"mrs-caroline": "user"}, "user"),
        ("Mo", {"mo": "moni"}, "moni"),
        ("Caroline", {}, "caroline"),
        ("Caroline", None, "caroline"),
    ],
    ids=["name", "uppercase", "slug-alias", "nickname", "empty-aliases", "no-aliases"],
)
def test_canonical_subject_aliases(raw: str, aliases: dict[str, str] | None, expected: str) -> None:
    assert canonical_subject(raw, aliases=aliases) == expected


@pytest.mark.parametrize(
    "raw",
    ["", "   ", "<script>", "a" * 100, "moni; drop table", "🙂", "'", "123", "moni\x00", "日本", None, 42],
    ids=["empty", "blank", "script", "100-chars", "sql", "emoji", "apostrophe", "digits", "nul", "cjk", "none", "int"],
)
def test_canonical_subject_rejects(raw: Any) -> None:
    with pytest.raises(InvalidSubjectError):
        canonical_subject(raw)


def test_invalid_subject_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        canonical_subject("<script>")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("user", True),
        ("moni", True),
        ("acme-corp", True),
        ("r2d2", True),
        ("a" * 64, True),
        ("a" * 65, False),
        ("Moni", False),
        ("acme corp", False),
        ("-acme", False),
        ("acme-", False),
        ("a--b", False),
        ("", False),
        ("1abc", False),
        ("josé", False),
        ("moni'", False),
    ],
    ids=lambda v: v if isinstance(v, str) and v else repr(v),
)
def test_is_canonical_subject(value: str, expected: bool) -> None:
    assert is_canonical_subject(value) is expected


# -- options ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, WorkingOptions()),
        (False, None),
        (None, None),
        ({"capacity": 3}, WorkingOptions(capacity=3)),
        ({}, WorkingOptions()),
        (WorkingOptions(capacity=5, salience_half_life=2.0), WorkingOptions(capacity=5, salience_half_life=2.0)),
    ],
    ids=["true", "false", "none", "dict", "empty-dict", "model"],
)
def test_resolve_tier(value: Any, expected: WorkingOptions | None) -> None:
    assert resolve_tier(value, WorkingOptions, "working") == expected


@pytest.mark.parametrize(
    "value",
    [{"capacity": 0}, {"capacity": "many"}, {"bogus": 1}, "yes", 7, ["capacity"], EpisodicOptions()],
    ids=["zero-capacity", "string-capacity", "unknown-key", "string", "int", "list", "wrong-model"],
)
def test_resolve_tier_rejects(value: Any) -> None:
    with pytest.raises(ConfigurationError):
        resolve_tier(value, WorkingOptions, "working")


@pytest.mark.parametrize(
    ("kwargs", "tiers"),
    [
        ({}, ["working", "episodic", "semantic", "digest", "document"]),
        ({"working": False}, ["episodic", "semantic", "digest", "document"]),
        ({"episodic": False, "digest": False}, ["working", "semantic", "document"]),
        (
            {"working": {"capacity": 3}, "semantic": SemanticOptions()},
            ["working", "episodic", "semantic", "digest", "document"],
        ),
        ({"digest": DigestOptions(max_facts=5)}, ["working", "episodic", "semantic", "digest", "document"]),
    ],
    ids=["defaults", "no-working", "no-episodic-digest", "dict-and-model", "digest-model"],
)
def test_capability_enabled_tiers(tmp_path: Path, kwargs: dict[str, Any], tiers: list[str]) -> None:
    cap = create_memory_capability(store=str(tmp_path / "s"), embedder=HashingEmbedder(32), **kwargs)
    assert cap.enabled_tiers() == tiers  # "document": ingested passages, whatever the tiers


@pytest.mark.parametrize(
    "kwargs",
    [
        {"working": {"capacity": 0}},
        {"semantic": {"half_life": "forever"}},
        {"episodic": {"ttl_days": 3}},
        {"digest": "weekly"},
        {"recall": {"min_relevance": 2}},
        {"preset": "everything"},
        {"max_context_tokens": 3},
        {"semantic": {"relations": {"max_edges": 0}}},
    ],
    ids=["capacity-0", "bad-half-life", "unknown-key", "string", "recall-range", "preset", "tiny-budget", "edges-0"],
)
def test_capability_rejects_invalid_options(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        create_memory_capability(store=str(tmp_path / "s"), embedder=HashingEmbedder(32), **kwargs)


@pytest.mark.parametrize(
    ("semantic", "expected"),
    [
        (True, None),
        ({}, None),
        ({"relations": False}, None),
        ({"relations": True}, RelationsOptions()),
        ({"relations": {"vocabulary": ["Married  To"]}}, RelationsOptions(vocabulary=("married to",))),
        ({"relations": {"enabled": False, "max_edges": 9}}, None),
        (SemanticOptions(relations=RelationsOptions(max_edges=9)), RelationsOptions(max_edges=9)),
    ],
    ids=["default", "empty-dict", "false", "true", "vocabulary", "dict-disabled", "model"],
)
def test_relations_are_opt_in(tmp_path: Path, semantic: Any, expected: RelationsOptions | None) -> None:
    cap = create_memory_capability(store=str(tmp_path / "s"), embedder=HashingEmbedder(32), semantic=semantic)
    assert cap.relations.options == expected
    if expected is not None:
        assert cap.relations.options is not None and cap.relations.options.enabled


def test_semantic_off_means_relations_off(tmp_path: Path) -> None:
    cap = create_memory_capability(store=str(tmp_path / "s"), embedder=HashingEmbedder(32), semantic=False)
    assert cap.semantic is None
    assert cap.relations.options is None
