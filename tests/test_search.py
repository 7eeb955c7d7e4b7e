"""Keyword ranking (reference §4.1) and result assembly: memchat.engine.search (keyword mode)."""

from __future__ import annotations

import random
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memchat.engine import search
from memchat.engine.model import KIND_EPISODE, KIND_FACT, Entry, Memory, SearchOptions
from memchat.engine.search import (
    DEFAULT_MAX_RESULTS,
    MIN_KEYWORD_SCORE,
    build_search_tokens,
    jaccard_tokens,
    keyword_search,
    matches_filters,
    score_entries,
)
from memchat.engine.search import tokens as search_tokens
from memchat.engine.search.keyword import _coverage, _field_stats
from memchat.engine.search.results import finish

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)


def entry(
    entry_id: str,
    text: str,
    topics: tuple[str, ...] | list[str] = (),
    *,
    kind: str = KIND_FACT,
    event_time: datetime | None = None,
    updated: int = 0,
    created: int = 0,
    score: float = 0.0,
) -> Entry:
    """An entry; ``updated`` / ``created`` are minutes after T0."""
    return Entry(
        id=entry_id,
        app="app",
        user="alice",
        memory=Memory(text=text, topics=tuple(topics), kind=kind, event_time=event_time),
        created_at=T0 + timedelta(minutes=created),
        updated_at=T0 + timedelta(minutes=updated),
        score=score,
    )


def ids(entries: list[Entry]) -> list[str]:
    return [e.id for e in entries]


def one_score(text: str, query: str, topics: tuple[str, ...] = ()) -> float:
    return score_entries([entry("x", text, topics)], query)[0]


# ---------------------------------------------------------------------------
# §4.1.6 score vectors
# ---------------------------------------------------------------------------


def test_single_entry_score():
    # coverage 0.4 + rarity 0.0719 + strength 0.1136
    assert one_score("User likes coffee", "coffee") == pytest.approx(0.5856, abs=5e-5)


def test_partial_token_match_score():
    score = one_score("User likes coffee and hiking", "coffee tea", ("preferences",))
    assert score == pytest.approx(0.3566, abs=5e-5)
    assert 0.34 < score < 0.45


def test_topic_only_match_score():
    score = one_score("Some content", "preferences xyz", ("preferences", "hobbies"))
    assert score == pytest.approx(0.3168, abs=5e-5)
    assert 0.3 < score < 0.4


def test_ranking_vector_and_order():
    entries = [
        entry("partial", "User likes coffee", updated=10),
        entry("best", "User likes coffee and tea", updated=0),
        entry("topic", "User likes hiking", ("tea",), updated=20),
        entry("none", "User likes running", updated=30),
    ]
    scores = score_entries(entries, "coffee tea")
    assert scores[0] == pytest.approx(0.4423, abs=5e-5)
    assert scores[1] == pytest.approx(0.8538, abs=5e-5)
    assert scores[2] == pytest.approx(0.3989, abs=5e-5)
    assert scores[3] == 0.0

    results = keyword_search(entries, "coffee tea", SearchOptions())
    # best-older > partial-newer > topic-newest; the no-match entry is excluded.
    assert ids(results) == ["best", "partial", "topic"]
    assert [round(e.score, 4) for e in results] == [0.8538, 0.4423, 0.3989]


def test_rarity_vector():
    entries = [
        entry("c1", "Caroline likes painting"),
        entry("c2", "Caroline likes hiking"),
        entry("c3", "Caroline likes music"),
        entry("rare", "Career planning includes counseling"),
    ]
    scores = score_entries(entries, "Caroline career")
    assert scores[3] == pytest.approx(0.4967, abs=5e-5)
    for score in scores[:3]:
        assert score == pytest.approx(0.3745, abs=5e-5)
    assert ids(keyword_search(entries, "Caroline career", SearchOptions()))[0] == "rare"


# ---------------------------------------------------------------------------
# §4.1.4 exact-phrase fallback and tokenisation edge cases
# ---------------------------------------------------------------------------


