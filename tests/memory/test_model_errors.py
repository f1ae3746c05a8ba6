"""Errors mapped the way httpx maps its engine's: permanent and transient model errors, each typed;
store errors per kind; unknown exceptions propagate unchanged; deferrals logged at WARNING.

Fakes are reached through real litellm: a fake answers an HTTP error by raising litellm's
``CustomLLMError(status_code, ...)``, which litellm maps by status as it maps a provider's answer.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from itertools import count
from pathlib import Path
from typing import Any

import httpx
import litellm
import openai
import pytest
from litellm.llms.custom_llm import CustomLLMError
from pydantic import BaseModel

from tiermem import (
    LLM,
    LiteLLMEmbedder,
    MemoryContext,
    MemorySystem,
    ModelAuthenticationError,
    ModelBadRequestError,
    ModelConnectionError,
    ModelContentPolicyError,
    ModelContextWindowError,
    ModelError,
    ModelNotFoundError,
    ModelPermanentError,
    ModelPermissionError,
    ModelRateLimitError,
    ModelServerError,
    ModelTimeoutError,
    ModelTransientError,
    Store,
    StoreConflictError,
    StoreError,
    StoreNotFoundError,
    StoreUnavailableError,
    system,
)
from tiermem.memory._llm._client import install_fake_embedder, install_fake_provider, map_model_error
from tiermem.memory._store._engine_errors import engine_errors
from tiermem.memory.testing import FrozenClock, HashingEmbedder, Where
from tiermem.pipelines import LLMStages

# litellm lazily imports a module whose pydantic TypedDict warns on every model call.
pytestmark = pytest.mark.filterwarnings(r"ignore:Items? .* `ReadOnly` qualifier:UserWarning")

TEXT = "I bake rye bread every Sunday."
_names = count()


class Output(BaseModel):
    answer: int


Reply = Callable[[], str]


class Fake:
    """A fake model through litellm whose reply is a function of nothing; counts its calls."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.calls = 0
        self.model = install_fake_provider(f"errors-{next(_names)}", self._serve)

    def _serve(self, model: str, messages: list[dict[str, Any]], call: Any = None) -> str:
        self.calls += 1
        return self.reply()


def _status(code: int, message: str = "") -> Reply:
    def reply() -> str:
        raise CustomLLMError(status_code=code, message=message or f"HTTP {code}")  # type: ignore[no-untyped-call]  # litellm leaves it untyped

    return reply


def _raises(exc: BaseException) -> Reply:
    def reply() -> str:
        raise exc

    return reply


def _observation() -> str:
    obs = {"subject": "user", "kind": "fact", "text": "The user bakes rye bread.", "salience": 0.7}
    return json.dumps({"observations": [obs]})


def _then(first: Reply, times: int, after: Reply) -> Reply:
    """``first`` for the first ``times`` calls, then ``after``."""
    served = count()

    def reply() -> str:
        return first() if next(served) < times else after()

    return reply


async def _ask(llm: LLM) -> Output:
    return await llm.structured(stage="observe", messages=[{"role": "user", "content": "hi"}], output=Output)


# -- the mapping -----------------------------------------------------------------------------------

_RESPONSE = httpx.Response(403, request=httpx.Request("POST", "https://provider.invalid/v1"))
_ARGS: dict[str, Any] = {"message": "provider said no", "llm_provider": "openai", "model": "gpt-x"}

