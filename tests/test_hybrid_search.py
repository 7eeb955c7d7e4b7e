"""Hybrid search: the fusion in engine/search.py (pure functions, hand-made
scores) and end to end through the service on sqlitevec with the offline
embedder. The fusion is the same code for every vector backend."""

from __future__ import annotations

import hashlib
import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from memchat.engine import MemoryService, Metadata, SearchOptions, UserKey
from memchat.engine import search as S
from memchat.engine.model import Entry, Memory

KEY = UserKey("test-app", "user-1")
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def entry(
    i: int, text: str, *, kind: str = "fact", when: datetime | None = None, score: float = 0.0
) -> Entry:
    at = T0 + timedelta(seconds=i)
    return Entry(f"m{i}", KEY.app, KEY.user, Memory(text, kind=kind, event_time=when), at, at, score=score)


# -- pure fusion ---------------------------------------------------------------


def test_scores_are_a_convex_combination_of_honest_similarities() -> None:
    coffee = entry(1, "User likes coffee")
    cars = entry(2, "User drives a red Volvo")
    everything = [coffee, cars]
    dense = [coffee.with_score(0.8), cars.with_score(-0.2)]
    ranking = S.HybridRanking(everything, dense, "coffee", dense_complete=True)
    keyword = S.lexical_scores(everything, "coffee")
    assert keyword[0] > 0 and keyword[1] == 0
    w_dense, w_keyword, w_tokens = S.HYBRID_WEIGHTS
    floor = S.HYBRID_SEMANTIC_FLOOR * 0.8  # a strong semantic hit keeps at least this
    assert ranking.score("m1") == pytest.approx(
        max((w_dense + w_tokens) * 0.8 + w_keyword * keyword[0], floor)
    )
    assert ranking.score("m2") == 0.0  # negative cosine counts as no similarity
    ranking.set_token_similarities({"m1": 0.5})
    mix = w_dense * 0.8 + w_keyword * keyword[0] + w_tokens * 0.5
    assert ranking.score("m1") == pytest.approx(max(mix, floor))
    results = ranking.results(SearchOptions())
    assert [r.id for r in results] == ["m1"]  # m2: no keyword, nothing above an unrelated memory
    assert all(0.0 <= r.score <= 1.0 for r in results)
    unfloored = S.HybridRanking(everything, dense, "coffee", dense_complete=True, background_alpha=None)
    assert [r.id for r in unfloored.results(SearchOptions())] == ["m1", "m2"]
    # A perfect match on every signal is exactly 1.
    perfect = S.HybridRanking([coffee], [coffee.with_score(1.0)], "User likes coffee", dense_complete=True)
    perfect.set_token_similarities({"m1": 1.0})
    [lexical] = S.lexical_scores([coffee], "User likes coffee")
    expected = S.HYBRID_WEIGHTS[0] + S.HYBRID_WEIGHTS[2] + S.HYBRID_WEIGHTS[1] * lexical
    assert perfect.score("m1") == pytest.approx(expected)


def _collection(cosines: list[float], texts: list[str] | None = None) -> tuple[list[Entry], list[Entry]]:
    texts = texts or [f"memory number {i} about topic{i}" for i in range(len(cosines))]
    entries = [entry(i, text) for i, text in enumerate(texts)]
    return entries, [e.with_score(c) for e, c in zip(entries, cosines, strict=True)]


def test_the_relevance_floor_is_relative_to_the_querys_background() -> None:
    e5 = S.calibration_for(type("E", (), {"name": "multilingual-e5-small"})())
    # Twenty memories whose cosines with the query are all alike: none stands out.
    flat = [0.80 + 0.002 * (i % 7) for i in range(20)]
    entries, dense = _collection(flat)
    ranking = S.HybridRanking(entries, dense, "zzz", dense_complete=True, calibration=e5)
    assert ranking.results(SearchOptions()) == []
    # The same background with one memory far above it: that one is kept, alone.
    entries, dense = _collection([*flat[:-1], 0.90])
    ranking = S.HybridRanking(entries, dense, "zzz", dense_complete=True, calibration=e5)
    assert [r.id for r in ranking.results(SearchOptions())] == ["m19"]
    assert ranking.z_score("m19") > 5
    # A keyword match always stays, whatever its cosine.
    entries, dense = _collection(flat)
    ranking = S.HybridRanking(entries, dense, "topic3", dense_complete=True, calibration=e5)
    assert [r.id for r in ranking.results(SearchOptions())] == ["m3"]
    # The floor can be turned off.
    off = S.HybridRanking(entries, dense, "zzz", dense_complete=True, calibration=e5, background_alpha=None)
    assert len(off.results(SearchOptions(max_results=50))) == 20