def test_special_identifier_raw_fallback():
    assert build_search_tokens("C++") == []
    assert one_score("We ported the parser to C++ last year", "C++") == 0.35
    assert one_score("Something else", "c++", ("Likes C++ a lot",)) == 0.2275
    assert one_score("We use Java", "C++") == 0.0
    results = keyword_search([entry("1", "We ported the parser to C++ last year")], "C++", SearchOptions())
    assert ids(results) == ["1"]
    assert results[0].score == 0.35


@pytest.mark.parametrize("query", ["!!!", "?? ...", "—", "+-*/", "   "])
def test_punctuation_only_query_scores_zero(query):
    entries = [entry("1", "!!! ?? ... — +-*/ punctuation everywhere"), entry("2", "plain text")]
    assert score_entries(entries, query) == [0.0, 0.0]
    assert keyword_search(entries, query, SearchOptions()) == []
    assert keyword_search(entries, query, SearchOptions(similarity_threshold=1e-9)) == []


def test_empty_query_returns_nothing():
    entries = [entry("1", "User likes coffee")]
    assert keyword_search(entries, "", SearchOptions()) == []
    assert keyword_search(entries, "  \t ", SearchOptions()) == []
    assert score_entries(entries, "") == [0.0]
    assert score_entries([], "coffee") == []


def test_no_english_substring_match():
    assert one_score("Learning to concatenate strings", "cat") == 0.0
    assert keyword_search([entry("1", "Learning to concatenate strings")], "cat", SearchOptions()) == []
    assert one_score("The cat sat on the mat", "cat") > MIN_KEYWORD_SCORE


def test_english_tokens_and_stopwords():
    assert build_search_tokens("  The Coffee and the TEA, coffee!  ") == ["coffee", "tea"]
    assert build_search_tokens("the and of is") == []
    # Single ASCII letters are dropped (byte length < 2); digits are kept.
    assert build_search_tokens("a b c 42 x1") == ["42", "x1"]


def test_multi_word_phrase_fallback_on_normalised_text():
    # No token survives (all stopwords), so the normalised-phrase fallback applies.
    assert build_search_tokens("to be or") == []
    assert one_score("It is, to be or not", "To be, or...") == 0.35
    assert one_score("It is: to or be", "to be or") == 0.0


# ---------------------------------------------------------------------------
# §4.1 step 5 ordering, step 8 limit
# ---------------------------------------------------------------------------


def test_ties_break_by_newer_updated_at_then_created_at_then_id():
    entries = [
        entry("b", "User likes coffee", updated=5, created=1),
        entry("a", "User likes coffee", updated=5, created=1),
        entry("old", "User likes coffee", updated=1),
        entry("new", "User likes coffee", updated=9),
        entry("c-newer", "User likes coffee", updated=5, created=3),
    ]
    results = keyword_search(entries, "coffee", SearchOptions())
    assert len({e.score for e in results}) == 1
    assert ids(results) == ["new", "c-newer", "a", "b", "old"]


def test_default_max_results_is_10():
    assert DEFAULT_MAX_RESULTS == 10
    # Same token count everywhere, so every score is equal and recency decides.
    entries = [
        entry(f"m{i:02d}", f"User likes coffee {'abcdefghijklmno'[i] * 2}", updated=i) for i in range(15)
    ]
    results = keyword_search(entries, "coffee", SearchOptions())
    assert len(results) == 10
    assert ids(results) == [f"m{i:02d}" for i in range(14, 4, -1)]
    assert len(keyword_search(entries, "coffee", SearchOptions(max_results=3))) == 3
    assert len(keyword_search(entries, "coffee", SearchOptions(max_results=50))) == 15
    assert len(keyword_search(entries, "coffee", SearchOptions(), default_max=4)) == 4


def test_similarity_threshold_overrides_min_score():
    entries = [entry("best", "User likes coffee and tea"), entry("partial", "User likes coffee")]
    assert ids(keyword_search(entries, "coffee tea", SearchOptions(similarity_threshold=0.8))) == ["best"]
    assert ids(keyword_search(entries, "coffee tea", SearchOptions(), min_score=0.8)) == ["best"]
    assert len(keyword_search(entries, "coffee tea", SearchOptions(), min_score=0)) == 2