LITELLM_ERRORS: list[tuple[str, Exception, type[ModelError]]] = [
    ("authentication", litellm.exceptions.AuthenticationError(**_ARGS), ModelAuthenticationError),
    ("permission-denied", litellm.exceptions.PermissionDeniedError(**_ARGS, response=_RESPONSE), ModelPermissionError),
    ("not-found", litellm.exceptions.NotFoundError(**_ARGS), ModelNotFoundError),
    ("bad-request", litellm.exceptions.BadRequestError(**_ARGS), ModelBadRequestError),
    ("unprocessable", litellm.exceptions.UnprocessableEntityError(**_ARGS, response=_RESPONSE), ModelBadRequestError),
    ("context-window", litellm.exceptions.ContextWindowExceededError(**_ARGS), ModelContextWindowError),
    ("content-policy", litellm.exceptions.ContentPolicyViolationError(**_ARGS), ModelContentPolicyError),
    ("timeout", litellm.exceptions.Timeout(**_ARGS), ModelTimeoutError),
    ("rate-limit", litellm.exceptions.RateLimitError(**_ARGS), ModelRateLimitError),
    ("api-connection", litellm.exceptions.APIConnectionError(**_ARGS), ModelConnectionError),
    ("service-unavailable", litellm.exceptions.ServiceUnavailableError(**_ARGS), ModelServerError),
    ("internal-server-error", litellm.exceptions.InternalServerError(**_ARGS), ModelServerError),
    ("bad-gateway", litellm.exceptions.BadGatewayError(**_ARGS), ModelServerError),
    ("api-error-500", litellm.exceptions.APIError(status_code=500, **_ARGS), ModelServerError),
    ("api-error-401", litellm.exceptions.APIError(status_code=401, **_ARGS), ModelAuthenticationError),
    ("api-error-429", litellm.exceptions.APIError(status_code=429, **_ARGS), ModelRateLimitError),
]


@pytest.mark.parametrize(
    ("engine_error", "expected"),
    [(error, expected) for _, error, expected in LITELLM_ERRORS],
    ids=[name for name, _, _ in LITELLM_ERRORS],
)
def test_each_litellm_error_maps_to_its_own_class(engine_error: Exception, expected: type[ModelError]) -> None:
    mapped = map_model_error(engine_error, stage="observe", model="openai/gpt-x", attempts=2)

    assert type(mapped) is expected
    assert isinstance(mapped, ModelPermanentError) is (not issubclass(expected, ModelTransientError))
    assert mapped.__cause__ is engine_error
    assert (mapped.stage, mapped.attempts, mapped.model) == ("observe", 2, "openai/gpt-x")


def test_context_window_and_content_policy_are_bad_requests() -> None:
    assert issubclass(ModelContextWindowError, ModelBadRequestError)
    assert issubclass(ModelContentPolicyError, ModelBadRequestError)


STATUSES = [
    (400, ModelBadRequestError),
    (401, ModelAuthenticationError),
    (403, ModelPermissionError),
    (404, ModelNotFoundError),
    (408, ModelTimeoutError),
    (422, ModelBadRequestError),
    (429, ModelRateLimitError),
    (500, ModelServerError),
    (502, ModelServerError),
    (503, ModelServerError),
    (504, ModelTimeoutError),
]


@pytest.mark.parametrize(("status", "expected"), STATUSES, ids=[str(s) for s, _ in STATUSES])
async def test_a_model_answering_an_http_error_raises_the_typed_class(status: int, expected: type[ModelError]) -> None:
    fake = Fake(_status(status))
    llm = LLM(fake.model, num_retries=0)

    with pytest.raises(expected) as caught:
        await _ask(llm)

    assert caught.value.status_code == (400 if status == 422 else status)  # litellm files a 422 as a 400
    assert caught.value.stage == "observe"
    assert llm.ledger.snapshot()["observe"]["failures"] == 1


NETWORK = [
    ("connection-refused", ConnectionRefusedError("refused"), ModelConnectionError),
    ("os-error", OSError("network unreachable"), ModelConnectionError),
    ("timeout", TimeoutError("read timed out"), ModelTimeoutError),
]


@pytest.mark.parametrize(("raised", "expected"), [(r, e) for _, r, e in NETWORK], ids=[name for name, _, _ in NETWORK])
async def test_network_errors_under_litellm_are_transient(raised: Exception, expected: type[ModelError]) -> None:
    llm = LLM(Fake(_raises(raised)).model, num_retries=0)

    with pytest.raises(expected, match=str(raised)):
        await _ask(llm)


@pytest.mark.parametrize(
    "raised",
    [ZeroDivisionError("division by zero"), KeyError("choices"), RuntimeError("a bug")],
    ids=["zero-division", "key-error", "runtime-error"],
)
async def test_an_unknown_exception_propagates_unchanged(raised: Exception) -> None:
    fake = Fake(_raises(raised))
    llm = LLM(fake.model, num_retries=3, retry_backoff=0.0)

    with pytest.raises(type(raised)) as caught:
        await _ask(llm)

    assert caught.value is raised
    assert fake.calls == 1


