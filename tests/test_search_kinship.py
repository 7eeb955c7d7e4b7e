"""A relative named in two steps is asked about by the one word for them
(memchat/engine/search/kinship.py)."""

from __future__ import annotations

import pytest

from memchat.engine.search.bridge import relation_in
from memchat.engine.search.kinship import in_one_word, named_relative


@pytest.mark.parametrize(
    ("query", "asked"),
    [
        ("我老公的妈妈有什么小动物？", "我婆婆有什么小动物？"),
        ("我的丈夫的爸爸住在哪里", "我公公住在哪里"),
        ("我妈的妈妈住在哪里", "我外婆、姥姥住在哪里"),
        ("我姐姐的老公做什么工作", "我姐夫做什么工作"),
        ("我妹妹的老公做什么工作", "我妹夫做什么工作"),
        ("我老公的姐姐叫什么", "我大姑子叫什么"),
        ("用户老婆的爸爸多大了", "用户的岳父、老丈人多大了"),
        ("What pet does my husband's mother have?", "What pet does my mother-in-law have?"),
        ("Where does my mom's mom live?", "Where does my grandmother, grandma live?"),
        ("What does the mother of my wife do?", "What does my mother-in-law do?"),
        ("How old is the user's brother's daughter?", "How old is the user's niece?"),
        ("What is My Son's Wife called?", "What is My daughter-in-law called?"),
        ("wheres my husbands mum live", "wheres my mother-in-law live"),
        ("What does my wife's mam do?", "What does my mother-in-law do?"),
        ("我太太的爸爸住哪", "我岳父、老丈人住哪"),
        ("我老公妈妈养了什么", "我婆婆养了什么"),
        ("俺媳妇儿姐姐在哪上班", "俺大姨子在哪上班"),
        # No owner, at the start: the user's (Chinese leaves "my" out; search-style queries).
        ("闺女的儿子上初几了？", "我外孙上初几了？"),
        ("我妹的儿子多大", "我外甥多大"),
        ("daughter's son school", "my grandson school"),
        # A partner is a husband or a wife: their parent is either word's.
        ("对象的妈妈身体咋样", "我婆婆、岳母、丈母娘身体咋样"),
        ("What does my partner's sister do?", "What does my sister-in-law do?"),
    ],
)
def test_two_steps_are_asked_as_one_word(query, asked) -> None:
    assert in_one_word(query) == asked


@pytest.mark.parametrize(
    "query",
    [
        "我妈妈有什么爱好",  # one step: my mother
        "我爸妈住在哪",  # my parents, not my father's mother
        "我儿子女儿都在上学",  # my son and my daughter
        "我老妈妈",  # an old mother, not a spouse's
        "我朋友的妈妈是医生",  # no word for a friend's mother
        "What does my friend's mother do?",
        "What does Tom's wife's mother do?",  # not the user's relative
        "my husband likes his mother's cooking",
        "",
    ],
)
def test_other_questions_are_left_as_they_are(query) -> None:
    assert in_one_word(query) is None


@pytest.mark.parametrize(
    "query", ["my huſband's mother", "my ſon's wife", "where does my ſiſ live", "my İ mother"]
)
def test_letters_only_unicode_folds_to_ascii_are_no_relation(query) -> None:
    """Unicode case folding matched the long s to "s" and then found no such word:
    a search for "my huſband's mother" raised KeyError."""
    assert in_one_word(query) is None
    assert relation_in(query) is None


@pytest.mark.parametrize(
    ("query", "names", "second"),
    [
        ("Remind me which day Declan's mam calls", ("Declan",), "mother"),
        ("Where does Bríd's husband work?", ("Bríd",), "husband"),
        ("What is Tom’s DAUGHTER called?", ("Tom",), "daughter"),
        ("老陈的妈妈养了什么宠物？", ("老陈",), "mother"),
        ("谁是王秀英的女儿", ("王秀英", "秀英"), "daughter"),
        ("谁是老陈的姐姐", ("是老陈", "老陈"), "older sister"),
    ],
)
def test_a_relative_of_a_named_person_is_found(query: str, names: tuple[str, ...], second: str) -> None:
    found = named_relative(query)
    assert found is not None
    assert (found.names, found.second) == (names, second)


def test_a_named_relative_in_one_word_replaces_name_and_step() -> None:
    found = named_relative("Remind me which day Declan's mam calls")
    assert found is not None
    assert "husband" in found.firsts() and "son" not in found.firsts()  # no word for a son's mother
    assert found.in_one_word("Declan", "husband") == "Remind me which day my mother-in-law calls"
    found = named_relative("谁是老陈的妈妈")
    assert found is not None
    assert found.in_one_word("老陈", "husband") == "谁是我婆婆"
    assert found.in_one_word("老陈", "wife") == "谁是我岳母、丈母娘"


@pytest.mark.parametrize(
    "query",
    [
        "What is my husband's mother called?",  # the user's own: in_one_word
        "我老公的妈妈住哪",
        "What is Mum's sister called?",  # a relation word, not a name
        "Where does the user's mother live?",
        "declan's mam",  # not written as a name
        "Declan's boat",  # no step
        "Where does Declan live?",
    ],
)
def test_no_named_relative_is_found_where_none_is_named(query: str) -> None:
    assert named_relative(query) is None
