"""A question about "the user" asked in the first person: "Where does the user
work?" is "Where do I work?", "用户多大岁数了？" is "我多大岁数了？".

The memories are one person's, the user's, and they name that person in more
than one way: a memory extractor writes "The user lives in Paddington" on one
day and "Priya drives a RAV4" on another, 用户… and 老周… alike. A question
that says "the user" then matched, on the keyword side, only the memories that
say so, and every one of them ("The user has mild asthma…") outranked the
memory that answers it ("Priya spends her workdays running blood tests…"): in
the seventh paraphrase set, half of the questions about "the user" missed
(benchmarks/README.md, "Thirty-seventh session"). In the first person the
question holds no word of how a memory names the user ("I", "my" are function
words to the keyword side; the models read "I" as the one the memories are
about), as a first-person question always did.

Only "the user" / "user's" / 用户 naming the person are read so: not "user
name", "user manual", 用户名 or 用户体验, which are things.
"""

from __future__ import annotations

import re

__all__ = ["in_first_person"]

#: What "user" qualifies when it names a thing, not the person: "user name", "user manual".
_THING = (
    r"(?!\s+(?:names?|manuals?|guides?|accounts?|ids?|interfaces?|agreements?|base|groups?|"
    r"experiences?|stor(?:y|ies)|research|settings?|profiles?|data|login|password)\b)"
)
_USERS = re.compile(r"\b(?:the\s+)?users?['’]s?(?=\s)" + _THING, re.IGNORECASE | re.ASCII)
_USER = re.compile(r"\b(?:the\s+)?user\b(?!['’])" + _THING, re.IGNORECASE | re.ASCII)
_USER_DE = re.compile(r"\b(?:the\s+)?user\s*(?=的)", re.IGNORECASE | re.ASCII)
#: The verb after or before "I" in its first-person form.
_VERB_AFTER_I = re.compile(r"\bI\s+(is|has|does|was|likes|lives|works)\b")
_VERB_BEFORE_I = re.compile(r"\b(does|is|has)\s+I\b", re.IGNORECASE)
_FIRST_PERSON = {"is": "am", "has": "have", "does": "do", "likes": "like", "lives": "live", "works": "work"}
#: 用户 naming a thing: 用户名 (a username), 用户体验, 用户协议…
_HAN_USER = re.compile(
    "用户(?!名|体验|协议|群|量|数|界面|手册|账|帐|信息|数据|隐私|画像|需求|反馈|服务|中心|评价|增长|规模|权限|设置)"
)


def in_first_person(query: str) -> str:
    """``query`` with "the user" as "I" / "my" and 用户 as 我; ``query`` itself when
    it names no user."""
    lower = query.lower()
    if "user" in lower:
        query = _in_english(query)
    if "用户" in query:
        query = _HAN_USER.sub("我", query)
    return query


def _in_english(query: str) -> str:
    query = _USER_DE.sub("我", query)  # "user 的工作": a Chinese question's "user"
    query = _USERS.sub(lambda m: _cased("my", m), query)
    query = _USER.sub(lambda m: "I", query)
    query = _VERB_BEFORE_I.sub(lambda m: _cased(_FIRST_PERSON[m.group(1).lower()], m) + " I", query)
    return _VERB_AFTER_I.sub(lambda m: "I " + _FIRST_PERSON.get(m.group(1), m.group(1)), query)


def _cased(word: str, found: re.Match[str]) -> str:
    """``word`` capitalised when what it replaces starts the query."""
    return word.capitalize() if found.start() == 0 else word