async def test_an_error_of_ours_raised_inside_a_fake_propagates_unchanged() -> None:
    raised = ModelError("scripted model has no replies left")

    with pytest.raises(ModelError) as caught:
        await _ask(LLM(Fake(_raises(raised)).model, num_retries=0))

    assert caught.value is raised


# -- retries: permanent errors fail fast, transient ones are retried ---------------------------------


@pytest.mark.parametrize("status", [400, 401, 403, 404], ids=["bad-request", "unauthorized", "forbidden", "not-found"])
async def test_a_permanent_error_is_not_retried(status: int) -> None:
    fake = Fake(_status(status))
    llm = LLM(fake.model, num_retries=3, validation_retries=3, retry_backoff=0.0)

    with pytest.raises(ModelPermanentError) as caught:
        await _ask(llm)

    assert fake.calls == 1
    assert caught.value.attempts == 1
    usage = llm.ledger.snapshot()["observe"]
    assert (usage["calls"], usage["retries"], usage["failures"]) == (1, 0, 1)


# What providers' clients raise before any request when no key is set (litellm 1.x files openai's as a 500,
# gemini's as a connection error): each must fail at once, not be retried as if the network failed.
NO_KEY = [
    ("openai", openai.OpenAIError("Missing credentials. Please pass an `api_key`, or set the `OPENAI_API_KEY` ...")),
    ("gemini", ValueError("Missing Gemini API key. Set the GEMINI_API_KEY or GOOGLE_API_KEY environment variable.")),
]


@pytest.mark.parametrize("raised", [r for _, r in NO_KEY], ids=[name for name, _ in NO_KEY])
async def test_a_missing_key_is_an_authentication_error_at_once(raised: Exception) -> None:
    fake = Fake(_raises(raised))
    llm = LLM(fake.model, num_retries=3, validation_retries=3, retry_backoff=0.0)

    with pytest.raises(ModelAuthenticationError, match=r"(?i)missing") as caught:
        await _ask(llm)

    assert (fake.calls, caught.value.attempts) == (1, 1)


async def test_a_missing_key_defers_a_capture_as_permanent(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    fake = Fake(_raises(NO_KEY[0][1]))
    mem = _system(store_path, embedder, clock, fake.model, num_retries=3)

    result = await mem.capture(ctx, [{"role": "user", "content": TEXT}])

    assert (result.deferred, result.error_kind, fake.calls) == (True, "permanent", 1)


@pytest.mark.parametrize("status", [429, 500, 503], ids=["rate-limited", "server-error", "unavailable"])
async def test_a_transient_error_is_retried_then_succeeds(status: int) -> None:
    fake = Fake(_then(_status(status), 2, lambda: '{"answer": 42}'))
    llm = LLM(fake.model, num_retries=2, retry_backoff=0.0)

    assert await _ask(llm) == Output(answer=42)
    assert fake.calls == 3
    usage = llm.ledger.snapshot()["observe"]
    assert (usage["calls"], usage["retries"], usage["failures"]) == (3, 2, 0)


async def test_a_transient_error_is_raised_once_the_retries_are_spent() -> None:
    fake = Fake(_status(503))
    llm = LLM(fake.model, num_retries=1, retry_backoff=0.0)

    with pytest.raises(ModelServerError) as caught:
        await _ask(llm)

    assert (fake.calls, caught.value.attempts) == (2, 2)


async def test_litellm_is_never_asked_to_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict[str, Any]] = []
    real = litellm.acompletion

    async def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs)
        return await real(*args, **kwargs)

    monkeypatch.setattr(litellm, "acompletion", recording)
    await _ask(LLM(Fake(lambda: '{"answer": 1}').model, timeout=7.0, num_retries=4))

    assert [(k["timeout"], k["num_retries"]) for k in seen] == [(7.0, 0)]


# -- the configuration fingerprint -------------------------------------------------------------------