def test_the_relevance_floor_never_hides_a_memory_that_scores_more_than_one_it_shows() -> None:
    """A keyword match stays whatever its cosine; a memory that scores more than it
    (here by its meaning, a little short of an outlier) is shown too. "What does my
    father-in-law do for fun?" showed a memory about a favourite dish (a keyword
    holder) and hid the best-scored one, about his fishing."""
    e5 = S.calibration_for(type("E", (), {"name": "multilingual-e5-small"})())
    # A wide, even spread, and one a little above it: not an outlier, and not as
    # close as the median answer is ((e5.unrelated + e5.answer) / 2 = 0.852).
    cosines = [0.30 + 0.50 * i / 18 for i in range(19)] + [0.845]
    cosines[3] = 0.70
    entries, dense = _collection(cosines)
    # "zebra" matches nothing: m3's keyword match is a weak one.
    ranking = S.HybridRanking(entries, dense, "topic3 zebra", dense_complete=True, calibration=e5)
    results = ranking.results(SearchOptions())
    assert [r.id for r in results] == ["m19", "m3"]
    assert ranking.score("m18") < ranking.score("m3")  # scores less than what is shown: hidden
    assert ranking.keyword.get("m19") is None and ranking.z_score("m19") < S.fusion.HYBRID_MIN_Z
    assert ranking.dense["m19"] < S.fusion.HYBRID_ANSWER_RELEVANCE
    # Without the keyword holder, nothing has evidence of its own: nothing is shown.
    ranking = S.HybridRanking(entries, dense, "zzz", dense_complete=True, calibration=e5)
    assert ranking.results(SearchOptions()) == []


def test_a_score_a_hair_below_the_floor_s_level_ties_with_it() -> None:
    """The same text's cosine moves by about a percent between machines: a memory
    scoring 1 % less than the least one shown is shown too, one 5 % less is not."""
    e5 = S.calibration_for(type("E", (), {"name": "multilingual-e5-small"})())
    cosines = [0.70 + 0.16 * i / 19 for i in range(20)]
    cosines[3] = 0.70  # m3 holds the query's word: the least score with evidence
    entries, dense = _collection(cosines)
    ranking = S.HybridRanking(entries, dense, "topic3", dense_complete=True, calibration=e5)
    level = ranking.score("m3")
    weight = ranking.w_dense + ranking.w_tokens  # no keyword, no token look here

    def cosine_scoring(target: float) -> float:
        low, high = 0.0, 1.0
        for _ in range(60):
            mid = (low + high) / 2
            low, high = (mid, high) if weight * e5.relevance(mid) < target else (low, mid)
        return high

    cosines[18], cosines[17] = cosine_scoring(level * 0.99), cosine_scoring(level * 0.95)
    entries, dense = _collection(cosines)
    ranking = S.HybridRanking(entries, dense, "topic3", dense_complete=True, calibration=e5)
    assert ranking.score("m18") < ranking.score("m3") == pytest.approx(level)
    assert max(ranking.z_score("m18"), ranking.z_score("m17")) < S.fusion.HYBRID_MIN_Z  # no evidence
    shown = [r.id for r in ranking.results(SearchOptions())]
    assert "m18" in shown and "m3" in shown and "m17" not in shown


def test_the_background_is_fitted_from_the_nearest_memories_when_that_is_all_there_is() -> None:
    from statistics import NormalDist

    normal = NormalDist(0.78, 0.02)
    size = 400
    cosines = [normal.inv_cdf(1 - (k + 0.5) / size) for k in range(size)]
    centre, spread = S.fusion.background(cosines)
    assert centre == pytest.approx(0.78, abs=1e-3) and spread == pytest.approx(0.02, rel=0.05)
    centre, spread = S.fusion.background(cosines[:100], size)  # the store's best 100 of 400
    assert centre == pytest.approx(0.78, abs=1e-3) and spread == pytest.approx(0.02, rel=0.05)
    assert S.fusion.background(cosines[:5]) is None  # too few to tell


def test_each_script_is_its_own_background() -> None:
    e5 = S.calibration_for(type("E", (), {"name": "multilingual-e5-small"})())
    english = [f"memory number {i} about topic{i}" for i in range(12)]
    chinese = ["我养了一只猫", "我喜欢喝茶", "我住在上海", "我会弹钢琴"]
    # A query in neither's words sits higher with the Chinese block as a whole: no outlier.
    cosines = [0.78 + 0.002 * (i % 5) for i in range(12)] + [0.84, 0.845, 0.85, 0.842]
    entries, dense = _collection(cosines, english + chinese)
    ranking = S.HybridRanking(entries, dense, "zzz", dense_complete=True, calibration=e5)
    assert ranking.results(SearchOptions()) == []


