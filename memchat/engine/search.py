"""Keyword ranking: the one place it lives, shared by every backend.

This is a port of the reference's in-process keyword search (reference §4.1)
and of its Reciprocal Rank Fusion for hybrid search (§4.2):

* tokenisation (§4.1.1): lower-cased, trimmed text; Han text is segmented with
  jieba's search mode, kana/hangul text is split into raw CJK runs, and Latin
  letter/digit runs are always added;
* a CJK trigram fallback (§4.1.2) so unsegmented CJK still matches partially;
* a BM25-based score in [0, 1] mixing coverage, rarity, strength and an
  ordered-phrase bonus (§4.1.3), with an exact-phrase fallback (§4.1.4);
* filters, ordering, kind fallback, near-duplicate removal (§4.1.5) and RRF.

Everything here is a pure function over :class:`~memchat.engine.model.Entry`
values. Per-text document statistics are memoised (keyed by the text), so
ranking a user's whole collection again for the next query does not re-tokenise
it; the per-search work is a few tight loops over the cached statistics.
"""

from __future__ import annotations

import logging
import math
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import lru_cache
from operator import itemgetter
from typing import Any

from memchat.engine.model import KIND_FACT, Entry, SearchOptions, utc

__all__ = [
    "DEDUP_JACCARD_THRESHOLD",
    "DEFAULT_MAX_RESULTS",
    "DEFAULT_RRF_K",
    "MIN_KEYWORD_SCORE",
    "MIN_KIND_FALLBACK_RESULTS",
    "build_search_tokens",
    "deduplicate",
    "jaccard_tokens",
    "keyword_search",
    "matches_filters",
    "merge_kind_fallback",
    "rrf_fuse",
    "score_entries",
    "sort_results",
]

#: Default minimum keyword score of the keyword backends.
MIN_KEYWORD_SCORE = 0.3
#: Default maximum number of keyword-search results.
DEFAULT_MAX_RESULTS = 10
#: Default Reciprocal Rank Fusion constant k.
DEFAULT_RRF_K = 60
#: A kind-filtered search with fewer results than this triggers the kind fallback.
MIN_KIND_FALLBACK_RESULTS = 3
#: Two entries whose token sets have a Jaccard similarity at least this are near-duplicates.
DEDUP_JACCARD_THRESHOLD = 0.8

_MIN_ENGLISH_TOKEN_BYTES = 2
_MIN_CJK_TOKEN_RUNES = 2
_CJK_GRAM_LEN = 3

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

_STATS_CACHE_SIZE = 50_000
_QUERY_CACHE_SIZE = 1_024

ENGLISH_STOPWORDS = frozenset(
    [
        "a", "an", "the", "and", "or", "of", "in", "on", "to", "for", "with", "is",
        "are", "am", "be", "been", "being", "was", "were", "this", "that", "these", "those",
    ]
)  # fmt: skip

CJK_STOPWORDS = frozenset(
    [
        "的", "了", "是", "在", "和", "有", "我", "他", "她", "它",
        "这", "那", "都", "也", "就", "不", "会", "到", "说", "对",
        "一个", "一些", "一种", "这个", "那个", "我们", "你们", "他们", "她们", "它们",
        "自己", "已经", "还是", "如果", "因为", "所以", "然后", "用户",
    ]
)  # fmt: skip

# ---------------------------------------------------------------------------
# Character classes
# ---------------------------------------------------------------------------

# Unicode Script property ranges (Scripts.txt, Unicode 15.1; Python's stdlib has
# no script lookup). "CJK" means the scripts Han, Hiragana, Katakana and Hangul.
_HAN_RANGES: tuple[tuple[int, int], ...] = (
    (0x2E80, 0x2E99), (0x2E9B, 0x2EF3), (0x2F00, 0x2FD5), (0x3005, 0x3005), (0x3007, 0x3007),
    (0x3021, 0x3029), (0x3038, 0x303B), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFA6D),
    (0xFA70, 0xFAD9), (0x16FE2, 0x16FE3), (0x16FF0, 0x16FF1), (0x20000, 0x2A6DF), (0x2A700, 0x2B739),
    (0x2B740, 0x2B81D), (0x2B820, 0x2CEA1), (0x2CEB0, 0x2EBE0), (0x2EBF0, 0x2EE5D), (0x2F800, 0x2FA1D),
    (0x30000, 0x3134A), (0x31350, 0x323AF),
)  # fmt: skip
_KANA_HANGUL_RANGES: tuple[tuple[int, int], ...] = (
    # Hiragana
    (0x3041, 0x3096), (0x309D, 0x309F), (0x1B001, 0x1B11F), (0x1B132, 0x1B132), (0x1B150, 0x1B152),
    (0x1F200, 0x1F200),
    # Katakana
    (0x30A1, 0x30FA), (0x30FD, 0x30FF), (0x31F0, 0x31FF), (0x32D0, 0x32FE), (0x3300, 0x3357),
    (0xFF66, 0xFF6F), (0xFF71, 0xFF9D), (0x1AFF0, 0x1AFF3), (0x1AFF5, 0x1AFFB), (0x1AFFD, 0x1AFFE),
    (0x1B000, 0x1B000), (0x1B120, 0x1B122), (0x1B155, 0x1B155), (0x1B164, 0x1B167),
    # Hangul
    (0x1100, 0x11FF), (0x302E, 0x302F), (0x3131, 0x318E), (0x3200, 0x321E), (0x3260, 0x327E),
    (0xA960, 0xA97C), (0xAC00, 0xD7A3), (0xD7B0, 0xD7C6), (0xD7CB, 0xD7FB), (0xFFA0, 0xFFBE),
    (0xFFC2, 0xFFC7), (0xFFCA, 0xFFCF), (0xFFD2, 0xFFD7), (0xFFDA, 0xFFDC),
)  # fmt: skip


