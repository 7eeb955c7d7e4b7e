"""Result assembly (reference §4.1 steps 4–8), shared by every search mode.

Filters (kind, time range), kind fallback, ordering (score, then event time
if asked, then recency and ID), near-duplicate removal and truncation run
here, the same after keyword, semantic or hybrid scoring.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from operator import itemgetter

from memchat.engine.model import KIND_FACT, Entry, SearchOptions, utc

from .dense import UNCALIBRATED, DenseCalibration
from .tokens import _jaccard_set

__all__ = [
    "DEFAULT_MAX_RESULTS",
    "MIN_KIND_FALLBACK_RESULTS",
    "dense_results",
    "finish",
    "matches_filters",
]

#: Default maximum number of search results.
DEFAULT_MAX_RESULTS = 10
#: A kind-filtered search with fewer results than this triggers the kind fallback.
MIN_KIND_FALLBACK_RESULTS = 3

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


def finish(candidates: list[_Pair], options: SearchOptions, limit: int) -> list[Entry]:
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
    dense_entries: Sequence[Entry],
    options: SearchOptions,
    *,
    calibration: DenseCalibration = UNCALIBRATED,
    default_max: int = DEFAULT_MAX_RESULTS,
) -> list[Entry]:
    """Semantic-only search over the store's nearest neighbours: score = the
    cosine similarity through the embedder's ``calibration`` (a 0–1 relevance,
    increasing with the cosine); ``similarity_threshold`` (if > 0) applies to it;
    filters, kind fallback, order, dedup and truncation as in keyword search."""
    limit = options.max_results if options.max_results > 0 else default_max
    seen: set[str] = set()
    candidates: list[_Pair] = []
    for entry in dense_entries:
        if entry.id and entry.id not in seen:
            seen.add(entry.id)
            candidates.append((calibration.relevance(float(entry.score)), entry))
    if options.similarity_threshold > 0:
        candidates = [p for p in candidates if p[0] >= options.similarity_threshold]
    return finish(candidates, options, limit)
