"""Chat transcripts as ``capture`` receives them: OpenAI and litellm message shapes, normalised.

A message may be a dict, a :class:`~tiermem.Message`, or any object with ``model_dump()`` or
``role``/``content`` attributes (litellm's ``Message``, OpenAI SDK objects); litellm is recognised by
shape, never imported. ``content`` may be a string, None (an assistant turn that only calls tools)
or a list of parts, of which the text parts are kept and images, audio and files ignored.

What the turn log keeps is a policy (``keep_roles``): by default what people said, the user's and
the assistant's text. System and developer prompts are instructions, not memories; tool payloads
are machine output, and a ``memory_*`` tool's result is memory already, so capturing it would feed
recall results back into the log. Those results are dropped even when ``"tool"`` is kept.

A batch is checked whole before anything is written: an invalid message raises
:class:`InvalidArgumentError` naming its index and the reason.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Literal, get_args

from pydantic import ValidationError

from ._errors import ConfigurationError, InvalidArgumentError
from ._records import Message

__all__ = ["DEFAULT_KEEP_ROLES", "Role", "keep_roles_option", "normalize_messages", "split_turns"]

Role = Literal["system", "developer", "user", "assistant", "tool"]
"""The chat roles a transcript may hold ("function", OpenAI's legacy tool role, counts as "tool")."""

ROLES: frozenset[str] = frozenset(get_args(Role))
DEFAULT_KEEP_ROLES: frozenset[str] = frozenset({"user", "assistant"})
"""What the turn log keeps unless configured otherwise: what the people in the conversation said."""

MEMORY_TOOL_PREFIX = "memory_"
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
_ALIASES = {"function": "tool"}
# The record's roles: "developer" is stored under its older name, "system".
_STORED: dict[str, Literal["user", "assistant", "system", "tool"]] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}


def keep_roles_option(roles: Collection[str]) -> frozenset[str]:
    """Validate a ``keep_roles`` option: a non-empty collection of known roles."""
    if isinstance(roles, str):
        raise ConfigurationError(f"keep_roles must be a collection of roles, not the string {roles!r}")
    chosen = frozenset(roles)
    unknown = sorted(chosen - ROLES)
    if unknown or not chosen:
        raise ConfigurationError(f"keep_roles must name some of {sorted(ROLES)}; got {sorted(chosen)}")
    return chosen


def _fields(message: object) -> Mapping[str, object] | None:
    """The message as a mapping: dicts as they are, pydantic-like objects dumped, else attributes."""
    if isinstance(message, Mapping):
        return message
    if isinstance(message, Message):
        return message.model_dump()
    dump = getattr(message, "model_dump", None)
    if callable(dump):
        dumped = dump()
        return dumped if isinstance(dumped, Mapping) else None
    if hasattr(message, "role") and hasattr(message, "content"):
        return {key: getattr(message, key, None) for key in ("role", "content", "name", "tool_calls", "tool_call_id")}
    return None


def _part_text(part: object, where: str) -> str | None:
    fields = part if isinstance(part, Mapping) else _fields(part)
    if fields is None or not isinstance(fields.get("type"), str):
        raise InvalidArgumentError(f"{where}: a content part must be an object with a string 'type'")
    if fields["type"] not in _TEXT_PARTS:
        return None  # images, audio, files, refusals: not what anyone said in words
    text = fields.get("text")
    if not isinstance(text, str):
        raise InvalidArgumentError(f"{where}: a {fields['type']!r} part needs a string 'text'")
    return text


def _text(content: object, role: str, where: str) -> str:
    if isinstance(content, str):
        return content
    if content is None:
        if role == "assistant":
            return ""  # an assistant turn that only calls tools (or says nothing) has no text
        raise InvalidArgumentError(f"{where}: a {role} message needs 'content'")
    if isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        texts = [_part_text(part, f"{where} part {j}") for j, part in enumerate(content)]
        return "\n".join(t for t in texts if t)
    raise InvalidArgumentError(
        f"{where}: 'content' must be a string, a list of parts or None, not {type(content).__name__}"
    )