def test_order_by_event_time_never_overrides_a_higher_score():
    entries = [
        entry("high-late", "User went hiking with tea and coffee", event_time=T0 + timedelta(days=30)),
        entry("low-early", "User drank coffee and tea", event_time=T0 - timedelta(days=30)),
    ]
    scores = dict(zip(ids(entries), score_entries(entries, "coffee tea hiking"), strict=True))
    assert scores["high-late"] > scores["low-early"] > MIN_KEYWORD_SCORE
    for order in (False, True):
        results = keyword_search(entries, "coffee tea hiking", SearchOptions(order_by_event_time=order))
        assert ids(results) == ["high-late", "low-early"]


def test_order_by_event_time_breaks_score_ties_undated_last():
    entries = [
        entry("undated-newest", "User likes coffee", updated=50),
        entry("late", "User likes coffee", event_time=T0 + timedelta(days=2), updated=10),
        entry("early", "User likes coffee", event_time=T0 + timedelta(days=1), updated=1),
    ]
    plain = keyword_search(entries, "coffee", SearchOptions())
    assert ids(plain) == ["undated-newest", "late", "early"]
    ordered = keyword_search(entries, "coffee", SearchOptions(order_by_event_time=True))
    assert ids(ordered) == ["early", "late", "undated-newest"]


def test_result_order_of_scored_candidates():
    entries = [
        entry("z", "x", score=0.5, updated=1),
        entry("y", "x", score=0.9),
        entry("a", "x", score=0.5, updated=1),
        entry("dated", "x", score=0.5, event_time=T0, updated=0),
    ]
    pairs = [(e.score, e) for e in entries]
    assert ids(finish(pairs, SearchOptions(), 0)) == ["y", "a", "z", "dated"]
    assert ids(finish(pairs, SearchOptions(order_by_event_time=True), 0)) == ["y", "dated", "a", "z"]
    assert ids(sort_results(entries, True)) == ["y", "dated", "a", "z"]  # the plain reference below
    assert ids(entries) == ["z", "y", "a", "dated"]  # input untouched


def test_results_are_copies_with_score():
    original = entry("1", "User likes coffee")
    [result] = keyword_search([original], "coffee", SearchOptions())
    assert result is not original
    assert original.score == 0.0
    assert result.score == pytest.approx(0.5856, abs=5e-5)
    assert replace(result, score=0.0) == original


# ---------------------------------------------------------------------------
# §4.1 step 4 filters and step 6 kind fallback
# ---------------------------------------------------------------------------


def test_kind_filter_uses_effective_kind():
    legacy = entry("legacy", "User likes coffee", kind="")  # empty kind is a fact
    fact = entry("fact", "User likes coffee too", kind=KIND_FACT)
    episode = entry("episode", "User had coffee in Paris", kind=KIND_EPISODE)
    entries = [legacy, fact, episode]
    assert matches_filters(legacy, SearchOptions(kind=KIND_FACT))
    assert not matches_filters(legacy, SearchOptions(kind=KIND_EPISODE))
    assert sorted(ids(keyword_search(entries, "coffee", SearchOptions(kind=KIND_FACT)))) == ["fact", "legacy"]
    assert ids(keyword_search(entries, "coffee", SearchOptions(kind=KIND_EPISODE))) == ["episode"]
    assert len(keyword_search(entries, "coffee", SearchOptions())) == 3


def test_kind_fallback_merges_preferred_kind_first():
    entries = [
        entry("ep", "User had coffee", kind=KIND_EPISODE, updated=0),
        entry("fact-best", "User likes coffee and tea", updated=1),
        entry("fact-ok", "User likes coffee", updated=2),
    ]
    no_fallback = keyword_search(entries, "coffee tea", SearchOptions(kind=KIND_EPISODE))
    assert ids(no_fallback) == ["ep"]

    merged = keyword_search(entries, "coffee tea", SearchOptions(kind=KIND_EPISODE, kind_fallback=True))
    # The episode comes first even though both facts outscore it; the rest in score order.
    assert ids(merged) == ["ep", "fact-best", "fact-ok"]
    assert merged[0].score < merged[1].score
    assert ids(
        keyword_search(
            entries, "coffee tea", SearchOptions(kind=KIND_EPISODE, kind_fallback=True, max_results=2)
        )
    ) == ["ep", "fact-best"]


