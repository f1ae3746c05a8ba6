"""The memory policy a command that writes runs under: ``--policy FILE`` (a JSON or TOML file of
:class:`~tiermem.memory._policy.MemoryPolicy`'s fields, or ``$TIERMEM_POLICY``) and the shorthands
``system()`` takes, ``--instructions TEXT`` and ``--category NAME``.

A bad file or a bad value is a usage error, raised when the command starts, before it opens the store:
a worker or a server never runs without the policy its operator gave it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from pydantic import ValidationError

from .._errors import ConfigurationError, InvalidArgumentError
from .._json_input import strict_json
from .._policy import MemoryPolicy

__all__ = ["chosen_policy", "policy_options", "policy_summary"]

F = TypeVar("F", bound=Callable[..., Any])

MAX_POLICY_BYTES = 1 << 20
"""A policy file larger than this is refused unread (a policy is at most a few kilobytes)."""
_SHORTHANDS = ("instructions", "categories")


def _fields(path: Path) -> object:
    """The file's top-level value: TOML for a ``.toml`` file, else JSON; ValueError or OSError for a bad one."""
    if path.stat().st_size > MAX_POLICY_BYTES:
        raise ValueError(f"larger than {MAX_POLICY_BYTES} bytes")
    text = path.read_bytes().decode("utf-8")  # UnicodeDecodeError is a ValueError
    if path.suffix.lower() == ".toml":
        return tomllib.loads(text)
    try:
        return strict_json(text)
    except InvalidArgumentError as exc:
        raise ValueError(str(exc)) from None


def _reasons(exc: ConfigurationError) -> str:
    """Each wrong field by name and why, without pydantic's types and links (its error is the context)."""
    cause = exc.__context__
    if not isinstance(cause, ValidationError):
        return str(exc)
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'policy'}: {e['msg'].removeprefix('Value error, ')}" for e in cause.errors()
    )


def load_policy(path: str) -> MemoryPolicy:
    """The policy a file holds; click.BadParameter (a one-line usage error) for a file that is not one."""
    try:
        fields = _fields(Path(path))
        if not isinstance(fields, dict):
            raise ValueError(f"not a table of MemoryPolicy's fields but {type(fields).__name__}")
        return MemoryPolicy(**{str(k): v for k, v in fields.items()})
    except ConfigurationError as exc:
        raise click.BadParameter(f"{path}: not a memory policy: {_reasons(exc)}", param_hint="--policy") from None
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError and UnicodeDecodeError are ValueErrors
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise click.BadParameter(f"{path}: {reason}", param_hint="--policy") from None


def _kept(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def kept(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value not in (None, ()):
            ctx.meta[f"tiermem.policy.{name}"] = value

    return kept


def policy_options(f: F) -> F:
    """``--policy FILE`` (``$TIERMEM_POLICY``), ``--instructions TEXT``, ``--category NAME`` (repeatable);
    the command reads what they say with :func:`chosen_policy` (``open_system`` does)."""
    f = click.option(
        "--category", "categories", multiple=True, metavar="NAME", expose_value=False, callback=_kept("categories"),
        help="a label of the policy's vocabulary (repeatable), as system(categories=...)",
    )(f)  # fmt: skip
    f = click.option(
        "--instructions", metavar="TEXT", expose_value=False, callback=_kept("instructions"),
        help="what to remember and what to leave out, in words, as system(instructions=...)",
    )(f)  # fmt: skip
    return click.option(
        "--policy", "policy_file", metavar="FILE", envvar="TIERMEM_POLICY", expose_value=False,
        type=click.Path(dir_okay=False), callback=_kept("file"),
        help="memory policy the writes obey: a JSON or TOML file of MemoryPolicy's fields [env: TIERMEM_POLICY]",
    )(f)  # fmt: skip


def chosen_policy() -> MemoryPolicy | None:
    """The policy the command's options say (None: none given); a usage error for a bad file or value, or
    for a field given both in the file and alone (as ``system()`` refuses it)."""
    meta = click.get_current_context().meta
    path = meta.get("tiermem.policy.file")
    base = load_policy(path) if path is not None else None
    alone: dict[str, Any] = {
        name: meta[f"tiermem.policy.{name}"] for name in _SHORTHANDS if f"tiermem.policy.{name}" in meta
    }
    if not alone:
        return base
    twice = sorted(set(alone) & (base.model_fields_set if base is not None else set()))
    if twice:
        flags = ", ".join("--category" if name == "categories" else f"--{name}" for name in twice)
        raise click.UsageError(f"{flags} given both alone and in the --policy file {path}: give each once")
    try:
        return (base or MemoryPolicy()).overridden_by(MemoryPolicy(**alone))
    except ConfigurationError as exc:
        raise click.BadParameter(_reasons(exc), param_hint="--instructions / --category") from None


def policy_summary(policy: MemoryPolicy | None) -> str:
    """What ``policy`` says, short, for the line a command says on stderr: ``(never health; never about moni)``,
    ``none`` for no policy."""
    if policy is None or policy.empty:
        return "none"
    parts = []
    if policy.instructions:
        shown = policy.instructions if len(policy.instructions) <= 40 else policy.instructions[:39] + "…"
        parts.append(f"instructions {shown!r}")
    for label, values in (
        ("categories", policy.categories or ()),
        ("only", policy.include_categories),
        ("never", policy.exclude_categories),
        ("never about", policy.exclude_subjects),
    ):
        if values:
            parts.append(f"{label} {', '.join(values)}")
    return "(" + "; ".join(parts) + ")"
