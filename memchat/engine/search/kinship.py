"""A relative named in two steps, asked about by the one word people use for
them: "my husband's mother" is "my mother-in-law", "我老公的妈妈" is "我婆婆".

A memory names the relative as the user would in speech ("周海燕的婆婆养了一只
八哥"); a question often composes them ("我老公的妈妈有什么小动物？"). The
models do not compose kinship: the memories that name the husband ranked
above the one about his mother. ``in_one_word`` gives the question with the
composed word in place of the two steps, asked beside the question as written
(a memory may compose them too: "Tom's mother Joan…"). A closed table of
relations, first person only ("my", "我", "用户的"), so other questions are
ranked as before.

The first step may be a name the memories give a relative ("Declan's mam",
"老陈的妈妈"): ``named_relative`` finds it, and when a memory says who that is to
the user ("Nora's husband Declan", bridge.relation_of), the relative has one
word too ("my mother-in-law").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .bridge import HAN_RE, RELATIONS

__all__ = ["FIRST_STEPS", "NamedRelative", "in_one_word", "named_relative"]

#: The relation words of engine/search/bridge.py that name no spouse (yet).
_NOT_MARRIED = frozenset(
    {"boyfriend", "fiance", "fiancé", "男朋友", "男友", "未婚夫"}
    | {"girlfriend", "fiancee", "fiancée", "女朋友", "女友", "未婚妻"}
)
#: A Chinese sibling word names the elder or the younger; English does not.
_ELDER_OR_YOUNGER = {
    "姐姐": "older sister",
    "大姐": "older sister",
    "二姐": "older sister",
    "妹妹": "younger sister",
    "小妹": "younger sister",
    "哥哥": "older brother",
    "大哥": "older brother",
    "二哥": "older brother",
    "弟弟": "younger brother",
    "小弟": "younger brother",
    "姐": "older sister",
    "妹": "younger sister",
    "哥": "older brother",
    "弟": "younger brother",
}
_SIBLING = {step: step.split()[1] for step in _ELDER_OR_YOUNGER.values()}


#: The relations a step may be.
_STEP_GROUPS = ("husband", "wife", "partner", "mother", "father", "son", "daughter", "sister", "brother")


def _steps() -> dict[str, tuple[str, ...]]:
    """The words of each step: the bridge's relation words (one list of them)."""
    steps = {
        group: tuple(w for w in RELATIONS[group] if w not in _NOT_MARRIED and w not in _ELDER_OR_YOUNGER)
        for group in _STEP_GROUPS
    }
    for word, step in _ELDER_OR_YOUNGER.items():
        steps[step] = (*steps.get(step, ()), word)
    return steps


_STEPS = _steps()
_SISTER = ("sister", "older sister", "younger sister")
_BROTHER = ("brother", "older brother", "younger brother")

#: (first step, second step) → the one word: English, then Chinese (synonyms after
#: the first). A first step of one language gets its own language's word.
_ONE_WORD: dict[tuple[str, str], tuple[str, str]] = {
    ("husband", "mother"): ("mother-in-law", "婆婆"),
    ("husband", "father"): ("father-in-law", "公公"),
    ("wife", "mother"): ("mother-in-law", "岳母、丈母娘"),
    ("wife", "father"): ("father-in-law", "岳父、老丈人"),
    # A partner is a husband or a wife: either word.
    ("partner", "mother"): ("mother-in-law", "婆婆、岳母、丈母娘"),
    ("partner", "father"): ("father-in-law", "公公、岳父、老丈人"),
    ("partner", "sister"): ("sister-in-law", "小姑子、大姑子、小姨子、大姨子"),
    ("partner", "brother"): ("brother-in-law", "小叔子、大伯子、小舅子、大舅子"),
    ("mother", "mother"): ("grandmother, grandma", "外婆、姥姥"),
    ("mother", "father"): ("grandfather, grandpa", "外公、姥爷"),
    ("father", "mother"): ("grandmother, grandma", "奶奶"),
    ("father", "father"): ("grandfather, grandpa", "爷爷"),
    ("son", "wife"): ("daughter-in-law", "儿媳妇"),
    ("daughter", "husband"): ("son-in-law", "女婿"),
    ("son", "son"): ("grandson", "孙子"),
    ("son", "daughter"): ("granddaughter", "孙女"),
    ("daughter", "son"): ("grandson", "外孙"),
    ("daughter", "daughter"): ("granddaughter", "外孙女"),
    ("mother", "sister"): ("aunt", "姨妈、小姨"),
    ("father", "sister"): ("aunt", "姑姑"),
    ("mother", "brother"): ("uncle", "舅舅"),
    ("father", "brother"): ("uncle", "叔叔、伯伯"),
    ("husband", "sister"): ("sister-in-law", "小姑子、大姑子"),
    ("wife", "sister"): ("sister-in-law", "小姨子、大姨子"),
    ("husband", "brother"): ("brother-in-law", "小叔子、大伯子"),
    ("wife", "brother"): ("brother-in-law", "小舅子、大舅子"),
    ("older sister", "husband"): ("brother-in-law", "姐夫"),
    ("younger sister", "husband"): ("brother-in-law", "妹夫"),
    ("sister", "husband"): ("brother-in-law", "姐夫、妹夫"),
    ("older brother", "wife"): ("sister-in-law", "嫂子"),
    ("younger brother", "wife"): ("sister-in-law", "弟媳"),
    ("brother", "wife"): ("sister-in-law", "嫂子、弟媳"),
}
for _first in _SISTER:
    _ONE_WORD[(_first, "son")] = ("nephew", "外甥")
    _ONE_WORD[(_first, "daughter")] = ("niece", "外甥女")