def test_kind_fallback_only_below_three_results():
    entries = [entry(f"ep{i}", f"User had coffee {i}", kind=KIND_EPISODE, updated=i) for i in range(3)]
    entries.append(entry("fact", "User likes coffee and more coffee"))
    results = keyword_search(entries, "coffee", SearchOptions(kind=KIND_EPISODE, kind_fallback=True))
    assert ids(results) == ["ep2", "ep1", "ep0"]


def test_merge_kind_fallback_rule_of_the_reference_pipeline():
    primary = [entry("p1", "x", kind=KIND_EPISODE, score=0.4)]
    fallback = [
        entry("f-fact-high", "x", kind=KIND_FACT, score=0.9),
        entry("p1", "x", kind=KIND_EPISODE, score=0.4),
        entry("f-ep", "x", kind=KIND_EPISODE, score=0.35),
        entry("f-fact-low", "x", kind="", score=0.31),
    ]
    merged = merge_kind_fallback(primary, fallback, KIND_EPISODE)
    assert ids(merged) == ["p1", "f-ep", "f-fact-high", "f-fact-low"]
    assert ids(merge_kind_fallback(primary, fallback, KIND_FACT)) == [
        "p1",
        "f-fact-high",
        "f-fact-low",
        "f-ep",
    ]
    assert ids(merge_kind_fallback(primary, fallback, KIND_EPISODE, limit=2)) == ["p1", "f-ep"]


def test_time_filters_undated_entries_pass():
    entries = [
        entry("before", "User likes coffee", event_time=datetime(2024, 1, 10, tzinfo=UTC)),
        entry("inside", "User likes coffee", event_time=datetime(2024, 3, 10, tzinfo=UTC)),
        entry("after", "User likes coffee", event_time=datetime(2024, 6, 10, tzinfo=UTC)),
        entry("undated", "User likes coffee"),
    ]
    options = SearchOptions(
        time_after=datetime(2024, 2, 1, tzinfo=UTC), time_before=datetime(2024, 5, 31, 23, 59, 59, tzinfo=UTC)
    )
    assert sorted(ids(keyword_search(entries, "coffee", options))) == ["inside", "undated"]
    assert sorted(
        ids(keyword_search(entries, "coffee", SearchOptions(time_after=datetime(2024, 3, 10, tzinfo=UTC))))
    ) == ["after", "inside", "undated"]
    # Bounds are inclusive.
    exact = SearchOptions(
        time_before=datetime(2024, 3, 10, tzinfo=UTC), time_after=datetime(2024, 3, 10, tzinfo=UTC)
    )
    assert sorted(ids(keyword_search(entries, "coffee", exact))) == ["inside", "undated"]


def test_idf_is_computed_before_filters():
    # Filtering must not change scores: IDF and averages use all of the user's entries.
    entries = [
        entry("ep", "User had coffee", kind=KIND_EPISODE),
        entry("f1", "User likes coffee"),
        entry("f2", "User likes tea"),
    ]
    all_scores = dict(zip(ids(entries), score_entries(entries, "coffee"), strict=True))
    [episode] = keyword_search(entries, "coffee", SearchOptions(kind=KIND_EPISODE))
    assert episode.score == all_scores["ep"]
    assert episode.score != score_entries([entries[0]], "coffee")[0]


# ---------------------------------------------------------------------------
# §4.1.5 dedup
# ---------------------------------------------------------------------------


def test_dedup_drops_lower_scored_near_duplicate():
    entries = [
        entry("short", "User likes coffee"),
        entry("dup-newer", "user likes COFFEE!", updated=5),
        entry("other", "User likes coffee and cake"),
    ]
    plain = keyword_search(entries, "coffee", SearchOptions())
    assert len(plain) == 3
    deduped = keyword_search(entries, "coffee", SearchOptions(deduplicate=True))
    # "dup-newer" ties with "short" on score and wins the tie (newer), so "short" is dropped;
    # {user, likes, coffee} vs {user, likes, coffee, cake} is 3/4 < 0.8, so "other" survives.
    assert ids(deduped) == ["dup-newer", "other"]