def _char_class(ranges: Iterable[tuple[int, int]]) -> str:
    return "".join(f"{re.escape(chr(lo))}-{re.escape(chr(hi))}" for lo, hi in sorted(ranges))


_HAN_CLASS = _char_class(_HAN_RANGES)
_CJK_CLASS = _char_class(_HAN_RANGES + _KANA_HANGUL_RANGES)
_HAN_RE = re.compile(f"[{_HAN_CLASS}]")
_CJK_RE = re.compile(f"[{_CJK_CLASS}]")
_CJK_RUN_RE = re.compile(f"[{_CJK_CLASS}]+")
_ASCII_WORD_RE = re.compile(r"[a-z0-9]+")

_CJK_SORTED = sorted(_HAN_RANGES + _KANA_HANGUL_RANGES)
_CJK_STARTS = [lo for lo, _ in _CJK_SORTED]
_CJK_ENDS = [hi for _, hi in _CJK_SORTED]

# Go's unicode.IsSpace (Python's str.isspace() also accepts U+001C..U+001F).
_SPACE_CHARS = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_SPACE_SET = frozenset(_SPACE_CHARS)

# Per-character flags, memoised.
_F_CJK = 1  # script Han, Hiragana, Katakana or Hangul
_F_WORD = 2  # letter (L*) or decimal digit (Nd): Go's IsLetter || IsDigit
_F_LETTER_NUMBER = 4  # letter (L*) or number (N*): Go's IsLetter || IsNumber
_F_SPACE = 8  # Go's unicode.IsSpace
_F_PUNCT = 16  # punctuation (P*) or symbol (S*)

_FLAGS: dict[str, int] = {}


def _is_cjk_code(cp: int) -> bool:
    i = bisect_right(_CJK_STARTS, cp) - 1
    return i >= 0 and cp <= _CJK_ENDS[i]


def _flags(ch: str) -> int:
    flags = _FLAGS.get(ch)
    if flags is None:
        flags = 0
        if _is_cjk_code(ord(ch)):
            flags |= _F_CJK
        category = unicodedata.category(ch)
        if ch.isalpha() or category == "Nd":
            flags |= _F_WORD
        if category[0] in "LN":
            flags |= _F_LETTER_NUMBER
        if ch in _SPACE_SET:
            flags |= _F_SPACE
        if category[0] in "PS":
            flags |= _F_PUNCT
        _FLAGS[ch] = flags
    return flags


def _trim(text: str) -> str:
    return text.strip(_SPACE_CHARS)


def _is_cjk_token(token: str) -> bool:
    return bool(token) and all(_flags(ch) & _F_CJK for ch in token)


def _is_word_token(token: str) -> bool:
    """Letters/digits only, no CJK rune (the reference's ``isASCIIAlnumToken``)."""
    return bool(token) and all(_flags(ch) & (_F_CJK | _F_WORD) == _F_WORD for ch in token)


def _is_punct_token(token: str) -> bool:
    return all(_flags(ch) & _F_PUNCT for ch in token)


def _is_cjk_stopword(word: str) -> bool:
    if not word:
        return False
    if word in CJK_STOPWORDS:
        return True
    return _is_cjk_token(word) and all(ch in CJK_STOPWORDS for ch in word)


def _keep_single_cjk_rune(text: str) -> bool:
    """True when ``text``, ignoring spaces and punctuation, is exactly one CJK rune."""
    kept = ""
    count = 0
    for ch in _trim(text):
        flags = _flags(ch)
        if flags & (_F_SPACE | _F_PUNCT):
            continue
        count += 1
        if count > 1:
            return False
        kept = ch
    return count == 1 and bool(_flags(kept) & _F_CJK)


# ---------------------------------------------------------------------------
# jieba (loaded lazily, only for text containing Han characters)
# ---------------------------------------------------------------------------

_jieba: Any = None
_jieba_state = 0  # 0: not tried, 1: loaded, -1: unavailable


def _get_jieba() -> Any:
    global _jieba, _jieba_state
    if _jieba_state == 0:
        try:
            import jieba

            jieba.setLogLevel(logging.WARNING)
            jieba.initialize()
            _jieba = jieba
            _jieba_state = 1
        except Exception:  # missing package or unreadable dictionary: raw CJK runs instead
            _jieba = None
            _jieba_state = -1
    return _jieba


# ---------------------------------------------------------------------------
# Tokenisation (§4.1.1, §4.1.2)
# ---------------------------------------------------------------------------


def _cjk_runs(text: str) -> list[str]:
    return _CJK_RUN_RE.findall(text)


def _raw_cjk_tokens(text: str, keep_single: bool) -> list[str]:
    return [
        segment
        for segment in _cjk_runs(text)
        if (keep_single or len(segment) >= _MIN_CJK_TOKEN_RUNES) and not _is_cjk_stopword(segment)
    ]


