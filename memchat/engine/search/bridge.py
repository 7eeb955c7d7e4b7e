"""Questions about a person the user names by relation: "my sister", "我对象".

"How many dogs does my sister have?" shares nothing with "Emma has two dogs":
the memory that answers it names the sister, and another memory says who she
is ("Alice and her sister Emma…", "我和女朋友陈静…"). The memories holding a
word of the relation (sister; 对象, 伴侣, 女朋友…: ``RELATIONS``) are read from
the keyword index, ``bridge`` takes the name most often beside such a word, and
the question is asked again about the name ("How many dogs does Emma have?").
The caller merges the two rankings, each memory at its better score: both are
relevance to the same question.

Only a first-person relation ("my …", "我(的)…") of a closed list of kinship
and social words triggers it, and only a name beside a word of the same
relation is used, so other questions are ranked as before (no LoCoMo question
is in the first person). Names are capitalised words in English (not a
possessive: in "Emma, Alice's sister" the sister is Emma), and jieba's
person-name tag in Chinese.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..model import Entry
from .tokens import _HAN_RE as HAN_RE
from .tokens import (
    ENGLISH_STOPWORDS,
    FAMILIAR_PREFIXES,
    SURNAMES,
    _is_cjk_token,
    is_familiar_name,
    jieba_module,
    tagger_module,
)

__all__ = [
    "BRIDGE_HOLDERS",
    "HAN_RE",
    "HAN_RELATION_WORDS",
    "MATCHES",
    "MY_RELATION_EN",
    "MY_RELATION_ZH",
    "RELATIONS",
    "Bridge",
    "bridge",
    "han_relation_words",
    "han_words",
    "is_name",
    "load_name_tagger",
    "merge",
    "name_tagger_loaded",
    "names_the_user",
    "relation_in",
    "relation_of",
    "relation_words",
    "relations_named",
]

#: Relation words by the relation they name (English singular forms; a plural
#: "s" is accepted). A query's word and a memory's need only share the group.
RELATIONS: dict[str, tuple[str, ...]] = {
    "partner": (
        "partner", "spouse", "other half", "better half", "对象", "伴侣", "爱人", "老伴", "另一半", "那口子",
    ),
    "wife": (
        "wife", "wifey", "missus", "girlfriend", "fiancee", "fiancée",
        "老婆", "妻子", "太太", "媳妇", "媳妇儿", "婆娘", "老婆子", "女朋友", "女友", "未婚妻",
        # 孩子他妈, "the child's mum", is the wife: read before 孩子 (longest first).
        "孩子他妈", "孩子她妈", "孩子他娘", "孩子妈", "娃他妈", "娃她妈",
    ),
    "husband": (
        "husband", "hubby", "boyfriend", "fiance", "fiancé",
        "老公", "丈夫", "先生", "老头子", "男朋友", "男友", "未婚夫",
        "孩子他爸", "孩子她爸", "孩子他爹", "孩子爸", "娃他爸", "娃她爸",
    ),
    "sibling": ("sibling", "兄弟姐妹"),
    # 细妹, 细佬, 老豆, 家婆, 家公: Cantonese.
    "sister": ("sister", "sis", "姐姐", "妹妹", "大姐", "二姐", "小妹", "幺妹", "细妹", "姐", "妹"),
    "brother": ("brother", "bro", "哥哥", "弟弟", "大哥", "二哥", "小弟", "兄长", "细佬", "哥", "弟"),
    "mother": ("mother", "mom", "mum", "mam", "mommy", "mummy", "妈妈", "老妈", "妈", "母亲", "老娘", "娘"),
    "father": ("father", "dad", "daddy", "爸爸", "老爸", "爸", "父亲", "老爹", "老豆", "爹"),
    "child": ("child", "children", "kid", "kiddo", "little one", "wee one", "孩子", "子女", "儿女"),
    "son": ("son", "boy", "lad", "laddie", "儿子"),
    "daughter": ("daughter", "girl", "lass", "lassie", "女儿", "闺女"),
    # 哥们 before 哥: "我哥们" is a friend, not a brother.
    "friend": (
        "friend", "pal", "buddy", "bestie", "bff", "mate",
        "朋友", "好朋友", "好友", "闺蜜", "闺密", "发小", "死党", "哥们", "哥们儿", "铁哥们",
    ),
    "colleague": ("colleague", "coworker", "co-worker", "workmate", "同事", "工友"),
    # Not "manager": it is as often a job title ("a project manager at Siemens").
    "boss": ("boss", "老板", "领导", "上司"),
    "roommate": ("roommate", "flatmate", "housemate", "室友", "舍友"),
    "neighbour": ("neighbour", "neighbor", "邻居"),
    # The wider family, each relative by the one word people use (search/kinship.py
    # asks "my husband's mother" as "my mother-in-law").
    # Written with hyphens or spaces ("mother in law"): ``_key``.
    "mother-in-law": ("mother-in-law", "mum-in-law", "mom-in-law", "婆婆", "家婆", "岳母", "丈母娘"),
    "father-in-law": ("father-in-law", "dad-in-law", "公公", "家公", "岳父", "老丈人", "丈人"),
    "sister-in-law": ("sister-in-law", "sis-in-law", "嫂子", "弟媳", "大姑子", "小姑子", "大姨子", "小姨子"),
    "brother-in-law": (
        "brother-in-law", "bro-in-law", "姐夫", "妹夫", "大伯子", "小叔子", "大舅子", "小舅子",
    ),
    "daughter-in-law": ("daughter-in-law", "儿媳妇", "儿媳"),
    "son-in-law": ("son-in-law", "女婿"),
    "grandmother": ("grandmother", "grandma", "granny", "外婆", "姥姥", "奶奶"),
    "grandfather": ("grandfather", "grandpa", "grandad", "granddad", "外公", "姥爷", "爷爷"),
    "grandchild": ("grandchild", "grandchildren", "grandkid"),
    "grandson": ("grandson", "孙子", "外孙"),
    "granddaughter": ("granddaughter", "孙女", "外孙女"),
    # Not 阿姨: any older woman, or a nanny, as often as an aunt.
    "aunt": ("aunt", "auntie", "姨妈", "小姨", "姑姑", "姑妈"),
    "uncle": ("uncle", "舅舅", "叔叔", "伯伯"),
    "nephew": ("nephew", "外甥", "侄子"),
    "niece": ("niece", "外甥女", "侄女"),
    "cousin": ("cousin", "表哥", "表姐", "表妹", "表弟", "堂哥", "堂姐", "堂妹", "堂弟"),
}  # fmt: skip
#: The relations a memory's word may name for a query's: "my partner" is a wife,
#: a husband or a partner; "my wife" a wife or a partner; "my sibling" a sister
#: or a brother, "my child" a son or a daughter, "my grandchild" a grandson or a
#: granddaughter (and the other way round).
_WIDER = {
    "partner": ("wife", "husband"),
    "sibling": ("sister", "brother"),
    "child": ("son", "daughter"),
    "grandchild": ("grandson", "granddaughter"),
}
MATCHES: dict[str, frozenset[str]] = {group: frozenset({group}) for group in RELATIONS}
for _wide, _narrow in _WIDER.items():
    MATCHES[_wide] = frozenset({_wide, *_narrow})
    for _group in _narrow:
        MATCHES[_group] = MATCHES[_group] | {_wide}


#: Between the parts of a relation word: "mother-in-law", "mother in law".
_PARTS = re.compile(r"[-\s]+")


def _key(word: str) -> str:
    """A relation word as the table is read: "Mother in law" is "mother-in-law"."""
    return _PARTS.sub("-", word.lower())


def _spelt(word: str) -> str:
    """A relation word as a pattern: its parts joined by hyphens or spaces."""
    return r"[-\s]+".join(map(re.escape, _PARTS.split(word)))


_ALL_WORDS = [word for words in RELATIONS.values() for word in words]
_GROUP_OF = {_key(word): group for group, words in RELATIONS.items() for word in words}
_LATIN = sorted((w for w in _ALL_WORDS if not HAN_RE.search(w)), key=len, reverse=True)
_HAN = sorted((w for w in _ALL_WORDS if HAN_RE.search(w)), key=len, reverse=True)
#: The Chinese relation words, longest first.
HAN_RELATION_WORDS = tuple(_HAN)
#: "my sister", "my older sister", "my best friend's" (one word may come between).
#: "The user's sister" is the same person: the user is the one these memories are
#: about, and a model searching for them (memory_search) often writes so.
MY_RELATION_EN = re.compile(
    r"\b(?:my|(?:the\s+)?user['’]s)\s+(?:[a-z-]+\s+)?(" + "|".join(map(_spelt, _LATIN)) + r")(?:s|es)?\b",
    # ASCII case only: Unicode's would take "ſiſ" (long s) for "sis", a word no table holds.
    re.IGNORECASE | re.ASCII,
)
#: "我妹妹", "我的老公", "俺媳妇", "用户的女儿", "我和老公" (my husband and I), and with
#: a short "…的" between: "我最亲近的闺蜜" (tried last: in "我朋友的妈妈" the user's
#: relation is the friend).
MY_RELATION_ZH = re.compile(
    r"(?:我|俺|咱|用户)(?:的|和|跟|与)?(?:[^\s的，。？！,.?!]{1,4}的)??"
    r"(" + "|".join(map(re.escape, _HAN)) + ")"
)
#: A relation no one in the question owns is the user's, in a question naming no
#: one else: "spouse job", "big bro job", "the grandkid", "our daughter", "ma wee
#: sis" (Scots), "a colleague of mine"; "老伴 血糖", "我家小妹", "我每周几跟孙子视频"
#: (Chinese leaves "my" out). Not "Declan's mam", "whose mum", "which coworker",
#: "how many kids": another's relative, or any of several.
_REL_EN = "(" + "|".join(map(_spelt, _LATIN)) + r")(?:s|es)?\b"
_OUR_RELATION_EN = re.compile(
    r"\b(?:our|ma|mah|me|the)\s+(?:[a-z-]+\s+)?" + _REL_EN + r"(?!\s+of\b)", re.IGNORECASE | re.ASCII
)
_FIRST_RELATION_EN = re.compile(r"^\s*((?:[a-z-]+\s+){0,2}?)" + _REL_EN, re.IGNORECASE | re.ASCII)
_RELATION_OF_MINE = re.compile(r"\b" + _REL_EN + r"\s+of\s+(?:mine|ours)\b", re.IGNORECASE | re.ASCII)
_REL_ZH = "(" + "|".join(map(re.escape, _HAN)) + ")"
_FIRST_RELATION_ZH = re.compile(r"^\s*(?:(?:我|俺|咱|用户)们?家(?:的|里)?)?" + _REL_ZH)
_WITH_RELATION_ZH = re.compile(r"(?:我|俺|咱)[^\s的，。？！,.?!]{0,6}?(?:跟|和|给|与|同|陪|带)" + _REL_ZH)
_WORD = re.compile(r"[\w'’-]+")
#: Relation words anywhere in a text (``relations_named``): English whole words, and
#: Chinese ones of two runes or more (姐, 哥, 妈 inside other words mean other things).
_ANY_RELATION_EN = re.compile(r"\b" + _REL_EN, re.IGNORECASE | re.ASCII)  # as MY_RELATION_EN
#: 先生 is a husband after his owner (我先生, 周海燕的先生, 她先生), a Mr after a
#: surname (王先生).
_OWNED_SIR = "(?<=[我的她俺咱户和跟])先生"
#: Relation words of several parts ("mother in law", "other half"), read as one.
_COMPOUND_EN = re.compile(
    r"\b(?:" + "|".join(_spelt(w) for w in _LATIN if _PARTS.search(w)) + r")\b", re.IGNORECASE | re.ASCII
)
_ANY_RELATION_ZH = re.compile("|".join(w if w != "先生" else _OWNED_SIR for w in _HAN if len(w) >= 2))
T = TypeVar("T")
#: A capitalised word after one of these is a place or a firm ("a friend in Berlin").
_PLACE_BEFORE = frozenset({"in", "at", "from", "to", "near", "of", "on", "for", "into", "by"})
#: Between a name and a relation after it, these say the relation is the name's own
#: ("Alice and her sister", "Alice has a friend"), not that the name is the relation.
_OWNER_BETWEEN = frozenset({"a", "an", "the", "her", "his", "their", "its"})
#: Words a relation may stand next to that are not names.
_NOT_NAMES = frozenset({"I", "On", "In", "At", "The", "A", "An", "My", "Her", "His", "Their", "User", "And"})
#: Memories read for a name (the best holders of the relation's words), and words
#: on either side of the relation.
BRIDGE_HOLDERS = 20
_WINDOW = 3


@dataclass(frozen=True, slots=True)
class Bridge:
    """The question asked again about the person: ``query`` with the relation
    replaced by ``name``, found next to it in ``via``. A memory naming several
    ("two children, Ciara and Fionn") gives ``names``, one question each
    (``queries``): which child is the daughter, the words do not say."""

    query: str
    name: str
    via: Entry
    names: tuple[str, ...]
    queries: tuple[str, ...]


def _group_words(group: str) -> list[str]:
    return [w for g in MATCHES[group] for w in RELATIONS[g]]


def relation_words(query: str, group: str) -> str:
    """The words a memory may name relation ``group`` with: a Chinese question reads
    the memories with 对象, 伴侣… and with partner, wife… (a Chinese speaker's
    English memories name them too), an English one only those with partner,
    wife… (Han text would load jieba's dictionary, a second of work, for an
    English question: on the event loop when an extraction searches; the caller
    asks ``han_relation_words`` only of a user whose memories hold one)."""
    han = bool(HAN_RE.search(query))
    return " ".join(w for w in _group_words(group) if han or not HAN_RE.search(w))


def han_relation_words(group: str) -> str:
    """The Chinese words a memory may name relation ``group`` with (老公, 丈夫… for
    "my husband"): an English question's second look, at a bilingual user's
    Chinese memories."""
    return " ".join(w for w in _group_words(group) if HAN_RE.search(w))


def relation_in(query: str) -> tuple[str, tuple[int, int]] | None:
    """The first-person relation the query asks about (its group, and the span
    the name replaces), if any: "my sister", or a relation no one else in the
    question owns (``_unowned_relation``)."""
    for pattern in (MY_RELATION_EN, MY_RELATION_ZH):
        found = pattern.search(query)
        if found:
            return _GROUP_OF[_key(found.group(1))], found.span()
    return _unowned_relation(query)


def relations_named(text: str) -> set[str]:
    """The relation groups whose words ``text`` holds ("Alice's husband Mark…":
    {"husband"}), whoever they are someone's of."""
    named = {_GROUP_OF[_key(found.group(1))] for found in _ANY_RELATION_EN.finditer(text)}
    return named | {_GROUP_OF[found] for found in _ANY_RELATION_ZH.findall(text)}