def test_stemming_lets_keyword_matches_cross_word_forms() -> None:
    entries = [entry(1, "Melanie painted a sunrise"), entry(2, "Melanie ran a marathon")]
    assert S.score_entries(entries, "paint")[0] == 0  # the keyword path does not stem
    scores = S.lexical_scores(entries, "When did Melanie paint?")
    assert scores[0] > scores[1]
    assert S.stem_text("Running Dogs") == "run dog"


def test_the_words_that_frame_a_question_match_nothing_in_hybrid_search() -> None:
    """Hybrid search's keyword side drops a question's function words ("who", "my",
    "at": NLTK's English list): they matched memories as content words do, and
    ranked memories holding "at" or "who" above the one that answers."""
    friend = entry(1, "Owen's best friend from university is Raj")
    early = entry(2, "Owen gets up at six o'clock every weekday")
    teacher = entry(3, "Harriet is a primary school teacher who teaches Year 4")
    question = "Who was my closest mate at uni?"
    assert S.lexical_scores([early, teacher], question) == [0.0, 0.0]
    # Keyword search keeps the reference's scoring and its 22 stopwords: they match there.
    assert all(score > 0 for score in S.score_entries([early, teacher], question))
    everything = [friend, early, teacher]
    dense = [friend.with_score(0.45), early.with_score(0.3), teacher.with_score(0.29)]
    ranking = S.HybridRanking(everything, dense, question, dense_complete=True, background_alpha=None)
    assert [r.id for r in ranking.results(SearchOptions())] == ["m1", "m2", "m3"]
    w_dense, _, w_tokens = S.HYBRID_WEIGHTS
    assert ranking.score("m2") == pytest.approx((w_dense + w_tokens) * 0.3)  # its meaning alone
    # Content words still match, in any form; a question of function words alone keeps them.
    assert S.lexical_scores([friend], "Where did my best friends study?")[0] > 0
    assert S.lexical_scores([entry(4, "Who am I? A nurse in Berlin")], "who am I")[0] > 0
    assert S.lexical_query("Do I own a car?").split() == ["car?"]


def test_light_verbs_in_a_question_match_nothing_in_hybrid_search() -> None:
    """The light verbs "get" and "go" (SMART's stoplist has them, and the modals) frame a question
    as "do" does: "How do I get to work?" ranked a wedding above the commute."""
    commute = entry(1, "Owen cycles to the office along the canal")
    wedding = entry(2, "Raj is getting married in Manchester in June")
    question = "How do I get to work?"
    assert S.lexical_query(question).split() == ["work?"]
    assert S.lexical_scores([wedding], question) == [0.0]
    dense = [commute.with_score(0.5), wedding.with_score(0.4)]
    ranking = S.HybridRanking([commute, wedding], dense, question, dense_complete=True, background_alpha=None)
    assert [r.id for r in ranking.results(SearchOptions())] == ["m1", "m2"]
    # Where nothing else is left they still count, and other verbs stay content words.
    assert S.lexical_query("where did I go").split() == ["where", "did", "i", "go"]
    assert S.lexical_query("What would I like to eat?").split() == ["like", "eat?"]


def test_word_pieces_do_not_rank_a_memory_in_the_other_script() -> None:
    """The word pieces (MiniLM's) read no Chinese: against an English question a
    Chinese memory's piece similarity is noise, so its weight goes to the memory's
    meaning. It ranked the memory that answers under unrelated ones and under the
    relevance floor ("What's my cat called?" found nothing)."""
    e5 = S.calibration_for(type("E", (), {"name": "multilingual-e5-small"})())
    cat = entry(1, "伟明养了一只橘猫，名字叫土豆。")
    bank = entry(2, "伟明的妻子周雯在银行做柜员。")
    job = entry(3, "Weiming works as a back-end developer")
    memories = [cat, bank, job]
    dense = [cat.with_score(0.80), bank.with_score(0.72), job.with_score(0.74)]
    ranking = S.HybridRanking(memories, dense, "What's my cat called?", dense_complete=True, calibration=e5)
    w_dense, _, w_tokens = S.HYBRID_WEIGHTS
    ranking.set_token_similarities({"m1": 0.05, "m2": 0.6, "m3": 0.3})
    assert ranking.score("m1") == pytest.approx((w_dense + w_tokens) * e5.relevance(0.80))
    assert ranking.score("m2") == pytest.approx((w_dense + w_tokens) * e5.relevance(0.72))
    # A memory in the query's own script keeps its piece similarity.
    assert ranking.score("m3") == pytest.approx(w_dense * e5.relevance(0.74) + w_tokens * 0.3)
    assert [r.id for r in ranking.results(SearchOptions())] == ["m1", "m3"]