def _normalize_segment_token(token: str) -> str:
    token = _trim(token.lower())
    if not token or _is_word_token(token) or _is_cjk_token(token):
        return token
    return "".join(ch for ch in token if _flags(ch) & (_F_CJK | _F_WORD))


def _segment_han(text: str, keep_single: bool) -> list[str]:
    jieba = _get_jieba()
    if jieba is None:
        return _raw_cjk_tokens(text, keep_single)
    try:
        words = list(jieba.cut_for_search(text, HMM=True))
    except Exception:
        return _raw_cjk_tokens(text, keep_single)
    tokens: list[str] = []
    for word in words:
        token = _normalize_segment_token(word)
        if not token or _is_punct_token(token):
            continue
        if _is_word_token(token):
            continue  # Latin runs come from the English pass; no double counting
        if _is_cjk_token(token):
            if not keep_single and len(token) < _MIN_CJK_TOKEN_RUNES:
                continue
            if _is_cjk_stopword(token):
                continue
        tokens.append(token)
    return tokens


def _english_tokens(text: str) -> list[str]:
    """Maximal runs of letters/digits; a CJK rune or any other character ends a run."""
    tokens: list[str] = []
    start = -1
    for i, ch in enumerate(text):
        if _flags(ch) & (_F_CJK | _F_WORD) == _F_WORD:
            if start < 0:
                start = i
        elif start >= 0:
            tokens.append(text[start:i])
            start = -1
    if start >= 0:
        tokens.append(text[start:])
    # Byte length >= 2: a single non-ASCII letter is two or more UTF-8 bytes.
    return [t for t in tokens if (len(t) >= 2 or not t.isascii()) and t not in ENGLISH_STOPWORDS]


def _primary_tokens(text: str, keep_single: bool) -> list[str]:
    """Primary tokens of already lower-cased and trimmed text, repeats kept."""
    if text.isascii():
        return [t for t in _ASCII_WORD_RE.findall(text) if len(t) >= 2 and t not in ENGLISH_STOPWORDS]
    tokens: list[str] = []
    if _HAN_RE.search(text):
        tokens.extend(_segment_han(text, keep_single))
    elif _CJK_RE.search(text):
        tokens.extend(_raw_cjk_tokens(text, keep_single))
    tokens.extend(_english_tokens(text))
    return tokens


def _cjk_trigrams(lowered: str) -> list[str]:
    """Every 3-rune window of every CJK run of >= 3 runes, stopword trigrams skipped."""
    if lowered.isascii():
        return []
    grams: list[str] = []
    for run in _cjk_runs(lowered):
        for i in range(len(run) - _CJK_GRAM_LEN + 1):
            gram = run[i : i + _CJK_GRAM_LEN]
            if not _is_cjk_stopword(gram):
                grams.append(gram)
    return grams


def _normalize_phrase(lowered: str) -> str:
    """Every rune that is not CJK or a letter/digit becomes a space; whitespace collapsed."""
    if lowered.isascii():
        return " ".join(_ASCII_WORD_RE.findall(lowered))
    chars = [ch if _flags(ch) & (_F_CJK | _F_WORD) else " " for ch in lowered]
    return " ".join("".join(chars).split())


def _dedup(tokens: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(t for t in tokens if t))


@lru_cache(maxsize=_QUERY_CACHE_SIZE)
def _search_tokens(trimmed_lower: str) -> tuple[str, ...]:
    if not trimmed_lower:
        return ()
    return tuple(_dedup(_primary_tokens(trimmed_lower, _keep_single_cjk_rune(trimmed_lower))))


def build_search_tokens(text: str) -> list[str]:
    """Primary query tokens (§4.1.1): de-duplicated, in order of appearance."""
    return list(_search_tokens(_trim(text.lower())))


@lru_cache(maxsize=_STATS_CACHE_SIZE)
def _jaccard_set(text: str) -> frozenset[str]:
    return frozenset(_search_tokens(_trim(text.lower()))) | frozenset(_cjk_trigrams(text.lower()))


def jaccard_tokens(text: str) -> set[str]:
    """The token set used for near-duplicate detection: search tokens plus CJK trigrams."""
    return set(_jaccard_set(text))


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


def _clear_caches() -> None:
    """Forget every memoised statistic (tests; or after swapping the segmenter)."""
    for cached in (_search_tokens, _jaccard_set, _field_stats, _topic_stats_cached, _query_info):
        cached.cache_clear()


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


def _score_all(entries: Sequence[Entry], query: str) -> list[float]:
    n = len(entries)
    scores = [0.0] * n
    query = _trim(query)
    if not query or n == 0:
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
    avg_content = max(sum([s.length for s in contents]) / n, 1.0)
    avg_topics = max(sum([s.length for s in topics]) / n, 1.0)

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
        df = len(hits)
        idf = math.log1p((n - df + 0.5) / (df + 0.5))
        total_weight += weight
        total_idf_weight += weight * idf
        if idf > 0:
            matched |= hits
            weighted_idf = weight * idf
            potential = weighted_idf * _CONTENT_FIELD_WEIGHT * _BM25_K1_PLUS_1
            specs.append((token, weight, weighted_idf, potential, token in primary_set))

    coverage_norm = max(total_weight, 1.0)
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
            _COVERAGE_WEIGHT * (matched_weight / coverage_norm)
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