for _first in _BROTHER:
    _ONE_WORD[(_first, "son")] = ("nephew", "侄子")
    _ONE_WORD[(_first, "daughter")] = ("niece", "侄女")
# Where Chinese has a word for the elder and one for the younger.
_ONE_WORD.update(
    {
        ("husband", "older sister"): ("sister-in-law", "大姑子"),
        ("husband", "younger sister"): ("sister-in-law", "小姑子"),
        ("wife", "older sister"): ("sister-in-law", "大姨子"),
        ("wife", "younger sister"): ("sister-in-law", "小姨子"),
        ("husband", "older brother"): ("brother-in-law", "大伯子"),
        ("husband", "younger brother"): ("brother-in-law", "小叔子"),
        ("wife", "older brother"): ("brother-in-law", "大舅子"),
        ("wife", "younger brother"): ("brother-in-law", "小舅子"),
        ("father", "older brother"): ("uncle", "伯伯"),
        ("father", "younger brother"): ("uncle", "叔叔"),
    }
)
for (_first, _second), _words in list(_ONE_WORD.items()):
    # A second step in Chinese names the elder or the younger ("我老公的姐姐"): the
    # same word as the English "sister".
    for _chinese, _english in _SIBLING.items():
        if _english == _second:
            _ONE_WORD.setdefault((_first, _chinese), _words)

_RELATION_OF = {word: relation for relation, words in _STEPS.items() for word in words}
_LATIN_WORDS = sorted((w for w in _RELATION_OF if not HAN_RE.search(w)), key=len, reverse=True)
_HAN_WORDS = sorted((w for w in _RELATION_OF if HAN_RE.search(w)), key=len, reverse=True)
_LATIN = "|".join(map(re.escape, _LATIN_WORDS))
_HAN_ALTERNATIVES = "|".join(map(re.escape, _HAN_WORDS))

#: "my husband's mother", "the user's wife's dad", "my mom's mom", "my husbands mum".
_EN_POSSESSIVE = re.compile(
    rf"\b(?P<owner>my|(?:the\s+)?user['’]s)\s+(?P<first>{_LATIN})(?:['’]s?|s)\s+(?P<second>{_LATIN})\b",
    re.IGNORECASE | re.ASCII,  # as the bridge's: no "ſon" for "son"
)
#: "the mother of my husband".
_EN_OF = re.compile(
    rf"\b(?:the\s+)?(?P<second>{_LATIN})\s+of\s+(?P<owner>my|(?:the\s+)?user['’]s)\s+(?P<first>{_LATIN})\b",
    re.IGNORECASE | re.ASCII,  # as the bridge's: no "ſon" for "son"
)
#: "我老公的妈妈", "我的老公的妈妈", "用户妈妈的妈妈": the 的 between the steps is
#: required ("我爸妈" is my parents, "我妈妈" my mother)…
_ZH = re.compile(
    rf"(?P<owner>我|俺|咱|用户)的?(?P<first>{_HAN_ALTERNATIVES})的(?P<second>{_HAN_ALTERNATIVES})"
)
#: The same with no owner, at the start of a question: "闺女的儿子上初几了？" (Chinese
#: leaves "my" out), "daughter's son school" (a search-style query): the user's.
_ZH_UNOWNED = re.compile(rf"^\s*(?P<first>{_HAN_ALTERNATIVES})的(?P<second>{_HAN_ALTERNATIVES})")
_EN_UNOWNED = re.compile(
    rf"^\s*(?P<first>{_LATIN})(?:['’]s?|s)\s+(?P<second>{_LATIN})\b", re.IGNORECASE | re.ASCII
)
_SPOUSES = sorted(
    (w for w in (*_STEPS["husband"], *_STEPS["wife"]) if HAN_RE.search(w)), key=len, reverse=True
)
_TWO_RUNES = [w for w in _HAN_WORDS if len(w) >= 2]
#: … but after a spouse, a two-rune step may follow without it ("我老公妈妈", "我老婆
#: 姐姐"): other pairs so written are more often two people ("我儿子女儿", my son and
#: my daughter).
_ZH_SPOUSE = re.compile(
    rf"(?P<owner>我|俺|咱|用户)的?(?P<first>{'|'.join(_SPOUSES)})(?P<second>{'|'.join(_TWO_RUNES)})"
)


