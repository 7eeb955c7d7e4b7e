"""Idioms said in plain words before a search reads them (search/idioms.py)."""

from __future__ import annotations

import pytest

from memchat.engine.search.idioms import in_plain_words


@pytest.mark.parametrize(
    ("query", "plain"),
    [
        ("What do I do for a living?", "What do I do as a job?"),
        ("What did I do for a living before I retired?", "What did I do as a job before I retired?"),
        ("WHAT DOES MY SON DO FOR A LIVING", "WHAT DOES MY SON DO as a job"),
        ("How do I make a living?", "How do I work?"),
        ("How does my sister earn her living these days?", "How does my sister work these days?"),
        ("Nate makes a living out of gaming", "Nate works out of gaming"),
        ("She earned their living abroad", "She worked abroad"),
        ("Is he still making a living from music?", "Is he still working from music?"),
    ],
)
def test_an_idiom_about_work_is_asked_in_plain_words(query: str, plain: str) -> None:
    assert in_plain_words(query) == plain


@pytest.mark.parametrize(
    ("query", "plain"),
    [
        ("How old is my granddaughter?", "What age is my granddaughter?"),
        ("how old's the grandkid", "what age is the grandkid"),
        ("how old r my kiddos", "what age r my kiddos"),
        ("How old will my mum be this summer?", "What age will my mum be this summer?"),
    ],
)
def test_how_old_asks_for_an_age_not_for_anything_old(query: str, plain: str) -> None:
    """ "How old is my granddaughter?" ranked "his old trawler" and "an old crewmate"
    above the memory giving her age: its "old" is no word of the answer."""
    assert in_plain_words(query) == plain


@pytest.mark.parametrize(
    "query",
    [
        "Where does my sister live?",
        "What does Nate recommend to make a living room comfy?",
        "a rug for a living room",
        "the cost of living in Dublin",
        "Did Grandad make a living will?",
        "living",
        "my old school friend",
        "how older cars pass the MOT",
        "我是做什么工作的？",
        "",
    ],
)
def test_other_words_stay_as_they_are(query: str) -> None:
    assert in_plain_words(query) == query