def score_entries(entries: Sequence[Entry], query: str) -> list[float]:
    """Keyword score in [0, 1] of each entry for ``query`` (§4.1.3/§4.1.4).

    IDF and average field lengths are computed over all ``entries`` given, so pass
    the user's whole collection (before filters), as the backends do.
    """
    return _score_all(entries, query)


# ---------------------------------------------------------------------------
# Filters, ordering, merging
# ---------------------------------------------------------------------------


def _effective_kind(entry: Entry) -> str:
    return entry.memory.kind or KIND_FACT


def matches_filters(entry: Entry, options: SearchOptions) -> bool:
    """Kind (effective kind, empty = fact) and time filters; undated entries pass time filters."""
    if options.kind and _effective_kind(entry) != options.kind:
        return False
    event_time = entry.memory.event_time
    if event_time is not None:
        if options.time_after is not None and utc(event_time) < utc(options.time_after):
            return False
        if options.time_before is not None and utc(event_time) > utc(options.time_before):
            return False
    return True


_Pair = tuple[float, Entry]


def _filter_pairs(pairs: list[_Pair], options: SearchOptions) -> list[_Pair]:
    if not options.kind and options.time_after is None and options.time_before is None:
        return pairs
    return [p for p in pairs if matches_filters(p[1], options)]


_FAR_PAST = datetime.min.replace(tzinfo=UTC)


def _event_key(pair: _Pair) -> tuple[int, datetime]:
    event_time = pair[1].memory.event_time
    return (1, _FAR_PAST) if event_time is None else (0, utc(event_time))


def _sort_pairs(pairs: Iterable[_Pair], order_by_event_time: bool) -> list[_Pair]:
    """§4.1 step 5 via stable passes, least significant key first."""
    result = sorted(pairs, key=lambda p: p[1].id)
    result.sort(key=lambda p: p[1].created_at, reverse=True)
    result.sort(key=lambda p: p[1].updated_at, reverse=True)
    if order_by_event_time:
        result.sort(key=_event_key)
    result.sort(key=lambda p: p[0], reverse=True)
    return result


def _take_sorted(pairs: list[_Pair], order_by_event_time: bool, count: int) -> Iterator[_Pair]:
    """The first ``count`` pairs (all if ``count <= 0``) in :func:`_sort_pairs` order, lazily.

    Sorting by score alone is cheap; the tie-breakers are applied group by group,
    only to the score groups actually reached.
    """
    by_score = sorted(pairs, key=itemgetter(0), reverse=True)
    n = len(by_score)
    if count <= 0 or count > n:
        count = n
    produced = 0
    i = 0
    while produced < count:
        score = by_score[i][0]
        j = i + 1
        while j < n and by_score[j][0] == score:
            j += 1
        group = by_score[i:j] if j - i == 1 else _sort_pairs(by_score[i:j], order_by_event_time)
        for pair in group:
            yield pair
            produced += 1
            if produced == count:
                return
        i = j


def sort_results(entries: list[Entry], order_by_event_time: bool) -> list[Entry]:
    """A sorted copy: score desc; [event_time asc, undated last]; updated_at desc; created_at desc; id."""
    return [e for _, e in _sort_pairs(((e.score, e) for e in entries), order_by_event_time)]


def _merge_pairs(primary: list[_Pair], fallback: list[_Pair], kind: str, limit: int) -> list[_Pair]:
    seen = {p[1].id for p in primary}
    same_kind: list[_Pair] = []
    other: list[_Pair] = []
    for pair in fallback:
        entry_id = pair[1].id
        if entry_id in seen:
            continue
        seen.add(entry_id)
        (same_kind if _effective_kind(pair[1]) == kind else other).append(pair)
    merged = [*primary, *same_kind, *other]
    if limit > 0:
        del merged[limit:]
    return merged


def merge_kind_fallback(
    primary: list[Entry], fallback: list[Entry], kind: str, *, limit: int = 0
) -> list[Entry]:
    """§4.1 step 6: the primary results, then fallback entries of ``kind``, then the rest.

    Entries already seen (by ID) are skipped; ``limit > 0`` truncates the merged list.
    """
    merged = _merge_pairs([(e.score, e) for e in primary], [(e.score, e) for e in fallback], kind, limit)
    return [e for _, e in merged]


# ---------------------------------------------------------------------------
# Near-duplicate removal (§4.1.5)
# ---------------------------------------------------------------------------


def _near_duplicate(a: frozenset[str], b: frozenset[str]) -> bool:
    """Jaccard(a, b) >= 0.8, in exact integer arithmetic; empty sets are never duplicates."""
    la, lb = len(a), len(b)
    if la == 0 or lb == 0:
        return False
    small, large = (a, b) if la <= lb else (b, a)
    if 5 * len(small) < 4 * len(large):  # even full containment cannot reach 0.8
        return False
    inter = len(small & large)
    return 5 * inter >= 4 * (la + lb - inter)


def _dedup_pairs(pairs: list[_Pair]) -> list[_Pair]:
    """§4.1.5 for any input order: visit by score (stable), compare with every higher-scored entry."""
    n = len(pairs)
    if n < 2:
        return list(pairs)
    sets = [_jaccard_set(p[1].memory.text) for p in pairs]
    order = sorted(range(n), key=lambda i: pairs[i][0], reverse=True)
    kept = [False] * n
    for pos, idx in enumerate(order):
        current = sets[idx]
        if not any(_near_duplicate(current, sets[order[prev]]) for prev in range(pos)):
            kept[idx] = True
    return [p for p, keep in zip(pairs, kept, strict=True) if keep]


