"""The ``tiermem`` commands that move memory in and out of a store: export, import, import-history."""

from __future__ import annotations

import contextlib
import sys
from typing import IO, Any

import click

from .._errors import InvalidArgumentError
from .._json_input import strict_json
from .._records import MemoryContext
from .._write import MAX_OBSERVE_WINDOW, OBSERVE_WINDOW, HistoryProgress
from ._options import awaited, emit, for_user, known_user, open_system, output_option, policy_options
from ._output import counts_text, history_text

__all__ = ["COMMANDS", "export", "import_", "import_history"]


@click.command()
@for_user(by_id=False)
@output_option
def export(who: MemoryContext, output: str) -> None:
    """Write a user's memory as JSON Lines (to stdout unless -o FILE)."""
    mem = open_system(read_only=True)
    known_user(mem, who)
    report = awaited(mem.export(who, sys.stdout if output == "-" else output))
    if output == "-":
        click.echo(counts_text("exported", report.records), err=True)  # stdout holds the export itself
    else:
        emit(report, counts_text("exported", report.records) + f" to {output}")


@click.command("import")
@for_user(by_id=False)
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
def import_(who: MemoryContext, file: str) -> None:
    """Read an export (FILE, or - for stdin) into a user's memory; importing twice changes nothing."""
    report = awaited(open_system(create=True).import_(who, sys.stdin if file == "-" else file))
    emit(report, counts_text("imported", report.records))


def _sessions(p: HistoryProgress | None) -> str | None:
    return None if p is None else f"{p.conversations_done}/{p.conversations_total} conversations"


def _progress_bar(turns: int) -> Any:
    """Turns done on stderr (stdout stays the report); redrawn at each report, a session's end too."""
    return click.progressbar(
        length=max(turns, 1), label="turns", item_show_func=_sessions, file=sys.stderr, update_min_steps=0
    )


@click.command("import-history")
@for_user(by_id=False)
@click.argument("file", type=click.File(encoding="utf-8"))
@click.option("--concurrency", type=click.IntRange(1, 64), default=4, show_default=True, help="sessions at once")
@click.option("--observe-window", type=click.IntRange(1, MAX_OBSERVE_WINDOW), default=OBSERVE_WINDOW,
              show_default=True, help="turns of a session per observer call (1: one per turn)")  # fmt: skip
@click.option("--model", help="litellm model string or 'rules' [default: from the environment]")
@policy_options
def import_history(who: MemoryContext, file: IO[str], concurrency: int, observe_window: int, model: str | None) -> None:
    """Feed past conversations (a JSON list, - for stdin) through the pipeline with their real dates.

    Each conversation is {"session_id": ..., "turns": [{"at": ISO time, "messages": [...]}]}.
    Interrupted? Run it again: the turns already imported are skipped. Work another process still holds a
    lease on is listed with its holder and expiry, and the exit code is 1.
    """
    try:
        text = file.read()
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"{file.name} is not UTF-8: {exc}") from None
    try:
        conversations = strict_json(text)
    except InvalidArgumentError as exc:
        raise InvalidArgumentError(f"{file.name}: {exc}") from None
    if not isinstance(conversations, list):
        raise InvalidArgumentError(f"{file.name}: not a JSON list of conversations")
    mem = open_system(create=True, model=model)
    with contextlib.ExitStack() as stack:
        bars: list[Any] = []  # entered at the first report: after the whole history was checked

        def progress(p: HistoryProgress) -> None:
            if not bars:
                bars.append(stack.enter_context(_progress_bar(p.turns_total)))
            bars[0].update(p.turns_done - bars[0].pos, current_item=p)

        imported = mem.import_conversations(
            who, conversations, concurrency=concurrency, on_progress=progress, observe_window=observe_window
        )
        report = awaited(imported)
    for error in report.errors:
        click.echo(f"tiermem: warning: {error}", err=True)
    emit(report, history_text(report))
    new = report.turns - report.duplicates
    if new and report.turns_deferred == new:  # nothing observed: the model failed on every turn
        click.echo(
            f"tiermem: error: all {new} turn(s) deferred, none observed: check the model and its key"
            " (warnings above), then run it again or let the worker retry them",
            err=True,
        )
        click.get_current_context().exit(1)
    if report.leased:  # work left to another holder: not done, so not a success
        left = ", ".join(w.what for w in report.leased)
        click.echo(f"tiermem: error: not done, held by another process's lease: {left} (see above)", err=True)
        click.get_current_context().exit(1)


COMMANDS = (export, import_, import_history)