def _unowned_relation(query: str) -> tuple[str, tuple[int, int]] | None:
    if HAN_RE.search(query):
        for pattern in (_FIRST_RELATION_ZH, _WITH_RELATION_ZH):
            found = pattern.search(query)
            # jieba's dictionary holds no 孩子他爸: a phrase of four runes is no part of another word.
            if found and (len(found.group(1)) >= 4 or _whole_word(query, found.start(1), found.end(1))):
                return _GROUP_OF[found.group(1)], found.span(1 if pattern is _WITH_RELATION_ZH else 0)
        return None
    if _names_someone(query):
        return None  # "When did Melanie take the kids…": Melanie's
    found = _OUR_RELATION_EN.search(query) or _RELATION_OF_MINE.search(query)
    if found is None:
        found = _FIRST_RELATION_EN.match(query)
        # Only describing words before it: "big bro job", "late father", not "how many kids".
        if found is None or any(w.lower() in _NOT_OWN for w in found.group(1).split()):
            return None
        return _GROUP_OF[_key(found.group(2))], found.span(2)
    return _GROUP_OF[_key(found.group(1))], found.span()


#: Words before a relation at a question's start that make it not the user's one
#: (only describing words may come first: "big bro", "late father", "closest friend").
_NOT_OWN = ENGLISH_STOPWORDS | frozenset(
    {
        "how", "what", "which", "whose", "who", "when", "where", "why", "whom",
        "any", "every", "each", "another", "other", "some", "all", "both", "no",
        "many", "much", "few", "his", "her", "their", "its", "your", "our", "my",
        "do", "does", "did", "has", "have", "had", "can", "could", "will", "would",
        "should", "may", "might", "at", "from", "by", "about", "as", "if", "than",
    }
)  # fmt: skip