def _dedup_sorted(stream: Iterable[_Pair], limit: int) -> list[_Pair]:
    """§4.1.5 for a score-descending stream: the visiting order is the input order, so a
    survivor depends only on earlier entries and we can stop after ``limit`` survivors."""
    seen: list[frozenset[str]] = []
    kept: list[_Pair] = []
    for pair in stream:
        current = _jaccard_set(pair[1].memory.text)
        duplicate = any(_near_duplicate(current, other) for other in seen)
        seen.append(current)
        if not duplicate:
            kept.append(pair)
            if limit > 0 and len(kept) >= limit:
                break
    return kept


def deduplicate(entries: Sequence[Entry]) -> list[Entry]:
    """Drop entries with a higher-scored near-duplicate (§4.1.5); survivors keep input order."""
    return [e for _, e in _dedup_pairs([(e.score, e) for e in entries])]


# ---------------------------------------------------------------------------
# The whole keyword search (§4.1 steps 1-8) and RRF (§4.2)
# ---------------------------------------------------------------------------


def keyword_search(
    entries: Sequence[Entry],
    query: str,
    options: SearchOptions,
    *,
    min_score: float = MIN_KEYWORD_SCORE,
    default_max: int = DEFAULT_MAX_RESULTS,
) -> list[Entry]:
    """Rank ``entries`` (the user's whole active collection) for ``query``.

    Returns copies of the matching entries with ``score`` set, best first.
    """
    query = _trim(query or "")
    if not query:
        return []
    limit = options.max_results if options.max_results > 0 else default_max
    threshold = options.similarity_threshold if options.similarity_threshold > 0 else min_score

    scores = _score_all(entries, query)
    if threshold > 0:
        candidates = [(s, e) for s, e in zip(scores, entries, strict=True) if s >= threshold]
    else:
        candidates = [(s, e) for s, e in zip(scores, entries, strict=True) if s > 0]

    return _finish(candidates, options, limit)


def rrf_fuse(ranked_lists: Sequence[Sequence[Entry]], k: int = DEFAULT_RRF_K) -> list[Entry]:
    """Reciprocal Rank Fusion (§4.2 step 4).

    Each entry's score becomes the sum over lists of ``1 / (k + rank + 1)`` (rank
    0-based). Entries without an ID are skipped; the first occurrence's entry is
    kept. The result is sorted as in :func:`sort_results` and not truncated.
    """
    if k <= 0:
        k = DEFAULT_RRF_K
    fused: dict[str, list[Any]] = {}
    for ranked in ranked_lists:
        for rank, entry in enumerate(ranked):
            if entry is None or not entry.id:
                continue
            contribution = 1.0 / (k + rank + 1)
            slot = fused.get(entry.id)
            if slot is None:
                fused[entry.id] = [entry, contribution]
            else:
                slot[1] += contribution
    merged = [entry.with_score(score) for entry, score in fused.values()]
    return sort_results(merged, False)


# ---------------------------------------------------------------------------
# Hybrid search: dense + keyword candidates, one fusion for every vector store
# ---------------------------------------------------------------------------
#
# The reference fuses the two lists with RRF (k = 60) and shows the RRF sum
# (≈ 0.016–0.033) to the model as a "similarity score (0-1)". We rank by a
# convex combination of scores that are each an honest 0–1 similarity instead:
#
#   relevance = w_dense · max(cosine, 0) + w_keyword · keyword + w_tokens · token_similarity
#
# * ``keyword`` is the engine's keyword score (§4.1.3, already in [0, 1]) over
#   a stemmed view of query and memories (Snowball English stemmer on Latin
#   words; CJK is left to jieba and the trigrams), IDF over the user's whole
#   collection;
# * ``cosine`` is the store's cosine similarity of the query and memory
#   embeddings (memories outside the store's top ``depth`` get the depth-th
#   cosine, an upper bound, when a keyword match brings them in);
# * ``token_similarity`` (late interaction) re-ranks the best ``rerank_depth``
#   candidates when the embedder can give per-token vectors (the offline
#   MiniLM can): the mean over the query's content word pieces of their best
#   cosine with any word piece of the memory — each piece weighted by how
#   rarely the re-ranked candidates match it, ``(1 − mean best cosine)²``, so
#   pieces every candidate matches (the speaker's name, "did") count little.
#   Without per-token vectors its weight goes to the cosine.
#
# Episode neighbourhood: memories with the same ``event_time`` as one of the
# ``HYBRID_EPISODE_SEEDS`` best candidates (stored metadata: things recorded
# for one moment, e.g. one conversation session) move ``HYBRID_EPISODE_WEIGHT``
# of the way up to that seed's score: ``s + w · max(seed − s, 0)``, never
# past the seed, so the score stays in [0, 1].
#
# Query-side adjustments: the dense and token weights are scaled by the share
# of the query that is not CJK (MiniLM has no useful CJK vocabulary; the
# keyword side handles CJK with jieba), the rest going to the keyword weight;
# and when the query names a date, month or year, the relevance becomes
# ``(1 − w_time) · relevance + w_time · [event_time falls in that period]``.
# Every weight is in [0, 1] and they sum to 1, so the score stays a 0–1
# relevance the model can read as such. Kind/time filters, kind fallback,
# ordering, dedup and truncation then run exactly as in keyword search.
# Weights were tuned on LoCoMo (benchmarks/recall_locomo.py; see its notes).

