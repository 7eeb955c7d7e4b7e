"""Keyword scoring (reference §4.1.3, §4.1.4): a BM25-based score in [0, 1].

Each memory's score mixes coverage (how much of the query it holds), rarity
(IDF of what it matched), strength (BM25 saturation) and an ordered-phrase
bonus, with an exact-phrase fallback. Per-text statistics are memoised (keyed
by the text), so ranking a user's whole collection again for the next query
does not re-tokenise it.

One change from the reference, for queries of more than two terms: the first
matched term is worth half of the coverage, the other terms share the other
half (see ``_coverage``). The reference divides by every term, so a query
listing alternatives ("喜欢 爱好 兴趣 偏好") scored 0.23 on a memory holding one
of them and fell under the 0.3 minimum score. For one- and two-term queries
the two rules agree, so the reference's score vectors (§4.1.6) hold.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from memchat.engine.model import Entry, SearchOptions

from .results import DEFAULT_MAX_RESULTS, finish
from .tokens import (
    _F_LETTER_NUMBER,
    _F_SPACE,
    _QUERY_CACHE_SIZE,
    _STATS_CACHE_SIZE,
    _cjk_trigrams,
    _flags,
    _is_word_token,
    _normalize_phrase,
    _primary_tokens,
    _search_tokens,
    _trim,
    lexical_query,
    stem_text,
)

if TYPE_CHECKING:
    from .index import KeywordStats

__all__ = ["MIN_KEYWORD_SCORE", "keyword_search", "lexical_scores", "score_entries"]

#: Default minimum keyword score of keyword search (the reference's 0.3).
MIN_KEYWORD_SCORE = 0.3

_PRIMARY_TOKEN_WEIGHT = 1.0
_CJK_TRIGRAM_WEIGHT = 0.45

_BM25_K1 = 1.2
_BM25_B = 0.75
_BM25_K1_PLUS_1 = 2.2  # the reference folds k1 + 1 as an exact constant
_BM25_ONE_MINUS_B = 0.25

_CONTENT_FIELD_WEIGHT = 1.0
_TOPIC_FIELD_WEIGHT = 0.65

_COVERAGE_WEIGHT = 0.40
_RARITY_WEIGHT = 0.25
_STRENGTH_WEIGHT = 0.25
_PHRASE_WEIGHT = 0.10

_EXACT_PHRASE_SCORE = 0.35
_EXACT_PHRASE_TOPIC_SCORE = 0.2275  # 0.35 x 0.65, folded exactly like the reference's constants

# ---------------------------------------------------------------------------
# Document statistics (§4.1.2 buildFieldSearchStats), memoised per text
# ---------------------------------------------------------------------------


class _FieldStats:
    __slots__ = ("length", "normalized", "tf", "tokens")

    def __init__(self, tokens: tuple[str, ...], tf: dict[str, int], length: int, normalized: str) -> None:
        self.tokens = tokens
        self.tf = tf
        self.length = length
        self.normalized = normalized


_EMPTY_STATS = _FieldStats((), {}, 0, "")


@lru_cache(maxsize=_STATS_CACHE_SIZE)
def _field_stats(text: str) -> _FieldStats:
    if not text:
        return _EMPTY_STATS
    lowered = text.lower()
    tokens = _primary_tokens(_trim(lowered), False)
    tf: dict[str, int] = {}
    for token in tokens:
        tf[token] = tf.get(token, 0) + 1
    length = len(tokens)
    for gram in _cjk_trigrams(lowered):
        if gram not in tf:  # each distinct trigram not already present: tf 1, length + 1
            tf[gram] = 1
            length += 1
    return _FieldStats(tuple(tokens), tf, length, _normalize_phrase(lowered))


@lru_cache(maxsize=_STATS_CACHE_SIZE)
def _topic_stats_cached(topics: tuple[str, ...]) -> _FieldStats:
    return _field_stats(" ".join(topics))


def _topics_text(entry: Entry) -> str:
    return " ".join(entry.memory.topics or ())


# ---------------------------------------------------------------------------
# Query side
# ---------------------------------------------------------------------------


class _QueryInfo:
    __slots__ = ("exact_allowed", "lower", "normalized", "primary", "raw_allowed", "tokens", "weights")

    def __init__(self, query: str) -> None:
        lowered = query.lower()
        self.lower = lowered
        self.primary: tuple[str, ...] = _search_tokens(_trim(lowered))
        weights: dict[str, float] = dict.fromkeys(self.primary, _PRIMARY_TOKEN_WEIGHT)
        for gram in _cjk_trigrams(lowered):
            if gram not in weights:
                weights[gram] = _CJK_TRIGRAM_WEIGHT
        self.tokens: tuple[str, ...] = tuple(weights)
        self.weights: tuple[float, ...] = tuple(weights.values())
        # §4.1.4 step 1: no tokens at all, letters/numbers plus some other non-space rune ("C++").
        has_alnum = has_special = False
        for ch in query:
            flags = _flags(ch)
            if flags & _F_LETTER_NUMBER:
                has_alnum = True
            elif not flags & _F_SPACE:
                has_special = True
        self.raw_allowed = bool(query) and not self.primary and has_alnum and has_special
        # §4.1.4 step 2: the normalised query must not be a single letter/digit word.
        self.normalized = _normalize_phrase(lowered)
        fields = self.normalized.split(" ")
        self.exact_allowed = bool(self.normalized) and not (len(fields) == 1 and _is_word_token(fields[0]))


@lru_cache(maxsize=_QUERY_CACHE_SIZE)
def _query_info(trimmed_query: str) -> _QueryInfo:
    return _QueryInfo(trimmed_query)


# ---------------------------------------------------------------------------
# Scoring (§4.1.3, §4.1.4)
# ---------------------------------------------------------------------------


def _contains_ordered(doc_tokens: tuple[str, ...], query_tokens: tuple[str, ...]) -> bool:
    if not doc_tokens or not query_tokens:
        return False
    idx = 0
    want = query_tokens[0]
    last = len(query_tokens)
    for token in doc_tokens:
        if token != want:
            continue
        idx += 1
        if idx == last:
            return True
        want = query_tokens[idx]
    return False


def _fallback_score(entry: Entry, content: _FieldStats, topics: _FieldStats, q: _QueryInfo) -> float:
    if q.raw_allowed:
        if q.lower in entry.memory.text.lower():
            return _EXACT_PHRASE_SCORE
        if q.lower in _topics_text(entry).lower():
            return _EXACT_PHRASE_TOPIC_SCORE
    if not q.exact_allowed:
        return 0.0
    if q.normalized in content.normalized:
        return _EXACT_PHRASE_SCORE
    if q.normalized in topics.normalized:
        return _EXACT_PHRASE_TOPIC_SCORE
    return 0.0


def _coverage(matched: float, total: float) -> float:
    """How much of the query a memory holds, in [0, 1].

    The reference's share ``matched / total`` reads every query as an AND of
    its terms. A longer query is mostly a bag of alternatives (a model asking
    "喜欢 爱好 兴趣 偏好": like, hobby, interest, preference), and a memory that
    holds one of them is a real match. So the first matched unit of term
    weight is worth half of the coverage whatever the query's length, and the
    rest of the query's weight shares the other half. For a total weight of
    at most two terms this equals the reference's share (so its score vectors
    hold); it is never below it.
    """
    share = matched / max(total, 1.0)
    if total <= 2.0:
        return share
    return max(share, 0.5 * min(matched, 1.0) + 0.5 * max(matched - 1.0, 0.0) / (total - 1.0))


def score_entries(entries: Sequence[Entry], query: str, stats: KeywordStats | None = None) -> list[float]:
    """Keyword score in [0, 1] of each entry for ``query`` (§4.1.3/§4.1.4).

    IDF and average field lengths are computed over all ``entries`` given, so pass
    the user's whole collection (before filters) — or, from a store that keeps
    them (search/index.py), the collection's ``stats`` with just the entries that
    hold a query term: the scores are the same.
    """
    scores = [0.0] * len(entries)
    query = _trim(query)
    if not query or not entries:
        return scores
    q = _query_info(query)

    # Cached per-text statistics; topics are joined with a space (an empty tuple is the empty text).
    memories = [e.memory for e in entries]
    field_stats = _field_stats
    topic_stats = _topic_stats_cached
    contents = [field_stats(m.text) for m in memories]
    topics = [
        topic_stats(tp if type(tp) is tuple else tuple(tp)) if (tp := m.topics) else _EMPTY_STATS
        for m in memories
    ]
    if stats is None:
        n = len(entries)
        avg_content = max(sum([s.length for s in contents]) / n, 1.0)
        avg_topics = max(sum([s.length for s in topics]) / n, 1.0)
    else:
        n = max(stats.count, 1)
        avg_content = max(stats.content_length / n, 1.0)
        avg_topics = max(stats.topic_length / n, 1.0)

    # Document frequency of each weighted query token (in the content or the topics).
    content_tfs = [s.tf for s in contents]
    topic_tfs = [s.tf for s in topics] if any(s is not _EMPTY_STATS for s in topics) else None
    matched: set[int] = set()
    # (token, weight, weight x idf, matched potential, is primary) for tokens with idf > 0
    specs: list[tuple[str, float, float, float, bool]] = []
    primary = q.primary
    primary_set = frozenset(primary)
    total_weight = 0.0
    total_idf_weight = 0.0
    for token, weight in zip(q.tokens, q.weights, strict=True):
        hits = {i for i, tf in enumerate(content_tfs) if token in tf}
        if topic_tfs is not None:
            hits.update([i for i, tf in enumerate(topic_tfs) if token in tf])
        df = len(hits) if stats is None or stats.df is None else stats.df.get(token, 0)
        idf = math.log1p((n - df + 0.5) / (df + 0.5))
        total_weight += weight
        total_idf_weight += weight * idf
        if idf > 0:
            matched |= hits
            weighted_idf = weight * idf
            potential = weighted_idf * _CONTENT_FIELD_WEIGHT * _BM25_K1_PLUS_1
            specs.append((token, weight, weighted_idf, potential, token in primary_set))

    rarity_norm = max(total_idf_weight, 1.0)
    # The ordered-phrase bonus needs >= 2 primary tokens, all present in the field.
    phrase_len = len(primary) if len(primary) >= 2 else -1
    contains_ordered = _contains_ordered
    k1, b, one_minus_b, k1_plus_1 = _BM25_K1, _BM25_B, _BM25_ONE_MINUS_B, _BM25_K1_PLUS_1
    topic_weight = _TOPIC_FIELD_WEIGHT
    for i in matched:
        content = contents[i]
        topic = topics[i]
        ctf = content.tf
        ttf = topic.tf
        raw = matched_potential = matched_weight = matched_idf = 0.0
        content_norm = topic_norm = 0.0
        content_primary = topic_primary = 0
        for token, weight, weighted_idf, potential, is_primary in specs:
            tf_c = ctf.get(token)
            tf_t = ttf.get(token) if ttf else None
            # BM25 per field (a field holding the token has length >= 1, and avg >= 1).
            if tf_c is None:
                if tf_t is None:
                    continue
                bm25_c = 0.0
            else:
                if not content_norm:
                    content_norm = k1 * (one_minus_b + b * content.length / avg_content)
                bm25_c = tf_c * k1_plus_1 / (tf_c + content_norm)
                if is_primary:
                    content_primary += 1
            if tf_t is None:
                bm25_t = 0.0
            else:
                if not topic_norm:
                    topic_norm = k1 * (one_minus_b + b * topic.length / avg_topics)
                bm25_t = tf_t * k1_plus_1 / (tf_t + topic_norm)
                if is_primary:
                    topic_primary += 1
            # Content field weight is 1.0: "1.0 * bm25_c" is exactly bm25_c.
            term = weighted_idf * (bm25_c + topic_weight * bm25_t)
            if term > 0:
                raw += term
                matched_weight += weight
                matched_idf += weighted_idf
                matched_potential += potential
        if matched_weight == 0:
            continue  # left to the exact-phrase fallback below
        strength = 0.0
        if matched_potential > 0:
            strength = raw / matched_potential
            if strength > 1.0:
                strength = 1.0
        phrase = 0.0
        if content_primary == phrase_len and contains_ordered(content.tokens, primary):
            phrase = 1.0
        elif topic_primary == phrase_len and contains_ordered(topic.tokens, primary):
            phrase = 0.8
        score = (
            _COVERAGE_WEIGHT * _coverage(matched_weight, total_weight)
            + _RARITY_WEIGHT * (matched_idf / rarity_norm)
            + _STRENGTH_WEIGHT * strength
            + _PHRASE_WEIGHT * phrase
        )
        scores[i] = score if score < 1.0 else 1.0

    # Exact-phrase fallback (§4.1.4) for every document no token matched.
    if q.raw_allowed:
        for i, entry in enumerate(entries):
            if not scores[i]:
                scores[i] = _fallback_score(entry, contents[i], topics[i], q)
    elif q.exact_allowed:
        phrase_text = q.normalized
        for i, content in enumerate(contents):
            if scores[i]:
                continue
            if phrase_text in content.normalized:
                scores[i] = _EXACT_PHRASE_SCORE
            elif phrase_text in topics[i].normalized:
                scores[i] = _EXACT_PHRASE_TOPIC_SCORE
    return scores


class _StemmedView:
    """What the keyword scorer reads of an entry (``.memory``), stemmed."""

    __slots__ = ("memory",)

    def __init__(self, memory: Any) -> None:
        self.memory = memory


@lru_cache(maxsize=_STATS_CACHE_SIZE)
def _stemmed_memory(text: str, topics: tuple[str, ...]) -> Any:
    from memchat.engine.model import Memory

    return Memory(text=stem_text(text), topics=tuple(stem_text(t) for t in topics))


def lexical_scores(entries: Sequence[Entry], query: str, stats: KeywordStats | None = None) -> list[float]:
    """The keyword score (§4.1.3, in [0, 1]) of each entry over stemmed text
    (``stats``: the collection's, in the stemmed space, as for score_entries)."""
    views = [_StemmedView(_stemmed_memory(e.memory.text, tuple(e.memory.topics or ()))) for e in entries]
    return score_entries(views, lexical_query(query), stats)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
def keyword_search(
    entries: Sequence[Entry],
    query: str,
    options: SearchOptions,
    *,
    min_score: float = MIN_KEYWORD_SCORE,
    default_max: int = DEFAULT_MAX_RESULTS,
    stats: KeywordStats | None = None,
    scores: Sequence[float] | None = None,
) -> list[Entry]:
    """Rank ``entries`` (the user's whole active collection) for ``query``.

    ``scores``: ``score_entries(entries, query, stats)`` when the caller has them
    already (the candidates' check in retrieval.py scores the same entries).
    Returns copies of the matching entries with ``score`` set, best first.
    """
    query = _trim(query or "")
    if not query:
        return []
    limit = options.max_results if options.max_results > 0 else default_max
    threshold = options.similarity_threshold if options.similarity_threshold > 0 else min_score

    if scores is None or len(scores) != len(entries):
        scores = score_entries(entries, query, stats)
    if threshold > 0:
        candidates = [(s, e) for s, e in zip(scores, entries, strict=True) if s >= threshold]
    else:
        candidates = [(s, e) for s, e in zip(scores, entries, strict=True) if s > 0]

    return finish(candidates, options, limit)