def _names_someone(query: str) -> bool:
    """Whether an English question names a person (a capitalised word not first
    and not "I")."""
    words = _WORD.findall(query)
    return any(is_name(w.removesuffix("'s").removesuffix("’s")) for w in words[1:])


def _whole_word(text: str, start: int, end: int) -> bool:
    """Whether jieba cuts ``text[start:end]`` as a word of its own (毛孩子, a pet, and
    朋友圈, the WeChat feed, hold 孩子 and 朋友 inside another word)."""
    jieba = jieba_module()
    if jieba is None:
        return True
    at = 0
    for word in jieba.cut(text):
        if at >= start:
            return at == start and at + len(word) == end
        at += len(word)
    return False


def _latin_group(word: str) -> str | None:
    """The relation group of an English word: "sister", "sisters", "sister's"."""
    word = _key(word).removesuffix("'s").removesuffix("’s")
    for form in (word, word.removesuffix("s"), word.removesuffix("es")):
        if form in _GROUP_OF:
            return _GROUP_OF[form]
    return None


def _nearest_first(i: int, count: int) -> list[int]:
    """Positions within the window around ``i``, nearest first (after before before)."""
    near = range(max(0, i - _WINDOW), min(count, i + _WINDOW + 1))
    return sorted((j for j in near if j != i), key=lambda j: (abs(j - i), j < i))


