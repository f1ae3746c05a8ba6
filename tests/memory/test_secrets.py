"""Secrets never stored: a key, a token or a password said in a turn is replaced by a typed placeholder
before it is journaled, embedded or shown to the model; near-misses stay as said.

The secrets are fakes of the right shape, made here from a seeded generator (never real keys).
"""

from __future__ import annotations

import json
import random
import string
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.fakes import messages_of, stage_model
from tiermem import (
    ConfigurationError,
    Episode,
    MemoryCapability,
    MemoryContext,
    MemorySystem,
    RedactionOptions,
    create_memory_capability,
    system,
)
from tiermem.memory._secrets import KINDS, Redactor
from tiermem.memory.testing import FrozenClock, FunctionModel, HashingEmbedder

Builder = Callable[..., MemorySystem]

pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

_RANDOM = random.Random(35)
_ALNUM = string.ascii_letters + string.digits


def _fake(length: int, alphabet: str = _ALNUM) -> str:
    return "".join(_RANDOM.choice(alphabet) for _ in range(length))


def _luhn_digit(body: str) -> str:
    total = 0
    for i, d in enumerate(reversed(body)):
        n = int(d) * (1 if i % 2 else 2)
        total += n - 9 if n > 9 else n
    return str((10 - total % 10) % 10)


def _card(prefix: str, length: int = 16) -> str:
    body = prefix + _fake(length - len(prefix) - 1, string.digits)
    return body + _luhn_digit(body)


_VISA, _AMEX = _card("4"), _card("37", 15)
_VISA_SAID = " ".join(_VISA[i : i + 4] for i in range(0, 16, 4))
_PEM_BODY = "\n".join(_fake(64, _ALNUM + "+/") for _ in range(3))

# (id, kind, secret, sentence saying it)
SECRETS: list[tuple[str, str, str, str]] = [
    ("openai", "api-key", s := "sk-proj-" + _fake(48), f"My OpenAI key is {s}, keep it safe."),
    ("openai-legacy", "api-key", s := "sk-" + _fake(20) + "T3BlbkFJ" + _fake(20), f"old key {s}"),
    ("anthropic", "api-key", s := "sk-ant-api03-" + _fake(93, _ALNUM + "-_") + "AA", f"use {s} for Claude"),
    ("aws-access-key", "api-key", s := "AKIA" + _fake(16, string.ascii_uppercase + "234567"), f"AWS id {s} ok"),
    ("aws-secret", "api-key", s := _fake(40, _ALNUM + "/+"), f"aws_secret_access_key = {s}"),
    ("github", "token", s := "ghp_" + _fake(36), f"my GitHub token: {s}"),
    ("github-fine-grained", "token", s := "github_pat_" + _fake(22) + "_" + _fake(59), f"PAT {s}"),
    ("gitlab", "token", s := "glpat-" + _fake(20), f"GitLab {s}."),
    ("slack", "token", s := "xoxb-" + _fake(12, string.digits) + "-" + _fake(24), f"slack bot {s}"),
    ("stripe", "api-key", s := "sk_live_" + _fake(24), f"Stripe secret {s}"),
    ("google", "api-key", s := "AIza" + _fake(35, _ALNUM + "-_"), f"Maps key {s}"),
    ("jwt", "token", s := f"eyJ{_fake(20)}.eyJ{_fake(40)}.{_fake(43, _ALNUM + '-_')}", f"session cookie {s}"),
    ("bearer", "token", s := _fake(40, _ALNUM + "-._"), f"send Authorization: Bearer {s} with it"),
    ("keyed-value", "api-key", s := _fake(32), f"the api key is {s}"),
    (
        "pem",
        "private-key",
        s := f"-----BEGIN RSA PRIVATE KEY-----\n{_PEM_BODY}\n-----END RSA PRIVATE KEY-----",
        f"Here is my deploy key:\n{s}\nthanks",
    ),
    ("password-said", "password", "hunter2", "By the way my password is hunter2."),
    ("password-word", "password", "swordfish", "My bank password is swordfish"),
    ("pwd", "password", "Tr0ub4dor&3", "pwd: Tr0ub4dor&3"),
    ("password-quoted", "password", "correct horse battery staple", 'password: "correct horse battery staple"'),
    ("password-for", "password", "Zx9!qq-Lm", "The password for the router is Zx9!qq-Lm, ok?"),
    ("password-changed", "password", "blue-Monkey-42", "I changed my password to blue-Monkey-42 yesterday."),
    ("url-credentials", "password", "s3cretPw", "db at postgres://admin:s3cretPw@db.internal:5432/app"),
    ("card-visa", "card-number", _VISA_SAID, f"Charge my card {_VISA_SAID}."),
    ("card-amex", "card-number", _AMEX, f"Amex {_AMEX} exp 04/29"),
]