def test_a_keyword_only_candidate_gets_at_most_the_last_dense_score() -> None:
    near, far = entry(1, "alpha"), entry(2, "lexical beta")
    ranking = S.HybridRanking([near, far], [near.with_score(0.6)], "lexical")
    assert ranking.dense_floor == 0.6 and ranking.dense.get("m2") is None
    complete = S.HybridRanking([near, far], [near.with_score(0.6)], "lexical", dense_complete=True)
    assert complete.dense_floor == 0.0  # the store returned everything: m2 has no vector


def test_a_memory_as_close_as_an_answer_is_kept_inside_a_block_of_its_own_topic() -> None:
    """Four Chinese memories among thirty English ones, three of them on learning
    Chinese: "公司里谁跟我用汉语聊天？" found nothing, though its answer scored 0.42,
    because the answer could not stand out of a block that all sat near it. A cosine
    as high as the calibration's median answer's is evidence of its own; one a little
    lower, with no more standing out, is still not."""
    e5 = S.calibration_for(type("E", (), {"name": "multilingual-e5-small"})())
    english = [f"memory number {i} about topic{i}" for i in range(30)]
    chinese = ["我养了一只猫", "我喜欢喝茶", "我在学中文", "同事陈伟常陪我练口语"]
    median_answer = (e5.unrelated + e5.answer) / 2
    for cosine, kept in ((median_answer + 0.01, ["m33"]), (median_answer - 0.01, [])):
        cosines = [0.70 + 0.1 * i / 29 for i in range(30)] + [0.82, 0.83, 0.835, cosine]
        entries, dense = _collection(cosines, english + chinese)
        ranking = S.HybridRanking(entries, dense, "谁跟我用汉语聊天", dense_complete=True, calibration=e5)
        assert not ranking.keyword and ranking.z_score("m33") < ranking._outlier_level()
        assert [r.id for r in ranking.results(SearchOptions())] == kept


def test_a_memory_both_models_stand_out_together_is_kept() -> None:
    """ "What's my job?" over ten of Alice's memories found nothing: the job's cosine
    stood 1.4 spreads out, short of the 1.5 the floor asks, though the word pieces
    stood it out too. Two models at least one spread each and their Stouffer sum at
    the level is evidence; either model alone short of one spread is not."""
    e5 = S.calibration_for(type("E", (), {"name": "multilingual-e5-small"})())
    background = [0.80 + 0.004 * ((7 * i) % 11) for i in range(19)]

    def ranking(cosine: float, token: float) -> S.HybridRanking:
        entries, dense = _collection([*background, cosine])
        ranked = S.HybridRanking(entries, dense, "what is my job", dense_complete=True, calibration=e5)
        pieces = {f"m{i}": 0.10 + 0.01 * ((3 * i) % 7) for i in range(19)}
        ranked.set_token_similarities({**pieces, "m19": token})
        return ranked

    def kept(ranked: S.HybridRanking) -> list[str]:
        return [r.id for r in ranked.results(SearchOptions())]

    level = ranking(0.84, 0.5)._outlier_level()
    together = ranking(0.84, 0.20)
    assert 1.0 <= together.z_score("m19") < level and not together.keyword
    assert kept(together) == ["m19"]
    assert kept(ranking(0.84, 0.13)) == []  # the pieces see nothing special in it
    alone = ranking(0.83, 0.60)  # the pieces shout, the cosine barely stands out
    assert alone.z_score("m19") < 1.0 and kept(alone) == []


def test_a_memory_giving_the_answer_type_asked_for_is_kept_and_lifted() -> None:
    """ "When's my birthday again?" shares no word with "Morag was born on 14 March
    1978", and its cosine stands out of nothing: the question asks for a birth, the
    memory gives the user's (search/answer_types.py), so it is kept, first. Her
    brother's birth is his, and a question asking for no type keeps nothing."""
    e5 = S.calibration_for(type("E", (), {"name": "multilingual-e5-small"})())
    texts = [f"memory number {i} about topic{i}" for i in range(18)]
    texts += ["Morag was born on 14 March 1978 in Maryhill", "Morag's brother Gregor was born in 1975"]
    flat = [0.80 + 0.002 * (i % 7) for i in range(20)]

    def kept(query: str) -> list[str]:
        entries, dense = _collection(flat, texts)
        ranking = S.HybridRanking(entries, dense, query, dense_complete=True, calibration=e5)
        return [r.id for r in ranking.results(SearchOptions())]

    assert kept("When's my birthday again?") == ["m18"]
    assert kept("When's my brother's birthday?") == ["m19"]
    assert kept("Which colour do I like?") == []