#: Between the names listed after a plural relation ("children, Ciara and Fionn").
_LIST_WORDS = frozenset({"and", "named", "called", "both"})
#: Names asked about from one list.
BRIDGE_LIST_NAMES = 3


def is_name(word: str) -> bool:
    return word[:1].isupper() and word[1:].islower() and word not in _NOT_NAMES


def _listed(
    items: Sequence[T], name_of: Callable[[T], str | None], joins: Callable[[T], bool]
) -> tuple[str, ...]:
    """The names listed at the start of ``items`` ("Ciara and Fionn", "陈浩和陈可"):
    read while each item is a name (``name_of`` gives it) or joins two (``joins``)."""
    names: list[str] = []
    for item in items[: 2 * BRIDGE_LIST_NAMES]:
        if name := name_of(item):
            names.append(name)
        elif not joins(item):
            break
    return tuple(names[:BRIDGE_LIST_NAMES])


def _latin_listed(word: str) -> str | None:
    return word if is_name(word) and not word.endswith(("'s", "’s")) else None


def _is_plural(word: str) -> bool:
    """A plural relation word: children, sisters, kids (not sister's, not sister)."""
    lower = word.lower()
    if lower in ("children", "grandchildren"):
        return True
    return lower.endswith("s") and _key(lower) not in _GROUP_OF and "'" not in lower and "’" not in lower