def test_dedup_compares_with_every_higher_scored_entry():
    words = [f"w{i}" for i in range(13)]
    a = entry("a", " ".join(words[0:10]), score=0.9)
    b = entry("b", " ".join([*words[0:9], words[10]]), score=0.8)  # J(a, b) = 9/11
    c = entry("c", " ".join([*words[0:8], *words[10:12]]), score=0.7)  # J(b, c) = 9/11, J(a, c) = 8/12
    d = entry("d", "completely different words here", score=0.95)
    # c is dropped because of b even though b itself was dropped (pairwise semantics);
    # survivors keep the input order.
    assert ids(deduplicate([c, a, d, b])) == ["a", "d"]
    # The engine's result assembly agrees (results in score order).
    pairs = [(e.score, e) for e in (c, a, d, b)]
    assert ids(finish(pairs, SearchOptions(deduplicate=True), 0)) == ["d", "a"]
    assert ids(finish(pairs, SearchOptions(deduplicate=True, kind="fact", kind_fallback=True), 0)) == [
        "d",
        "a",
    ]
    # Exactly 0.8 counts as a duplicate.
    assert ids(
        deduplicate([entry("x", "aa bb cc dd", score=1), entry("y", "aa bb cc dd ee", score=0.5)])
    ) == ["x"]
    # Two empty token sets are never duplicates.
    empties = [
        entry("e1", "!!!", score=0.5),
        entry("e2", "the of and", score=0.4),
        entry("e3", "???", score=0.3),
    ]
    assert ids(deduplicate(empties)) == ["e1", "e2", "e3"]
    assert deduplicate([]) == []


def test_jaccard_tokens():
    assert jaccard_tokens("User likes coffee, coffee!") == {"user", "likes", "coffee"}
    assert jaccard_tokens("我喜欢Python编程") == {"喜欢", "编程", "python", "我喜欢"}
    assert jaccard_tokens("...") == set()


# ---------------------------------------------------------------------------
# CJK
# ---------------------------------------------------------------------------

ZHANG = "张三喜欢 Go 语言编程"


def test_chinese_memory_tokens():
    # jieba's search mode; Latin runs come from the English pass, after the CJK tokens.
    assert build_search_tokens(ZHANG) == ["张三", "喜欢", "语言", "编程", "go"]
    assert build_search_tokens("喜欢 爱好 兴趣 偏好") == ["喜欢", "爱好", "兴趣", "偏好"]
    # "我" is a single rune and a stopword; "什么" is kept.
    assert build_search_tokens("我喜欢什么") == ["喜欢", "什么"]


def test_a_name_glued_to_the_next_word_is_a_token_too():
    """jieba's search mode glues an unknown name to what follows it (林晓对, 孙浩和林晓);
    the tagger's cut of the run adds the names (the glued run stays)."""
    assert build_search_tokens("林晓对芒果过敏。") == ["林晓对", "林晓", "芒果", "过敏"]
    assert {"孙浩", "林晓"} <= set(build_search_tokens("孙浩和林晓的结婚纪念日是5月20日。"))
    # Read with what follows it: "孙浩养" alone is one three-rune name to the tagger.
    assert "孙浩" in build_search_tokens("孙浩养了一只柯基犬，名叫馒头。")
    assert build_search_tokens("林晓的生日在十月。") == ["林晓", "生日", "十月"]  # not glued: as before


def test_a_familiar_name_jieba_splits_is_one_token():
    """小/老/阿 before a surname names someone familiar; jieba keeps some (小张, 老李)
    and splits others (小 + 刘是)."""
    assert build_search_tokens("小刘是我的同事，在银行上班") == ["小刘", "同事", "银行", "上班"]
    assert build_search_tokens("老陈有什么爱好") == ["老陈", "什么", "爱好"]
    assert build_search_tokens("小张和老李是朋友") == ["小张", "老李", "朋友"]  # jieba's own: as before
    # A surname rune that starts a real word stays that word.
    assert build_search_tokens("我下载了一个小程序") == ["下载", "程序"]
    assert build_search_tokens("小于十个") == ["小于", "十个"]
    assert build_search_tokens("老公在小区门口") == ["老公", "小区", "门口"]