#: Fusion weights with token-level re-ranking (dense, keyword, tokens); sum 1.
HYBRID_WEIGHTS = (0.3, 0.4, 0.3)
#: Weight of "the memory's event_time is in the period the query names".
HYBRID_TIME_WEIGHT = 0.1
#: Dense candidates asked of the store (at least; more for large limits).
HYBRID_DENSE_DEPTH = 100
#: How many of the best candidates are re-ranked with token similarity.
HYBRID_RERANK_DEPTH = 50
#: Exponent of a query piece's weight ``1 − mean best cosine`` over the re-ranked candidates.
HYBRID_PIECE_WEIGHT_POWER = 2.0
#: Share of the way a memory moves up to the best candidate sharing its event_time.
HYBRID_EPISODE_WEIGHT = 0.3
#: How many of the best candidates lift the memories of their episode.
HYBRID_EPISODE_SEEDS = 3


class _StemmedView:
    """What the keyword scorer reads of an entry (``.memory``), stemmed."""

    __slots__ = ("memory",)

    def __init__(self, memory: Any) -> None:
        self.memory = memory


_stemmer: Any = None
_stemmer_state = 0


def _get_stemmer() -> Any:
    global _stemmer, _stemmer_state
    if _stemmer_state == 0:
        try:
            import snowballstemmer

            _stemmer = snowballstemmer.stemmer("english")
            _stemmer_state = 1
        except Exception:  # not installed: a light suffix stripper instead
            _stemmer_state = -1
    return _stemmer


_LATIN_WORD_RE = re.compile(r"[A-Za-z]+")
_LIGHT_SUFFIXES = ("ing", "ed", "es", "s", "ly")


@lru_cache(maxsize=_STATS_CACHE_SIZE)
def _stem_word(word: str) -> str:
    stemmer = _get_stemmer()
    if stemmer is not None:
        return str(stemmer.stemWord(word))
    for suffix in _LIGHT_SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def stem_text(text: str) -> str:
    """``text`` lower-cased with every Latin word replaced by its English stem."""
    return _LATIN_WORD_RE.sub(lambda m: _stem_word(m.group(0).lower()), text)


@lru_cache(maxsize=_STATS_CACHE_SIZE)
def _stemmed_memory(text: str, topics: tuple[str, ...]) -> Any:
    from memchat.engine.model import Memory

    return Memory(text=stem_text(text), topics=tuple(stem_text(t) for t in topics))


def lexical_scores(entries: Sequence[Entry], query: str) -> list[float]:
    """The keyword score (§4.1.3, in [0, 1]) of each entry over stemmed text."""
    views = [_StemmedView(_stemmed_memory(e.memory.text, tuple(e.memory.topics or ()))) for e in entries]
    return _score_all(views, stem_text(query))  # type: ignore[arg-type]


def latin_share(query: str) -> float:
    """Share of the query's letters that are not CJK (1.0 for English, 0.0 for Chinese)."""
    letters = [ch for ch in query if _flags(ch) & _F_LETTER_NUMBER]
    if not letters:
        return 1.0
    cjk = sum(1 for ch in letters if _flags(ch) & _F_CJK)
    return 1.0 - cjk / len(letters)


_MONTH_NAMES = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_MONTHS = {name: i + 1 for i, name in enumerate(_MONTH_NAMES)}
_MONTH_ALT = "|".join([*_MONTHS, *(m[:3] for m in _MONTHS if m != "may")])
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+({_MONTH_ALT})\.?,?\s+(\d{{4}})\b")
_MONTH_DAY_YEAR = re.compile(rf"\b({_MONTH_ALT})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_MONTH_YEAR = re.compile(rf"\b({_MONTH_ALT})\.?,?\s+(\d{{4}})\b")
_YEAR = re.compile(r"(?<![\d-])((?:19|20)\d\d)(?![\d-])")
#: Slack after a named period: an event is often recorded a few days after it happened.
_PERIOD_SLACK_DAYS = 7


def _month_number(name: str) -> int:
    name = name.lower()
    return _MONTHS.get(name) or next(v for k, v in _MONTHS.items() if k.startswith(name))


def query_periods(query: str) -> list[tuple[datetime, datetime]]:
    """The [start, end) periods an English query names: a day (±1 day), a month
    or a year (each with a week of slack after it). Empty when it names none."""
    from datetime import timedelta

    text = query.lower()
    periods: list[tuple[datetime, datetime]] = []

    def day(y: int, m: int, d: int) -> None:
        try:
            start = datetime(y, m, d, tzinfo=UTC)
        except ValueError:
            return
        periods.append((start - timedelta(days=1), start + timedelta(days=2)))

    for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy"), (_ISO_DATE, "ymd")):
        for match in pattern.finditer(text):
            a, b, c = match.groups()
            if order == "dmy":
                day(int(c), _month_number(b), int(a))
            elif order == "mdy":
                day(int(c), _month_number(a), int(b))
            else:
                day(int(a), int(b), int(c))
        text = pattern.sub(" ", text)
    slack = timedelta(days=_PERIOD_SLACK_DAYS)
    for match in _MONTH_YEAR.finditer(text):
        year, month = int(match.group(2)), _month_number(match.group(1))
        start = datetime(year, month, 1, tzinfo=UTC)
        end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
        periods.append((start, end + slack))
    text = _MONTH_YEAR.sub(" ", text)
    for match in _YEAR.finditer(text):
        year = int(match.group(1))
        periods.append((datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC) + slack))
    return periods