#: What a memory says of a relation: the names it gives the relative, and whose
#: relative it says they are ("Ciara's husband Tom": Ciara), if it names them.
Named = tuple[tuple[str, ...], str | None]


def _latin_name(text: str, group: str) -> Named:
    words = _WORD.findall(_COMPOUND_EN.sub(lambda found: _key(found[0]), text))
    for i, word in enumerate(words):
        if _latin_group(word) not in MATCHES[group]:
            continue
        before = words[i - 1] if i else ""
        whose = before[:-2] if before.endswith(("'s", "’s")) and is_name(before[:-2]) else None
        if _is_plural(word):
            # "two children, Ciara and Fionn" for "my daughter": one of them is.
            listed = _listed(words[i + 1 :], _latin_listed, lambda w: w.lower() in _LIST_WORDS)
            if len(listed) > 1:
                return listed, whose
        for j in _nearest_first(i, len(words)):
            name = words[j]
            possessive = name.endswith(("'s", "’s"))  # "Alice's sister": Alice is not the sister
            place = j > 0 and words[j - 1].lower() in _PLACE_BEFORE
            owner = j < i and any(w.lower() in _OWNER_BETWEEN for w in words[j + 1 : i])
            if is_name(name) and not (possessive or place or owner):
                return (name,), whose
    return (), None


def _latin_people(text: str) -> set[str]:
    """The capitalised names ``text`` mentions (a possessive's name too)."""
    names = (w.removesuffix("'s").removesuffix("’s") for w in _WORD.findall(text))
    return {n for n in names if is_name(n)}