def test_for_cjk_queries_the_weights_of_what_cannot_read_cjk_move_aside() -> None:
    assert S.latin_share("coffee") == 1.0 and S.latin_share("咖啡") == 0.0
    assert S.latin_share("Go 语言") == pytest.approx(0.5)
    # Digits belong to no script: this memory is Chinese, not half English (counted as
    # English, it was ranked against the English block, stood far out of it, and came
    # first for most Chinese questions of its user).
    assert S.latin_share("老王用的手机是华为Mate 60 Pro。") < 0.5
    assert S.latin_share("2024年我去了哪里") == 0.0
    chinese = entry(1, "李四每天早上喝咖啡")
    minilm = S.calibration_for(type("E", (), {"name": "all-MiniLM-L6-v2 (int8 ONNX, offline)"})())
    ranking = S.HybridRanking([chinese], [chinese.with_score(0.1)], "咖啡", calibration=minilm)
    assert ranking.w_dense == 0 and ranking.w_tokens == 0 and ranking.w_keyword == pytest.approx(1.0)
    assert ranking.semantic_floor == 0 and ranking.rerank_targets(SearchOptions()) == []
    # A model that reads Chinese keeps its dense weight; MiniLM's token pieces still step aside.
    e5 = S.calibration_for(
        type("E", (), {"name": "multilingual-e5-small (q4, offline); token re-rank all-MiniLM"})()
    )
    assert e5.model == "multilingual-e5-small" and e5.reads_cjk
    ranking = S.HybridRanking([chinese], [chinese.with_score(0.9)], "咖啡", calibration=e5)
    w_dense, w_keyword, w_tokens = S.HYBRID_WEIGHTS
    # Their weight goes to the side that reads Chinese: the keyword side weighs as much
    # as in English.
    assert ranking.w_tokens == 0 and ranking.w_keyword == w_keyword
    assert ranking.w_dense == pytest.approx(w_dense + w_tokens)
    english = S.HybridRanking([chinese], [chinese.with_score(0.9)], "coffee", calibration=e5)
    assert (english.w_dense, english.w_keyword, english.w_tokens) == S.HYBRID_WEIGHTS


def test_dense_calibration_is_increasing_with_anchors_at_0_1_and_0_9() -> None:
    for calibration in S.CALIBRATIONS:
        values = [calibration.relevance(c / 100) for c in range(-100, 101)]
        assert all(a < b for a, b in itertools.pairwise(values))
        assert values[0] == 0.0 and values[-1] == pytest.approx(1.0)
        assert calibration.relevance(calibration.unrelated) == pytest.approx(0.1)
        assert calibration.relevance(calibration.answer) == pytest.approx(0.9)
    assert S.UNCALIBRATED.relevance(0.42) == 0.42 and S.UNCALIBRATED.relevance(-0.3) == 0.0
    assert S.calibration_for(object()) is S.UNCALIBRATED


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("What did Gina find on 1 February, 2023?", datetime(2023, 1, 31), datetime(2023, 2, 3)),
        ("What did John do the week before August 3, 2023?", datetime(2023, 8, 2), datetime(2023, 8, 5)),
        ("What did we plan on 2024-05-10", datetime(2024, 5, 9), datetime(2024, 5, 12)),
        ("What class did Maria start in December 2023?", datetime(2023, 12, 1), datetime(2024, 1, 8)),
        ("How often did Melanie go to the beach in 2023?", datetime(2023, 1, 1), datetime(2024, 1, 8)),
        # A comma with no space after it still separates the day from the year.
        ("Where was the photo from December 1,2023 taken?", datetime(2023, 11, 30), datetime(2023, 12, 3)),
        ("What did Tim read on 8th December,2023?", datetime(2023, 12, 7), datetime(2023, 12, 10)),
        ("What did Tim learn in December,2023?", datetime(2023, 12, 1), datetime(2024, 1, 8)),
    ],
)
def test_dates_named_in_the_query(query: str, start: datetime, end: datetime) -> None:
    assert S.query_periods(query) == [(start.replace(tzinfo=UTC), end.replace(tzinfo=UTC))]


def test_no_dates_no_periods() -> None:
    assert S.query_periods("What does Nate like? He has 2 turtles and 1024 cards") == []


