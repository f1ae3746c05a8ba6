"""The REST server's tables, in-process: each tiermem error's HTTP status, the keys file, the API keys' lookup.

The server itself is tested through a real process in tests/memory/test_rest.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiermem import MemoryContext
from tiermem.memory import _errors as errors
from tiermem.memory._rest import ApiKeys, KeyGrant, load_keys, status_of

STATUS = {
    errors.MemoryNotFoundError: 404,
    errors.InvalidArgumentError: 422,
    errors.InvalidSubjectError: 422,
    errors.ConfigurationError: 422,
    errors.SyncInEventLoopError: 500,
    errors.UserErasedError: 409,
    errors.StoreConflictError: 409,
    errors.StoreUnavailableError: 503,
    errors.StoreNotFoundError: 500,
    errors.StoreMismatchError: 500,
    errors.EmbedderError: 500,
    errors.ModelRateLimitError: 503,
    errors.ModelTimeoutError: 503,
    errors.ModelAuthenticationError: 502,
    errors.ModelContextWindowError: 502,
    errors.ModelOutputError: 502,
    errors.ModelError: 502,
}


@pytest.mark.parametrize(("error", "status"), list(STATUS.items()), ids=[e.__name__ for e in STATUS])
def test_each_error_has_its_status(error: type[errors.TiermemError], status: int) -> None:
    assert status_of(error("x")) == status


def _tree(root: type[errors.TiermemError]) -> list[type[errors.TiermemError]]:
    return [root, *(c for sub in root.__subclasses__() for c in _tree(sub))]


def test_every_error_of_the_tree_is_a_client_or_server_error() -> None:
    classes = _tree(errors.TiermemError)
    assert set(STATUS) <= set(classes)
    assert all(400 <= status_of(c("x")) < 600 for c in classes)
    assert {status_of(c("x")) for c in classes if issubclass(c, errors.InvalidArgumentError)} == {404, 422}


KEYS = {"alice": "alice-key-7Qx2mB9vLr4Tn8Kp", "bob": "bob-key-Hc5Wd1Zs6Yj3Fg0Ue", "bob-2": "bob-key-2-Lm0Nq8Rt6Vw4Yz"}


def _keys() -> ApiKeys:
    users = {"alice": "alice", "bob": "bob", "bob-2": "bob"}  # two keys for one user: a rotation
    return ApiKeys([KeyGrant(key=key, user_id=users[name], namespace="acme") for name, key in KEYS.items()])


@pytest.mark.parametrize(
    ("presented", "user"),
    [
        (KEYS["alice"], "alice"),
        (KEYS["bob"], "bob"),
        (KEYS["bob-2"], "bob"),
        (KEYS["alice"][:-1], None),
        (KEYS["alice"] + "x", None),
        (KEYS["alice"].upper(), None),
        ("", None),
    ],
    ids=["alice", "bob", "bob-rotated", "prefix", "longer", "case", "empty"],
)
def test_a_key_is_its_user_and_nothing_else_is(presented: str, user: str | None) -> None:
    expected = None if user is None else MemoryContext(namespace="acme", user_id=user)
    assert _keys().context(presented) == expected


@pytest.mark.parametrize(
    ("grants", "message"),
    [([], "grants no key"), ([KeyGrant(key=KEYS["alice"], user_id="a")] * 2, "a key twice")],
    ids=["none", "twice"],
)
def test_keys_must_be_given_once_each(grants: list[KeyGrant], message: str) -> None:
    with pytest.raises(errors.ConfigurationError, match=message):
        ApiKeys(grants)


SECRET = "alice-key-7Qx2mB9vLr4Tn8Kp"
BAD_FILES = {
    "not-a-list": ({"key": SECRET, "user_id": "alice"}, "a JSON list"),
    "short-key": ([{"key": SECRET[:15], "user_id": "alice"}], "entry 1: key: a key must have at least 16 characters"),
    "key-with-space": ([{"key": SECRET + " x", "user_id": "alice"}], "entry 1: key: a key may hold letters"),
    "key-with-comma": ([{"key": SECRET + ",x", "user_id": "alice"}], "entry 1: key: a key may hold letters"),
    "key-twice": ([{"key": SECRET, "user_id": "alice"}, {"key": SECRET, "user_id": "bob"}], "a key twice"),
    "no-user": ([{"key": SECRET}], "entry 1: user_id: Field required"),
    "bad-user": ([{"key": SECRET, "user_id": "a\nb"}], "entry 1: user_id: Value error, id contains control"),
    "extra-field": ([{"key": SECRET, "user_id": "alice", "admin": True}], "entry 1: admin: Extra inputs"),
    "no-keys": ([], "grants no key"),
}


@pytest.mark.parametrize("case", list(BAD_FILES), ids=list(BAD_FILES))
def test_a_bad_keys_file_says_what_is_wrong_without_quoting_a_key(tmp_path: Path, case: str) -> None:
    content, message = BAD_FILES[case]
    (tmp_path / "keys.json").write_text(json.dumps(content))
    with pytest.raises(errors.ConfigurationError, match="keys file") as refused:
        load_keys(tmp_path / "keys.json")
    assert message in str(refused.value) and SECRET[:15] not in str(refused.value)


@pytest.mark.parametrize(
    ("text", "message"), [(None, "cannot read"), ("[{", "is not JSON")], ids=["missing", "not-json"]
)
def test_an_unreadable_keys_file_is_refused(tmp_path: Path, text: str | None, message: str) -> None:
    if text is not None:
        (tmp_path / "keys.json").write_text(text)
    with pytest.raises(errors.ConfigurationError, match=message):
        load_keys(tmp_path / "keys.json")
