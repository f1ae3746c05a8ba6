"""The ``tiermem`` commands of the operator's grants: which user may read or write which shared scope."""

from __future__ import annotations

import click

from .._records import MemoryContext
from ._options import awaited, data_options, emit, for_user, namespace_option, open_system

__all__ = ["COMMANDS", "grant", "grants", "revoke"]

scope_option = click.option("--scope", required=True, help="the shared scope: team:<id>, org:<id> or agent:<id>")


@click.command()
@for_user(by_id=False)
@scope_option
@click.option("--write", is_flag=True, help="also let the user write to it (share, remember)")
def grant(who: MemoryContext, scope: str, write: bool) -> None:
    """Let USER read (with --write, also write) a shared scope of the namespace."""
    made = awaited(open_system(create=True).grant(who.namespace, who.user_id, scope, "write" if write else "read"))
    emit(made, f"granted {made.right} on {made.scope} to {made.namespace}/{made.user_id}")


@click.command()
@for_user(by_id=False)
@scope_option
def revoke(who: MemoryContext, scope: str) -> None:
    """Withdraw USER's access to a shared scope."""
    held = awaited(open_system().revoke(who.namespace, who.user_id, scope))
    emit({"revoked": held}, f"revoked {scope} from {who.namespace}/{who.user_id}" if held else "no such grant")


@click.command(name="grants")
@namespace_option
@data_options
def grants(namespace: str) -> None:
    """The grants in force in the namespace."""
    found = awaited(open_system().grants(namespace))
    emit(found, "\n".join(f"{g.user_id}\t{g.scope}\t{g.right}" for g in found) or "no grants")


COMMANDS = (grant, revoke, grants)
