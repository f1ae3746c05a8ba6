"""LoCoMo loading for ``bench/locomo.py``: sessions with parsed dates, turns, repaired evidence.

The data file is not shipped (CC BY-NC 4.0, see ../shared/data/README.md beside the repository); this module only
reads it. Evidence repair follows the data README: split ids joined by ``;`` or whitespace,
normalise ``D:11:26`` -> ``D11:26`` and ``D30:05`` -> ``D30:5``, drop ids that name no turn.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["CATEGORIES", "Conversation", "Question", "Session", "TurnRow", "load", "parse_date", "repair_evidence"]

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
_SESSION = re.compile(r"session_(\d+)")
_ID = re.compile(r"^D:?(\d+):0*(\d+)$")


@dataclass(frozen=True, kw_only=True)
class TurnRow:
    dia_id: str
    speaker: str
    text: str  # with " [shares image: <caption>]" appended when the turn shares an image
    session: int
    date_text: str

    @property
    def document(self) -> str:
        """The baseline document: ``[session date] speaker: text``."""
        return f"[{self.date_text}] {self.speaker}: {self.text}"


@dataclass(frozen=True, kw_only=True)
class Session:
    number: int
    date_text: str
    when: datetime
    turns: list[TurnRow]


@dataclass(frozen=True, kw_only=True)
class Question:
    question: str
    answer: str
    category: int
    evidence: list[str]  # repaired, existing dia_ids only; may be empty
    raw_evidence: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: list[Session]
    questions: list[Question]

    @property
    def turns(self) -> list[TurnRow]:
        return [t for s in self.sessions for t in s.turns]


def parse_date(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` -> an aware UTC datetime."""
    cleaned = " ".join(text.replace(",", ", ").split()).replace(" ,", ",")
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y"):
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"unparsable LoCoMo date {text!r}")


def repair_evidence(raw: list[Any], known: set[str]) -> list[str]:
    out: list[str] = []
    for entry in raw:
        for part in re.split(r"[;\s]+", str(entry)):
            m = _ID.match(part.strip())
            if not m:
                continue
            did = f"D{int(m[1])}:{int(m[2])}"
            if did in known and did not in out:
                out.append(did)
    return out


def load(path: str | Path, *, quick: bool = False) -> list[Conversation]:
    """All conversations; ``quick``: the first conversation, its first 5 sessions, its questions on them."""
    samples = json.loads(Path(path).read_text())
    if quick:
        samples = samples[:1]
    out: list[Conversation] = []
    for sample in samples:
        conv = sample["conversation"]
        numbers = sorted(int(m[1]) for k in conv if (m := _SESSION.fullmatch(k)) and isinstance(conv[k], list))
        if quick:
            numbers = numbers[:5]
        sessions: list[Session] = []
        for n in numbers:
            date_text = conv[f"session_{n}_date_time"]
            turns = []
            for t in conv[f"session_{n}"]:
                text = t["text"]
                if t.get("blip_caption"):
                    text = f"{text} [shares image: {t['blip_caption']}]"
                turns.append(
                    TurnRow(dia_id=t["dia_id"], speaker=t["speaker"], text=text, session=n, date_text=date_text)
                )
            sessions.append(Session(number=n, date_text=date_text, when=parse_date(date_text), turns=turns))
        known = {t.dia_id for s in sessions for t in s.turns}
        all_known = {t["dia_id"] for k in conv if _SESSION.fullmatch(k) and isinstance(conv[k], list) for t in conv[k]}
        questions = []
        for qa in sample["qa"]:
            raw = list(qa.get("evidence") or [])
            if quick and repair_evidence(raw, all_known) != repair_evidence(raw, known):
                continue  # in quick mode keep only questions answerable from the sessions fed
            if quick and not repair_evidence(raw, known):
                continue
            answer = qa.get("answer", qa.get("adversarial_answer", ""))
            questions.append(
                Question(
                    question=qa["question"],
                    answer=str(answer),
                    category=int(qa["category"]),
                    evidence=repair_evidence(raw, known),
                    raw_evidence=[str(e) for e in raw],
                )
            )
        out.append(
            Conversation(
                sample_id=sample["sample_id"],
                speaker_a=conv["speaker_a"],
                speaker_b=conv["speaker_b"],
                sessions=sessions,
                questions=questions,
            )
        )
    return out