def test_a_chinese_name_finds_every_memory_that_names_it():
    texts = ["林晓对芒果过敏。", "孙浩和林晓的结婚纪念日是5月20日。", "林晓的生日在十月。"]
    texts.append("孙浩养了一只柯基犬。")
    entries = [entry(f"m{i}", text) for i, text in enumerate(texts)]
    assert sorted(ids(keyword_search(entries, "林晓", SearchOptions()))) == ["m0", "m1", "m2"]
    assert sorted(ids(keyword_search(entries, "孙浩", SearchOptions()))) == ["m1", "m3"]


def test_a_query_listing_alternatives_finds_a_memory_holding_one():
    memory = entry("zhang", ZHANG)
    # Only "喜欢" of the four query tokens matches. The reference's coverage 1/4 gave
    # 0.4*0.25 + 0.25*rarity + 0.25*(1/2.2) = 0.2298, under the 0.3 minimum: the seed
    # demo's own query found nothing. The first matched term now covers half the query.
    score = score_entries([memory], "喜欢 爱好 兴趣 偏好")[0]
    assert score == pytest.approx(0.2298 + 0.4 * (0.5 - 0.25), abs=5e-5)
    assert ids(keyword_search([memory], "喜欢 爱好 兴趣 偏好", SearchOptions())) == ["zhang"]


def test_a_chinese_question_finds_the_memory_it_asks_about():
    memory = entry("zhang", ZHANG)
    # "我喜欢什么" -> primary tokens [喜欢, 什么] (weight 1) plus the trigrams 我喜欢, 喜欢什,
    # 欢什么 (weight 0.45 each). Only "喜欢" is in the memory: coverage max(1/3.35, 0.5).
    score = score_entries([memory], "我喜欢什么")[0]
    assert score == pytest.approx(0.2533 + 0.4 * (0.5 - 1 / 3.35), abs=5e-5)
    assert ids(keyword_search([memory], "我喜欢什么", SearchOptions())) == ["zhang"]


def test_coverage_is_the_reference_share_up_to_two_terms_and_never_below_it():
    for total in (1.0, 1.45, 2.0):
        for matched in (0.0, 0.45, 1.0, total):
            if matched <= total:
                assert _coverage(matched, total) == pytest.approx(matched / max(total, 1.0))
    assert _coverage(1.0, 4.0) == 0.5  # one of four alternatives
    assert _coverage(2.0, 4.0) == pytest.approx(0.5 + 0.5 / 3)
    assert _coverage(4.0, 4.0) == 1.0
    for total in (2.5, 3.0, 4.0, 7.35):
        steps = [i * 0.05 * total for i in range(21)]
        values = [_coverage(m, total) for m in steps]
        assert values == sorted(values)  # more matched, more covered
        assert all(v >= m / total - 1e-12 for v, m in zip(values, steps, strict=True))


def test_chinese_query_found_at_default_threshold():
    entries = [entry("zhang", ZHANG), entry("other", "李四住在上海"), entry("en", "User likes coffee")]
    results = keyword_search(entries, "喜欢编程", SearchOptions())
    assert ids(results) == ["zhang"]
    assert results[0].score > MIN_KEYWORD_SCORE
    assert ids(keyword_search(entries, "go", SearchOptions())) == ["zhang"]


def test_cjk_trigram_fallback_kana():
    # Kana text (no Han) is split into raw CJK runs: the query token "だいすき" is not a
    # token of the memory ("すしがだいすきです" is one run), so only the 0.45-weight
    # trigrams だいす / いすき match.
    memory = entry("sushi", "すしがだいすきです")
    assert build_search_tokens("だいすき") == ["だいすき"]
    assert build_search_tokens("すしがだいすきです") == ["すしがだいすきです"]
    score = score_entries([memory], "だいすき")[0]
    assert score == pytest.approx(0.3425, abs=5e-5)
    assert ids(keyword_search([memory], "だいすき", SearchOptions())) == ["sushi"]
    assert score_entries([memory], "ラーメン")[0] == 0.0