def test_a_named_date_favours_memories_from_then() -> None:
    may = entry(1, "Went to a concert", when=datetime(2023, 5, 10, tzinfo=UTC))
    june = entry(2, "Went to a concert", when=datetime(2023, 6, 10, tzinfo=UTC))
    undated = entry(3, "Went to a concert")
    everything = [may, june, undated]
    dense = [e.with_score(0.5) for e in everything]
    ranking = S.HybridRanking(everything, dense, "Which concert in June 2023?", dense_complete=True)
    assert ranking.time_weight == S.HYBRID_TIME_WEIGHT
    assert ranking.results(SearchOptions())[0].id == "m2"
    assert ranking.score("m2") - ranking.score("m1") == pytest.approx(S.HYBRID_TIME_WEIGHT)


def test_filters_fallback_threshold_and_limit_apply_to_the_fused_list() -> None:
    may = datetime(2024, 5, 10, tzinfo=UTC)
    items = [
        entry(1, "concert in May", kind="episode", when=may),
        entry(2, "concert music fan"),
        entry(3, "concert tickets bought"),
    ]
    dense = [e.with_score(0.9 - 0.1 * i) for i, e in enumerate(items)]
    ranking = S.HybridRanking(items, dense, "concert", dense_complete=True)
    assert [r.id for r in ranking.results(SearchOptions(kind="episode"))] == ["m1"]
    fallback = ranking.results(SearchOptions(kind="episode", kind_fallback=True))
    assert [r.memory.kind for r in fallback] == ["episode", "fact", "fact"]
    before = ranking.results(SearchOptions(time_before=datetime(2024, 5, 1, tzinfo=UTC)))
    assert "m1" not in [r.id for r in before] and len(before) == 2  # undated entries pass
    assert len(ranking.results(SearchOptions(max_results=1))) == 1
    top = ranking.score(ranking.order[0])
    assert [r.id for r in ranking.results(SearchOptions(similarity_threshold=top))] == [ranking.order[0]]


def test_dense_only_results_are_cosine_scores() -> None:
    items = [entry(1, "a").with_score(0.9), entry(2, "b").with_score(0.2), entry(3, "c", kind="episode")]
    results = S.dense_results(items, SearchOptions(similarity_threshold=0.1))
    assert [(r.id, r.score) for r in results] == [("m1", 0.9), ("m2", 0.2)]


def test_token_similarity_is_the_mean_best_match() -> None:
    np = pytest.importorskip("numpy")
    query = np.array([[1.0, 0.0], [0.0, 1.0]])
    memory = np.array([[1.0, 0.0]])
    assert S.token_similarity(query, memory) == pytest.approx(0.5)
    assert S.token_similarity(query, np.zeros((0, 2))) == 0.0


def test_token_similarities_of_many_memories_equal_one_by_one() -> None:
    np = pytest.importorskip("numpy")
    rng = np.random.default_rng(7)

    def unit(n: int) -> object:
        rows = rng.normal(size=(n, 8))
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    query = unit(3)
    memories = [unit(1), np.zeros((0, 8)), unit(5), unit(2)]
    together = S.token_similarities(query, memories)
    alone = [S.token_similarity(query, m) for m in memories]
    assert together == pytest.approx(alone)
    # The per-piece best cosines travel along, for the rarity weighting.
    assert np.allclose(together[2].best, alone[2].best)
    assert S.token_similarities(query, []) == []


# -- end to end on sqlitevec with the offline embedder --------------------------


@pytest.fixture
async def svc(tmp_path):
    pytest.importorskip("sqlite_vec", reason="pip install 'memchat[sqlitevec]'")
    pytest.importorskip("onnxruntime", reason="pip install 'memchat[embed]'")
    from backends import create

    service = MemoryService(create("sqlitevec", dsn=f"sqlite:///{tmp_path / 'hybrid.db'}"), soft_delete=True)
    async with service:
        yield service


MEMORIES = [
    "User drinks a double espresso every morning",
    "User's car is a red Volvo",
    "User is allergic to cats",
    "User plays chess on Sundays",
    "张三喜欢 Go 语言编程",
    "李四每天早上喝咖啡",
]


async def test_hybrid_finds_meaning_without_shared_words(svc: MemoryService) -> None:
    for text in MEMORIES:
        await svc.add(KEY, text)
    keyword_only = SearchOptions(mode="keyword")
    assert await svc.search(KEY, "favourite coffee", keyword_only) == []  # no shared word
    hits = await svc.search(KEY, "favourite coffee", SearchOptions(max_results=3))  # hybrid: the default
    assert hits[0].memory.text == "User drinks a double espresso every morning"
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    assert hits == sorted(hits, key=lambda h: -h.score)


