"""The request wrapper a search query loses before it is ranked (search/request.py)."""

from __future__ import annotations

import pytest

from memchat.engine.search.bridge import HAN_RELATION_WORDS
from memchat.engine.search.request import without_request


@pytest.mark.parametrize(
    ("query", "question"),
    [
        ("Remind me when my flight leaves", "when my flight leaves"),
        ("remind me about my next dentist appointment", "my next dentist appointment"),
        ("Tell me my wedding anniversary", "my wedding anniversary"),
        ("Can you please tell me about my sister?", "my sister?"),
        ("Hey, do you remember what my dog is called?", "what my dog is called?"),
        ("I'd like to know where my mother lives", "where my mother lives"),
        ("What do you know about my allergies?", "my allergies?"),
        ("请问我老公叫什么名字", "我老公叫什么名字"),
        ("提醒我出国度假的日期", "出国度假的日期"),
        ("帮我查一下护照号码", "护照号码"),
        ("你还记得我喜欢什么花吗", "我喜欢什么花吗"),
    ],
)
def test_a_leading_request_is_taken_off(query: str, question: str) -> None:
    assert without_request(query, HAN_RELATION_WORDS) == question


def test_a_relation_after_a_chinese_request_keeps_its_owner() -> None:
    """ "告诉我老公是干什么的" asks what *my* husband does: the 我 stays with him."""
    assert without_request("告诉我老公是干什么的", HAN_RELATION_WORDS) == "我老公是干什么的"
    assert without_request("告诉我下次看牙是什么时候", HAN_RELATION_WORDS) == "下次看牙是什么时候"


@pytest.mark.parametrize(
    "query",
    [
        "What is my job?",  # no request
        "Tell me",  # nothing would be left
        "提醒我",
        "Who reminded me to call the bank?",  # not at the start
        "Telling apart the twins",  # a word that only begins like one
        "我告诉老板我要请假",
    ],
)
def test_other_queries_are_left_as_they_are(query: str) -> None:
    assert without_request(query, HAN_RELATION_WORDS) == query
