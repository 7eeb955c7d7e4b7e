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

The user's name is read so too ("王芳 职业", "What does Tomás do?"), for the same
reason: the name matched only the memories that use it. Which name is the
user's, the memories say (``the_user_named``): one at least a fifth of them
hold, and in English only where they also say "user". A store of two people's
conversations (LoCoMo's) never does, and there a name says whom a question is
about. 用户 is no index term: a Chinese name must be no one's relative in the
memories holding it (``bridge.names_the_user``, asked by the caller).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from itertools import pairwise

from .bridge import is_name
from .tokens import _HAN_RE, FUNCTION_WORDS, SURNAMES, build_search_tokens, is_familiar_name, jieba_module

__all__ = ["USER_WORD", "as_the_user", "in_first_person", "index_terms", "name_candidates", "the_user_named"]

#: What "user" qualifies when it names a thing, not the person: "user name", "user manual".
_THING = (
    r"(?!\s+(?:names?|manuals?|guides?|accounts?|ids?|interfaces?|agreements?|base|groups?|"
    r"experiences?|stor(?:y|ies)|research|settings?|profiles?|data|login|password)\b)"
)
_USERS = re.compile(r"\b(?:the\s+)?users?['’]s?(?=\s)" + _THING, re.IGNORECASE | re.ASCII)
_USER = re.compile(r"\b(?:the\s+)?user\b(?!['’])" + _THING, re.IGNORECASE | re.ASCII)
_USER_DE = re.compile(r"\b(?:the\s+)?user\s*(?=的)", re.IGNORECASE | re.ASCII)
#: The verb after or before "I" in its first-person form. ASCII case only: Unicode's
#: read "İs İ" (a Turkish capital I) as "is I", a verb the table does not hold.
_VERB_AFTER_I = re.compile(r"\bI\s+(is|has|does|was|likes|lives|works)\b")
_VERB_BEFORE_I = re.compile(r"\b(does|is|has)\s+I\b", re.IGNORECASE | re.ASCII)
_FIRST_PERSON = {"is": "am", "has": "have", "does": "do", "likes": "like", "lives": "live", "works": "work"}
#: 用户 naming a thing: 用户名 (a username), 用户体验, 用户协议…
_HAN_USER = re.compile(
    "用户(?!名|体验|协议|群|量|数|界面|手册|账|帐|信息|数据|隐私|画像|需求|反馈|服务|中心|评价|增长|规模|权限|设置)"
)


def in_first_person(query: str) -> str:
    """``query`` with "the user" as "I" / "my" and 用户 as 我; ``query`` itself when
    it names no user, or nothing else (``_asks_more``)."""
    asked = query
    if "user" in asked.lower():
        asked = _in_english(asked)
    if "用户" in asked:
        asked = _HAN_USER.sub("我", asked)
    return asked if _asks_more(asked) else query


#: What a question says of the user once in the first person.
_I = re.compile(r"\b(?:I|me|my|mine)\b|我的?", re.IGNORECASE)


def _asks_more(query: str) -> bool:
    """Whether ``query`` asks about more than the user: "user", "Priya" alone (typed
    in the memory panel's filter) look for the word, not for "I"."""
    return bool(re.search(r"\w", _I.sub("", query)))


def _in_english(query: str) -> str:
    query = _USER_DE.sub("我", query)  # "user 的工作": a Chinese question's "user"
    query = _USERS.sub(lambda m: _cased("my", m), query)
    return _verbs_of_i(_USER.sub(lambda m: "I", query))


def _verbs_of_i(query: str) -> str:
    """``query`` with the verbs beside an "I" put in for a third person in the first
    person ("does I" → "do I", "I has" → "I have")."""
    query = _VERB_BEFORE_I.sub(lambda m: _cased(_FIRST_PERSON[m.group(1).lower()], m) + " I", query)
    return _VERB_AFTER_I.sub(lambda m: "I " + _FIRST_PERSON.get(m.group(1), m.group(1)), query)


#: The word the memories call the user by, in the keyword index (用户 is a stopword there).
USER_WORD = "user"
#: A name most memories hold is the user's (a relative's is rarer)...
USER_NAME_SHARE = 0.2
#: ... in English, when the memories call the user "the user" too (a store of two
#: people's conversations, LoCoMo's, never does: there a name says whom a question
#: is about).
USER_WORD_SHARE = 0.1
_LATIN_NAME = re.compile(r"\b([^\W\d_][^\W\d_-]*)(?:['’]s)?\b")
#: Capitalised words at the start of a question that name no one.
_NOT_NAMES = FUNCTION_WORDS | {"tell", "remind", "show", "please", "hey", "hi", "ok", "okay", "user"}


def name_candidates(query: str) -> tuple[str, ...]:
    """The words of ``query`` that may be the user's name: capitalised words
    ("Tomás", "Priya's", lower-cased as the keyword index holds them), and Chinese
    words of a surname and a given name (王芳, 周建国) or a familiar name (老周)."""
    names: list[str] = []
    for word in _LATIN_NAME.findall(query):
        if is_name(word) and word.lower() not in _NOT_NAMES:
            names.append(word.lower())
    if _HAN_RE.search(query):
        tokens = build_search_tokens(query)
        for token in tokens:
            if 2 <= len(token) <= 3 and _HAN_RE.match(token) and _is_han_name(token):
                names.append(token)
        names.extend(_split_names(query, set(tokens)))
    return tuple(dict.fromkeys(names))


def _is_han_name(token: str) -> bool:
    return token[0] in SURNAMES or is_familiar_name(token)


def _split_names(query: str, tokens: set[str]) -> list[str]:
    """Names jieba cuts in two, a surname and a given name it reads as another word
    (周 + 建国, 刘 + 秀英): the index holds the given name alone (``index_terms``)."""
    jieba = jieba_module()
    if jieba is None:
        return []
    pieces = jieba.lcut(query)
    return [
        first + given
        for first, given in pairwise(pieces)
        if len(first) == 1 and first in SURNAMES and len(given) == 2 and given in tokens
    ]


def index_terms(name: str) -> tuple[str, ...]:
    """The keyword index's words for a name from :func:`name_candidates`: the name,
    and for a Chinese surname and two-character given name the given name alone,
    which memories call the same person by (陈丽华, 丽华). For a name jieba cuts in
    two (周建国), the given name it keeps (建国) is both."""
    if len(name) == 3 and _HAN_RE.match(name) and name[0] in SURNAMES:
        given = name[1:]
        return (given,) if name not in build_search_tokens(name) else (name, given)
    return (name,)


def the_user_named(names: tuple[str, ...], df: Mapping[str, int], count: int) -> str | None:
    """Which of ``names`` is the user's (index tokens; ``df``: the memories holding
    each, and ``USER_WORD``, of ``count``): one that at least ``USER_NAME_SHARE``
    of the memories hold (an English one only where ``USER_WORD_SHARE`` of them
    also say "user"), the most held first; None for no such name."""
    if count <= 0:
        return None
    said_user = df.get(USER_WORD, 0) >= USER_WORD_SHARE * count
    shares = {name: sum(df.get(term, 0) for term in index_terms(name)) for name in names}
    held = [
        (share, name)
        for name, share in shares.items()
        if share >= USER_NAME_SHARE * count and (said_user or _HAN_RE.match(name))
    ]
    return max(held)[1] if held else None


def as_the_user(query: str, name: str) -> str:
    """``query`` with the user's ``name`` (as :func:`name_candidates` gave it) in the
    first person: "What does Tomás …" asks "What do I …", "王芳 职业" asks "我 职业"."""
    if _HAN_RE.match(name):
        asked = query.replace(name, "我")
    else:
        pattern = re.compile(r"\b" + re.escape(name) + r"(['’]s)?\b", re.IGNORECASE)
        asked = _verbs_of_i(pattern.sub(lambda m: _cased("my", m) if m.group(1) else "I", query))
    return asked if _asks_more(asked) else query


def _cased(word: str, found: re.Match[str]) -> str:
    """``word`` capitalised when what it replaces starts the query."""
    return word.capitalize() if found.start() == 0 else word