def _in_periods(entry: Entry, periods: Sequence[tuple[datetime, datetime]]) -> bool:
    event_time = entry.memory.event_time
    if event_time is None:
        return False
    when = utc(event_time)
    return any(start <= when < end for start, end in periods)


class HybridRanking:
    """Stage one of hybrid search: every candidate with its dense and keyword
    similarities, ranked. ``rerank_targets`` names the candidates worth a
    token-level look; ``results`` applies filters, fallback, order, dedup."""

    def __init__(
        self,
        keyword_entries: Sequence[Entry],
        dense_entries: Sequence[Entry],
        query: str,
        *,
        dense_complete: bool = False,
        weights: tuple[float, float, float] = HYBRID_WEIGHTS,
        time_weight: float = HYBRID_TIME_WEIGHT,
    ) -> None:
        query = _trim(query or "")
        self.query = query
        share = latin_share(query)
        w_dense, w_keyword, w_tokens = weights
        # MiniLM cannot read CJK: shift the dense and token weights to the keyword side.
        w_keyword += (w_dense + w_tokens) * (1.0 - share)
        self.w_dense, self.w_keyword, self.w_tokens = w_dense * share, w_keyword, w_tokens * share
        self.periods = query_periods(query) if share > 0 else []
        self.time_weight = time_weight if self.periods else 0.0

        self.dense: dict[str, float] = {}
        for entry in dense_entries:
            if entry.id and entry.id not in self.dense:
                self.dense[entry.id] = min(max(float(entry.score), 0.0), 1.0)
        # A memory the store did not return has at most the last returned cosine.
        self.dense_floor = 0.0 if dense_complete or not self.dense else min(self.dense.values())

        self.entries: dict[str, Entry] = {e.id: e for e in dense_entries if e.id}
        self.keyword: dict[str, float] = {}
        if query and keyword_entries:
            for entry, score in zip(keyword_entries, lexical_scores(keyword_entries, query), strict=True):
                if score > 0:
                    self.keyword[entry.id] = score
                    self.entries.setdefault(entry.id, entry)
        self.tokens: dict[str, float] = {}
        self._scores = {memory_id: self._compute(memory_id) for memory_id in self.entries}
        self.order = sorted(self._scores, key=self._scores.__getitem__, reverse=True)

    def _mix(self, memory_id: str, relevance: float) -> float:
        if self.time_weight:
            hit = 1.0 if _in_periods(self.entries[memory_id], self.periods) else 0.0
            relevance = (1.0 - self.time_weight) * relevance + self.time_weight * hit
        return relevance

    def score(self, memory_id: str) -> float:
        """The candidate's fused relevance in [0, 1]."""
        return self._scores[memory_id]

    def _compute(self, memory_id: str) -> float:
        dense = self.dense.get(memory_id, self.dense_floor)
        keyword = self.keyword.get(memory_id, 0.0)
        token = self.tokens.get(memory_id)
        if token is None:
            relevance = (self.w_dense + self.w_tokens) * dense + self.w_keyword * keyword
        else:
            relevance = self.w_dense * dense + self.w_keyword * keyword + self.w_tokens * token
        return min(max(self._mix(memory_id, relevance), 0.0), 1.0)

    def rerank_targets(self, options: SearchOptions, depth: int = HYBRID_RERANK_DEPTH) -> list[Entry]:
        """The best ``depth`` candidates that pass the filters (and, for the kind
        fallback, the best others too): the ones token similarity should score."""
        if self.w_tokens <= 0 or depth <= 0:
            return []
        chosen: list[Entry] = []
        others: list[Entry] = []
        for memory_id in self.order:
            entry = self.entries[memory_id]
            if matches_filters(entry, options):
                if len(chosen) < depth:
                    chosen.append(entry)
            elif (
                options.kind
                and options.kind_fallback
                and len(others) < depth
                and matches_filters(entry, replace(options, kind=""))
            ):
                others.append(entry)
            if len(chosen) >= depth and (not options.kind_fallback or len(others) >= depth):
                break
        return chosen + others

    def set_token_similarities(self, similarities: dict[str, float]) -> None:
        """Token similarities of re-ranked candidates. Values from :func:`token_similarity`
        carry each query piece's best cosine: given together, the pieces are
        re-weighted by how rarely these candidates match them."""
        similarities = _weighted_piece_means(similarities)
        for memory_id, value in similarities.items():
            if memory_id in self.entries:
                self.tokens[memory_id] = min(max(float(value), 0.0), 1.0)
                self._scores[memory_id] = self._compute(memory_id)

    def _episode_lift(self, candidates: list[_Pair], options: SearchOptions) -> list[_Pair]:
        """Lift the memories sharing an event_time with one of the best candidates."""
        weight, seeds = HYBRID_EPISODE_WEIGHT, HYBRID_EPISODE_SEEDS
        if weight <= 0 or seeds <= 0 or len(candidates) < 2:
            return candidates
        seed_options = replace(options, kind="") if options.kind and options.kind_fallback else options
        best: dict[datetime, float] = {}
        taken = 0
        for score, entry in sorted(candidates, key=itemgetter(0), reverse=True):
            if taken >= seeds:
                break
            if not matches_filters(entry, seed_options):
                continue
            taken += 1
            if entry.memory.event_time is not None:
                when = utc(entry.memory.event_time)
                best[when] = max(best.get(when, 0.0), score)
        if not best:
            return candidates
        lifted: list[_Pair] = []
        for score, entry in candidates:
            seed = best.get(utc(entry.memory.event_time)) if entry.memory.event_time is not None else None
            if seed is not None and seed > score:
                score = min(score + weight * (seed - score), 1.0)
            lifted.append((score, entry))
        return lifted

    def results(self, options: SearchOptions, *, default_max: int = DEFAULT_MAX_RESULTS) -> list[Entry]:
        """Filters, kind fallback, order, dedup and truncation as in :func:`keyword_search`,
        after the episode lift. ``options.similarity_threshold`` (if > 0) applies to the
        final score."""
        limit = options.max_results if options.max_results > 0 else default_max
        threshold = options.similarity_threshold
        candidates = [(score, self.entries[i]) for i, score in self._scores.items()]
        candidates = self._episode_lift(candidates, options)
        if threshold > 0:
            candidates = [p for p in candidates if p[0] >= threshold]
        return _finish(candidates, options, limit)


