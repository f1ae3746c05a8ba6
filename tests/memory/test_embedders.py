"""The shipped embedders: the ONNX default loads offline from the package, means what it should,
and stores made with another shipped embedder keep opening with it or move with ``tiermem reembed``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from tiermem import (
    Alias,
    ConfigurationError,
    EmbedderError,
    Episode,
    Fact,
    HashingEmbedder,
    MemoryContext,
    OnnxEmbedder,
    StaticEmbedder,
    Store,
    StoreMismatchError,
    create_memory_capability,
)
from tiermem.memory._cli._main import main as cli_main
from tiermem.memory._embed._names import DEFAULT_EMBEDDER, embedder_for_id, embedder_name, resolve_embedder
from tiermem.memory._records import Document, StoredRecord
from tiermem.memory._store._store import REEMBEDDING, stored_meta
from tiermem.memory.testing import Where

ONNX_ID = "minilm-l6-onnx-int8-v1"
STATIC_ID = "minilm-static-v1"
MEMORIES = [
    "I am allergic to peanuts.",
    "I moved from Berlin to Lisbon last month.",
    "My sister's wedding is in June.",
    "I play the cello in a community orchestra.",
    "Our car is a blue Volvo estate.",
]


@pytest.fixture(scope="session")
def onnx() -> OnnxEmbedder:
    """The shipped default, loaded once for the whole session."""
    return OnnxEmbedder()


def cosine(embedder: OnnxEmbedder, a: str, others: Sequence[str]) -> np.ndarray:
    vectors = embedder.embed([a, *others])
    similarities: np.ndarray = vectors[1:] @ vectors[0]
    return similarities


# -- the ONNX model itself --------------------------------------------------------------------------


REFERENCE = Path(__file__).parent.parent / "data" / "minilm_vectors.json"


def test_vectors_do_not_depend_on_the_cpu(onnx: OnnxEmbedder) -> None:
    """The shipped model computes its integer matmuls exactly on any x86 or ARM CPU.

    The reference vectors were made by the shipped model (bench/export_onnx_embedder.py, step 4).
    Before that step, int8 weights on a CPU without AVX-512 VNNI saturated 16-bit sums: these texts
    came out at cosine 0.984-0.994 to their vectors on a VNNI machine, and LoCoMo recall moved.
    """
    reference = json.loads(REFERENCE.read_text())
    got = onnx.embed(reference["texts"])
    want = np.asarray(reference["vectors"], dtype=np.float32)
    agreement = (got * want).sum(axis=1) / np.linalg.norm(want, axis=1)
    assert agreement.min() >= 0.999, agreement


def test_a_texts_vector_does_not_depend_on_its_batch(onnx: OnnxEmbedder) -> None:
    """int8 activations share one quantization range per run: batched, a text's vector would follow its batch-mates."""
    texts = json.loads(REFERENCE.read_text())["texts"]
    alone = np.stack([onnx.embed([text])[0] for text in texts])
    together = onnx.embed([*texts, "x " * 200, "Short."])[: len(texts)]
    assert ((alone * together).sum(axis=1) >= 0.99999).all()
    batched = OnnxEmbedder(batch_size=8).embed([*texts, "x " * 200, "Short."])[: len(texts)]
    assert ((alone * batched).sum(axis=1) < 0.9999).any()  # what one run per text avoids


def test_loads_offline_from_the_shipped_files_without_torch(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from tiermem.memory._embed._embedders import asset_path\n"
        "from tiermem.memory._embed._onnx import OnnxEmbedder\n"
        "e = OnnxEmbedder()\n"
        "v = e.embed(['I am allergic to peanuts.'])\n"
        "assert v.shape == (1, 384), v.shape\n"
        "assert sorted(p.name for p in asset_path('minilm-onnx').iterdir()) == "
        "['NOTICE', 'model.onnx', 'tokenizer.json']\n"
        "assert not {'torch', 'transformers', 'sentence_transformers'} & set(sys.modules)\n"
        "print('ok')\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_vectors_are_unit_float32_rows_and_empty_texts_zero(onnx: OnnxEmbedder) -> None:
    vectors = onnx.embed([*MEMORIES, "", "   "])
    assert vectors.dtype == np.float32
    assert vectors.shape == (len(MEMORIES) + 2, onnx.dimensions) == (len(MEMORIES) + 2, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors[: len(MEMORIES)], axis=1), 1.0, atol=1e-5)
    assert not vectors[len(MEMORIES) :].any()
    assert onnx.embed([]).shape == (0, 384)


