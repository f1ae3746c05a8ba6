"""How the offline rules model reads English: splitting, lexicons, phrase patterns, rewriting.

Pure functions and compiled patterns over strings, used by :mod:`tiermem.pipelines._rules`. Rewriting only
swaps pronouns and adds third-person verb endings, so every content word of a sentence survives
(recall depends on them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache

from tiermem.memory._errors import InvalidSubjectError
from tiermem.memory._subjects import USER, canonical_subject
from tiermem.memory._text import CHAT_WORDS, STOP_WORDS, split_sentences, tokens
from tiermem.prompts.observe import Kind

__all__ = [
    "ADVERBS",
    "APPOSITION",
    "COUPLES",
    "HEALTH",
    "MY_REL_START",
    "NAMED_REL_START",
    "OWNER_REL",
    "PLACES",
    "RELATIONS",
    "REL_MOD",
    "REVEALS",
    "SECOND_PERSON",
    "STARTERS",
    "STOPWORDS",
    "WORK",
    "content_words",
    "display_name",
    "ensure_period",
    "has_first_person",
    "jaccard",
    "kind_of",
    "leading_name",
    "normalise",
    "rewrite_first_person",
    "salience_of",
    "split_sentences",
    "strip_apposition",
    "strip_greeting",
    "subject_of",
    "third_person",
    "tokens",
    "user_aliases",
    "words",
]


def words(text: str) -> frozenset[str]:
    """A lexicon written as text: its whitespace-separated words."""
    return frozenset(text.split())


# Stop words plus the words of chat that carry no content ("great", "sounds"): one list, in
# tiermem.memory._text, shared with recall and the benchmarks.
STOPWORDS = STOP_WORDS | CHAT_WORDS
_MEMO = 1 << 14
"""Texts each memoised text function keeps (a few MB at most)."""

_ADVERBS = words(
    """really also just still always never usually often sometimes absolutely totally definitely actually
    recently finally already only even mostly truly generally currently now simply certainly probably almost
    nearly rarely seldom occasionally honestly literally kinda sorta"""
)
ADVERBS = _ADVERBS
"""Filler adverbs ("really", "just", "now") skipped when reading a predicate."""
_NO_INFLECT = words(
    """can could will would shall should may might must was were did had got made saw took came ran bought ate
    drank met left felt thought told said found gave knew began wrote spent lost won sent built taught
    brought caught fought heard held kept paid sold sat slept spoke stood swam understood wore grew flew
    drove rode broke chose fell forgot hid became went used quit split too and or both as to at in on for with but so
    the a an ought"""
)
_IRREGULAR = {
    "am": "is", "be": "is", "have": "has", "do": "does", "go": "goes", "don't": "doesn't",
    "haven't": "hasn't", "ain't": "isn't", "'m": "is",
}  # fmt: skip
_FIRST_PERSON = re.compile(
    r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself|[Ww]e|[Ww]e're|[Ww]e've|our|ours|us)\b|^(?:My|Our)\b"
)
STARTERS = words(
    """I I'm My Our We You Your He She His Her They Their It Its The A An This That These Those There Here What
    When Where Why How Who Which Yesterday Today Tomorrow Tonight Last Next Also And But So Oh Well Yes No
    Yeah Maybe Actually Honestly Anyway Just Thanks Thank Hi Hello Hey Sure Ok Okay Great Good Nice Wow Cool
    Awesome Lol Every Some Most All After Before During Since If As At In On For With Not Sorry Please Let
    Recently Lately Sometimes Usually Monday Tuesday Wednesday Thursday Friday Saturday Sunday January
    February March April May June July August September October November December Then Now Once Speaking
    Both Any One"""
)
_GREETING = re.compile(
    r"^(?:(?:hi|hello|hey|hiya|howdy|greetings)(?:\s+there|\s+[a-z]{2,}(?=[,!.]))?|good (?:morning|afternoon|evening)"
    r"|(?:yes|yeah|yep|no|nope|ok|okay|sure|great|cool|nice|wow|oh|ah|haha|lol|well|aw+|omg)(?=[,!.]))[\s,!.]*",
    re.IGNORECASE,
)
_THANKS = re.compile(r"^(?:thanks|thank you|thx|cheers|bye|goodbye|see you|take care|talk soon)\b", re.IGNORECASE)

# Relations to a person: relation word -> edge relation (see _rules for the direction).
_REL_SPEC = """wife husband spouse=married to; partner girlfriend boyfriend=partner of;
fiance fiancee fiancé fiancée=engaged to; brother=brother of; sister=sister of; mother mom mum=mother of;
father dad=father of; son=son of; daughter=daughter of; friend bestie=friend of; cousin=cousin of;
colleague coworker co-worker=colleague of; boss manager=boss of; aunt=aunt of; uncle=uncle of;
grandmother grandma=grandmother of; grandfather grandpa=grandfather of; niece=niece of; nephew=nephew of;
neighbor neighbour=neighbour of; roommate flatmate=roommate of; mentor=mentor of"""
RELATIONS: dict[str, str] = {
    word: rel.strip() for part in _REL_SPEC.split(";") for words, rel in [part.split("=")] for word in words.split()
}
COUPLES = frozenset({"married to", "partner of", "engaged to"})
_REL = "|".join(sorted(map(re.escape, RELATIONS), key=len, reverse=True))
_MOD = r"(?:(?:best|old|older|younger|little|big|new|close|good|dear|eldest|oldest|youngest|twin|step)\s+)?"
REL_MOD = _MOD
"""What may stand before a relation word: "best" friend, "older" brother."""
_NAME = r"[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?"
_OWNER = r"(?P<owner>\b[Tt]he user's|\b[A-Z][a-z]+'s|\b[Mm]y|\b[Oo]ur)"
MY_REL_START = re.compile(
    rf"^(?i:(?:(?:and|so|also|oh|well|btw|plus)\b,?\s+)*(?:my|our)\s+(?P<mod>{_MOD})(?P<rel>{_REL})),?\s+"
    rf"(?P<name>{_NAME})(?P<poss>'s)?\b,?\s*(?P<rest>.*)$"
)
NAMED_REL_START = re.compile(
    rf"^(?P<holder>[A-Z][a-z]+)'s\s+(?i:(?P<mod>{_MOD})(?P<rel>{_REL})),?\s+(?P<name>{_NAME})(?P<poss>'s)?\b,?\s*"
    rf"(?P<rest>.*)$"
)
APPOSITION = re.compile(rf"\b(?P<name>{_NAME}),\s+{_OWNER}\s+(?i:(?P<mod>{_MOD})(?P<rel>{_REL})),")
OWNER_REL = re.compile(rf"{_OWNER}\s+(?i:(?P<mod>{_MOD})(?P<rel>{_REL})),?\s+(?P<name>{_NAME})")
_BARE_APPOSITION = re.compile(rf"^({_NAME}),\s+(?:[Tt]he user's|[Mm]y|[Oo]ur|[A-Z][a-z]+'s)\s+[^,]+,\s+")
_PROPER = r"(?:the\s+)?(?P<org>[A-Z][\w&-]*(?:\s+(?:&\s+)?[A-Z][\w&-]*){0,3})"
# Homes and employers come from the update patterns of _updates (the sentence's own subject, now);
# these are the other places and organisations.
PLACES = [
    (re.compile(rf"\b(?:stud(?:y|ies|ied|ying))\s+at\s+{_PROPER}"), "studies at"),
    (re.compile(rf"\bmembers?\s+of\s+{_PROPER}"), "member of"),
]

# Lexicons for kind and salience.
SECOND_PERSON = re.compile(r"\b(?:you|your|yours|yourself|you're|you've|you'll|you'd)\b", re.IGNORECASE)
REVEALS = re.compile(r"\b(?:my|our|I'm|I am|I've|I have|I was|we're|we have)\b", re.IGNORECASE)
_PREFERENCE = re.compile(
    r"\b(?:lov(?:e|es|ed|ing)|(?<!looks )(?<!look )(?<!feel )(?<!feels )(?<!felt )(?<!seems )likes?|liked|"
    r"enjoy(?:s|ed)?|hate[sd]?|prefer(?:s|red)?|favou?rites?|fan of|can't stand|dislike[sd]?|passionate about)\b",
    re.IGNORECASE,
)
_PLAN = re.compile(
    r"\b(?:will|going to|gonna|plan(?:s|ning|ned)?|next (?:week|weekend|month|year|summer|spring|fall|autumn|"
    r"winter|time)|tomorrow|tonight|soon|upcoming|intend(?:s)?|hop(?:e|ing) to|about to|thinking of)\b|\w'll\b",
    re.IGNORECASE,
)
_EVENT = re.compile(
    r"\b(?:went|did|yesterday|last (?:week|weekend|month|year|night|summer|spring|fall|winter|time)|ago|"
    r"visited|attended|met|took|bought|finished|started|moved|saw|celebrated|graduated|joined|won|ran)\b"
    r"|\bI\s+(?:\w+ly\s+)?\w+ed\b",
    re.IGNORECASE,
)
_RELATIONSHIP = re.compile(rf"\b(?i:my|our)\s+(?i:{_MOD}(?:{_REL}))s?\b|\b(?i:{_REL}),?\s+[A-Z][a-z]+")
HEALTH = re.compile(
    r"\b(?:allerg\w*|diabet\w*|asthma|cancer|sick|illness|doctor|hospital\w*|diagnos\w*|medic\w*|surger\w*|"
    r"injur\w*|pregnan\w*|vegan|vegetarian|gluten|lactose|therap\w*|depress\w*|anxiety|disease|health\w*)\b",
    re.IGNORECASE,
)
WORK = re.compile(
    r"\b(?:work\w*|job|career|compan\w*|office|employ\w*|hired|promot\w*|salary|colleague|boss|engineer|"
    r"teacher|nurse|startup|business|profession\w*|intern\w*|retire\w*|student|universit\w*|college|degree)\b",
    re.IGNORECASE,
)
_ADVERB_RUN = "|".join(sorted(_ADVERBS))
# (pattern, suffix after the owner); None marks "I <verb>", whose verb gets a third-person ending
_FIRST_PERSON_RULES: list[tuple[re.Pattern[str], str | None]] = [
    (re.compile(pattern), suffix)
    for pattern, suffix in [
        (r"\bI\s*'m\b|\bI am\b", " is"),
        (r"\bI\s*'ve\b", " has"),
        (r"\bI\s*'d\b", " would"),
        (r"\bI\s*'ll\b", " will"),
        (rf"\bI\b((?:\s+(?:{_ADVERB_RUN}))*)\s+([a-z]+(?:'[a-z]+)?)\b", None),
        (r"\bI\b|\bme\b|\bmyself\b", ""),
        (r"\b[Mm]y\b|\bmine\b|\b[Oo]ur\b|\bours\b", "'s"),
        (r"\b[Ww]e\s*'re\b", " and {we} are"),
        (r"\b[Ww]e\s*'ve\b", " and {we} have"),
        (r"\b[Ww]e\s*'ll\b", " and {we} will"),
        (r"\b[Ww]e\s*'d\b", " and {we} would"),
        (r"\b[Ww]e\b|\bus\b", " and {we}"),
    ]
]


def content_words(text: str) -> list[str]:
    """Tokens that carry meaning: no stopwords, no single letters."""
    return [t for t in tokens(text) if t not in STOPWORDS and len(t) > 1]


def normalise(text: str) -> list[str]:
    """Tokens for comparing facts: lowercase, without filler adverbs ("now", "still")."""
    return list(_normalised(text))


# Memoised: consolidation compares every new sentence with each of the user's facts, so one fact's text is
# tokenised once per sentence of a batch otherwise. Pure functions of the text, bounded.
@lru_cache(maxsize=_MEMO)
def _normalised(text: str) -> tuple[str, ...]:
    return tuple(t for t in tokens(text) if t not in _ADVERBS)


@lru_cache(maxsize=_MEMO)
def _token_set(text: str) -> frozenset[str]:
    return frozenset(_normalised(text))


def jaccard(a: str, b: str) -> float:
    """Token-set Jaccard similarity of two texts (0 when both are empty)."""
    sa, sb = _token_set(a), _token_set(b)
    return len(sa & sb) / len(sa | sb) if sa | sb else 0.0


def ensure_period(text: str) -> str:
    """The text as a sentence: capitalised first letter and end punctuation."""
    text = text.strip()
    if not text:
        return text
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def has_first_person(text: str) -> bool:
    """Whether the sentence speaks in the first person (I, me, my, we, our ...)."""
    return bool(_FIRST_PERSON.search(text))


def third_person(verb: str) -> str:
    """Simple-present third person: "love" -> "loves", "watch" -> "watches", "was" stays."""
    if verb in _IRREGULAR:
        return _IRREGULAR[verb]
    past = (verb.endswith("ed") and not verb.endswith("eed")) or verb in {"agreed", "freed"}  # "need" is present
    if past or verb in _NO_INFLECT or verb in _ADVERBS or verb.endswith(("'t", "ly")) or not verb.isalpha():
        return verb
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and len(verb) > 2 and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def rewrite_first_person(text: str, owner: str = "the user", we: str = "others") -> str:
    """Rewrite a first-person sentence about ``owner``: "I love my dog" -> "the user loves the user's dog".

    ``owner`` is "the user" for the primary user or a name ("Melanie") for another speaker; "we" and "us"
    become "<owner> and <we>" ("Moni", "their family", "others": see :mod:`._companions`). The verb
    right after "I" (past adverbs like "really") gets a third-person ending. The first letter is left
    as is (the text may be the tail of a sentence); :func:`ensure_period` capitalises.
    """
    out = text.replace("\u2019", "'")
    for pattern, replacement in _rewrites(owner, we):
        out = pattern.sub(replacement, out)
    return out


def _rewrites(o: str, we: str) -> list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]]:
    def verb(m: re.Match[str]) -> str:
        return f"{o}{m.group(1)} {third_person(m.group(2))}"

    return [
        (pattern, f"{o}{suffix.format(we=we)}" if isinstance(suffix, str) else verb)
        for pattern, suffix in _FIRST_PERSON_RULES
    ]


def leading_name(sentence: str) -> tuple[str, bool] | None:
    """The capitalised name a sentence starts with, and whether an apposition ("Moni, my wife,") follows."""
    words = sentence.split()
    run: list[str] = []
    appositive = False
    for i, word in enumerate(words[:5]):
        core = word.rstrip(",.;:!?")
        core = core[:-2] if core.endswith("'s") else core
        if not (core == "&" or re.fullmatch(r"[A-Z][\w&.-]*", core)) or (run and core in STARTERS):
            break
        run.append(core)
        if core != word:
            if word.endswith(","):  # "Moni, my wife, ..." is an apposition; "Caroline, you ..." a vocative
                after = words[i + 1 : i + 4]
                appositive = bool(after) and after[0].lower() in {"my", "our"} and any(w.endswith(",") for w in after)
                if not appositive:
                    return None
            break
    if not run or run[0] in STARTERS or len(run) >= len(words):
        return None
    if [w.lower().strip(",") for w in words[len(run) : len(run) + 2]] in (["and", "i"], ["and", "me"]):
        return None
    name = " ".join(run).strip("&-. ")
    return (name, appositive) if name else None


def strip_greeting(raw: str) -> str:
    """The sentence without a leading greeting; "" for thanks and goodbyes."""
    text = re.sub(r"\bi\b", "I", raw.strip())
    if _THANKS.match(text):
        return ""
    previous = None
    while previous != text:
        previous, text = text, _GREETING.sub("", text, count=1).strip()
    return text


def kind_of(sentence: str) -> Kind:
    """preference > plan > event > relationship > fact, by marker words."""
    kinds: tuple[tuple[re.Pattern[str], Kind], ...] = ((_PREFERENCE, "preference"), (_PLAN, "plan"), (_EVENT, "event"))
    for pattern, kind in kinds:
        if pattern.search(sentence):
            return kind
    return "relationship" if _RELATIONSHIP.search(sentence) else "fact"


def salience_of(sentence: str, kind: str, words: Sequence[str]) -> float:
    """Health 0.9, family 0.85, work and preferences 0.8, plans and events 0.6, else 0.5 (0.3-0.4 if short)."""
    if HEALTH.search(sentence):
        return 0.9
    if kind == "relationship" or _RELATIONSHIP.search(sentence):
        return 0.85
    if WORK.search(sentence) or kind == "preference":
        return 0.8
    if kind in {"plan", "event"}:
        return 0.6
    return 0.3 if len(words) < 2 else 0.4 if len(words) == 2 else 0.5


@lru_cache(maxsize=_MEMO)
def strip_apposition(text: str) -> str:
    """The sentence without its apposition: "Moni, the user's wife, is ..." -> "Moni is ..."."""
    return _BARE_APPOSITION.sub(r"\1 ", text)


def subject_of(raw: str, aliases: Mapping[str, str]) -> str | None:
    """The canonical subject a name stands for ("Moni" -> "moni", an alias of the user -> "user"), or None."""
    try:
        return canonical_subject(raw, aliases=aliases)
    except InvalidSubjectError:
        return None


def user_aliases(user_names: Iterable[str]) -> dict[str, str]:
    """Each display name of the primary user, and its first word, standing for "user"."""
    names = {" ".join(n.lower().split()) for n in user_names if n.strip()}
    return {key: USER for n in names for key in (n, n.split()[0])}


def display_name(subject: str) -> str:
    """A subject as it is written in prose: "acme-corp" -> "Acme Corp"."""
    return " ".join(part.capitalize() for part in subject.split("-"))