#: Between a name and a relation after it, these say the relation is the name's own
#: (周海燕的妈妈, 老刘和老伴: his mother, his wife), not that the name is the relation.
_HAN_OWNER_BETWEEN = frozenset({"的", "和", "跟", "与", "同"})
#: Chinese words that may name several children at once ("两个孩子，陈浩和陈可").
_HAN_COLLECTIVES = frozenset({"孩子", "孩子们", "子女", "儿女"})
#: Between the names of such a list: punctuation (jieba's "x") and conjunctions ("c").
_HAN_LIST_FLAGS = frozenset({"x", "c"})


def _is_person_tag(flag: str) -> bool:
    """jieba's tags of a person's name: nr, and nrt / nrfg, which it gives some
    Chinese given names too (李淑芬 is 李 nr + 淑芬 nrt)."""
    return flag.startswith("nr")


def _han_person(pair: tuple[str, str]) -> str | None:
    """The name of a tagged word that is a person's (two runes or more), else None."""
    word, flag = pair
    return word if _is_person_tag(flag) and len(word) >= 2 else None


def _han_joins(pair: tuple[str, str]) -> bool:
    return pair[1] in _HAN_LIST_FLAGS and pair[0] not in "。？！.?!"


def han_words(text: str, posseg: Any) -> list[tuple[str, str]]:
    """``text`` cut into (word, part-of-speech flag) pairs by jieba's tagger, a
    person's name one word."""
    pairs: list[tuple[str, str]] = []
    for p in posseg.cut(text):
        # jieba cuts 老陈 into 老 + 陈, and 王秀英 into the surname + 秀英: one name each.
        # It also reads some given names as other proper nouns (周 + 建华 nz, 周 +
        # 建国 ns), and keeps some familiar names whole but as other words (老周 t,
        # 老马 n): names too.
        prefix = pairs[-1] if pairs else ("", "")
        surname = len(prefix[0]) == 1 and prefix[1] == "nr"
        given = _is_person_tag(p.flag) or (p.flag in _GIVEN_NAME_FLAGS and len(p.word) == 2)
        # 刘 as a bound morpheme (zg) before 秀英 (nr) is a surname too.
        bound_surname = len(prefix[0]) == 1 and prefix[1] in _BOUND_FLAGS and prefix[0] in SURNAMES
        if (
            (surname and given)
            or (bound_surname and _is_person_tag(p.flag) and len(p.word) <= 2)
            or (_is_person_tag(p.flag) and len(p.word) == 1 and prefix[0] in FAMILIAR_PREFIXES)
        ):
            pairs[-1] = (prefix[0] + p.word, "nr")
        elif _is_familiar_name(p.word, p.flag):
            pairs.append((p.word, "nr"))
        else:
            pairs.append((p.word, p.flag))
    return pairs


#: What jieba tags a surname it does not read as one: a bound morpheme (刘 zg).
_BOUND_FLAGS = frozenset({"zg", "ng"})
#: What jieba tags a given name after a surname when it misreads it: another
#: proper noun (建华 nz), a place (建国 ns).
_GIVEN_NAME_FLAGS = frozenset({"nz", "ns"})
#: What jieba tags a familiar name it keeps whole when it does not say person:
#: a time (老周 t), a noun (老马 n).
_FAMILIAR_NAME_FLAGS = frozenset({"t", "n"})


def _is_familiar_name(word: str, flag: str) -> bool:
    """老周, 小马: a prefix of familiarity and a surname, tagged as a time or a noun."""
    return is_familiar_name(word) and flag in _FAMILIAR_NAME_FLAGS


#: What may stand between a name and the relation after it that it names: "陈浩是我女婿",
#: "陈浩，我女婿".
_HAN_NAMING_BETWEEN = frozenset({"是", "就是", "也是", "乃", "我", "俺", "咱", "用户", "，", ",", "、"})