def test_same_input_gives_the_same_vectors(onnx: OnnxEmbedder) -> None:
    assert np.array_equal(onnx.embed(MEMORIES), onnx.embed(MEMORIES))
    assert np.array_equal(onnx.embed(MEMORIES), OnnxEmbedder(threads=1).embed(MEMORIES))


class _RecordingSession:
    """An onnxruntime session that notes which thread made each run and how many ran at once; runs in the
    embedder's own threads wait for ``gate`` when one is given."""

    def __init__(self, session: object, gate: threading.Event | None = None) -> None:
        self.session, self.gate, self.threads, self.running, self.most = session, gate, list[str](), 0, 0
        self.lock = threading.Lock()

    def run(self, *args: object) -> object:
        name = threading.current_thread().name
        if self.gate is not None and name.startswith("tiermem-embed"):
            assert self.gate.wait(30)
        with self.lock:
            self.threads.append(name)
            self.running += 1
            self.most = max(self.most, self.running)
        try:
            time.sleep(0.002)  # long enough for the runs in flight to overlap on any machine
            return self.session.run(*args)  # type: ignore[attr-defined]
        finally:
            with self.lock:
                self.running -= 1


TEXTS = [f"{m} ({n} days ago)" if n % 3 else m for n, m in enumerate(MEMORIES * 4)]


def test_a_bulk_call_keeps_runs_in_flight_side_by_side_with_the_same_vectors() -> None:
    want = OnnxEmbedder(threads=1).embed(TEXTS)  # one thread: its runs go one after another, in the caller
    embedder = OnnxEmbedder(threads=2)
    embedder.embed(["load the session"])
    recording = _RecordingSession(embedder._session)
    embedder._session = recording
    got = embedder.embed(TEXTS)
    assert np.array_equal(got, want)  # each text still its own run: the same vectors, in the caller's order
    assert recording.most == 2 and all(name.startswith("tiermem-embed") for name in recording.threads)
    recording.threads.clear()
    one = embedder.embed([TEXTS[0]])  # a single run stays in the calling thread
    assert np.array_equal(one[0], want[0]) and recording.threads == [threading.current_thread().name]


def test_a_call_made_beside_another_keeps_its_runs_in_its_own_thread() -> None:
    """Calls already side by side (an import's groups) would only add threads contending for the same cores."""
    want = OnnxEmbedder(threads=1).embed(TEXTS)
    embedder = OnnxEmbedder(threads=2)
    embedder.embed(["load the session"])
    gate = threading.Event()
    recording = _RecordingSession(embedder._session, gate)
    embedder._session = recording
    first: list[np.ndarray] = []
    spread = threading.Thread(target=lambda: first.append(embedder.embed(TEXTS)), name="first-caller")
    spread.start()
    try:
        deadline = time.monotonic() + 10
        while not embedder._calls:  # the first call is in progress, its runs held at the gate
            assert time.monotonic() < deadline
            time.sleep(0.001)
        second = embedder.embed(TEXTS)
        mine = list(recording.threads)
    finally:
        gate.set()
        spread.join(30)
    assert mine == [threading.current_thread().name] * len(TEXTS)
    assert first and np.array_equal(second, want) and np.array_equal(first[0], want)
    assert any(name.startswith("tiermem-embed") for name in recording.threads)


def test_a_failed_run_in_a_bulk_call_raises_an_embedder_error_and_cancels_the_rest() -> None:
    embedder = OnnxEmbedder(threads=2)
    embedder.embed(["load the session"])
    release, lock = threading.Event(), threading.Lock()
    runs = [0]

    class Failing:
        def run(self, *args: object) -> object:
            with lock:
                runs[0] += 1
                later = runs[0] > 1
            if later:  # the runs after the first are still going when the caller sees the failure
                release.wait(10)
            raise RuntimeError("out of memory")

    embedder._session = Failing()
    try:
        with pytest.raises(EmbedderError, match="the ONNX embedder failed: out of memory"):
            embedder.embed(TEXTS)
    finally:
        release.set()
    embedder._pool().shutdown(wait=True)  # whatever had started has ended
    assert runs[0] <= 3 < len(TEXTS)  # the first, and at most one more per thread: the rest never ran


