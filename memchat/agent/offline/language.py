"""Text helpers of the offline model: language, clauses, third person, pieces."""

from __future__ import annotations

import math
import re

from .rules import ADVERBS, PAST_VERBS

HAN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
PUNCTUATION = " .!?,;:。！？，；：、"


def is_chinese(text: str) -> bool:
    return bool(HAN.search(text))


def clean(fragment: str) -> str:
    return fragment.strip().strip(PUNCTUATION).strip()


def split_clauses(text: str) -> list[str]:
    """Sentences and "…, and I …" parts: "I'm vegetarian and I play the cello" is two.
    A Chinese part that continues without a subject ("…，也会打鼓") gets "我" back."""
    parts = re.split(r"[.!;\n。！；，,]+|\s+(?:and|but)\s+(?=(?:i|i'm|i've|my)\b)", text, flags=re.I)
    clauses: list[str] = []
    for part in (p.strip() for p in parts if p and p.strip()):
        if clauses and is_chinese(part) and re.match(r"^(?:也|还|并且|而且)", part) and "我" not in part[:1]:
            part = "我" + re.sub(r"^(?:也|还|并且|而且)", "", part)
        clauses.append(part)
    return clauses


def third_person_verb(verb: str) -> str:
    """play → plays, go → goes, study → studies, have → has (past forms stay)."""
    lower = verb.lower()
    if lower in PAST_VERBS or lower.endswith("ed"):
        return verb
    if lower == "have":
        return "has"
    if lower in ("do", "go"):
        return verb + "es"
    if lower in ("can", "can't", "cannot", "will", "won't", "should", "must", "may", "might"):
        return verb
    if re.search(r"(s|sh|ch|x|z)$", lower):
        return verb + "es"
    if re.search(r"[^aeiou]y$", lower):
        return verb[:-1] + "ies"
    return verb + "s"


_CONTRACTIONS = [
    (r"^i am\b", "User is"), (r"^i'm\b", "User is"), (r"^i've\b", "User has"), (r"^i have\b", "User has"),
    (r"^i was\b", "User was"), (r"^i don't\b", "User doesn't"), (r"^i do not\b", "User does not"),
    (r"^i didn't\b", "User didn't"), (r"^i can't\b", "User can't"), (r"^i cannot\b", "User cannot"),
    (r"^i can\b", "User can"), (r"^i won't\b", "User won't"), (r"^i'll\b", "User will"),
    (r"^i never\b", "User never"), (r"^i no longer\b", "User no longer"), (r"^i\b", "User"),
    (r"^my\b", "User's"), (r"\bmy\b", "their"), (r"\bmine\b", "theirs"), (r"\bmyself\b", "themselves"),
    (r"\bme\b", "them"), (r"\bi'm\b", "they're"), (r"\bi\b", "they"),
]  # fmt: skip


#: "User [usually|no longer …] <verb>": the verb to put in the third person.
_SUBJECT_VERB = re.compile(
    r"User ((?:(?:no longer|" + "|".join(sorted(ADVERBS, key=len, reverse=True)) + r") )*)([\w'-]+)", re.I
)
#: Words after "User" that are already right ("User is …", "User doesn't …").
_NOT_VERBS = frozenset({
    "is", "was", "has", "does", "doesn't", "did", "didn't", "can't", "cannot", "can", "won't", "will",
    "never", "they're", "would", "could", "should", "must", "may", "might",
})  # fmt: skip


def third_person(fragment: str, chinese: bool, subject: str = "") -> str:
    """A statement about the user from "I …" / "my …" / "我…": "I usually run 5k" →
    "User usually runs 5k", "my sister is Ana" → "User's sister is Ana", "我的车" → "用户的车".
    ``subject`` replaces "User"/"用户" (the user's name, once known)."""
    text = clean(fragment)
    if chinese:
        text = re.sub(r"^我的", "用户的", re.sub(r"^我(?!的)", "用户", text))
        text = text.replace("我的", "用户的")
        return text.replace("用户", subject, 1) if subject and text.startswith("用户") else text
    for pattern, repl in _CONTRACTIONS:
        text = re.sub(pattern, repl, text, flags=re.I)
    match = _SUBJECT_VERB.match(text)
    if match and match.group(2).lower() not in _NOT_VERBS:
        start = match.start(2)
        text = text[:start] + third_person_verb(match.group(2)) + text[match.end(2) :]
    if subject:
        text = re.sub(r"^User\b", subject, text)
    return text[:1].upper() + text[1:]


def chunks(text: str) -> list[str]:
    """Word-sized pieces (two characters at a time for CJK), as a model streams."""
    return re.findall(
        r"[\u3400-\u9fff\uf900-\ufaff\u3000-\u303f\uff00-\uffef]{1,2}|[^\s\u3400-\u9fff]+\s*|\s+", text
    )


def token_estimate(piece: str) -> int:
    """Roughly how many tokens a model's tokenizer makes of ``piece``: a CJK
    character each, about four characters of other text each."""
    han = len(HAN.findall(piece))
    rest = len(piece.strip()) - han
    return max(1, han + math.ceil(rest / 4)) if piece.strip() else 1
