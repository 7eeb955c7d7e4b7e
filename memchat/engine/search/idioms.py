"""Idioms whose words say something else to a search: "what do I do for a living?"
asks about a job, not about where anyone lives.

Hybrid search's keyword side stems the question's words, and the token
re-rank compares word pieces: both read "living" as "live", so "What do I do
for a living?" ranked "Owen lives in a terraced house in Canton" (0.55) above
every memory about a job, in four of the five paraphrase sets
(benchmarks/README.md, "Thirty-sixth session"). ``in_plain_words`` says such an idiom
in plain words ("…do as a job", "how do I work?"), which the models read as well
and the keyword side no longer mistakes. A closed list: a word is replaced only
inside its idiom, so "Where does my sister live?" and "living room" keep theirs.

"How old is my granddaughter?" asks for an age, not for anything old: its "old"
matched "his old trawler", "an old crewmate" and "old habit", and the memory
giving the age ("孙女朵朵今年七岁") came fourth (benchmarks/README.md, "Forty-first
session"). It is asked as "what age is my granddaughter?".
"""

from __future__ import annotations

import re

__all__ = ["in_plain_words"]

#: What "living" qualifies when it is no idiom: "make a living room comfy".
_COMPOUND = (
    r"(?!\s+(?:rooms?|spaces?|areas?|quarters|wages?|costs?|expenses?|standards?|arrangements?"
    r"|situations?|conditions?|will|wills|things?|beings?|creatures?|memory|legends?|trusts?)\b)"
)
#: "do for a living", "write for a living": the work someone does as a job.
_FOR_A_LIVING = re.compile(r"\bfor\s+a\s+living\b" + _COMPOUND, re.IGNORECASE | re.ASCII)
#: "make a living", "earns his living": working (the models read "earn money" no
#: better than "living"; "work" they read as a job).
_EARN_A_LIVING = re.compile(
    r"\b(make|makes|made|making|earn|earns|earned|earning)"
    r"\s+(?:a|my|his|her|their|our|your|one['’]s)\s+living\b" + _COMPOUND,
    re.IGNORECASE | re.ASCII,
)

#: "How old is she?", "how old's the grandkid", "how old are the twins": an age.
_HOW_OLD = re.compile(r"\bhow\s+old(?:['’]s\b|\b)", re.IGNORECASE | re.ASCII)


def in_plain_words(query: str) -> str:
    """``query`` with each idiom of the list above in plain words; ``query`` itself
    when it holds none."""
    lower = query.lower()
    if "old" in lower:
        query = _HOW_OLD.sub(_what_age, query)
    if "living" not in lower:  # most queries stop here
        return query
    query = _FOR_A_LIVING.sub("as a job", query)
    return _EARN_A_LIVING.sub(_work, query)


def _what_age(found: re.Match[str]) -> str:
    words = "What age" if found[0][0] == "H" else "what age"
    return f"{words} is" if found[0].endswith(("'s", "’s")) else words


#: "work" in the form of the verb it replaces.
_WORK_FORMS = {"make": "work", "earn": "work", "makes": "works", "earns": "works", "made": "worked"}


def _work(found: re.Match[str]) -> str:
    verb = found.group(1).lower()
    if verb.endswith("ing"):
        return "working"
    return _WORK_FORMS.get(verb, "worked")