def _han_name(pairs: Sequence[tuple[str, str]], group: str) -> Named:
    for i, (word, _) in enumerate(pairs):
        if _GROUP_OF.get(word) not in MATCHES[group]:
            continue
        whose = _han_person(pairs[i - 2]) if i >= 2 and pairs[i - 1][0] in _HAN_OWNER_BETWEEN else None
        if word in _HAN_COLLECTIVES and len(listed := _listed(pairs[i + 1 :], _han_person, _han_joins)) > 1:
            return listed, whose  # "两个孩子，陈浩和陈可" for "我女儿": one of them is
        for j in _nearest_first(i, len(pairs)):
            # "周海燕的妈妈": a name with 的 before the relation is its owner, not the mother;
            # "老刘和老伴": one with 和 between is the relation's companion, not the wife.
            owner = j < i and any(w in _HAN_OWNER_BETWEEN for w, _ in pairs[j + 1 : i])
            # "周建国答应女婿…": a name before the relation with a verb between is
            # someone acting on the relative; "陈浩是我女婿" names them.
            acting = j < i and any(w not in _HAN_NAMING_BETWEEN for w, _ in pairs[j + 1 : i])
            if (name := _han_person(pairs[j])) and not owner and not acting:
                return (name,), whose
            if j == i + 1 and (name := _appositive_name(pairs, j)):
                return (name,), whose
    return (), None


#: What jieba tags some given names as when they stand alone: an adjective (浩然),
#: another proper noun.
_APPOSITIVE_FLAGS = frozenset({"a", "nz", "ns", "nt"})


def _appositive_name(pairs: Sequence[tuple[str, str]], j: int) -> str | None:
    """The word right after a relation that names the relative though jieba does not
    tag it a name: "儿子浩然读初二" (浩然 an adjective), the relation, the name and
    then what they do (a verb or a preposition: not "儿子聪明得很")."""
    word, flag = pairs[j]
    doing = pairs[j + 1][1][:1] if j + 1 < len(pairs) else ""
    if 2 <= len(word) <= 3 and _is_cjk_token(word) and flag in _APPOSITIVE_FLAGS and doing in ("v", "p"):
        return word
    return None


_tagger_loaded = False


def load_name_tagger() -> None:
    """Load jieba's part-of-speech tagger (about half a second, after jieba):
    the first Chinese question about "我对象" would otherwise wait for it."""
    global _tagger_loaded
    posseg = tagger_module()
    if posseg is not None and not _tagger_loaded:
        list(posseg.cut("我和女朋友陈静"))
        _tagger_loaded = True


def name_tagger_loaded() -> bool:
    """Whether :func:`load_name_tagger` has nothing left to load."""
    return _tagger_loaded


def bridge(
    query: str, holders: Sequence[Entry], relation: tuple[str, tuple[int, int]] | None = None
) -> Bridge | None:
    """The question about the person a first-person relation in ``query`` names:
    the name most often beside a word of the same relation in ``holders`` (the
    memories holding one of its words, best first; a tie goes to the better).
    ``relation`` is ``relation_in(query)`` when the caller already has it."""
    relation = relation or relation_in(query)
    if relation is None:
        return None
    group, (start, end) = relation
    han_query = bool(HAN_RE.search(query))
    counts: Counter[tuple[str, ...]] = Counter()
    same_script: dict[tuple[str, ...], bool] = {}
    via: dict[tuple[str, ...], Entry] = {}
    read = [(entry, han, people, named(group)) for entry, han, people, named in _readings(holders)]
    relatives = {name for *_, (names, _) in read for name in names}
    user = _the_user((people for _, _, people, _ in read), relatives)
    for entry, han, _, (names, whose) in read:
        # Not the user: in "周建国答应女婿…" the name beside the son-in-law is his.
        names = tuple(name for name in names if name not in query and name != user)
        if not names or _someone_elses(whose, user):
            continue  # "刘晓燕的丈夫陈磊" is the daughter's husband, not the user's
        counts[names] += 1
        same_script[names] = same_script.get(names, False) or han == han_query
        via.setdefault(names, entry)
    if not counts:
        return None
    # A name in the question's language first (a Chinese question about "我爱人" and an
    # English memory about a wife are most likely not about one person), then the most
    # often named, then one person over a list ("her daughter Ciara" over "two
    # children, Ciara and Fionn"); max keeps the first of equals: the better holder.
    names = max(counts, key=lambda n: (same_script[n], counts[n], len(n) == 1))
    queries = tuple(_in_place(query, start, end, name) for name in names)
    return Bridge(queries[0], names[0], via[names], names, queries)


