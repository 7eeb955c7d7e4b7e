"""A bounded set of keyword candidates, chosen in the store (issue 12).

A common query word ("my", "like") is held by most of a user's memories, and
scoring every holder in Python grows with the collection. So a store with an
inverted index ranks the holders itself and returns the best few hundred; the
engine's scorer (keyword.py) then ranks those exactly.

The keyword score of a memory (keyword.py, ``score_entries``) is

    0.40 · coverage(matched weight) + 0.25 · matched idf / rarity norm
        + 0.25 · strength + 0.10 · ordered phrase

and everything but the phrase term is a function of the memory's postings
(which query terms it holds, their term counts, its field lengths) and of the
collection's statistics. :class:`CandidatePlan` holds those numbers for one
query; :meth:`CandidatePlan.rank` is that function plus the phrase bonus for
every memory holding all the phrase's terms (in order or not: the postings do
not say), so the rank bounds the score from above and is what the stores
compute (in numpy, :meth:`CandidatePlan.choose`, or in Redis's Lua). A memory
left out ranks — so scores — at most the last one returned (the cutoff): when
the k-th best exact score among the candidates is above it, the top k is
exact; otherwise the engine asks again
for every holder ranked at least that k-th best score
(:meth:`KeywordPlanner.below`). The ranking so never changes; only the work does.

Ties at the limit are cut in the order search results give equal scores
(``Entry.newest_first``: updated_at desc, created_at desc, ID) by a store that
knows the tied holders' times (the in-memory and SQL stores; Chroma while it
keeps the user's records), and it says so: ``Chosen.cutoff_key``, that key of
the last holder it returned at the cutoff, so one left out there comes after
it. Other stores cut them by ID and say nothing. Hybrid search fuses the
keyword candidates with the dense ones, re-ranks the best and lifts episodes,
so after ranking it works out the least keyword score at which a holder left
out could still reach its re-rank or its results
(``HybridRanking.keyword_needed``; ties at the cutoff behind the cutoff key
count as behind, in the re-rank targets' order as in the results', both newest
first) and asks the store for the holders ranked from there: its ranking is the
full scan's. Without the key, a search whose last result ties with the cutoff
(hundreds of copies of one sentence) read every holder tied there.

Told how many of the best keyword search ranks (``depth``), a store returns
fewer still: only the holders ranked at least the depth-th best *floor* (the
rank less the phrase bonus, which the score never falls below;
:meth:`CandidatePlan.settle`), so the engine reads and scores a few more than
``depth`` memories, not a few hundred.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import numpy as np

from .index import KEYWORD_SPACE, KeywordStats, NewestFirst
from .keyword import (
    _BM25_B,
    _BM25_K1,
    _BM25_K1_PLUS_1,
    _BM25_ONE_MINUS_B,
    _COVERAGE_WEIGHT,
    _PHRASE_WEIGHT,
    _RARITY_WEIGHT,
    _STRENGTH_WEIGHT,
    _TOPIC_FIELD_WEIGHT,
    _query_info,
)
from .tokens import _trim, lexical_query

__all__ = ["KEYWORD_CANDIDATES", "CandidatePlan", "Chosen", "KeywordPlanner", "NewestFirst"]

#: How many ranked holders a store returns for one query (the engine needs the
#: best ``max_results`` for keyword search and the best 100 for hybrid re-ranking).
KEYWORD_CANDIDATES = 300
#: Margin for the float rounding between a store's ranks and the engine's scores.
_FLOAT_MARGIN = 1e-6


class Chosen(NamedTuple):
    """What a store returns for a :class:`CandidatePlan`: the memory IDs, the cutoff
    (the best rank of a holder left out; None: none was), and, when the limit cut
    through the holders ranked exactly at the cutoff in the order results give
    equal scores (the store knew their times), ``Entry.newest_first`` of the last
    of them returned: every one left out at the cutoff sorts after it (None: no
    such guarantee: the tie was cut by memory ID, or :meth:`CandidatePlan.settle`
    left more out)."""

    ids: list[str]
    cutoff: float | None
    cutoff_key: NewestFirst | None = None

    def stats(self, stats: KeywordStats) -> KeywordStats:
        """``stats`` carrying this cut (what the engine's completeness checks read)."""
        return replace(stats, rank_cutoff=self.cutoff, cutoff_key=self.cutoff_key)


@dataclass(frozen=True, slots=True)
class CandidatePlan:
    """What a store needs to rank the holders of a query's terms."""

    #: Stored (prefixed) term -> (query weight, query weight x idf).
    weights: Mapping[str, tuple[float, float]]
    #: Summed weight of all the query's tokens (coverage's denominator).
    total_weight: float
    #: max(summed weight x idf of all the query's tokens, 1) (rarity's denominator).
    rarity_norm: float
    #: Average content and topic lengths over the user's active memories.
    avg_content: float
    avg_topics: float
    #: Return at most this many holders (None: every holder ranked >= ``min_rank``).
    limit: int | None
    #: Leave out holders ranked below this.
    min_rank: float = -1.0
    #: How many of the best the engine ranks (None: unknown): with it the store
    #: returns only the holders that can be among them (:meth:`settle`).
    depth: int | None = None
    #: Stored terms a holder must all hold to earn the ordered-phrase bonus (empty:
    #: the query cannot earn it), and that bonus.
    phrase_terms: frozenset[str] = frozenset()
    phrase_bonus: float = 0.0

    # The constants of the formula, for stores that write it in their own language.
    k1: float = _BM25_K1
    b: float = _BM25_B
    one_minus_b: float = _BM25_ONE_MINUS_B
    k1_plus_1: float = _BM25_K1_PLUS_1
    topic_weight: float = _TOPIC_FIELD_WEIGHT
    coverage_weight: float = _COVERAGE_WEIGHT
    rarity_weight: float = _RARITY_WEIGHT
    strength_weight: float = _STRENGTH_WEIGHT

    def rank(self, postings: Iterable[tuple[str, int, int, int, int]]) -> float:
        """An upper bound of the keyword score from one memory's postings of the
        query's terms, (stored term, content tf, topic tf, content length, topic
        length): exact but for the ordered-phrase bonus, counted in full when the
        memory holds every term of the phrase (whether in order is not known here)."""
        rows = list(postings)
        if not rows:
            return 0.0
        terms = [row[0] for row in rows]
        counts = np.array([row[1:] for row in rows], dtype=np.float64)
        which = np.arange(len(rows))
        ranks = self.rank_holders(np.zeros(len(rows), dtype=np.int64), which, terms, counts, 1)
        return float(ranks[0])

    def rank_holders(
        self,
        holders: Any,
        which: Any,
        terms: Sequence[str],
        counts: Any,
        size: int,
        *,
        phrase_bonus: bool = True,
    ) -> Any:
        """:meth:`rank` of many memories at once (numpy): posting ``i`` is memory
        ``holders[i]`` (an index < ``size``) holding ``terms[which[i]]`` with
        ``counts[i]`` = (content tf, topic tf, content length, topic length).
        Returns each memory's rank (0 for one holding no term), its postings
        summed in order; without ``phrase_bonus``, its *floor*: the rank less the
        ordered-phrase bonus, which the engine's score never falls below."""
        weights = np.array([self.weights[t][0] for t in terms], dtype=np.float64)[which]
        weighted_idf = np.array([self.weights[t][1] for t in terms], dtype=np.float64)[which]
        phrase = np.array([t in self.phrase_terms for t in terms], dtype=np.float64)[which]
        tf_content, tf_topics, content_length, topic_length = (counts[:, i] for i in range(4))
        k1, b, omb, k1p1 = self.k1, self.b, self.one_minus_b, self.k1_plus_1
        saturation = tf_content * k1p1 / (tf_content + k1 * (omb + b * content_length / self.avg_content))
        saturation = saturation + self.topic_weight * (
            tf_topics * k1p1 / (tf_topics + k1 * (omb + b * topic_length / self.avg_topics))
        )
        matched = np.bincount(holders, weights=weights, minlength=size)
        matched_idf = np.bincount(holders, weights=weighted_idf, minlength=size)
        raw = np.bincount(holders, weights=weighted_idf * saturation, minlength=size)
        held = np.bincount(holders, weights=phrase, minlength=size)
        total = self.total_weight
        if total <= 2.0:
            coverage = matched / max(total, 1.0)
        else:
            coverage = np.where(matched <= 1.0, 0.5 * matched, 0.5 + 0.5 * (matched - 1.0) / (total - 1.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            strength = np.minimum(np.where(matched_idf > 0, raw / (matched_idf * k1p1), 0.0), 1.0)
        rank = (
            self.coverage_weight * coverage
            + self.rarity_weight * matched_idf / self.rarity_norm
            + self.strength_weight * strength
        )
        if self.phrase_terms and phrase_bonus:
            rank = rank + np.where(held == len(self.phrase_terms), self.phrase_bonus, 0.0)
        return np.where(matched > 0, np.minimum(rank, 1.0), 0.0)

    def settle(
        self,
        ranked: Sequence[tuple[str, float, float]],
        cutoff: float | None,
        cutoff_key: NewestFirst | None = None,
    ) -> Chosen:
        """What a store returns from its best-ranked holders ``ranked`` — (ID, rank,
        floor), best rank first — of which none left out ranks above ``cutoff``
        (None: none was left out): those ranked at least the ``depth``-th best floor.

        The engine's score of a memory is at least its floor and at most its rank,
        so the engine's ``depth``-th best score is at least that floor, and a memory
        ranked below it cannot enter the top ``depth``: it is left out, and the
        cutoff becomes the best of their ranks. The engine so reads and scores a
        few more than ``depth`` memories instead of every ranked one, and its
        completeness check (:meth:`KeywordPlanner.complete`) holds by construction."""
        ids = [memory_id for memory_id, _, _ in ranked]
        depth = self.depth
        if depth is None or not self._settles(len(ranked)):  # depth: for the type checker
            return Chosen(ids, cutoff, cutoff_key)
        floor = heapq.nlargest(depth, (f for _, _, f in ranked))[-1] - _FLOAT_MARGIN
        kept = [memory_id for memory_id, rank, _ in ranked if rank >= floor]
        dropped = [rank for _, rank, _ in ranked if rank < floor]
        if dropped:
            cutoff = max(dropped) if cutoff is None else max(cutoff, max(dropped))
            cutoff_key = None
        return Chosen(kept, cutoff, cutoff_key)

    def _settles(self, ranked: int) -> bool:
        """Whether :meth:`settle` cuts ``ranked`` holders (else it returns them all)."""
        return self.depth is not None and 0 < self.depth < ranked and self.min_rank < 0

    def choose(
        self,
        ids: Sequence[Any] | Mapping[int, Any],
        holders: Any,
        which: Any,
        terms: Sequence[str],
        counts: Any,
        *,
        ranks: Any = None,
        newest_first: Mapping[str, NewestFirst] | None = None,
    ) -> Chosen:
        """What a store returns from the postings of the query's terms, ranked here
        (numpy) rather than in the store: posting ``i`` is memory ``ids[holders[i]]`` (an ID
        string; None for a free slot that no posting names)
        holding ``terms[which[i]]`` with ``counts[i]`` (see :meth:`rank_holders`).
        ``ids`` may be a mapping naming only the :meth:`contenders` of ``ranks``
        (the holders' ranks, made here when not given).
        Returns what :meth:`settle` does: the best ``limit`` by rank, of those ranked
        at least ``min_rank``, cut to what can reach the top ``depth``. Ties at the
        limit are cut in the order results give equal scores when ``newest_first``
        holds ``Entry.newest_first`` of every holder :meth:`tied` names (then the
        engine need not read the ones left out to know they come after), else by
        memory ID (the order the SQL stores used to rank in)."""
        if not len(holders):
            return Chosen([], None)
        if ranks is None:
            ranks = self.rank_holders(holders, which, terms, counts, len(ids))
        found, limited = self.contenders(ranks)
        cutoff: float | None = None
        cutoff_key: NewestFirst | None = None
        if limited:
            # Only the holders tied at the limit need their times (the others are kept
            # whole, in whatever order), and all of them: else the tie goes by ID.
            times = newest_first or {}
            if times and not all(ids[s] in times for s in self._tied(ranks, found).tolist()):
                times = {}
            last = (0, 0, "")
            order = sorted(found.tolist(), key=lambda s: (-ranks[s], times.get(ids[s], last), ids[s]))
            del order[self.limit :]
            cutoff = float(ranks[order[-1]])
            cutoff_key = times.get(ids[order[-1]])
        else:
            order = found.tolist()
        if not self._settles(len(order)):  # the floors would not be used: skip their pass
            return Chosen([ids[s] for s in order], cutoff, cutoff_key)
        floors = self.rank_holders(holders, which, terms, counts, len(ranks), phrase_bonus=False)
        ranked = [(ids[s], float(ranks[s]), float(floors[s])) for s in order]
        return self.settle(ranked, cutoff, cutoff_key)

    def tied(self, ranks: Any) -> Any:
        """The holders (indexes into ``ranks``) :meth:`choose` cuts through: those
        ranked exactly at the ``limit``-th best rank when more than ``limit`` are
        ranked at least that (else none). A store that gives their
        ``Entry.newest_first`` to :meth:`choose` has its ties cut in the results' order.
        None either for a plan with a ``depth`` (keyword search): its check of the cut
        (:meth:`KeywordPlanner.complete`) does not read the order of a tie."""
        found, limited = self.contenders(ranks)
        return self._tied(ranks, found) if limited and self.depth is None else found[:0]

    def _tied(self, ranks: Any, found: Any) -> Any:
        if self.limit is None or len(found) <= self.limit:
            return found[:0]
        level = ranks[found].min()
        return found[ranks[found] == level]

    def contenders(self, ranks: Any) -> tuple[Any, bool]:
        """The holders (indexes into ``ranks``) :meth:`choose` orders by rank and memory
        ID: every one ranked above 0 (and at least ``min_rank``), or, past ``limit`` of
        them, each at least as good as the limit-th (True: the limit cuts them)."""
        found = np.flatnonzero(ranks > 0)
        if self.min_rank >= 0:
            found = found[ranks[found] >= self.min_rank]
        if self.limit is not None and len(found) > self.limit:
            threshold = np.partition(ranks[found], len(found) - self.limit)[len(found) - self.limit]
            return found[ranks[found] >= threshold], True
        return found, False


class KeywordPlanner:
    """Makes the :class:`CandidatePlan` of one query once a store knows its
    statistics (the document frequencies of the query's terms among them)."""

    def __init__(
        self, query: str, space: str, limit: int | None = KEYWORD_CANDIDATES, depth: int | None = None
    ) -> None:
        # The query as the space's scorer reads it (keyword_search / lexical_scores).
        text = _trim(query) if space == KEYWORD_SPACE else _trim(lexical_query(query))
        info = _query_info(text)
        self.space = space
        self.tokens = tuple(zip(info.tokens, info.weights, strict=True))
        # keyword.py's bonus needs >= 2 primary tokens, each held (a repeated one never is).
        distinct = set(info.primary)
        self.phrase = distinct if len(info.primary) >= 2 and len(distinct) == len(info.primary) else set()
        self.limit = limit
        #: The engine ranks only the best ``depth`` (None: all of them).
        self.depth = depth
        self.min_rank = -1.0

    def plan(self, stats: KeywordStats, stored: Mapping[str, str] | None = None) -> CandidatePlan:
        """The plan for ``stats`` (with ``df`` of the query's tokens). ``stored``
        maps a prefixed term to the form the store keeps it in (long terms)."""
        n = max(stats.count, 1)
        df = stats.df or {}
        weights: dict[str, tuple[float, float]] = {}
        total = total_idf = 0.0
        for token, weight in self.tokens:
            idf = math.log1p((n - df.get(token, 0) + 0.5) / (df.get(token, 0) + 0.5))
            total += weight
            total_idf += weight * idf
            term = f"{self.space}:{token}"
            weights[stored.get(term, term) if stored else term] = (weight, weight * idf)
        phrase = {f"{self.space}:{token}" for token in self.phrase}
        return CandidatePlan(
            weights=weights,
            phrase_terms=frozenset(stored.get(t, t) if stored else t for t in phrase),
            phrase_bonus=_PHRASE_WEIGHT,
            total_weight=total,
            rarity_norm=max(total_idf, 1.0),
            avg_content=max(stats.content_length / n, 1.0),
            avg_topics=max(stats.topic_length / n, 1.0),
            limit=self.limit,
            min_rank=self.min_rank,
            # Keyword search ranks only its best ``depth``; hybrid search fuses every
            # keyword candidate it gets with the dense ones (one past its re-rank
            # depth may still reach the fused top), so it keeps all that are ranked.
            depth=self.depth if self.space == KEYWORD_SPACE else None,
        )

    @staticmethod
    def complete(scores: Sequence[float], stats: KeywordStats | None, depth: int) -> bool:
        """Whether candidates with these exact ``scores``, cut at ``stats.rank_cutoff``,
        hold the true best ``depth``: nothing left out can beat the depth-th best."""
        if stats is None or stats.rank_cutoff is None:
            return True
        ordered = sorted(scores, reverse=True)
        if len(ordered) < depth:
            return False
        # A holder left out ranks (so scores) at most the cutoff. Strictly above (beyond
        # the store's float rounding): one left out with an equal score may win the
        # tie (results.py breaks ties by age).
        return ordered[depth - 1] > stats.rank_cutoff + 1e-9

    def below(self, scores: Sequence[float], depth: int) -> KeywordPlanner:
        """A planner for every holder that could still beat the depth-th best of ``scores``."""
        ordered = sorted(scores, reverse=True)
        return self.ranked_from(ordered[depth - 1] if len(ordered) >= depth else 0.0)

    def ranked_from(self, level: float) -> KeywordPlanner:
        """A planner for every holder ranked at least ``level`` (the rank bounds the
        score from above: a holder ranked below it scores below it)."""
        wider = KeywordPlanner.__new__(KeywordPlanner)
        wider.space, wider.tokens, wider.phrase = self.space, self.tokens, self.phrase
        wider.limit = None
        wider.depth = None
        wider.min_rank = level - 1e-9
        return wider