def test_cjk_trigram_adds_to_han_matching():
    memory = entry("tiananmen", "北京天安门广场")
    assert build_search_tokens("京天安门") == ["天安", "天安门"]
    with_trigram = score_entries([memory], "京天安门")[0]
    assert with_trigram == pytest.approx(0.7898, abs=5e-5)
    assert ids(keyword_search([memory], "京天安门", SearchOptions())) == ["tiananmen"]


def test_single_cjk_rune_query_uses_phrase_fallback():
    # A one-rune query keeps its rune as a token, but documents never hold single-rune
    # tokens, so the normalised-phrase fallback scores the substring match 0.35.
    assert build_search_tokens("茶") == ["茶"]
    assert build_search_tokens(" 茶！") == ["茶"]
    assert build_search_tokens("我") == []  # stopword
    assert one_score("我喜欢喝茶", "茶") == 0.35
    assert one_score("我喜欢喝咖啡", "茶") == 0.0


def test_mixed_cjk_latin_no_double_count():
    stats = _field_stats("我喜欢Python编程")
    assert stats.tf["python"] == 1
    assert stats.tokens == ("喜欢", "编程", "python")
    assert stats.length == 4  # three primary tokens + the trigram 我喜欢
    assert build_search_tokens("我喜欢Python编程") == ["喜欢", "编程", "python"]
    # Same score as the single-entry English vector: python tf 1 in a field of length 4 = average.
    assert one_score("我喜欢Python编程", "python") == pytest.approx(0.5856, abs=5e-5)


def test_hangul_raw_runs():
    assert build_search_tokens("안녕하세요 세계") == ["안녕하세요", "세계"]
    assert one_score("세계 여행", "세계") == pytest.approx(0.5856, abs=5e-5)


def test_without_jieba_han_text_falls_back_to_raw_cjk_runs(monkeypatch):
    monkeypatch.setattr(search_tokens, "jieba_module", lambda: None)
    search.clear_caches()
    try:
        assert build_search_tokens(ZHANG) == ["张三喜欢", "语言编程", "go"]
        assert build_search_tokens("我的") == []  # made only of single-rune stopwords
        # The trigram fallback still lets a partial query match.
        assert score_entries([entry("zhang", ZHANG)], "三喜欢吗")[0] > 0  # trigram 三喜欢
    finally:
        search.clear_caches()


def test_jieba_is_imported_lazily():
    code = (
        "import sys\n"
        "from memchat.engine import search\n"
        "search.build_search_tokens('User likes coffee')\n"
        "search.build_search_tokens('안녕하세요 すし')\n"
        "assert 'jieba' not in sys.modules, 'imported too early'\n"
        "assert search.build_search_tokens('喜欢编程') == ['喜欢', '编程']\n"
        "assert 'jieba' in sys.modules\n"
    )
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root, check=False
    )
    assert result.returncode == 0, result.stderr
    assert "Building prefix dict" not in result.stderr  # jieba's logging is silenced


# ---------------------------------------------------------------------------
# The optimised pipeline equals a plain composition of the reference's steps.
# ---------------------------------------------------------------------------


def sort_results(entries: list[Entry], order_by_event_time: bool) -> list[Entry]:
    """Score desc; [event_time asc, undated last]; updated_at desc; created_at desc; id."""

    def event_key(e: Entry):
        return (
            (1, datetime.min.replace(tzinfo=UTC)) if e.memory.event_time is None else (0, e.memory.event_time)
        )

    result = sorted(entries, key=lambda e: e.id)
    result.sort(key=lambda e: e.created_at, reverse=True)
    result.sort(key=lambda e: e.updated_at, reverse=True)
    if order_by_event_time:
        result.sort(key=event_key)
    result.sort(key=lambda e: e.score, reverse=True)
    return result


