"""Sentence helpers for the offline rules model: splitting, tokens and first-person rewriting.

Pure functions over strings, used by :mod:`pipelines.rules`. Rewriting only swaps pronouns and
adds third-person verb endings, so every content word of a sentence survives (recall needs them).
"""

from __future__ import annotations

import re

__all__ = [
    "STARTERS",
    "STOPWORDS",
    "content_words",
    "ensure_period",
    "has_first_person",
    "jaccard",
    "leading_name",
    "normalise",
    "rewrite_first_person",
    "split_sentences",
    "strip_greeting",
    "third_person",
    "tokens",
]

_PROTECTED = re.compile(r"\b(Mr|Mrs|Ms|Dr|Prof|St|Jr|Sr|vs|e\.g|i\.e|approx)\.", re.IGNORECASE)
_MARK = "\u2063"  # an invisible separator stands in for a protected full stop while splitting
_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\s*\n+\s*")
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

STOPWORDS = frozenset(
    ["a", "an", "the", "and", "or", "but", "so", "if", "then", "than", "that", "this", "these", "those", "it", "its", "it's", "is", "am", "are", "was", "were", "be", "been", "being", "i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "myself", "we", "we're", "we've", "our", "ours", "us", "you", "you're", "your", "yours", "he", "him", "his", "she", "her", "they", "them", "their", "there", "here", "what", "when", "where", "why", "how", "who", "whom", "which", "to", "of", "in", "on", "at", "by", "for", "with", "from", "about", "as", "into", "onto", "over", "under", "up", "down", "out", "off", "again", "just", "also", "too", "very", "really", "quite", "much", "many", "more", "most", "some", "any", "all", "both", "each", "few", "such", "no", "not", "nor", "only", "own", "same", "can", "could", "will", "would", "shall", "should", "may", "might", "must", "do", "does", "did", "doing", "done", "have", "has", "had", "having", "get", "got", "go", "going", "gone", "lot", "lots", "thing", "things", "stuff", "kind", "sort", "yes", "yeah", "ok", "okay", "sure", "oh", "hi", "hello", "hey", "thanks", "thank", "please", "well", "still", "even", "ever", "now", "today", "anyway", "actually", "maybe", "great", "good", "nice", "cool", "awesome", "amazing", "wonderful", "lovely", "glad", "sounds", "sound", "wow", "haha", "lol", "totally", "definitely", "absolutely", "interesting", "user", "user's", "said", "asked", "one"]
)

_ADVERBS = frozenset(
    ["really", "also", "just", "still", "always", "never", "usually", "often", "sometimes", "absolutely", "totally", "definitely", "actually", "recently", "finally", "already", "only", "even", "mostly", "truly", "generally", "currently", "now", "simply", "certainly", "probably", "almost", "nearly", "rarely", "seldom", "occasionally", "honestly", "literally", "kinda", "sorta"]
)
_NO_INFLECT = frozenset(
    ["can", "could", "will", "would", "shall", "should", "may", "might", "must", "was", "were", "did", "had", "got", "made", "saw", "took", "came", "ran", "bought", "ate", "drank", "met", "left", "felt", "thought", "told", "said", "found", "gave", "knew", "began", "wrote", "spent", "lost", "won", "sent", "built", "taught", "brought", "caught", "fought", "heard", "held", "kept", "paid", "sold", "sat", "slept", "spoke", "stood", "swam", "understood", "wore", "grew", "flew", "drove", "rode", "broke", "chose", "fell", "forgot", "hid", "became", "went", "used", "too", "and", "or", "both", "as", "to", "at", "in", "on", "for", "with", "but", "so", "the", "a", "an", "ought"]
)
_IRREGULAR = {
    "am": "is", "be": "is", "have": "has", "do": "does", "go": "goes", "don't": "doesn't",
    "haven't": "hasn't", "ain't": "isn't", "'m": "is",
}  # fmt: skip
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|me|my|mine|myself|[Ww]e|[Ww]e're|[Ww]e've|our|ours|us)\b|^(?:My|Our)\b")
STARTERS = frozenset(
    ["I", "I'm", "My", "Our", "We", "You", "Your", "He", "She", "His", "Her", "They", "Their", "It", "Its", "The", "A", "An", "This", "That", "These", "Those", "There", "Here", "What", "When", "Where", "Why", "How", "Who", "Which", "Yesterday", "Today", "Tomorrow", "Tonight", "Last", "Next", "Also", "And", "But", "So", "Oh", "Well", "Yes", "No", "Yeah", "Maybe", "Actually", "Honestly", "Anyway", "Just", "Thanks", "Thank", "Hi", "Hello", "Hey", "Sure", "Ok", "Okay", "Great", "Good", "Nice", "Wow", "Cool", "Awesome", "Lol", "Every", "Some", "Most", "All", "After", "Before", "During", "Since", "If", "As", "At", "In", "On", "For", "With", "Not", "Sorry", "Please", "Let", "Recently", "Lately", "Sometimes", "Usually", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December", "Then", "Now", "Once", "Speaking", "Both", "Any", "One"]
)
_GREETING = re.compile(
    r"^(?:(?:hi|hello|hey|hiya|howdy|greetings)(?:\s+there|\s+[a-z]{2,}(?=[,!.]))?|good (?:morning|afternoon|evening)"
    r"|(?:yes|yeah|yep|no|nope|ok|okay|sure|great|cool|nice|wow|oh|ah|haha|lol|well|aw+|omg)(?=[,!.]))[\s,!.]*",
    re.IGNORECASE,
)
_THANKS = re.compile(r"^(?:thanks|thank you|thx|cheers|bye|goodbye|see you|take care|talk soon)\b", re.IGNORECASE)


def split_sentences(text: str) -> list[str]:
    """Split text into stripped sentences, keeping their end punctuation ("Dr. Ho" is not a boundary)."""
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    protected = _PROTECTED.sub(lambda m: m.group(0)[:-1] + _MARK, text)
    parts = (p.replace(_MARK, ".").strip() for p in _BOUNDARY.split(protected))
    return [" ".join(p.split()) for p in parts if p and p.strip(" .!?,;:-")]


def tokens(text: str) -> list[str]:
    """Lowercase word tokens; an apostrophe suffix stays attached ("user's")."""
    return _TOKEN.findall(text.lower().replace("\u2019", "'"))


def content_words(text: str) -> list[str]:
    """Tokens that carry meaning: no stopwords, no single letters."""
    return [t for t in tokens(text) if t not in STOPWORDS and len(t) > 1]


def normalise(text: str) -> list[str]:
    """Tokens for comparing facts: lowercase, without filler adverbs ("now", "still")."""
    return [t for t in tokens(text) if t not in _ADVERBS]


def jaccard(a: str, b: str) -> float:
    """Token-set Jaccard similarity of two texts (0 when both are empty)."""
    sa, sb = set(normalise(a)), set(normalise(b))
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
    if verb in _NO_INFLECT or verb in _ADVERBS or verb.endswith(("ed", "'t", "ly")) or not verb.isalpha():
        return verb
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and len(verb) > 2 and verb[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def rewrite_first_person(text: str, owner: str = "the user") -> str:
    """Rewrite a first-person sentence about ``owner``: "I love my dog" -> "the user loves the user's dog".

    ``owner`` is "the user" for the primary user or a name ("Melanie") for another speaker.
    Verbs right after "I" (past adverbs like "really") get a third-person ending. The first letter is
    left as is (the text may be the tail of a sentence); :func:`ensure_period` capitalises.
    """
    o = owner
    adverbs = "|".join(sorted(_ADVERBS))
    rules: list[tuple[str, str | None]] = [
        (r"\bI\s*'m\b|\bI am\b", f"{o} is"),
        (r"\bI\s*'ve\b", f"{o} has"),
        (r"\bI\s*'d\b", f"{o} would"),
        (r"\bI\s*'ll\b", f"{o} will"),
        (rf"\bI\b((?:\s+(?:{adverbs}))*)\s+([a-z]+(?:'[a-z]+)?)\b", None),
        (r"\bI\b", o),
        (r"\b[Mm]y\b|\bmine\b|\b[Oo]ur\b|\bours\b", f"{o}'s"),
        (r"\bmyself\b", "themselves"),
        (r"\bme\b", o),
        (r"\b[Ww]e\s*'re\b", f"{o} and others are"),
        (r"\b[Ww]e\s*'ve\b", f"{o} and others have"),
        (r"\b[Ww]e\s*'ll\b", f"{o} and others will"),
        (r"\b[Ww]e\b|\bus\b", f"{o} and others"),
    ]
    out = text.replace("\u2019", "'")
    for pattern, replacement in rules:
        if replacement is None:
            out = re.sub(pattern, lambda m: f"{o}{m.group(1)} {third_person(m.group(2))}", out)
        else:
            out = re.sub(pattern, replacement, out)
    return out


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
                appositive = len(words) > i + 1 and words[i + 1].lower() in {"my", "our"}
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