_TWO_STEPS = (
    (_ZH, True),
    (_ZH_SPOUSE, True),
    (_EN_POSSESSIVE, False),
    (_EN_OF, False),
    (_ZH_UNOWNED, True),
    (_EN_UNOWNED, False),
)


def in_one_word(query: str) -> str | None:
    """``query`` with a first-person relative named in two steps named by the one
    word for them ("my husband's mother" → "my mother-in-law"), or None when it
    names none."""
    for pattern, chinese in _TWO_STEPS:
        found = pattern.search(query)
        if found is None:
            continue
        first = _RELATION_OF[found["first"].lower()]
        owner = found.groupdict().get("owner") or ("我" if chinese else "my")
        one_word = _one_word(owner, first, _RELATION_OF[found["second"].lower()], chinese)
        if one_word is not None:
            return query[: found.start()] + one_word + query[found.end() :]
    return None


def _one_word(owner: str, first: str, second: str, chinese: bool) -> str | None:
    """The owner's relative ``second`` of their ``first`` in one word ("my" husband
    mother: "my mother-in-law"), or None when no word names them."""
    words = _ONE_WORD.get((first, second))
    if words is None:
        return None
    return f"{owner}{'的' if owner == '用户' else ''}{words[1]}" if chinese else f"{owner} {words[0]}"


#: The first steps the table knows, as the bridge names their groups.
FIRST_STEPS = tuple(dict.fromkeys(first for first, _ in _ONE_WORD if first in RELATIONS))
#: "Declan's mam", "Bríd's husband": a capitalised name, then a step. The name is
#: read with Unicode's letters, the step with ASCII case only (as the bridge's).
_EN_NAMED = re.compile(rf"\b(?P<name>[^\W\d_][^\W\d_-]*)['’]s\s+(?P<second>(?ai:{_LATIN}))\b")
#: "老陈的妈妈": two or three runes, then 的 and a step (which of them is a name,
#: only the memories say).
_ZH_NAMED = re.compile(rf"(?P<name>[{HAN_RE.pattern[1:-1]}]{{2,3}})的(?P<second>{_HAN_ALTERNATIVES})")
#: Words before 's or 的 that name no one the memories could say is a relative.
_NOT_NAMED = frozenset({"User", "My", "Our", "Your", "Their", "His", "Her", "Its"})
_OWNERS = ("我", "俺", "咱", "用户")


@dataclass(frozen=True, slots=True)
class NamedRelative:
    """A relative of a person the question names ("Declan's mam", "老陈的妈妈"). Who
    that person is to the user ("my husband"), the memories say (bridge.relation_of);
    then the relative has one word too ("my mother-in-law")."""

    query: str
    #: The name, or in Chinese the runs before 的 that may be one, longest first.
    names: tuple[str, ...]
    #: The relative's step from the named person, as the table names it.
    second: str
    chinese: bool
    #: Where the names end (at 's or 的) and the step does.
    name_end: int
    end: int

    def firsts(self) -> tuple[str, ...]:
        """The relations the named person may have to the user for which the table
        has a word for their relative."""
        return tuple(first for first in FIRST_STEPS if (first, self.second) in _ONE_WORD)

    def in_one_word(self, name: str, first: str) -> str | None:
        """The query with the relative named in one word, the person ``name`` being
        the user's ``first`` ("which day my mother-in-law calls")."""
        one_word = _one_word("我" if self.chinese else "my", first, self.second, self.chinese)
        if one_word is None:
            return None
        return self.query[: self.name_end - len(name)] + one_word + self.query[self.end :]


def named_relative(query: str) -> NamedRelative | None:
    """The relative of a named person the query asks about, if it names one
    ("Declan's mam", "老陈的妈妈"); None otherwise, and for a relative of the user's
    own (``in_one_word``)."""
    for pattern, chinese in ((_ZH_NAMED, True), (_EN_NAMED, False)):
        for found in pattern.finditer(query):
            name = found["name"]
            if chinese:
                runs = (name, name[1:]) if len(name) == 3 else (name,)
                names = tuple(n for n in runs if not n.startswith(_OWNERS) and n not in _RELATION_OF)
            else:
                person = name[:1].isupper() and name[1:].islower() and name not in _NOT_NAMED
                names = (name,) if person and name.lower() not in _RELATION_OF else ()
            if names:
                second = _RELATION_OF[found["second"].lower()]
                return NamedRelative(query, names, second, chinese, found.end("name"), found.end())
    return None