def _memory_calls(calls: object) -> set[str]:
    """Ids of the calls an assistant message makes to tiermem's own tools (``calls``: its checked ``tool_calls``)."""
    ids: set[str] = set()
    for call in calls if isinstance(calls, Sequence) else ():
        call_fields = call if isinstance(call, Mapping) else _fields(call) or {}
        function = call_fields.get("function")
        function_fields = function if isinstance(function, Mapping) else _fields(function) or {}
        name = function_fields.get("name")
        call_id = call_fields.get("id")
        if isinstance(name, str) and name.startswith(MEMORY_TOOL_PREFIX) and isinstance(call_id, str):
            ids.add(call_id)
    return ids


def normalize_messages(
    raw: Sequence[object], *, keep_roles: Collection[str] = DEFAULT_KEEP_ROLES
) -> tuple[Message, ...]:
    """The messages of one turn as the turn log keeps them, or :class:`InvalidArgumentError`.

    Every message is checked, kept or not; a message whose role is not kept, or with no text
    (an assistant message that only calls tools), is left out. A kept ``developer`` message is
    stored as ``system`` (its older name). Raises when nothing is left to keep.
    """
    if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Sequence) or not raw:
        raise InvalidArgumentError("capture needs a non-empty list of messages")
    keep = frozenset(keep_roles)
    memory_calls: set[str] = set()
    out: list[Message] = []
    for i, message in enumerate(raw):
        where = f"message {i}"
        fields = _fields(message)
        if fields is None:
            raise InvalidArgumentError(
                f"{where}: expected a dict or a message object with 'role' and 'content', got {type(message).__name__}"
            )
        role = fields.get("role")
        if role is None:  # never guessed: a message with no role is as likely the assistant's
            raise InvalidArgumentError(f"{where}: a message needs 'role', one of {sorted(ROLES)}")
        role = _ALIASES.get(role, role) if isinstance(role, str) else role
        if role not in ROLES:
            raise InvalidArgumentError(f"{where}: unknown role {role!r}; expected one of {sorted(ROLES)}")
        name = fields.get("name")
        if name is not None and not isinstance(name, str):
            raise InvalidArgumentError(f"{where}: 'name' must be a string, not {type(name).__name__}")
        calls = fields.get("tool_calls")
        if calls is not None and (isinstance(calls, (str, bytes, Mapping)) or not isinstance(calls, Sequence)):
            raise InvalidArgumentError(f"{where}: 'tool_calls' must be a list")
        text = _text(fields.get("content"), role, where)
        if role == "assistant":
            memory_calls |= _memory_calls(calls)
        stored_developer = isinstance(message, Message) and role == "system" and "developer" in keep
        if (role not in keep and not stored_developer) or not text.strip():
            continue
        call_id = fields.get("tool_call_id")
        if role == "tool" and (
            (name or "").startswith(MEMORY_TOOL_PREFIX) or (isinstance(call_id, str) and call_id in memory_calls)
        ):
            continue  # tiermem's own results: memory already, and a feedback loop if logged
        try:
            out.append(Message(role=_STORED[role], content=text, name=name or None))
        except ValidationError as exc:
            raise InvalidArgumentError(f"{where}: {exc.errors()[0]['msg']}") from exc
    if not out:
        raise InvalidArgumentError(f"no text to capture: no message of the kept roles {sorted(keep)} has content")
    return tuple(out)


def split_turns(items: Sequence[object]) -> list[list[object]]:
    """A batch as turns: each list is one turn; loose messages start a new turn at every user message."""
    turns: list[list[object]] = []
    for item in items:
        if isinstance(item, (list, tuple)):
            turns.append(list(item))
            continue
        fields = _fields(item)
        if fields is None:
            turns.append([item])  # not a message: normalize_messages names it
            continue
        if fields.get("role", "user") == "user" or not turns:
            turns.append([])
        turns[-1].append(item)
    return turns
