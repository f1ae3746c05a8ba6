"""Secrets never stored: what a turn or a written text says is scanned, and every secret in it is replaced
by a typed placeholder (``[secret:api-key]``) before anything is journaled, embedded or shown to a model.

Found by shape, offline, by regular expressions with checks (a detector whose prefix the text lacks is
skipped: about 0.1 ms for an ordinary 1,000-character turn): provider keys and tokens by their
documented prefixes (OpenAI and Anthropic ``sk-``, AWS ``AKIA``, GitHub ``ghp_``, GitLab ``glpat-``,
Slack ``xox?-``, Stripe ``sk_live_``, Google ``AIza``), JWTs, bearer tokens, credentials in URLs, values
given to a key word (``api_key=``, ``client secret:``), PEM private keys (the whole block), passwords
said as such ("my password is hunter2", "pwd: ..."), and card numbers that pass the Luhn check. Emails
and phone numbers are PII, redacted only when asked (``[pii:email]``). Callers add patterns, name -> regex.

Why no library: detect-secrets (1.5.0, 2024) scans source files line by line; on free text its entropy
plugins flag ordinary words, it knows no Anthropic or Google key, no card number, no password said in a
sentence, and for a GitHub token or a PEM key it reports the prefix or the header line rather than the
secret to replace (and takes about 20 ms a turn). Presidio and scrubadub find PII, not credentials, and
Presidio needs a spaCy model fetched at install.

What stays: the word "password" with no value after it (or a plain word such as "wrong" after it),
hex ids and commit shas (a sha is not a credential, and people cite them), UUIDs, version numbers,
dates, and long numbers that fail Luhn or no card network issues.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel

from ._errors import ConfigurationError
from ._records import MemoryContext, Message, Turn

__all__ = ["KINDS", "PII_KINDS", "Redacted", "RedactionOptions", "Redactor", "redaction_option"]

_R = TypeVar("_R", bound=BaseModel)
_NAME = re.compile(r"[a-z][a-z0-9-]{0,31}")
_FLAGS = re.IGNORECASE

KINDS = ("api-key", "token", "private-key", "password", "card-number")
"""The secret kinds found by default; the placeholder names the kind: ``[secret:api-key]``."""
PII_KINDS = ("email", "phone")
"""Found only with ``pii=True``; placeholder ``[pii:email]``."""


@dataclass(frozen=True, kw_only=True)
class RedactionOptions:
    """What is redacted before anything is stored or sent to a model.

    ``secrets``: the built-in secret kinds (:data:`KINDS`); ``pii``: emails and phone numbers too;
    ``patterns``: more kinds, name (lowercase, ``[a-z][a-z0-9-]*``) -> regular expression, each match
    replaced by ``[secret:NAME]`` (only its group ``secret`` when it has one). A bad name or regex is
    a :class:`ConfigurationError` here, at construction.
    """

    secrets: bool = True
    """Replace the built-in secret kinds (on by default)."""
    pii: bool = False
    """Replace emails and phone numbers too (off by default)."""
    patterns: Mapping[str, str] = field(default_factory=dict)
    """More kinds: name -> regex, each match replaced by ``[secret:NAME]``."""

    def __post_init__(self) -> None:
        for name, value in (("secrets", self.secrets), ("pii", self.pii)):
            if not isinstance(value, bool):
                raise ConfigurationError(f"redact {name} must be True or False, not {value!r}")
        if not isinstance(self.patterns, Mapping):
            raise ConfigurationError(f"redact patterns must be a mapping of name to regex, not {self.patterns!r}")
        for name, pattern in self.patterns.items():
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise ConfigurationError(f"redact pattern name {name!r} must match [a-z][a-z0-9-]* (32 at most)")
            _compiled(name, pattern)
        object.__setattr__(self, "patterns", dict(self.patterns))  # frozen: a copy the caller cannot change


def _compiled(name: str, pattern: object) -> re.Pattern[str]:
    """``pattern`` compiled, or ConfigurationError: not a string, not a regex, or matching the empty string."""
    if not isinstance(pattern, str) or not pattern:
        raise ConfigurationError(f"redact pattern {name!r} must be a non-empty regex string, not {pattern!r}")
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ConfigurationError(f"redact pattern {name!r} is not a valid regex: {exc}") from exc
    if regex.fullmatch(""):
        raise ConfigurationError(f"redact pattern {name!r} matches the empty string")
    return regex


def redaction_option(value: object) -> RedactionOptions:
    """``redact=``: True (the default: secrets), False (nothing), a dict or a :class:`RedactionOptions`."""
    if value is True or value is None:
        return RedactionOptions()
    if value is False:
        return RedactionOptions(secrets=False)
    if isinstance(value, RedactionOptions):
        return value
    if isinstance(value, Mapping):
        unknown = set(value) - {"secrets", "pii", "patterns"}
        if unknown:
            raise ConfigurationError(f"unknown redact option {sorted(unknown)}; valid: secrets, pii, patterns")
        return RedactionOptions(**{str(k): v for k, v in value.items()})
    raise ConfigurationError(f"redact must be True, False, a dict or RedactionOptions, not {type(value).__name__}")


# -- the detectors ------------------------------------------------------------------------------


def _random_looking(value: str) -> bool:
    """A credential mixes character classes; a word or a slug of words does not."""
    has_digit = any(c.isdigit() for c in value)
    return has_digit or (any(c.isupper() for c in value) and any(c.islower() for c in value))


def _luhn(digits: str) -> bool:
    total = 0
    for i, d in enumerate(reversed(digits)):
        n = int(d) * (2 if i % 2 else 1)
        total += n - 9 if n > 9 else n
    return total % 10 == 0


def _card(value: str) -> bool:
    """13 to 19 digits a card network issues (first digit 2 to 6) passing Luhn; separators in groups only."""
    digits = re.sub(r"[ -]", "", value)
    return 13 <= len(digits) <= 19 and digits[0] in "23456" and _luhn(digits)


# Words that follow "password is" without being one ("the password is wrong", "my password is too weak").
_NOT_PASSWORD_WORDS = (
    "a an the my your our his her their its this that it and or not no too very so still now also just really "
    "wrong incorrect correct right same different expired weak strong required invalid valid changed reset set "
    "saved stored safe unsafe secure insecure long short hard easy missing empty blank needed protected hashed "
    "encrypted hidden visible case-sensitive forgotten lost known unknown secret private mandatory optional in on "
    "for of at by with to from into be been being was is were none"
)
_NOT_PASSWORDS = frozenset(_NOT_PASSWORD_WORDS.split())


_QUOTES = "\"'\u201c\u201d\u2018\u2019"


def _said_password(value: str) -> bool:
    return value.strip(_QUOTES).lower() not in _NOT_PASSWORDS and not value.startswith("[")


_KEY_WORDS = (
    r"api[_ -]?key|api[_ -]?token|access[_ -]?token|auth[_ -]?token|refresh[_ -]?token|secret[_ -]?key"
    r"|secret[_ -]?access[_ -]?key|client[_ -]?secret|private[_ -]?token|app[_ -]?secret"
)
_PASSWORD_WORDS = r"password|passwd|passphrase|pass phrase|pwd|passcode"
_SAID = r"(?:\s*[:=]\s*|\s+(?:is|was)(?:\s+now)?(?:\s*:)?\s+)"
_VALUE = r"(?P<secret>\"[^\"\n]{1,128}\"|'[^'\n]{1,128}'|“[^”\n]{1,128}”|[^\s\"'“”]{1,128}?)(?=[.,;:)]?(?:\s|$))"


@dataclass(frozen=True)
class _Detector:
    kind: str
    regex: re.Pattern[str]
    check: Callable[[str], bool] | None = None
    """A test the matched secret must pass (Luhn, random-looking), else it stays."""
    hints: tuple[str, ...] = ()
    """Lowercase substrings every match holds one of: without any in the text the regex is not run (most
    turns hold none, and a substring test costs far less than a regex pass)."""


def _detector(
    kind: str, pattern: str, *hints: str, check: Callable[[str], bool] | None = None, flags: int = 0
) -> _Detector:
    return _Detector(kind, re.compile(pattern, flags), check, hints)


_KEYED_VALUE = (
    rf"(?<![A-Za-z0-9])(?:\w+[_\-])?(?:{_KEY_WORDS})\b[\"']?{_SAID}[\"']?(?P<secret>[A-Za-z0-9_\-./+=]{{12,}})"
)
_PASSWORD_SAID = rf"\b(?:{_PASSWORD_WORDS})\b{_SAID}{_VALUE}"
_PASSWORD_OF = rf"\b(?:{_PASSWORD_WORDS})\s+(?:for|to|of|on)\s+[^\n.:=]{{1,40}}?{_SAID}{_VALUE}"
_PASSWORD_TO = rf"\b(?:set|changed?|reset|updated?)\s+(?:\w+\s+){{0,2}}(?:{_PASSWORD_WORDS})\s+to\s+{_VALUE}"
_GITHUB = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_")
_B = r"(?<![A-Za-z0-9_\-])"  # not inside a longer token
_E = r"(?![A-Za-z0-9_\-])"

SECRET_DETECTORS = (
    _detector(
        "private-key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[^-]|-(?!----))*?"
        r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        "-----begin",
    ),
    # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-api03-) and the providers that copied the shape.
    _detector("api-key", _B + r"sk-[A-Za-z0-9_\-]{20,}" + _E, "sk-", check=_random_looking),
    _detector("api-key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b", "akia", "asia", "abia", "acca"),  # AWS key id
    _detector("api-key", _B + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}" + _E, "_live_", "_test_"),  # Stripe
    _detector("api-key", _B + r"AIza[A-Za-z0-9_\-]{35}" + _E, "aiza"),  # Google API key
    _detector("token", _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})" + _E, *_GITHUB),
    _detector("token", _B + r"glpat-[A-Za-z0-9_\-]{20,}" + _E, "glpat-"),  # GitLab
    _detector("token", _B + r"xox[abposr]-[A-Za-z0-9\-]{10,}" + _E, "xox"),  # Slack
    _detector("token", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]{20,}", "hooks.slack"),  # webhook
    _detector("token", _B + r"ya29\.[A-Za-z0-9_\-]{20,}" + _E, "ya29."),  # Google OAuth access token
    _detector("token", _B + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*" + _E, "eyj"),  # JWT
    _detector(
        "token", r"\bbearer\s+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)", "bearer", check=_random_looking, flags=_FLAGS
    ),
    _detector("password", r"\b[a-z][a-z0-9+.\-]*://[^\s:/@]+:(?P<secret>[^\s@/]+)@", "://", flags=_FLAGS),
    _detector("api-key", _KEYED_VALUE, "key", "token", "secret", check=_random_looking, flags=_FLAGS),
    _detector("password", _PASSWORD_SAID, "pass", "pwd", check=_said_password, flags=_FLAGS),
    _detector("password", _PASSWORD_OF, "pass", "pwd", check=_said_password, flags=_FLAGS),  # "... for the router is"
    _detector("password", _PASSWORD_TO, "pass", "pwd", check=_said_password, flags=_FLAGS),  # "changed ... to ..."
    _detector("card-number", r"\d(?<!\d\d)(?<!\d[.\-]\d)(?:[ -]?\d){12,18}(?!\d|[.\-]\d)", check=_card),
)
PII_DETECTORS = (
    _detector("email", r"\b[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}\b", "@"),
    _detector("phone", r"(?<![\w+])\+\d{1,3}[ .\-]?(?:\(\d{1,4}\)[ .\-]?)?\d{1,4}(?:[ .\-]?\d{2,4}){2,4}(?!\w)", "+"),
    _detector("phone", r"(?<![\w.\-])\(?\d{3}\)?[ .\-]\d{3}[ .\-]\d{4}(?![\w.\-])"),  # 555-867-5309
    _detector("phone", r"(?<![\w.\-])0\d{2,4}[ \-]\d{3,4}[ \-]?\d{3,4}(?![\w.\-])"),  # 020 7946 0958
)


# -- redaction ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Redacted:
    """A text with its secrets replaced, and how many of each kind were."""

    text: str
    found: Counter[str]


class Redactor:
    """Replaces what :class:`RedactionOptions` asks for with typed placeholders, and tallies it per user."""

    def __init__(self, options: RedactionOptions | None = None) -> None:
        self.options = options or RedactionOptions()
        self._detectors: list[tuple[_Detector, str]] = []
        if self.options.secrets:
            self._detectors += [(d, f"[secret:{d.kind}]") for d in SECRET_DETECTORS]
        if self.options.pii:
            self._detectors += [(d, f"[pii:{d.kind}]") for d in PII_DETECTORS]
        for name, pattern in self.options.patterns.items():
            self._detectors.append((_Detector(name, _compiled(name, pattern)), f"[secret:{name}]"))
        self._tally: dict[tuple[str, str], Counter[str]] = {}
        self._lock = threading.Lock()  # captures run in worker threads

    def redact(self, text: str) -> Redacted:
        """``text`` with every secret replaced. Findings that overlap are one secret, the union of their
        spans (erring towards removal), of the kind of the first detector among them (secrets before PII)."""
        spans: list[tuple[int, int, int]] = []  # start, end, detector order
        lowered = text.lower()
        for order, (detector, _) in enumerate(self._detectors):
            if detector.hints and not any(hint in lowered for hint in detector.hints):
                continue
            for match in detector.regex.finditer(text):
                group = "secret" if "secret" in detector.regex.groupindex else 0
                value = match.group(group)
                if value is None or not value.strip() or (detector.check and not detector.check(value)):
                    continue
                spans.append((match.start(group), match.end(group), order))
        if not spans:
            return Redacted(text, Counter())
        merged: list[list[int]] = []
        for start, end, order in sorted(spans):
            if merged and start < merged[-1][1]:
                merged[-1][1:] = [max(merged[-1][1], end), min(merged[-1][2], order)]
            else:
                merged.append([start, end, order])
        parts, found, at = [], Counter[str](), 0
        for start, end, order in merged:
            detector, placeholder = self._detectors[order]
            parts += [text[at:start], placeholder]
            found[detector.kind] += 1
            at = end
        parts.append(text[at:])
        return Redacted("".join(parts), found)

    def text(self, text: str, *, user: tuple[str, str] | None = None) -> str:
        """``text`` redacted, the kinds found counted for ``user`` (namespace, user id)."""
        if not self._detectors:
            return text
        redacted = self.redact(text)
        if redacted.found and user is not None:
            with self._lock:
                self._tally.setdefault(user, Counter()).update(redacted.found)
        return redacted.text

    def for_user(self, ctx: MemoryContext, text: str) -> str:
        """``text`` redacted, what was found counted for ``ctx``'s user."""
        return self.text(text, user=(ctx.namespace, ctx.user_id))

    def messages(self, ctx: MemoryContext, messages: Iterable[Message]) -> tuple[Message, ...]:
        """A turn's messages with their contents redacted, counted for ``ctx``'s user."""
        return tuple(
            m if (content := self.for_user(ctx, m.content)) == m.content else m.model_copy(update={"content": content})
            for m in messages
        )

    def record(self, ctx: MemoryContext, record: _R) -> _R:
        """A stored record (an import's, a caller's episode) with its said text redacted: a turn's messages and
        context, an episode's summary, a fact's, an observation's, a digest's or a chunk's text, a document's title."""
        update: dict[str, object] = {}
        if isinstance(record, Turn):
            update = {"messages": self.messages(ctx, record.messages), "context": self.for_user(ctx, record.context)}
        for name in ("text", "summary", "title"):
            value = getattr(record, name, None)
            if isinstance(value, str):
                update[name] = self.for_user(ctx, value)
        return record.model_copy(update=update) if update else record

    def tally(self, ctx: MemoryContext) -> dict[str, int]:
        """The secrets this process redacted for ``ctx``'s user, by kind."""
        with self._lock:
            return dict(sorted(self._tally.get((ctx.namespace, ctx.user_id), Counter()).items()))