# (id, sentence): what looks a little like a secret and must stay as said.
NEAR_MISSES: list[tuple[str, str]] = [
    # A commit sha is an id people cite, not a credential: kept (as is every bare hex id).
    ("commit-sha", "The fix landed in commit 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 on main."),
    ("hex-id", "Order a94f03c2e71b is on its way."),
    ("uuid", "Ticket 123e4567-e89b-12d3-a456-426614174000 is closed."),
    ("version", "We upgraded to 10.0.19045.3693 and then to version 2.4.1."),
    ("luhn-fails", "Invoice 4111111111111112 is paid."),
    ("long-number-no-network", "Tracking number 9400111899223344556677 arrived."),
    ("date", "We met on 2024-05-12 at 10:30 and again on 12.05.2024."),
    ("password-word-alone", "I forgot my password again, can you send a reset link?"),
    ("password-is-wrong", "The password is wrong, it says."),
    ("password-too-weak", "My password is too weak according to the site."),
    ("bearer-word", "I am the bearer of bad news today."),
    ("sk-word", "We use sk-learn pipelines at work."),
    ("api-key-topic", "Our api key rotation policy is documented in the wiki."),
    ("slug", "Deploy the task-manager-dashboard-v2 branch."),
    ("email", "Write to jane.doe@example.com about it."),  # PII: kept unless pii=True
    ("phone", "Call me on +44 20 7946 0958 or (555) 867-5309."),
]


class RecordingEmbedder(HashingEmbedder):
    """The hashing embedder, keeping every text it was asked to embed (the embedding input)."""

    def __init__(self) -> None:
        super().__init__(256)
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.seen += list(texts)
        return super().embed(texts)


@pytest.fixture
def build(store_path: str, clock: FrozenClock) -> Builder:
    def make(model: Any = "rules", **options: Any) -> MemorySystem:
        model = model.model if isinstance(model, FunctionModel) else model
        embedder = options.pop("embedder", None) or HashingEmbedder(256)
        return system(model=model, store=store_path, embedder=embedder, clock=clock, semantic=True, **options)

    return make


def _everything_stored(mem: MemorySystem | MemoryCapability) -> str:
    """Every row of every table of the store, as the engine holds it (the library's reads are not used)."""
    db = mem.store._db
    return "\n".join(repr(db.open_table(name).to_arrow().to_pylist()) for name in sorted(mem.store._table_names()))


async def _through_every_stage(mem: MemorySystem, ctx: MemoryContext, sentences: Sequence[str]) -> None:
    for n, sentence in enumerate(sentences):
        await mem.capture(ctx, messages_of(sentence, "Noted."), idempotency_key=f"turn-{n}")
    await mem.end_session(ctx)
    await mem.consolidate(ctx)
    await mem.digest(ctx)


# -- the detector, kind by kind -----------------------------------------------------------------


def test_the_corpus_covers_every_kind() -> None:
    assert {kind for _, kind, _, _ in SECRETS} == set(KINDS)


@pytest.mark.parametrize(("kind", "secret", "sentence"), [s[1:] for s in SECRETS], ids=[s[0] for s in SECRETS])
def test_each_secret_is_replaced_by_its_kind(kind: str, secret: str, sentence: str) -> None:
    redacted = Redactor().redact(sentence)

    assert secret not in redacted.text
    assert f"[secret:{kind}]" in redacted.text
    assert redacted.found == Counter({kind: 1})


@pytest.mark.parametrize("sentence", [n[1] for n in NEAR_MISSES], ids=[n[0] for n in NEAR_MISSES])
def test_near_misses_stay_as_said(sentence: str) -> None:
    redacted = Redactor().redact(sentence)

    assert redacted.text == sentence and not redacted.found


# -- through the real store and a fake model ----------------------------------------------------


