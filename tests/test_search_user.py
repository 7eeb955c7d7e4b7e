"""A question about "the user" is asked in the first person
(memchat/engine/search/user.py); the search through every backend is in
tests/conformance/test_semantic_search.py."""

from __future__ import annotations

import pytest

from memchat.engine.search.user import in_first_person


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
        "这个应用的用户体验怎么样",
        "What does Alice do?",
    ],
)
def test_a_user_that_is_a_thing_or_no_user_is_left_alone(query) -> None:
    assert in_first_person(query) == query