def test_the_fingerprint_changes_with_the_key_but_does_not_hold_it(monkeypatch: pytest.MonkeyPatch) -> None:
    llm = LLM("openai/gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-key-0123456789")
    wrong = llm.fingerprint
    monkeypatch.setenv("OPENAI_API_KEY", "sk-right-key-0123456789")
    right = llm.fingerprint

    assert wrong != right
    assert wrong.startswith("openai/gpt-4o-mini#")
    assert "sk-" not in wrong + right
    assert LLM("openai/gpt-4o").fingerprint != right
    assert LLM("openai/gpt-4o-mini", temperature=None).fingerprint != right


# -- capture: the acceptance scenario ----------------------------------------------------------------


def _system(store_path: str, embedder: HashingEmbedder, clock: FrozenClock, model: Any, **options: Any) -> MemorySystem:
    return system(model=model, store=store_path, embedder=embedder, clock=clock, **options)


def _turns(mem: MemorySystem, ctx: MemoryContext) -> list[Any]:
    where = Where(eq={"namespace": ctx.namespace, "user_id": ctx.user_id})
    return sorted(mem.store.query("turns", where), key=lambda t: t.seq)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("tiermem")]


async def test_a_401_journals_the_turn_reports_a_permanent_failure_and_is_not_retried(
    store_path: str,
    embedder: HashingEmbedder,
    clock: FrozenClock,
    ctx: MemoryContext,
    caplog: pytest.LogCaptureFixture,
) -> None:
    unauthorized = Fake(_status(401, "Incorrect API key provided"))
    mem = _system(store_path, embedder, clock, unauthorized.model, num_retries=3)

    with caplog.at_level(logging.WARNING, logger="tiermem"):
        result = await mem.capture(ctx, [{"role": "user", "content": TEXT}])
    (turn,) = _turns(mem, ctx)

    assert (result.deferred, result.error_kind) == (True, "permanent")
    assert isinstance(result.exception, ModelAuthenticationError)
    assert unauthorized.calls == 1  # failed fast: no retries for a 401
    assert (turn.status, turn.messages[0].content, turn.error_kind) == ("pending", TEXT, "permanent")
    assert turn.error_config is not None and turn.error_config.startswith(unauthorized.model)
    (warning,) = _warnings(caplog)
    assert "permanent" in warning.getMessage() and turn.id in warning.getMessage()

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="tiermem"):
        report = await mem.retry_pending()

    assert unauthorized.calls == 1  # the same configuration would fail the same way
    assert (report.turns, report.skipped) == (0, 1)
    assert "failed permanently" in _warnings(caplog)[0].getMessage()

    fixed = Fake(_observation)
    reconfigured = _system(store_path, embedder, clock, fixed.model)
    report = await reconfigured.retry_pending()

    (turn,) = _turns(reconfigured, ctx)
    assert (report.turns, report.turns_ok, report.skipped, fixed.calls) == (1, 1, 0, 1)
    assert (turn.status, turn.error, turn.error_kind, turn.error_config) == ("observed", None, None, None)
    assert [e.text for e in await reconfigured.working_memory(ctx)] == ["The user bakes rye bread."]