def merge_kind_fallback(
    primary: list[Entry], fallback: list[Entry], kind: str, *, limit: int = 0
) -> list[Entry]:
    """§4.1 step 6: the primary results, then unseen fallback entries of ``kind``, then the rest."""
    seen = {e.id for e in primary}
    rest = [e for e in fallback if e.id not in seen and not seen.add(e.id)]  # type: ignore[func-returns-value]
    merged = [*primary, *(e for e in rest if (e.memory.kind or KIND_FACT) == kind)]
    merged += [e for e in rest if (e.memory.kind or KIND_FACT) != kind]
    return merged[:limit] if limit > 0 else merged


def deduplicate(entries: list[Entry]) -> list[Entry]:
    """§4.1.5: drop an entry with a higher-scored (stable order) near-duplicate; input order kept."""
    order = sorted(range(len(entries)), key=lambda i: entries[i].score, reverse=True)
    sets = [jaccard_tokens(e.memory.text) for e in entries]
    kept = set()
    for pos, i in enumerate(order):
        if not any(
            sets[i]
            and sets[order[j]]
            and len(sets[i] & sets[order[j]]) * 5 >= 4 * len(sets[i] | sets[order[j]])
            for j in range(pos)
        ):
            kept.add(i)
    return [e for i, e in enumerate(entries) if i in kept]


def reference_pipeline(entries, query, options, min_score=MIN_KEYWORD_SCORE, default_max=DEFAULT_MAX_RESULTS):
    query = query.strip()
    if not query:
        return []
    limit = options.max_results if options.max_results > 0 else default_max
    threshold = options.similarity_threshold if options.similarity_threshold > 0 else min_score
    scores = score_entries(entries, query)
    passing = [
        e.with_score(s)
        for e, s in zip(entries, scores, strict=True)
        if (s >= threshold if threshold > 0 else s > 0)
    ]
    results = sort_results([e for e in passing if matches_filters(e, options)], options.order_by_event_time)
    if options.kind and options.kind_fallback and len(results) < 3:
        unfiltered = replace(options, kind="", kind_fallback=False)
        fallback = sort_results(
            [e for e in passing if matches_filters(e, unfiltered)], options.order_by_event_time
        )
        results = merge_kind_fallback(results, fallback, options.kind, limit=limit)
    if options.deduplicate and len(results) > 1:
        results = deduplicate(results)
    return results[:limit] if limit > 0 else results


def test_keyword_search_matches_reference_pipeline():
    rng = random.Random(20240501)
    vocab = ["coffee", "tea", "hiking", "user", "likes", "paris", "music", "喜欢", "编程", "the", "C++"]
    for _ in range(300):
        entries = []
        for i in range(rng.randint(0, 25)):
            words = rng.choices(vocab, k=rng.randint(1, 5))
            entries.append(
                entry(
                    f"id{rng.randint(0, 99):02d}-{i}",
                    " ".join(words),
                    rng.sample(["drinks", "travel", "tea"], k=rng.randint(0, 2)),
                    kind=rng.choice(["", KIND_FACT, KIND_EPISODE]),
                    event_time=rng.choice([None, T0, T0 + timedelta(days=rng.randint(-5, 5))]),
                    updated=rng.randint(0, 3),
                    created=rng.randint(0, 2),
                )
            )
        query = " ".join(rng.choices(vocab, k=rng.randint(1, 3)))
        options = SearchOptions(
            kind=rng.choice(["", "", KIND_FACT, KIND_EPISODE]),
            time_after=rng.choice([None, T0 - timedelta(days=2)]),
            time_before=rng.choice([None, T0 + timedelta(days=2)]),
            max_results=rng.choice([0, 0, 1, 2, 5]),
            similarity_threshold=rng.choice([0.0, 0.0, 0.2, 0.5]),
            order_by_event_time=rng.random() < 0.5,
            kind_fallback=rng.random() < 0.5,
            deduplicate=rng.random() < 0.5,
        )
        default_max = rng.choice([10, 3])
        got = keyword_search(entries, query, options, default_max=default_max)
        want = reference_pipeline(entries, query, options, default_max=default_max)
        assert [(e.id, e.score) for e in got] == [(e.id, e.score) for e in want], (query, options)
