"""What ``ingest`` is given, read: a file by path, or bytes already fetched with their content type or URL.

The format is the content type when given, else the name's suffix; the bytes are decoded (text formats),
parsed by the format's own module (imported only when a document of it comes) and checked before
anything is written. Every failure is a DocumentError naming what to fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from .._errors import DocumentError, InvalidArgumentError
from .._text import encodable
from ._parsed import Parsed

__all__ = ["CONTENT_TYPES", "Loaded", "load", "parse"]

CONTENT_TYPES: dict[str, str] = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".pdf": "application/pdf",
}
_ALIASES = {
    "text/x-markdown": "text/markdown",
    "application/xhtml+xml": "text/html",
    "application/x-pdf": "application/pdf",
}
_KNOWN = frozenset(CONTENT_TYPES.values())


@dataclass(frozen=True, kw_only=True)
class Loaded:
    """A document's bytes, their format, the name it came by (path or URL, "" if none) and a title from the name."""

    data: bytes
    content_type: str
    charset: str | None
    origin: str
    name_title: str


def load(source: object, *, content_type: str | None = None, name: str | None = None) -> Loaded:
    """``source`` (a path, or bytes) read and its format decided; raises DocumentError before any write."""
    if content_type is not None and not isinstance(content_type, str):
        raise DocumentError(f"content_type must be a string, not {type(content_type).__name__}")
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise DocumentError("name must be a non-empty string (a file name or URL)")
    if name is not None:
        try:
            encodable(name, "name")
        except InvalidArgumentError as exc:
            raise DocumentError(str(exc)) from None
    if isinstance(source, bytes | bytearray | memoryview):
        data, origin = bytes(source), name or ""
        if content_type is None and not origin:
            raise DocumentError("bytes need a content_type or a name (a file name or URL) saying their format")
    elif isinstance(source, str | os.PathLike):
        path = Path(source).expanduser()
        if not path.is_file():
            raise DocumentError(f"no such file: {str(path)!r}")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise DocumentError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
        origin = name or str(path.resolve())
    else:
        raise DocumentError(f"a document is a path or bytes, not {type(source).__name__}")
    kind, charset = _content_type(content_type, origin)
    return Loaded(data=data, content_type=kind, charset=charset, origin=origin, name_title=_name_title(origin))


def parse(loaded: Loaded) -> Parsed:
    """The document parsed by its format's module."""
    if loaded.content_type == "application/pdf":
        from ._pdf import parse_pdf

        return parse_pdf(loaded.data)
    text = _decoded(loaded)
    if loaded.content_type == "text/markdown":
        from ._markdown import parse_markdown

        return parse_markdown(text)
    if loaded.content_type == "text/html":
        from ._html import parse_html

        return parse_html(text)
    from ._plain import parse_text

    return parse_text(text)


def _content_type(declared: str | None, origin: str) -> tuple[str, str | None]:
    charset = None
    if declared is not None:
        kind, *params = (p.strip() for p in declared.split(";"))
        kind = _ALIASES.get(kind.lower(), kind.lower())
        for param in params:
            key, _, value = param.partition("=")
            if key.strip().lower() == "charset" and value.strip():
                charset = value.strip().strip('"')
    else:
        suffix = PurePosixPath(urlsplit(origin).path if "://" in origin else origin).suffix.lower()
        kind = CONTENT_TYPES.get(suffix, "")
        if not kind:
            raise DocumentError(
                f"cannot tell the format of {origin!r} from its suffix {suffix or '(none)'!r}; pass content_type "
                f"(one of {sorted(_KNOWN)}) or name a file ending in one of {sorted(CONTENT_TYPES)}"
            )
    if kind not in _KNOWN:
        raise DocumentError(f"unsupported content type {kind!r}; tiermem ingests {sorted(_KNOWN)}")
    return kind, charset


def _decoded(loaded: Loaded) -> str:
    if b"\x00" in loaded.data[:4096]:
        raise DocumentError(f"{loaded.origin or 'the document'} is binary, not {loaded.content_type}")
    try:
        return loaded.data.decode(loaded.charset or "utf-8-sig")
    except (UnicodeDecodeError, LookupError) as exc:
        raise DocumentError(
            f"{loaded.origin or 'the document'} is not {loaded.charset or 'UTF-8'} text ({exc}); "
            "pass its charset in content_type, e.g. 'text/plain; charset=latin-1'"
        ) from None


def _name_title(origin: str) -> str:
    """A title from a path or URL when the document names none: its file name without the suffix."""
    path = urlsplit(origin).path if "://" in origin else origin
    stem = PurePosixPath(path.replace("\\", "/")).stem
    return stem or origin or "document"
