"""What a store keeps so keyword search need not read every memory (issue 12).

Keyword scoring needs, for a query, the memories that hold one of its terms
and three collection statistics: how many active memories the user has, their
summed field lengths (for BM25's length norm) and each query term's document
frequency (for IDF). A store with ``Capabilities.native_keyword_search`` keeps
these up to date with every write, in the same transaction:

* an inverted index: for each active memory, one posting per distinct term of
  its :func:`index_record` (content and topics together: a term counts once
  per memory, as the scorer's document frequency does);
* per user, the active count and the four length sums of the records.

Terms live in two spaces, each a prefix of the stored term: ``k:`` — the
keyword mode's tokens (the reference's ranking, §4.1.2, on the raw text) —
and ``s:`` — hybrid search's tokens over the stemmed text (search/keyword.py,
``lexical_scores``). The tokenisation is the engine's, so every backend holds
the same terms and ranks exactly like a scan of every memory: the scorer gets
the same numbers from :class:`KeywordStats` that it would count itself.

A query whose ranking needs every memory's text (no token at all: the
reference's raw-substring fallback, e.g. ``C++``) has no terms
(:func:`query_terms` returns None) and the store is scanned as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .keyword import _field_stats, _query_info, _stemmed_memory, _topic_stats_cached
from .tokens import _trim, lexical_query

__all__ = [
    "INDEX_VERSION",
    "KEYWORD_SPACE",
    "LEXICAL_SPACE",
    "IndexRecord",
    "KeywordStats",
    "index_record",
    "query_terms",
]

#: The space of keyword mode (raw tokens) and of hybrid search (stemmed tokens).
KEYWORD_SPACE = "k"
LEXICAL_SPACE = "s"
SPACES = (KEYWORD_SPACE, LEXICAL_SPACE)
#: Bumped when the tokenisation changes: stores rebuild their index on open.
#: 3: a name jieba's search mode glued to the next word is cut apart too (林晓对 → 林晓).
#: 4: a familiar name jieba split is one token (小 + 刘是 → 小刘).
INDEX_VERSION = 4


@dataclass(frozen=True, slots=True)
class IndexRecord:
    """What one active memory adds to its user's index."""

    #: Distinct terms of both spaces, each prefixed with its space ("k:cat", "s:cat").
    terms: tuple[str, ...]
    #: Content and topic lengths in each space: (k content, k topics, s content, s topics).
    lengths: tuple[int, int, int, int]
    #: For each of ``terms``: its count in the content and in the topics (BM25's tf),
    #: which with the lengths lets a store rank its candidates (search/candidates.py).
    counts: tuple[tuple[int, int], ...] = ()

    def postings(self) -> list[tuple[str, int, int, int, int]]:
        """(term, content tf, topic tf, content length, topic length) per term, the
        lengths of the term's own space."""
        k_content, k_topics, s_content, s_topics = self.lengths
        rows = []
        for term, (tf_content, tf_topics) in zip(self.terms, self.counts, strict=True):
            if term.startswith(f"{KEYWORD_SPACE}:"):
                rows.append((term, tf_content, tf_topics, k_content, k_topics))
            else:
                rows.append((term, tf_content, tf_topics, s_content, s_topics))
        return rows


#: ``Entry.newest_first`` of a memory: (-updated_at µs, -created_at µs, ID).
NewestFirst = tuple[int, int, str]


@dataclass(frozen=True, slots=True)
class KeywordStats:
    """One space's collection statistics, as the scorer needs them."""

    #: Active memories of the user.
    count: int
    #: Summed content and topic field lengths over those memories.
    content_length: int
    topic_length: int
    #: Memories holding each asked token (un-prefixed), in content or topics; None
    #: when the candidates are every memory holding a query term (then the scorer
    #: counts them among the candidates: the same numbers, no extra lookup).
    df: Mapping[str, int] | None = None
    #: When the store returned only the best-ranked holders of a query term
    #: (search/candidates.py): the rank of the last one returned, which no
    #: holder left out exceeds. None: every holder is among the candidates.
    rank_cutoff: float | None = None
    #: With ``rank_cutoff``: when the store's limit cut through the holders ranked
    #: exactly at it and the store cut them in the order search results give equal
    #: scores (``Entry.newest_first``), that key of the last of them returned: each
    #: one left out at the cutoff sorts after it (search/candidates.py, ``Chosen``).
    #: None: nothing is known of the order of those left out.
    cutoff_key: NewestFirst | None = None

    @classmethod
    def of(
        cls, space: str, count: int, lengths: Iterable[int], df: Mapping[str, int] | None = None
    ) -> KeywordStats:
        """From a store's sums (the four of :class:`IndexRecord`) and, if it counted
        them, its posting counts (prefixed terms) for ``space``."""
        sums = list(lengths)
        offset = 0 if space == KEYWORD_SPACE else 2
        prefix = f"{space}:"
        return cls(
            count=int(count),
            content_length=int(sums[offset]),
            topic_length=int(sums[offset + 1]),
            df=None
            if df is None
            else {term[len(prefix) :]: int(n) for term, n in df.items() if term.startswith(prefix)},
        )


def _field_terms(memory: Any) -> tuple[dict[str, tuple[int, int]], int, int]:
    """Each term of the memory with its (content tf, topic tf), and the two lengths."""
    content = _field_stats(memory.text)
    topics_tuple = tuple(memory.topics or ())
    topics = _topic_stats_cached(topics_tuple) if topics_tuple else None
    counts = {term: (tf, 0) for term, tf in content.tf.items()}
    topic_length = 0
    if topics is not None:
        for term, tf in topics.tf.items():
            counts[term] = (counts.get(term, (0, 0))[0], tf)
        topic_length = topics.length
    return counts, content.length, topic_length


def index_record(memory: Any) -> IndexRecord:
    """The postings and lengths of one memory (its text and topics), both spaces."""
    raw_terms, raw_content, raw_topics = _field_terms(memory)
    stemmed = _stemmed_memory(memory.text, tuple(memory.topics or ()))
    stem_terms, stem_content, stem_topics = _field_terms(stemmed)
    postings = sorted((f"{KEYWORD_SPACE}:{t}", n) for t, n in raw_terms.items()) + sorted(
        (f"{LEXICAL_SPACE}:{t}", n) for t, n in stem_terms.items()
    )
    return IndexRecord(
        tuple(t for t, _ in postings),
        (raw_content, raw_topics, stem_content, stem_topics),
        tuple(n for _, n in postings),
    )


def query_terms(query: str, space: str) -> tuple[str, ...] | None:
    """The prefixed terms a store looks up for ``query`` in ``space``; None when the
    ranking needs a scan (no token to look up: the raw-substring fallback)."""
    query = query or ""
    # As the scorers read it: keyword_search trims the query, lexical_scores stems it first.
    trimmed = _trim(query) if space == KEYWORD_SPACE else _trim(lexical_query(query))
    if not trimmed:
        return None
    info = _query_info(trimmed)
    if not info.tokens or info.raw_allowed:
        return None
    return tuple(f"{space}:{token}" for token in info.tokens)
