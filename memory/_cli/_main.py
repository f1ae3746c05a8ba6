"""The ``tiermem`` command, on click: inspect and govern a store, and run the demo, the worker, the MCP server.

Every data command goes through the public API (``system(...)`` and its methods) and prints plain
text, or JSON with ``--json``. A ``TiermemError`` (a missing store, an unknown id, a bad argument)
becomes one line on stderr, ``tiermem: error: ...``, and exit code 1; a usage error is one such line too
(click's message and a pointer to ``--help``), code 2.
The only module that imports click, with its parts beside it: the shared options (``_cli_options``),
the commands that read (``_cli_read``), change (``_cli_change``), move (``_cli_move``) and run
(``_cli_run``), and the REST server's (``_cli_serve``); what the commands print is rendered in ``_cli_output``,
and the memory policy the writing commands obey is read in ``_policy_file``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import click

from .._errors import TiermemError
from .._text import loggable
from . import _change as _cli_change
from . import _grants as _cli_grants
from . import _ingest as _cli_ingest
from . import _move as _cli_move
from . import _read as _cli_read
from . import _run as _cli_run
from . import _serve as _cli_serve
from ._options import keep

__all__ = ["cli", "main"]


def _one_line(exc: BaseException, message: str | None = None) -> str:
    """The error (or its ``message``) as one bounded line of plain text: a message quoting a hostile file
    cannot flood or rewrite the terminal."""
    return loggable(" ".join((message or str(exc)).split()), limit=2000) or type(exc).__name__


_DIMS = "dimensions of a litellm embedding model"
_STORE = "LanceDB folder or URI [default: $TIERMEM_STORE, else ~/.tiermem/store]"


def _one_line_error(exc: click.ClickException) -> click.ClickException:
    """click's usage (or file) error shown as one line, as every other error, with where to read the usage."""

    def show(file: Any = None) -> None:
        ctx = getattr(exc, "ctx", None)
        command = ctx.command_path if isinstance(ctx, click.Context) else "tiermem"
        click.echo(f"tiermem: error: {_one_line(exc, exc.format_message())} (see '{command} --help')", err=True)

    exc.show = show  # type: ignore[method-assign]  # this error's own way to be shown, click's call unchanged
    return exc


class _Group(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)  # in the order they are declared: read, change, grants, move, run

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.ClickException as exc:  # the global options' errors
            raise _one_line_error(exc) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise
        except click.ClickException as exc:  # the command's name, arguments and options, a FILE it cannot open
            raise _one_line_error(exc) from None
        except (TiermemError, OSError) as exc:  # OSError: a file given to -o that cannot be written ...
            click.echo(f"tiermem: error: {_one_line(exc)}", err=True)
            ctx.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="tiermem", prog_name="tiermem", message="%(prog)s %(version)s")
@click.option("--store", envvar="TIERMEM_STORE", expose_value=False, callback=keep("store"), help=_STORE)
@click.option("--embedder", expose_value=False, callback=keep("embedder"), help="the embedder the store was made with")
@click.option("--embedder-dimensions", type=int, expose_value=False, callback=keep("embedder_dimensions"), help=_DIMS)
@click.option("--json", is_flag=True, expose_value=False, callback=keep("json"), help="print JSON, for scripts")
def cli() -> None:
    """Tiered memory for LLM agents: see and govern what a store remembers about each user."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("LiteLLM").setLevel(logging.WARNING)


for _command in (
    *_cli_read.COMMANDS,
    *_cli_change.COMMANDS,
    *_cli_grants.COMMANDS,
    *_cli_move.COMMANDS,
    *_cli_ingest.COMMANDS,
    *_cli_run.COMMANDS,
    *_cli_serve.COMMANDS,
):
    cli.add_command(_command)  # in the order they are declared: read, change, grants, move, ingest, run, serve


def main(argv: Sequence[str] | None = None) -> int:
    """The console script: run one command, return its exit code (0, 1 after an error line, 2 misuse)."""
    try:
        code = cli.main(args=list(argv) if argv is not None else None, prog_name="tiermem", standalone_mode=False)
    except click.ClickException as exc:  # usage errors: click's message and code 2
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("tiermem: interrupted", err=True)
        return 130
    except BrokenPipeError:  # `tiermem export u | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