def test_a_bulk_call_once_no_thread_can_start_runs_in_the_caller() -> None:
    """While the interpreter shuts down (an ``atexit`` hook, a daemon thread) the pool takes no work."""
    want = OnnxEmbedder(threads=1).embed(TEXTS)
    embedder = OnnxEmbedder(threads=2)
    embedder._pool().shutdown()  # refuses new work as it does during interpreter shutdown
    assert np.array_equal(embedder.embed(TEXTS), want)
    script = (
        "import atexit\n"
        "from tiermem.memory._embed._onnx import OnnxEmbedder\n"
        "e = OnnxEmbedder(threads=2)\n"
        "atexit.register(lambda: print(e.embed(['one text', 'another text', 'a third']).shape))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "(3, 384)", done.stderr


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_child_starts_with_a_free_lock_and_no_call_in_progress() -> None:
    embedder = OnnxEmbedder(threads=2)
    embedder._pool()
    embedder._calls = 1  # a call of another thread was in progress at the fork
    with embedder._lock, warnings.catch_warnings():  # held at the fork: the child's copy would stay held
        warnings.simplefilter("ignore", DeprecationWarning)  # forking with threads (3.12+): the child runs no ORT
        pid = os.fork()
        if pid == 0:
            fine = embedder._calls == 0 and embedder._runner is None and embedder._lock.acquire(blocking=False)
            os._exit(0 if fine else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert embedder._calls == 1 and embedder._runner is not None  # the parent's own state is untouched


def test_a_text_means_the_same_alone_or_in_a_long_batch(onnx: OnnxEmbedder) -> None:
    """Batches pad to their longest text and int8 activations are scaled per batch: close, not equal."""
    long = " ".join(["We walked along the river and talked about the old days."] * 12)
    together = onnx.embed([*MEMORIES, long] * 7)  # several batches of mixed lengths
    alone = np.vstack([onnx.embed([m]) for m in MEMORIES])
    assert (np.sum(together[: len(MEMORIES)] * alone, axis=1) > 0.98).all()


def test_long_texts_are_truncated_not_refused(onnx: OnnxEmbedder) -> None:
    assert onnx.embed(["word " * 2000]).shape == (1, 384)


@pytest.mark.parametrize(
    ("cue", "memory"),
    [
        ("which nuts must I avoid eating?", "I am allergic to peanuts."),
        ("where does the user live", "I moved from Berlin to Lisbon last month."),
        ("when is the family celebration for my sibling?", "My sister's wedding is in June."),
        ("what instrument do I play?", "I play the cello in a community orchestra."),
        ("What car does the user own?", "Our car is a blue Volvo estate."),
    ],
    ids=["nuts-peanuts", "live-lisbon", "sibling-wedding", "instrument-cello", "car-volvo"],
)
def test_a_paraphrase_is_closest_to_its_memory(onnx: OnnxEmbedder, cue: str, memory: str) -> None:
    scores = cosine(onnx, cue, MEMORIES)
    assert MEMORIES[int(np.argmax(scores))] == memory
    others = np.delete(scores, MEMORIES.index(memory))
    assert scores[MEMORIES.index(memory)] - others.max() > 0.1


def test_unrelated_cue_is_far_from_every_memory(onnx: OnnxEmbedder) -> None:
    related = cosine(onnx, "which nuts must I avoid eating?", ["I am allergic to peanuts."])[0]
    for cue in ("quantum chromodynamics lecture notes", "the router's firmware checksum"):
        assert cosine(onnx, cue, MEMORIES).max() < related - 0.2


def test_custom_model_needs_an_id(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="model_id"):
        OnnxEmbedder(tmp_path)


# -- names, ids and the default ----------------------------------------------------------------------


def test_the_default_is_the_onnx_model() -> None:
    default = resolve_embedder(None)
    assert DEFAULT_EMBEDDER == "minilm-onnx"
    assert isinstance(default, OnnxEmbedder)
    assert default.id == ONNX_ID  # model and quantization: the store's guard tells it from the static one


@pytest.mark.parametrize(
    ("embedder_id", "name", "kind"),
    [
        (ONNX_ID, "minilm-onnx", OnnxEmbedder),
        (STATIC_ID, "minilm-static", StaticEmbedder),
        ("hashing-v1-128", "hashing", HashingEmbedder),
        ("litellm:openai/text-embedding-3-small", "openai/text-embedding-3-small", None),
        ("somebody-elses", None, None),
    ],
    ids=["onnx", "static", "hashing", "litellm", "unknown"],
)
def test_a_stored_id_maps_back_to_its_embedder(embedder_id: str, name: str | None, kind: type | None) -> None:
    assert embedder_name(embedder_id) == name
    found = embedder_for_id(embedder_id)
    if kind is None:
        assert found is None
    else:
        assert isinstance(found, kind)
        assert found is not None and found.id == embedder_id


# -- stores made with another embedder ---------------------------------------------------------------


@pytest.fixture
def static_store(tmp_path: Path) -> str:
    """A store written with the static embedder (the default before), with a few facts."""
    path = str(tmp_path / "static-store")
    cap = create_memory_capability(store=path, embedder="minilm-static")
    ctx = MemoryContext(user_id="u-1")
    for text in MEMORIES:
        cap.tiers.add_semantic_fact(ctx, text)
    return path


def test_a_store_opens_with_the_shipped_embedder_that_made_it(static_store: str) -> None:
    cap = create_memory_capability(store=static_store)
    assert cap.tiers.embedder.id == STATIC_ID


def test_the_guard_names_the_embedder_that_made_the_store_and_the_migration(static_store: str) -> None:
    with pytest.raises(StoreMismatchError) as caught:
        create_memory_capability(store=static_store, embedder="minilm-onnx")
    message = str(caught.value)
    assert f"'{STATIC_ID}' (384 dimensions)" in message
    assert "embedder='minilm-static'" in message
    assert f"tiermem reembed --store {static_store}" in message


def _text(record: StoredRecord) -> str:
    """The text of a record of a table that has one (every table here but episodes, aliases and documents)."""
    assert not isinstance(record, Episode | Alias | Document), record
    return record.text


def _nearest_fact(store_path: str, cue: str) -> str:
    cap = create_memory_capability(store=store_path)
    query = cap.tiers.embedder.embed([cue])[0]
    hits = cap.tiers.store.vector_search("facts", query, Where(eq={"user_id": "u-1"}), limit=1)
    assert isinstance(hits[0].record, Fact)
    return hits[0].record.text


def _tiermem() -> list[str]:
    script = Path(sys.executable).parent / "tiermem"
    return [str(script)] if script.exists() else [sys.executable, "-m", "tiermem.memory._cli._main"]


def test_tiermem_reembed_moves_a_static_store_to_the_default(static_store: str) -> None:
    done = subprocess.run(
        [*_tiermem(), "reembed", "--store", static_store], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert f"{STATIC_ID} -> {ONNX_ID}" in done.stdout
    assert f"{len(MEMORIES)} records re-embedded" in done.stdout
    assert stored_meta(static_store)["embedder_id"] == ONNX_ID
    cap = create_memory_capability(store=static_store)
    assert cap.tiers.embedder.id == ONNX_ID
    ctx = MemoryContext(user_id="u-1")
    assert sorted(f.text for f in cap.tiers.facts(ctx)) == sorted(MEMORIES)
    assert _nearest_fact(static_store, "which nuts must I avoid eating?") == "I am allergic to peanuts."
    hits = cap.tiers.store.text_search("facts", "Lisbon", Where(eq={"user_id": "u-1"}), limit=3)
    assert [h.record.text for h in hits if isinstance(h.record, Fact)] == ["I moved from Berlin to Lisbon last month."]
    assert len(hits) == 1


def test_tiermem_reembed_on_a_store_already_moved_does_nothing(
    static_store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["reembed", "--store", static_store, "--embedder", "minilm-static"]) == 0
    assert "already uses minilm-static-v1; nothing to do" in capsys.readouterr().out


def test_tiermem_reembed_refuses_a_folder_without_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["reembed", "--store", str(tmp_path / "nothing-here")]) == 1
    assert capsys.readouterr().err.startswith("tiermem: error: no tiermem store")


def test_an_interrupted_reembed_is_refused_until_run_again(static_store: str) -> None:
    store = Store(static_store, embedder_id=STATIC_ID, dimensions=384)
    target = HashingEmbedder(64)

    def failing(table: str, records: list[StoredRecord]) -> np.ndarray:
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        store.reembed(target.id, target.dimensions, failing)
    assert stored_meta(static_store)["embedder_id"] == REEMBEDDING + target.id
    with pytest.raises(StoreMismatchError, match="part-way through `tiermem reembed`"):
        create_memory_capability(store=static_store, embedder="minilm-static")

    resumed = Store(static_store, embedder_id=REEMBEDDING + target.id, dimensions=64)
    counts = resumed.reembed(target.id, target.dimensions, lambda _t, recs: target.embed([_text(r) for r in recs]))
    assert counts["facts"] == len(MEMORIES)
    cap = create_memory_capability(store=static_store)  # picks the hashing embedder the store now records
    assert cap.tiers.embedder.id == target.id
    assert len(cap.tiers.facts(MemoryContext(user_id="u-1"))) == len(MEMORIES)