def _readings(holders: Sequence[Entry]) -> list[tuple[Entry, bool, set[str], Callable[[str], Named]]]:
    """The holders a bridge reads, each with whether its text is Chinese and its
    :func:`_reading`."""
    read = []
    for entry in holders[:BRIDGE_HOLDERS]:
        han = bool(HAN_RE.search(entry.memory.text))
        read.append((entry, han, *_reading(entry.memory.text, han)))
    return read


def _reading(text: str, han: bool) -> tuple[set[str], Callable[[str], Named]]:
    """The people ``text`` names, and what it says of a relation group
    (:data:`Named`), read from one cut of the text."""
    if not han:
        return _latin_people(text), lambda group: _latin_name(text, group)
    posseg = tagger_module()
    if posseg is None:
        return set(), lambda group: ((), None)
    pairs = han_words(text, posseg)
    people = {name for pair in pairs if (name := _han_person(pair))}
    return people, lambda group: _han_name(pairs, group)


def _someone_elses(whose: str | None, user: str | None) -> bool:
    """Whether a relation a memory gives an owner (``whose``) is another person's
    than the ``user``'s (:func:`_the_user`; None: not known)."""
    return whose is not None and user is not None and whose != user


def _the_user(people: Iterable[set[str]], relatives: set[str]) -> str | None:
    """The person the memories are about: the one most of them name (at least two,
    and more than anyone else), of those they name as no one's relative; None when
    no one stands out (memories in the first person: "我和老公王磊…")."""
    counts = Counter(name for names in people for name in names - relatives)
    ranked = counts.most_common(2)
    if not ranked or ranked[0][1] < 2 or (len(ranked) > 1 and ranked[1][1] == ranked[0][1]):
        return None
    return ranked[0][0]


def names_the_user(name: str, holders: Sequence[Entry], forms: Iterable[str] = ()) -> bool:
    """Whether the memories holding ``name`` make it the user's: the person most of
    them name, who is no one's relative (:func:`_the_user`). In "我和老公老陈…",
    老陈 is the husband: the memories are in the first person. ``forms``: other
    names of the same person (丽华 for 陈丽华), counted as ``name``."""
    same = {name, *forms}

    def one(names: set[str]) -> set[str]:
        return {name if n in same else n for n in names}

    read = _readings(holders)
    relatives = one({n for *_, named in read for group in RELATIONS for n in named(group)[0]})
    return name not in relatives and _the_user((one(people) for _, _, people, _ in read), relatives) == name


def relation_of(name: str, holders: Sequence[Entry], groups: Sequence[str]) -> str | None:
    """Which of ``groups`` the user's relation named ``name`` is, as the memories
    holding the name say it ("Nora's husband Declan": husband), first of ``groups``
    to name it in the best holder first; None when none does. A relation of
    someone else's ("Ciara's husband Declan", when the memories are Nora's) is not
    the user's."""
    read = [(entry, people, {g: named(g) for g in groups}) for entry, _, people, named in _readings(holders)]
    relatives = {name, *(n for *_, said in read for names, _ in said.values() for n in names)}
    user = _the_user((people for _, people, _ in read), relatives)
    for entry, _, said in read:
        if name not in entry.memory.text:
            continue
        for group in groups:
            names, whose = said[group]
            if name in names and not _someone_elses(whose, user):
                return group
    return None


def _in_place(query: str, start: int, end: int, name: str) -> str:
    """``query`` with ``name`` for its ``start:end``. A Chinese name stands apart, set
    off by spaces: jieba would glue it to the next word ("陈可学什么" gives 陈可学), and
    the name is the one word the question must match."""
    if not HAN_RE.search(name):
        return query[:start] + name + query[end:]
    return f"{query[:start].rstrip()} {name} {query[end:].lstrip()}".strip()


def merge(*rankings: Sequence[Entry], limit: int) -> list[Entry]:
    """The rankings as one, each memory at its best score, best first."""
    best: dict[str, Entry] = {}
    for entry in (entry for ranking in rankings for entry in ranking):
        kept = best.get(entry.id)
        if kept is None or (entry.score or 0.0) > (kept.score or 0.0):
            best[entry.id] = entry
    ranked = sorted(best.values(), key=lambda e: -(e.score or 0.0))
    return ranked[:limit] if limit > 0 else ranked
