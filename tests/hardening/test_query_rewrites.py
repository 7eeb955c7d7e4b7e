"""The search's query rewrites never raise, whatever the text: a request's wrapper
taken off, an idiom in plain words, a relative in two steps asked in one word (the
user's own or a named person's), the relation a question names, the tokens. "my
huſband's mother" once raised KeyError from every search (Unicode's case folding
took the long s for "s")."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memchat.engine.search.answer_types import ANSWER_TYPES, TypedQuestion, states
from memchat.engine.search.bridge import RELATIONS, relation_in, relations_named
from memchat.engine.search.idioms import in_plain_words
from memchat.engine.search.kinship import in_one_word, named_relative
from memchat.engine.search.request import without_request
from memchat.engine.search.tokens import _CJK_CLASS, build_search_tokens, latin_share
from memchat.engine.search.user import as_the_user, in_first_person, name_candidates

from .strategies import ANY_CHAR, given_settings

#: Letters that Unicode case folding matches to ASCII ones (long s, Kelvin, Turkish i).
FOLDING = "ſKİıß"
WORDS = sorted({w for words in RELATIONS.values() for w in words})
PIECES = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(["my ", "My ", "MY ", "the user's ", "'s ", "s ", " of my ", "我", "的", "用户", "俺"]),
    st.sampled_from(["Declan", "Bríd", "老陈", "王秀英", "Ärger", "ǅemal"]),
    st.sampled_from(["Remind me ", "tell me ", "请问", "告诉我", "提醒我"]),
    st.sampled_from([" for a living", " makes a living", " earning their living", " room", " LIVING"]),
    st.sampled_from(list(FOLDING)),
    st.text(ANY_CHAR, max_size=3),
)
QUERIES = st.lists(PIECES, max_size=8).map("".join)


def _folded(text: str) -> str:
    return text.replace("s", "ſ").replace("k", "\u212a").replace("i", "ı")


@given_settings(weight=20)
@given(QUERIES)
@example("İs İ")  # the Turkish capital I folded "İs" to no verb the table holds
def test_no_rewrite_raises(query: str) -> None:
    for text in (query, _folded(query), query.upper()):
        rest = in_plain_words(in_first_person(without_request(text)))
        assert isinstance(rest, str)
        assert in_one_word(rest) is None or isinstance(in_one_word(rest), str)
        named = named_relative(rest)
        if named is not None:
            for name in named.names:
                for first in named.firsts():
                    assert isinstance(named.in_one_word(name, first), str)
        for name in name_candidates(rest):
            assert isinstance(as_the_user(rest, name), str)
        found = relation_in(rest)
        assert found is None or found[0] in RELATIONS
        assert isinstance(build_search_tokens(rest), list)


@given_settings(weight=20)
@given(QUERIES)
@example("Her huſband is a nurse")  # Unicode's case folding took the long s for "s"
def test_reading_a_memory_for_an_answer_never_raises(text: str) -> None:
    """A question asking for a type of answer reads every candidate memory's text
    (search/answer_types.py): "Her huſband is a nurse" once raised KeyError from
    every search for a job."""
    for memory in (text, _folded(text), text.upper()):
        assert relations_named(memory) <= RELATIONS.keys()
        for kind in ANSWER_TYPES:
            for question in (TypedQuestion(kind), TypedQuestion(kind, relation="husband")):
                assert isinstance(states(memory, question), bool)


CJK_LETTER = re.compile(f"[{_CJK_CLASS}]")


def _share_read_by_character(text: str) -> float:
    """The share of non-CJK letters, read one character at a time (what
    tokens.latin_share did before it skipped text without CJK). Digits and other
    numbers belong to no script."""
    letters = [ch for ch in text if unicodedata.category(ch)[0] == "L"]
    if not letters:
        return 1.0
    cjk = sum(1 for ch in letters if CJK_LETTER.fullmatch(ch))
    return 1.0 - cjk / len(letters)


@given_settings(weight=20)
@given(
    st.lists(
        st.one_of(
            st.text(ANY_CHAR, max_size=6),
            st.sampled_from(["咖啡", "Go ", "ｶﾀｶﾅ", "한국", "²", "〇", "Mate 60"]),
        ),
        max_size=6,
    ).map("".join)
)
def test_the_share_of_latin_letters_is_read_as_by_character(text: str) -> None:
    assert latin_share(text) == pytest.approx(_share_read_by_character(text))