def _finish(candidates: list[_Pair], options: SearchOptions, limit: int) -> list[Entry]:
    """§4.1 steps 4–8 over scored candidates (shared by keyword-style result assembly)."""
    order = options.order_by_event_time
    filtered = _filter_pairs(candidates, options)
    if options.kind and options.kind_fallback and len(filtered) < MIN_KIND_FALLBACK_RESULTS:
        primary = _sort_pairs(filtered, order)
        seen = {p[1].id for p in primary}
        unfiltered = _filter_pairs(candidates, replace(options, kind="", kind_fallback=False))
        rest = [p for p in unfiltered if p[1].id not in seen]
        room = limit - len(primary) if limit > 0 else 0
        same_kind = [p for p in rest if _effective_kind(p[1]) == options.kind]
        other = [p for p in rest if _effective_kind(p[1]) != options.kind]
        results = primary
        if limit <= 0 or room > 0:
            results += _take_sorted(same_kind, order, room)
            if limit <= 0 or len(results) < limit:
                results += _take_sorted(other, order, limit - len(results) if limit > 0 else 0)
        if options.deduplicate and len(results) > 1:
            results = _dedup_pairs(results)
    elif options.deduplicate:
        results = _dedup_sorted(_take_sorted(filtered, order, 0), limit)
    else:
        results = list(_take_sorted(filtered, order, limit))
    if limit > 0:
        del results[limit:]
    return [entry.with_score(score) for score, entry in results]


def dense_results(
    dense_entries: Sequence[Entry], options: SearchOptions, *, default_max: int = DEFAULT_MAX_RESULTS
) -> list[Entry]:
    """Semantic-only search over the store's nearest neighbours: score = cosine
    similarity; ``similarity_threshold`` (if > 0) applies to it; filters, kind
    fallback, order, dedup and truncation as in keyword search."""
    limit = options.max_results if options.max_results > 0 else default_max
    seen: set[str] = set()
    candidates: list[_Pair] = []
    for entry in dense_entries:
        if entry.id and entry.id not in seen:
            seen.add(entry.id)
            candidates.append((float(entry.score), entry))
    if options.similarity_threshold > 0:
        candidates = [p for p in candidates if p[0] >= options.similarity_threshold]
    return _finish(candidates, options, limit)


class TokenMatch(float):
    """A token similarity (the plain mean) that also keeps each query piece's best cosine."""

    best: Any

    def __new__(cls, value: float, best: Any) -> TokenMatch:
        match = super().__new__(cls, value)
        match.best = best
        return match


def token_similarity(query_tokens: Any, memory_tokens: Any) -> float:
    """Late interaction: mean over query pieces of the best cosine with a memory piece
    (a :class:`TokenMatch`, which :meth:`HybridRanking.set_token_similarities` re-weights)."""
    if query_tokens is None or memory_tokens is None or not len(query_tokens) or not len(memory_tokens):
        return 0.0
    best = (query_tokens @ memory_tokens.T).max(axis=1)
    return TokenMatch(float(best.mean()), best)


def _weighted_piece_means(similarities: dict[str, float]) -> dict[str, float]:
    """Re-weight the query pieces of :class:`TokenMatch` values given together:
    weight ``(1 − mean best cosine over the candidates)^p``, normalised to sum 1."""
    matches = [v for v in similarities.values() if isinstance(v, TokenMatch)]
    if len(matches) < 2 or len(matches) != len(similarities) or HYBRID_PIECE_WEIGHT_POWER <= 0:
        return similarities
    import numpy as np

    if len({len(m.best) for m in matches}) != 1:
        return similarities
    best = np.stack([np.asarray(m.best, dtype=np.float64) for m in matches])
    weights = np.clip(1.0 - best.mean(axis=0), 1e-3, None) ** HYBRID_PIECE_WEIGHT_POWER
    weights /= weights.sum()
    return {memory_id: float(m.best @ weights) for memory_id, m in zip(similarities, matches, strict=True)}
