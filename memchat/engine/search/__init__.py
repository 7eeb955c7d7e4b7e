"""Search: one retrieval path for the tools, preload, CLI, TUI and library.

* :mod:`.tokens` — tokenisation (reference §4.1.1–§4.1.2), stemming;
* :mod:`.keyword` — keyword scoring (§4.1.3–§4.1.4) and keyword search;
* :mod:`.dense` — cosine calibration per embedder, token-level similarity;
* :mod:`.fusion` — hybrid ranking: calibrated dense + keyword + tokens;
* :mod:`.results` — filters, kind fallback, order, dedup, truncation (§4.1 steps 4–8).
* :mod:`.request` — a request's wrapper taken off the question ("Remind me…", "请问");
* :mod:`.idioms` — an idiom said in plain words ("do for a living" → "do as a job");
* :mod:`.kinship` — a relative named in two steps asked by the one word ("我老公的妈妈" → 我婆婆);
* :mod:`.bridge` — a question about "my sister" asked again about the person she is.

``MemoryService.search`` picks the mode (hybrid, semantic or keyword) and
calls these; everything here is a pure function over
:class:`~memchat.engine.model.Entry` values.
"""

from __future__ import annotations

from .bridge import load_name_tagger
from .dense import (
    CALIBRATIONS,
    UNCALIBRATED,
    DenseCalibration,
    TokenMatch,
    calibration_for,
    token_similarities,
    token_similarity,
    weighted_piece_means,
)
from .fusion import (
    HYBRID_DENSE_DEPTH,
    HYBRID_EPISODE_SEEDS,
    HYBRID_EPISODE_WEIGHT,
    HYBRID_RERANK_DEPTH,
    HYBRID_SEMANTIC_FLOOR,
    HYBRID_TIME_WEIGHT,
    HYBRID_WEIGHTS,
    HybridRanking,
    memories_in_periods,
    query_periods,
)
from .keyword import MIN_KEYWORD_SCORE, keyword_search, lexical_scores, score_entries
from .results import DEFAULT_MAX_RESULTS, MIN_KIND_FALLBACK_RESULTS, dense_results, matches_filters
from .tokens import build_search_tokens, jaccard_tokens, latin_share, lexical_query, stem_text

__all__ = [
    "CALIBRATIONS",
    "DEFAULT_MAX_RESULTS",
    "HYBRID_DENSE_DEPTH",
    "HYBRID_EPISODE_SEEDS",
    "HYBRID_EPISODE_WEIGHT",
    "HYBRID_RERANK_DEPTH",
    "HYBRID_SEMANTIC_FLOOR",
    "HYBRID_TIME_WEIGHT",
    "HYBRID_WEIGHTS",
    "MIN_KEYWORD_SCORE",
    "MIN_KIND_FALLBACK_RESULTS",
    "UNCALIBRATED",
    "DenseCalibration",
    "HybridRanking",
    "TokenMatch",
    "build_search_tokens",
    "calibration_for",
    "clear_caches",
    "dense_results",
    "jaccard_tokens",
    "keyword_search",
    "latin_share",
    "lexical_query",
    "lexical_scores",
    "load_name_tagger",
    "matches_filters",
    "memories_in_periods",
    "query_periods",
    "score_entries",
    "stem_text",
    "token_similarities",
    "token_similarity",
    "weighted_piece_means",
]


def clear_caches() -> None:
    """Forget every memoised statistic (after swapping the segmenter, e.g. in tests)."""
    from . import keyword, tokens

    for cached in (
        tokens._search_tokens,
        tokens._jaccard_set,
        tokens._stem_word,
        keyword._field_stats,
        keyword._topic_stats_cached,
        keyword._query_info,
        keyword._stemmed_memory,
    ):
        cached.cache_clear()