async def test_hybrid_keeps_keyword_strength_and_cjk(svc: MemoryService) -> None:
    for text in MEMORIES:
        await svc.add(KEY, text, topics=["饮料"] if "咖啡" in text else None)
    [first, *_] = await svc.search(KEY, "chess", SearchOptions(hybrid_search=True))
    assert first.memory.text == "User plays chess on Sundays"
    for query, expected in (
        ("咖啡", "李四每天早上喝咖啡"),
        ("饮料", "李四每天早上喝咖啡"),
        ("Go 编程", "张三喜欢 Go 语言编程"),
    ):
        [first, *_] = await svc.search(KEY, query, SearchOptions(hybrid_search=True))
        assert first.memory.text == expected, query


async def test_hybrid_hides_tombstones_and_respects_kind(svc: MemoryService) -> None:
    gone = await svc.add(KEY, "User likes green tea")
    await svc.add(KEY, "User likes black tea", metadata=Metadata(kind="episode"))
    await svc.add(UserKey("test-app", "user-2"), "User likes white tea")
    await svc.delete(KEY, gone.id)
    hits = await svc.search(KEY, "tea", SearchOptions(hybrid_search=True))
    assert [h.memory.text for h in hits] == ["User likes black tea"]
    assert await svc.search(KEY, "tea", SearchOptions(hybrid_search=True, kind="fact")) == []
    await svc.restore(KEY, gone.id)  # restored with its old embedding
    hits = await svc.vector_search(KEY, "green tea")
    assert hits[0].id == gone.id and hits[0].score > 0.5  # calibrated: well above unrelated (0.1)


async def test_an_update_re_embeds_the_new_text(svc: MemoryService) -> None:
    added = await svc.add(KEY, "User likes coffee")
    result = await svc.update(KEY, added.id, "User owns a sailing boat")
    [hit, *_] = await svc.vector_search(KEY, "boat on the sea")
    assert hit.id == result.memory_id and hit.memory.text == "User owns a sailing boat"
    assert [h.id for h in await svc.vector_search(KEY, "coffee")] == [result.memory_id]


async def test_the_search_tool_shows_the_fused_0_to_1_score(svc: MemoryService) -> None:
    for text in MEMORIES:
        await svc.add(KEY, text)
    tool = next(t for t in svc.tools() if t.name == "memory_search")
    answer = json.loads(await tool.call({"query": "which pet is the user allergic to"}, KEY))
    results = answer["results"] if isinstance(answer, dict) else answer
    assert results[0]["memory"] == "User is allergic to cats"
    assert all(0.0 <= r["score"] <= 1.0 for r in results)
    assert results[0]["score"] > 0.3  # a relevance, not an RRF sum of ~0.03


# -- the same-moment lift and rare-piece weighting (recall 0.680 → 0.704) -------------


def _moment_entry(i: int, text: str, when: datetime | None = None) -> Entry:
    at = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=i)
    return Entry(f"m{i}", "a", "u", Memory(text, event_time=when), at, at)


def test_a_memory_of_the_same_moment_as_a_top_hit_is_lifted_but_never_past_it() -> None:
    day = datetime(2023, 5, 1, tzinfo=UTC)
    a = _moment_entry(1, "Nate attended a game convention", day)
    b = _moment_entry(2, "Nate plays Catan", day)
    c = _moment_entry(3, "Nate plays chess", datetime(2023, 6, 1, tzinfo=UTC))
    ranking = S.HybridRanking(
        [a, b, c],
        [a.with_score(0.9), b.with_score(0.3), c.with_score(0.3)],
        "convention",
        dense_complete=True,
    )
    scores = {r.id: r.score for r in ranking.results(SearchOptions())}
    assert scores["m2"] > scores["m3"]
    lifted = ranking.score("m2") + S.HYBRID_EPISODE_WEIGHT * (ranking.score("m1") - ranking.score("m2"))
    assert scores["m2"] == pytest.approx(lifted)
    assert scores["m1"] == ranking.score("m1") >= scores["m2"]
    assert all(0 <= v <= 1 for v in scores.values())
    # Filtered out, the top hit lifts nothing.
    assert {r.id: r.score for r in ranking.results(SearchOptions(kind="episode"))} == {}


