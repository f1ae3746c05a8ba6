"""The ``tiermem`` commands that change a user's memory: forget, erase, pin, unpin."""

from __future__ import annotations

import click

from .._errors import InvalidArgumentError
from .._records import MemoryContext
from ._options import awaited, emit, for_user, open_system, policy_options
from ._output import counts_text, forget_text

__all__ = ["COMMANDS", "erase", "forget", "pin", "unpin"]


@click.command()
@for_user(by_id=True)
@click.option(
    "--include-turns", is_flag=True, help="also delete the captured turns it came from (else they stay searchable)"
)
@click.option(
    "--model", default="rules", show_default=True, help="the model that rewrites the digest and episode summaries"
)
@policy_options
def forget(who: MemoryContext, id: str, include_turns: bool, model: str) -> None:
    """Delete one memory and what was derived only from it; every text derived from it (episode summaries,
    observations, the digest) is rewritten without it. The captured turns, what the user said, stay
    unless --include-turns."""
    report = awaited(open_system(model=model).forget(who, id, include_turns=include_turns))
    emit(report, forget_text(report))


@click.command()
@for_user(by_id=False)
@click.option("--yes", is_flag=True, help="confirm: the user's memory is deleted for good")
def erase(who: MemoryContext, yes: bool) -> None:
    """Erase every record of a user from every table, old versions purged from disk."""
    if not yes:
        raise InvalidArgumentError(f"erase deletes all of {who.user_id!r} in {who.namespace!r} for good; add --yes")
    report = awaited(open_system().erase_user(who))
    emit(report, counts_text(f"erased {who.namespace}/{who.user_id}:", report.rows))


@click.command()
@for_user(by_id=True)
def pin(who: MemoryContext, id: str) -> None:
    """Pin a fact or episode: it never decays, is never archived or compacted away."""
    record = awaited(open_system().pin(who, id))
    emit(record, f"pinned {record.id}")


@click.command()
@for_user(by_id=True)
def unpin(who: MemoryContext, id: str) -> None:
    """Unpin a fact or episode: it decays again from its last reinforcement."""
    record = awaited(open_system().unpin(who, id))
    emit(record, f"unpinned {record.id}")


COMMANDS = (forget, erase, pin, unpin)