async def test_no_secret_reaches_a_table_an_embedding_or_a_prompt(build: Builder, ctx: MemoryContext) -> None:
    model, embedder = stage_model(), RecordingEmbedder()
    mem = build(model, embedder=embedder)

    await _through_every_stage(mem, ctx, [s[3] for s in SECRETS])
    stored, prompts = _everything_stored(mem), [c.prompt for c in model.calls]
    found = await mem.recall(ctx, "password key token card", limit=50)
    stats = await mem.stats(ctx)

    assert embedder.seen and found
    assert any("[secret:api-key]" in p for p in prompts)  # the observer was shown the turn, as redacted
    for _, kind, secret, _ in SECRETS:
        assert secret not in stored, kind
        assert not any(secret in p for p in prompts), kind
        assert not any(secret in t for t in embedder.seen), kind
        assert not any(secret in item.text for item in found), kind
    assert stats.redacted == dict(Counter(kind for _, kind, _, _ in SECRETS))
    assert "[secret:api-key]" in stored and "[secret:password]" in stored and "[secret:private-key]" in stored


async def test_without_redaction_the_same_check_finds_the_secrets(build: Builder, ctx: MemoryContext) -> None:
    model = stage_model()
    mem = build(model, redact=False)

    await _through_every_stage(mem, ctx, [s[3] for s in SECRETS[:3]])
    stored = _everything_stored(mem)

    assert all(secret in stored for _, _, secret, _ in SECRETS[:3])
    assert any(SECRETS[0][2] in c.prompt for c in model.calls)
    assert (await mem.stats(ctx)).redacted == {}


async def test_near_misses_are_stored_as_said(build: Builder, ctx: MemoryContext) -> None:
    model = stage_model()
    mem = build(model)

    await _through_every_stage(mem, ctx, [n[1] for n in NEAR_MISSES])
    stored = _everything_stored(mem)

    assert all(json.dumps(sentence)[1:-1] in stored or sentence in stored for _, sentence in NEAR_MISSES)
    assert "[secret:" not in stored
    assert (await mem.stats(ctx)).redacted == {}


async def test_a_rerun_of_a_capture_with_a_secret_is_the_same_turn(build: Builder, ctx: MemoryContext) -> None:
    mem = build()
    sentence = SECRETS[0][3]

    first = await mem.capture(ctx, messages_of(sentence))
    again = await mem.capture(ctx, messages_of(sentence))

    assert again.duplicate and again.turn.id == first.turn.id
    assert "[secret:api-key]" in first.turn.text


async def test_imported_history_is_redacted(build: Builder, ctx: MemoryContext) -> None:
    model = stage_model()
    mem = build(model)
    secret, sentence = SECRETS[5][2], SECRETS[5][3]
    turn = {"at": "2025-01-02T10:00:00+00:00", "messages": messages_of(sentence)}
    history = [{"session_id": "past", "turns": [turn]}]

    await mem.import_conversations(ctx, history)

    assert secret not in _everything_stored(mem)
    assert not any(secret in c.prompt for c in model.calls)
    assert (await mem.stats(ctx)).redacted == {"token": 1}


async def test_written_facts_are_redacted(build: Builder, ctx: MemoryContext) -> None:
    mem = build()
    key, card = SECRETS[0][2], _VISA

    fact = await mem.remember(ctx, f"The user's OpenAI key is {key}.")
    corrected = await mem.update(ctx, fact.id, text=f"The user pays with card {card}.")
    tools = mem.tools(ctx, write=True)
    call = {"name": "memory_remember", "arguments": json.dumps({"text": "my password is hunter2", "kind": "fact"})}
    (reply,) = await tools.execute({"role": "assistant", "content": None,
                                    "tool_calls": [{"id": "c1", "type": "function", "function": call}]})  # fmt: skip

    assert fact.text == "The user's OpenAI key is [secret:api-key]."
    assert corrected.text == "The user pays with card [secret:card-number]."
    assert json.loads(reply["content"])["results"][0]["text"] == "my password is [secret:password]"
    stored = _everything_stored(mem)
    assert key not in stored and card not in stored and "hunter2" not in stored
    assert (await mem.stats(ctx)).redacted == {"api-key": 1, "card-number": 1, "password": 1}
    assert (await mem.stats(MemoryContext(user_id="someone-else"))).redacted == {}  # counted per user


async def test_the_capability_writes_are_redacted(store_path: str, clock: FrozenClock, ctx: MemoryContext) -> None:
    cap = create_memory_capability(store=store_path, embedder=HashingEmbedder(256), clock=clock)
    key, token, password = SECRETS[0][2], SECRETS[5][2], "hunter2"
    now = clock.now()
    episode = Episode(
        id="ep-1", namespace=ctx.namespace, user_id=ctx.user_id, session_id="s-0",
        summary=f"The user shared the token {token}.", subjects=("user",), started_at=now, ended_at=now,
        created_at=now, updated_at=now,
    )  # fmt: skip

    entry = await cap.add_working_memory(ctx, f"The user's key is {key}.")
    stored_episode = await cap.add_episode(episode)
    digest = await cap.set_digest(ctx, f"The user's password is {password}.")

    assert (entry.text, stored_episode.summary, digest.text) == (
        "The user's key is [secret:api-key].",
        "The user shared the token [secret:token].",
        "The user's password is [secret:password].",
    )
    stored = _everything_stored(cap)
    assert key not in stored and token not in stored and password not in stored
    assert (await cap.stats(ctx)).redacted == {"api-key": 1, "password": 1, "token": 1}