def test_query_pieces_every_candidate_matches_count_less() -> None:
    import numpy as np

    query = np.array([[1.0, 0.0], [0.0, 1.0]])
    sims = {
        "m1": S.token_similarity(query, np.array([[1.0, 0.0]])),
        "m2": S.token_similarity(query, np.array([[0.0, 1.0], [0.6, 0.8]])),
        "m3": S.token_similarity(query, np.array([[1.0, 0.0], [0.0, 0.0]])),
    }
    weighted = S.weighted_piece_means(sims)
    assert weighted["m2"] > weighted["m1"]  # m2 matches the piece few candidates match
    assert all(0 <= v <= 1 for v in weighted.values())
    assert S.weighted_piece_means({"x": 0.5}) == {"x": 0.5}


PEOPLE = ["Anna", "Bruno", "Chen", "Dara", "Emil", "Fatima", "Goran", "Hana", "Ivo", "Jun", "Kemal", "Lena"]
DOINGS = [
    "goes hiking in the mountains on weekends", "plays chess at the club on Tuesdays",
    "bakes sourdough bread for the neighbours", "is learning to play the cello",
    "runs a small bicycle repair shop", "collects old vinyl jazz records",
    "volunteers at the animal shelter", "paints watercolour landscapes",
    "swims in the lake every morning", "writes short stories about the sea",
    "grows tomatoes and basil on the balcony", "teaches Spanish to teenagers",
    "travels to Japan every spring", "restores antique furniture",
]  # fmt: skip


class TextHashEmbedder:
    """A vector drawn from each whole text's hash: nearness unrelated to the words,
    so many keyword holders lie beyond the nearest 100."""

    name, dimension = "text-hash", 32

    async def embed(self, texts: Any) -> list[list[float]]:
        vectors = []
        for text in texts:
            rng = np.random.default_rng(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big"))
            vector = rng.standard_normal(self.dimension)
            vector[0] += 6.0  # every cosine positive (about 0.9), as a real model's are
            vectors.append((vector / np.linalg.norm(vector)).tolist())
        return vectors


async def test_the_best_results_do_not_depend_on_how_many_are_asked_for() -> None:
    """The memory panel's filter asks for 200 results, the memory_search tool for
    10: their first ten are the same memories with the same scores. A search reads
    5 nearest per result asked (at least 100), and only the nearest 100 may shape
    the ranking: when every depth read did, a keyword holder beyond the nearest 100
    scored otherwise, and the two disagreed on the top 3 of 42 of 760 LoCoMo questions."""
    from backends import create

    service = MemoryService(create("inmemory"), limit=0, embedder=TextHashEmbedder())
    async with service:
        key = UserKey("app", "many")
        for person in PEOPLE:
            for doing in DOINGS:
                await service.add(key, f"{person} {doing}")
        queries = ("Anna's hobbies", "hiking with Bruno", "who plays music on Tuesdays?", "Lena in Japan")
        for query in queries:
            few = await service.search(key, query, SearchOptions(max_results=10))
            many = await service.search(key, query, SearchOptions(max_results=200))
            assert len(many) > len(few) == 10
            assert [(e.id, round(e.score, 9)) for e in many[:10]] == [(e.id, round(e.score, 9)) for e in few]


class RecordingEmbedder(TextHashEmbedder):
    """The text-hash vectors, each call of the model recorded."""

    def __init__(self) -> None:
        self.query_calls: list[list[str]] = []

    async def embed_query(self, texts: Any) -> list[list[float]]:
        self.query_calls.append(list(texts))
        return await self.embed(texts)


@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
async def test_the_questions_a_search_asks_together_are_embedded_in_one_call(mode: str) -> None:
    """ "My husband's mother" is asked as written and as "my mother-in-law": the model
    reads both in one call (a batch of two costs it about 1.3 times one question),
    and each ranking uses its own question's vector."""
    from backends import create

    embedder = RecordingEmbedder()
    service = MemoryService(create("inmemory"), limit=0, embedder=embedder)
    async with service:
        key = UserKey("app", "family")
        for text in ("My mother-in-law breeds roses.", "My husband fixes boats.", "Tea every morning."):
            await service.add(key, text)
        asked = "What is my husband's mother's hobby?"
        results = await service.search(key, asked, SearchOptions(max_results=3, mode=mode))
        assert embedder.query_calls == [[asked, "What is my mother-in-law's hobby?"]]
        alone = await service.search(key, "What is my mother-in-law's hobby?", SearchOptions(mode=mode))
        by_id = {e.id: e.score for e in results}
        assert all(by_id.get(e.id, -1.0) >= e.score - 1e-9 for e in alone[:1])  # each at its better score
        embedder.query_calls.clear()
        await service.search(key, "Tea", SearchOptions(mode=mode))
        assert embedder.query_calls == [["Tea"]]
