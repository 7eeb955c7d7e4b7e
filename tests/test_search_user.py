"""A question about "the user" is asked in the first person
(memchat/engine/search/user.py); the search through every backend is in
tests/conformance/test_semantic_search.py."""

from __future__ import annotations

import pytest

from memchat.engine.search.user import (
    as_the_user,
    in_first_person,
    index_terms,
    name_candidates,
    the_user_named,
)


@pytest.mark.parametrize(
    ("query", "asked"),
    [
        ("Where does the user work?", "Where do I work?"),
        ("Which drug can't the user tolerate?", "Which drug can't I tolerate?"),
        ("Is the user allergic to nuts?", "Am I allergic to nuts?"),
        ("Has the user been to Japan?", "Have I been to Japan?"),
        ("What is the user's long-term ambition?", "What is my long-term ambition?"),
        ("the user's occupation", "My occupation"),
        ("user's wife job", "My wife job"),
        ("The user likes what?", "I like what?"),
        ("用户多大岁数了？", "我多大岁数了？"),
        ("用户的女儿是做什么的？", "我的女儿是做什么的？"),
        ("User 的工作是什么？", "我的工作是什么？"),
    ],
)
def test_the_user_is_asked_about_as_i(query, asked) -> None:
    assert in_first_person(query) == asked


@pytest.mark.parametrize(
    "query",
    [
        "What's my user name for the bank?",
        "Where is the user manual for the oven?",
        "How many users does the forum have?",
        "Who uses the car on Sundays?",
        "我的用户名是什么",
        # The word alone (the memory panel's filter) looks for the word.
        "user",
        "the user's",
        "用户",
        "这个应用的用户体验怎么样",
        "What does Alice do?",
    ],
)
def test_a_user_that_is_a_thing_or_no_user_is_left_alone(query) -> None:
    assert in_first_person(query) == query


@pytest.mark.parametrize(
    ("query", "names"),
    [
        ("Tomás work trip abroad", ("tomás",)),
        ("What is Priya's job?", ("priya",)),
        ("Where does my sister live?", ()),
        ("Tell me when Anna and Tom married", ("anna", "tom")),
        ("王芳 职业", ("王芳",)),
        ("老周是做啥子生意的？", ("老周",)),
        ("豆豆什么时候打疫苗", ()),  # no surname: a nickname, maybe the baby's
        # jieba cuts these in two (周 + 建国, 刘 + 秀英): still one name each.
        ("周建国最馋哪样下酒菜？", ("周建国",)),
        ("刘秀英的生日是哪天", ("刘秀英",)),
        ("我和朋友去吃饭", ()),
    ],
)
def test_the_names_a_question_may_call_the_user_by(query, names) -> None:
    assert name_candidates(query) == names


def test_the_user_is_the_name_most_memories_hold_where_they_also_say_user() -> None:
    # 20 memories: Priya in 8, "user" in 5, her sister Anna in 2.
    df = {"priya": 8, "user": 5, "anna": 2}
    assert the_user_named(("priya",), df, 20) == "priya"
    assert the_user_named(("anna",), df, 20) is None
    # Two people's conversations (LoCoMo's) never say "user": a name says whom a
    # question is about there.
    assert the_user_named(("caroline",), {"caroline": 10, "melanie": 9}, 20) is None
    # 用户 is no index term: a Chinese name needs only its share.
    assert the_user_named(("王芳",), {"王芳": 16}, 36) == "王芳"
    assert the_user_named(("王静",), {"王芳": 16, "王静": 3}, 36) is None
    # A name jieba cuts in two is held in the index by its given name.
    assert index_terms("周建国") == ("建国",)
    assert the_user_named(("周建国",), {"建国": 12}, 36) == "周建国"
    assert the_user_named(("周建国",), {"周建国": 12, "建国": 2}, 36) is None
    # Memories call the user by the given name too (陈丽华 twice, 丽华 seven times).
    assert index_terms("陈丽华") == ("陈丽华", "丽华") and index_terms("王芳") == ("王芳",)
    assert the_user_named(("陈丽华",), {"陈丽华": 2, "丽华": 7}, 38) == "陈丽华"
    assert the_user_named(("陈丽华",), {"陈丽华": 2}, 38) is None


@pytest.mark.parametrize(
    ("query", "name", "asked"),
    [
        ("How much does Tomás get paid?", "tomás", "How much do I get paid?"),
        ("What is Priya's job?", "priya", "What is my job?"),
        ("Priya's sister's job", "priya", "My sister's job"),
        ("王芳 职业", "王芳", "我 职业"),
        ("王芳的家在哪", "王芳", "我的家在哪"),
        ("周建国最馋哪样下酒菜？", "周建国", "我最馋哪样下酒菜？"),
    ],
)
def test_the_user_s_name_is_asked_as_i(query, name, asked) -> None:
    assert as_the_user(query, name) == asked


@pytest.mark.parametrize(("query", "name"), [("Priya", "priya"), ("Priya's", "priya"), ("王芳", "王芳")])
def test_the_user_s_name_alone_is_searched_as_the_name(query, name) -> None:
    assert as_the_user(query, name) == query