async def test_an_imported_export_is_redacted(build: Builder, tmp_path: Path, ctx: MemoryContext) -> None:
    secret, sentence = SECRETS[0][2], SECRETS[0][3]
    leaky = system(model="rules", store=str(tmp_path / "leaky"), embedder=HashingEmbedder(256), redact=False)
    await leaky.capture(ctx, messages_of(sentence))
    await leaky.remember(ctx, sentence)
    export = tmp_path / "export.jsonl"
    await leaky.export(ctx, str(export))
    assert secret in export.read_text(encoding="utf-8")
    mem = build()

    await mem.import_(ctx, str(export))

    assert secret not in _everything_stored(mem)
    assert (await mem.stats(ctx)).redacted["api-key"] >= 2


async def test_a_cue_is_redacted_before_it_is_embedded(build: Builder, ctx: MemoryContext) -> None:
    embedder = RecordingEmbedder()
    mem = build(embedder=embedder)
    await mem.capture(ctx, messages_of("I keep my keys in the blue drawer."))
    secret, sentence = SECRETS[6][2], SECRETS[6][3]

    await mem.format_context(ctx, sentence)
    await mem.recall(ctx, sentence)

    assert embedder.seen and not any(secret in text for text in embedder.seen)
    assert (await mem.stats(ctx)).redacted == {}  # a cue is not stored: nothing is counted


# -- options ------------------------------------------------------------------------------------


async def test_pii_is_redacted_only_when_asked(build: Builder, ctx: MemoryContext) -> None:
    mem = build(redact={"pii": True})
    said = "Write to jane.doe@example.com or call +44 20 7946 0958, my password is hunter2."

    turn = (await mem.capture(ctx, messages_of(said))).turn

    assert turn.messages[0].content == "Write to [pii:email] or call [pii:phone], my password is [secret:password]."
    assert (await mem.stats(ctx)).redacted == {"email": 1, "password": 1, "phone": 1}


async def test_user_patterns_add_kinds(build: Builder, ctx: MemoryContext) -> None:
    options = RedactionOptions(patterns={"employee-id": r"EMP-\d{6}", "door-code": r"door code (?P<secret>\d{4})"})
    mem = build(redact=options)

    turn = (await mem.capture(ctx, messages_of("I am EMP-123456 and the door code 4821 opens it."))).turn

    assert turn.messages[0].content == "I am [secret:employee-id] and the door code [secret:door-code] opens it."
    assert (await mem.stats(ctx)).redacted == {"door-code": 1, "employee-id": 1}


async def test_secrets_off_keeps_user_patterns(build: Builder, ctx: MemoryContext) -> None:
    mem = build(redact={"secrets": False, "patterns": {"ticket": r"TCK-\d+"}})

    turn = (await mem.capture(ctx, messages_of("my password is hunter2, see TCK-42"))).turn

    assert turn.messages[0].content == "my password is hunter2, see [secret:ticket]"


@pytest.mark.parametrize(
    "redact",
    [
        pytest.param({"patterns": {"broken": "("}}, id="bad-regex"),
        pytest.param({"patterns": {"Bad Name": "x+"}}, id="bad-name"),
        pytest.param({"patterns": {"anything": ".*"}}, id="matches-empty"),
        pytest.param({"patterns": {"number": 42}}, id="pattern-not-a-string"),
        pytest.param({"patterns": ["x+"]}, id="patterns-not-a-mapping"),
        pytest.param({"pii": "yes"}, id="pii-not-a-bool"),
        pytest.param({"secret": True}, id="unknown-key"),
        pytest.param("yes", id="not-an-option"),
    ],
)
def test_bad_redaction_options_are_refused_before_anything_is_written(
    build: Builder, store_path: str, redact: object
) -> None:
    with pytest.raises(ConfigurationError):
        build(redact=redact)

    assert not Path(store_path).exists()


def test_a_bad_pattern_is_refused_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="not a valid regex"):
        RedactionOptions(patterns={"broken": "[a-"})