async def test_a_new_key_in_the_environment_counts_as_a_new_configuration(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = Fake(_then(_status(401), 1, _observation))
    mem = _system(store_path, embedder, clock, fake.model)
    await mem.capture(ctx, [{"role": "user", "content": TEXT}])

    monkeypatch.setenv("OPENAI_API_KEY", "sk-a-fixed-key")
    report = await mem.retry_pending()

    assert (report.turns_ok, report.skipped, fake.calls) == (1, 0, 2)


async def test_a_503_defers_as_transient_and_is_retried(
    store_path: str,
    embedder: HashingEmbedder,
    clock: FrozenClock,
    ctx: MemoryContext,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = Fake(_then(_status(503, "Service Unavailable"), 2, _observation))
    mem = _system(store_path, embedder, clock, LLMStages(LLM(fake.model, num_retries=1, retry_backoff=0.0)))

    with caplog.at_level(logging.WARNING, logger="tiermem"):
        result = await mem.capture(ctx, [{"role": "user", "content": TEXT}])
    report = await mem.retry_pending()

    (turn,) = _turns(mem, ctx)
    assert (result.deferred, result.error_kind) == (True, "transient")
    assert isinstance(result.exception, ModelServerError)
    assert "transient" in _warnings(caplog)[0].getMessage()
    assert (report.turns, report.turns_ok, report.skipped) == (1, 1, 0)
    assert (turn.status, fake.calls) == ("observed", 3)


async def test_an_unknown_exception_in_capture_propagates_and_the_turn_stays_journaled(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    bug = ZeroDivisionError("division by zero")
    mem = _system(store_path, embedder, clock, Fake(_raises(bug)).model)

    with pytest.raises(ZeroDivisionError) as caught:
        await mem.capture(ctx, [{"role": "user", "content": TEXT}])

    (turn,) = _turns(mem, ctx)
    assert caught.value is bug
    assert (turn.status, turn.messages[0].content) == ("pending", TEXT)


async def test_a_permanent_failure_at_session_end_is_not_retried_until_reconfigured(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    session_end = {"encode": "session"}  # a model call at session end: the two-call path's
    mem = _system(store_path, embedder, clock, "rules", episodic=session_end)
    await mem.capture(ctx, [{"role": "user", "content": TEXT}])
    forbidden = Fake(_status(403))
    broken = _system(store_path, embedder, clock, forbidden.model, episodic=session_end)

    ended = await broken.end_session(ctx)
    report = await broken.retry_pending()

    assert (ended.deferred, ended.error_kind, type(ended.exception)) == (True, "permanent", ModelPermissionError)
    assert (report.episodes, report.skipped, forbidden.calls) == (0, 1, 1)
    assert (await mem.retry_pending()).episodes_ok == 1


async def test_a_permanent_failure_in_consolidation_keeps_the_episode_until_reconfigured(
    store_path: str, embedder: HashingEmbedder, clock: FrozenClock, ctx: MemoryContext
) -> None:
    mem = _system(store_path, embedder, clock, "rules")
    await mem.capture(ctx, [{"role": "user", "content": TEXT}])
    await mem.end_session(ctx)
    not_found = Fake(_status(404, "The model `gpt-9` does not exist"))
    broken = _system(store_path, embedder, clock, not_found.model)

    failed = await broken.consolidate(ctx)
    report = await broken.retry_pending()
    again = await broken.consolidate(ctx)

    assert (failed.deferred, failed.error_kind, type(failed.exception)) == (True, "permanent", ModelNotFoundError)
    assert (report.consolidations, report.skipped, again.episodes, not_found.calls) == (0, 1, 0, 1)
    assert (await mem.retry_pending()).consolidations == 1
    assert [e.status for e in await mem.recent_episodes(ctx)] == ["consolidated"]


# -- the litellm embedder maps through the same function ---------------------------------------------


@pytest.mark.parametrize(
    ("status", "expected", "calls"),
    [(401, ModelAuthenticationError, 1), (503, ModelServerError, 3)],
    ids=["unauthorized-fails-fast", "unavailable-is-retried"],
)
def test_the_litellm_embedder_raises_the_typed_errors(status: int, expected: type[ModelError], calls: int) -> None:
    served = count()

    def vectors(model: str, texts: list[str]) -> list[list[float]]:
        next(served)
        raise CustomLLMError(status_code=status, message=f"HTTP {status}")  # type: ignore[no-untyped-call]  # litellm leaves it untyped

    embedder = LiteLLMEmbedder(install_fake_embedder(f"embed-{status}", vectors), dimensions=4, retry_backoff=0.0)

    with pytest.raises(expected) as caught:
        embedder.embed(["hello"])

    assert (caught.value.stage, next(served)) == ("embed", calls)


def test_the_litellm_embedder_embeds_through_a_fake() -> None:
    model = install_fake_embedder("embed-ok", lambda model, texts: [[3.0, 4.0, 0.0, 0.0] for _ in texts])

    matrix = LiteLLMEmbedder(model, dimensions=4).embed(["a", "b"])

    assert matrix.shape == (2, 4)
    assert matrix[0].tolist() == pytest.approx([0.6, 0.8, 0.0, 0.0])


# -- store errors -------------------------------------------------------------------------------------

ENGINE_ERRORS: list[tuple[str, Exception, type[StoreError]]] = [
    (
        "commit-conflict",
        RuntimeError("lance error: Commit conflict for version 7"),
        StoreConflictError,
    ),
    ("retryable-conflict", OSError("Retryable commit conflict for version 3"), StoreConflictError),
    (
        "update-after-an-overwrite",
        RuntimeError(
            "lance error: Incompatible transaction: This Update transaction is incompatible with concurrent "
            "transaction Overwrite at version 2."
        ),
        StoreConflictError,
    ),
    ("table-not-found", ValueError("Table 'facts' was not found"), StoreNotFoundError),
    ("file-not-found", FileNotFoundError(2, "No such file or directory"), StoreNotFoundError),
    (
        "io-not-found",
        RuntimeError("LanceError(IO): Not found: /s/facts.lance/data/x.lance"),
        StoreNotFoundError,
    ),
    (
        "io-error",
        RuntimeError("LanceError(IO): Generic S3 error: connection reset"),
        StoreUnavailableError,
    ),
    ("permission", PermissionError(13, "Permission denied"), StoreUnavailableError),
    ("disk-full", OSError(28, "No space left on device"), StoreUnavailableError),
]


@pytest.mark.parametrize(
    ("raised", "expected"), [(r, e) for _, r, e in ENGINE_ERRORS], ids=[name for name, _, _ in ENGINE_ERRORS]
)
def test_engine_errors_map_to_store_errors_per_kind(raised: Exception, expected: type[StoreError]) -> None:
    with pytest.raises(StoreError) as caught, engine_errors("write to facts"):
        raise raised

    assert type(caught.value) is expected
    assert caught.value.__cause__ is raised


@pytest.mark.parametrize(
    "raised",
    [ValueError("Invalid input, Schema error: No field named nonexistent"), KeyError("record"), TypeError("bug")],
    ids=["invalid-filter", "key-error", "type-error"],
)
def test_an_unknown_engine_error_propagates_unchanged(raised: Exception) -> None:
    with pytest.raises(type(raised)) as caught, engine_errors("read facts"):
        raise raised

    assert caught.value is raised


def test_reading_a_table_whose_files_were_deleted_raises_store_not_found(store_path: str) -> None:
    store = Store(store_path, embedder_id="hashing-v1-4", dimensions=4)
    store.table("aliases")
    shutil.rmtree(Path(store_path) / "meta.lance" / "data")

    with pytest.raises(StoreNotFoundError, match="meta"):
        Store(store_path, embedder_id="hashing-v1-4", dimensions=4)


# -- logging ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("status", "kind"), [(401, "permanent"), (503, "transient")], ids=["permanent", "transient"])
async def test_a_deferral_logs_a_warning_under_the_tiermem_logger(
    store_path: str,
    embedder: HashingEmbedder,
    clock: FrozenClock,
    ctx: MemoryContext,
    caplog: pytest.LogCaptureFixture,
    status: int,
    kind: str,
) -> None:
    mem = _system(store_path, embedder, clock, Fake(_status(status)).model, num_retries=0)

    with caplog.at_level(logging.DEBUG, logger="tiermem"):
        result = await mem.capture(ctx, [{"role": "user", "content": TEXT}])

    (warning,) = _warnings(caplog)
    assert result.deferred
    assert warning.name.startswith("tiermem.memory.")  # the write side logs under its modules
    assert f"deferred ({kind} failure)" in warning.getMessage()


async def test_a_stage_result_and_its_timing_are_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    llm = LLM(Fake(lambda: '{"answer": 1}').model)

    with caplog.at_level(logging.DEBUG, logger="tiermem"):
        await _ask(llm)

    (record,) = [r for r in caplog.records if r.name == "tiermem.memory._llm._client"]
    assert record.levelno == logging.DEBUG
    assert "observe" in record.getMessage() and "answered in" in record.getMessage()
