"""Embedding and search: the read path by meaning and by keywords of MemoryService.

A mixin of ``MemoryService`` (engine/service.py), kept apart so each module
stays small: the service's writes and lifecycle there, its embeddings and its
one retrieval path (``search``, ``vector_search``) here. It reads the service's
``store``, settings and ``_ready`` (declared below for the type checker).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar, cast

from . import search as keyword
from . import validation
from .model import SEARCH_KEYWORD, SEARCH_MODES, SEARCH_SEMANTIC, Entry, SearchOptions, UserKey
from .search.bridge import (
    BRIDGE_HOLDERS,
    HAN_RE,
    HAN_RELATION_WORDS,
    bridge,
    han_relation_words,
    merge,
    name_tagger_loaded,
    names_the_user,
    relation_in,
    relation_of,
    relation_words,
)
from .search.candidates import KEYWORD_CANDIDATES, KeywordPlanner
from .search.idioms import in_plain_words
from .search.index import KEYWORD_SPACE, LEXICAL_SPACE, KeywordStats, query_terms
from .search.kinship import in_one_word, named_relative
from .search.request import without_request
from .search.scope import one_search, read_together, shared_read
from .search.user import USER_WORD, as_the_user, in_first_person, index_terms, name_candidates, the_user_named

#: What a search's query vectors are shared under (search/scope.py).
_QUERY_VECTOR = "query vector"

if TYPE_CHECKING:
    from .embedding import Embedder
    from .store import KeywordIndexStore, PeriodStore, Store, VectorStore

__all__ = ["Retrieval"]

#: Rounds of asking the store for more keyword holders before asking for all of them.
_KEYWORD_ROUNDS = 3
#: Most memories a store lists for the periods a query names (more: every keyword
#: holder is read instead, as by a store that cannot list them).
PERIOD_MEMORIES = 1000

A = TypeVar("A")
B = TypeVar("B")


async def _together(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Both results, the two run concurrently (as :func:`_each`)."""
    a, b = await _each([cast("Awaitable[object]", first), cast("Awaitable[object]", second)])
    return cast("A", a), cast("B", b)


async def _name_tagger_loaded() -> None:
    """jieba's name tagger, loaded in a thread the first time (about a second and a
    half: never on the event loop)."""
    if not name_tagger_loaded():
        await asyncio.to_thread(keyword.load_name_tagger)


async def _each(awaitables: Sequence[Awaitable[A]]) -> list[A]:
    """Every result, all run concurrently; when one fails the others are
    cancelled (``asyncio.gather`` would leave them running unobserved) and the
    failure raised as it is."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        raise


class Retrieval:
    """``MemoryService``'s embeddings and searches (see the module docstring)."""

    store: Store
    search_mode: str
    max_results: int
    min_score: float
    _keyword_only: bool
    _embedder: Embedder | None

    if TYPE_CHECKING:

        async def _ready(self, key: UserKey | None = None) -> None: ...

    # -- embeddings (vector stores only) ----------------------------------

    @property
    def is_vector_store(self) -> bool:
        """The store keeps embeddings and answers nearest-neighbour queries
        (every backend does; see ``has_embedder`` for whether this service embeds)."""
        return bool(getattr(self.store.capabilities, "vector_search", False))

    @property
    def _vectors(self) -> VectorStore:
        """The store as a vector store (what it is whenever ``is_vector_store``)."""
        return cast("VectorStore", self.store)

    @property
    def has_embedder(self) -> bool:
        """False when made with ``embedder=NO_EMBEDDER`` (or False): keyword only."""
        return not self._keyword_only

    @property
    def embedder(self) -> Embedder:
        """The embedder (the offline default unless one was given). A ConfigError
        for a service made with ``NO_EMBEDDER``."""
        if self._keyword_only:
            from .model import ConfigError

            raise ConfigError(
                "this memory service has no embedder (keyword search only): "
                "create it without embedder=NO_EMBEDDER (or unset MEMCHAT_EMBEDDER=none) for semantic search"
            )
        if self._embedder is None:
            from .embedding import default_embedder

            self._embedder = default_embedder()
        return self._embedder

    async def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        from .model import BackendError

        vectors = await self.embedder.embed(list(texts))
        if len(vectors) != len(texts):
            raise BackendError(
                f"the embedder {self.embedder.name} returned {len(vectors)} vectors for {len(texts)} texts"
            )
        dimension = self._vectors.dimension
        for vector in vectors:
            if len(vector) != dimension:
                raise BackendError(
                    f"embedding dimension mismatch: expected {dimension}, got {len(vector)} "
                    f"from the embedder {self.embedder.name}"
                )
        return vectors

    async def embed_texts(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for memory texts from this service's embedder, checked against
        the store's dimension (import and migration embed in batches with it)."""
        return await self._embed(texts)

    async def _vector_for(self, text: str) -> list[float] | None:
        """The embedding to store with ``text`` (None without an embedder or
        for a store without vectors). Computed before any atomic section, so a
        failure changes nothing."""
        if not (self.is_vector_store and self.has_embedder):
            return None
        return (await self._embed([text]))[0]

    async def search(self, key: UserKey, query: str, options: SearchOptions | None = None) -> list[Entry]:
        """Rank the user's memories for ``query``; each result carries ``score``, a 0–1 relevance.

        The one retrieval path of the tools, preload, CLI, TUI and library. The
        mode is ``options.resolved_mode(self.search_mode)``:

        * ``"hybrid"`` (the default): meaning and keywords fused
          (``search.HybridRanking``: calibrated cosine, keyword score, token-level
          similarity);
        * ``"semantic"``: meaning only (the calibrated cosine, as ``vector_search``);
        * ``"keyword"``: the reference's keyword ranking (§4.1), 0.3 minimum score.

        Hybrid and semantic need an embedder and a store with vectors; without
        them the search is keyword (no error). Filters, kind fallback, order,
        dedup and truncation behave the same in every mode.

        A query or search kind with a NUL or a lone surrogate is an
        ``InvalidMemoryError`` (on every backend); a blank query finds nothing."""
        self._check_search(key, query, options)
        await self._ready()
        if not isinstance(query, str) or not query.strip():
            return []
        with one_search():  # what one store call of this search read, the next may reuse
            return await self._search(key, query, options or SearchOptions())

    async def _search(self, key: UserKey, query: str, options: SearchOptions) -> list[Entry]:
        mode = options.resolved_mode(self.search_mode)
        if mode == SEARCH_KEYWORD:  # keyword mode ranks the words as given (the reference's)
            return await self._asked(key, query, options, mode)
        # The question a request carries, "the user" as "I" (the memories are the
        # user's, whatever they call them), its idioms in plain words ("for a living":
        # as a job, not "lives"): search/request.py, search/user.py, search/idioms.py.
        query = in_plain_words(in_first_person(without_request(query, HAN_RELATION_WORDS)))
        query = await self._as_the_user(key, query)
        one_word = None
        if not options.order_by_event_time:
            one_word = in_one_word(query) or await self._named_in_one_word(key, query)
        if one_word is None:
            return await self._asked(key, query, options, mode)
        # "我老公的妈妈" asked as written (a memory may say 老陈的妈妈) and as 我婆婆, the word
        # a memory more often says (search/kinship.py); each memory at its better score.
        self._embed_ahead([query, one_word])
        results, again = await _together(
            self._asked(key, query, options, mode), self._asked(key, one_word, options, mode)
        )
        return merge(results, again, limit=options.max_results or self.max_results)

    async def _as_the_user(self, key: UserKey, query: str) -> str:
        """``query`` with the user's name in the first person ("王芳 职业" is "我 职业"),
        when it names the person most of the memories hold (search/user.py): the
        memories call the user "The user…" one day and by name the next, and the
        name matched only the latter. One keyword lookup, for a query naming anyone."""
        names = name_candidates(query)
        if not names:
            return query
        terms = " ".join((*(term for name in names for term in index_terms(name)), USER_WORD))
        _, stats, _ = await self._keyword_candidates(key, terms, KEYWORD_SPACE, 1)
        if stats is None or stats.df is None:
            return query
        name = the_user_named(names, stats.df, stats.count)
        if name is None:
            return query
        if HAN_RE.match(name):
            # 用户 is no index term, so no share of "user" tells a store about the user
            # from one in the first person ("我和老公老陈…": 老陈 is the husband). The
            # memories holding the name say whether it is no one's relative.
            forms = index_terms(name)
            holders = await self._holders(key, " ".join(forms))
            await _name_tagger_loaded()
            if not names_the_user(name, holders, forms):
                return query
        return as_the_user(query, name)

    async def _named_in_one_word(self, key: UserKey, query: str) -> str | None:
        """ "Declan's mam" is "my mother-in-law" when a memory says Declan is the
        user's husband ("Nora's husband Declan…"): the query so, or None."""
        named = named_relative(query)
        if named is None:
            return None
        firsts = named.firsts()
        if not firsts:
            return None
        holders = await self._holders(key, " ".join(named.names))
        if any(HAN_RE.search(e.memory.text) for e in holders):
            await _name_tagger_loaded()
        for name in named.names:
            first = relation_of(name, holders, firsts)
            if first is not None:
                return named.in_one_word(name, first)
        return None

    async def _asked(self, key: UserKey, query: str, options: SearchOptions, mode: str) -> list[Entry]:
        """The ranking for ``query`` as it stands, with the question again about the
        person a first-person relation in it names (search/bridge.py)."""
        relation = None if options.order_by_event_time else relation_in(query)
        if relation is None:
            return await self._ranked(key, query, options, mode)

        async def about_the_person() -> list[Entry] | None:
            # "my sister", "我对象": who that is (the memories holding the relation's
            # words), then the question again about the person (search/bridge.py).
            group = relation[0]
            holders = await self._holders(key, relation_words(query, group))
            found = bridge(query, holders, relation)
            if found is None and not HAN_RE.search(query):
                # "My husband" in English, and no English memory names him: a bilingual
                # user's Chinese ones may ("老陈是…"). Reading them needs jieba's
                # dictionary and name tagger (about a second and a half to load): only
                # for a user who has such a memory, and then in a thread, once.
                words = han_relation_words(group)
                if await self._holds_any(key, words.split()):
                    await _name_tagger_loaded()
                    found = bridge(query, await self._holders(key, words), relation)
            if found is None:
                return None
            if len(found.queries) == 1:
                return await self._ranked(key, found.query, options, mode)
            # One of several ("two children, Ciara and Fionn"): each asked about.
            self._embed_ahead(found.queries)
            rankings = await _each([self._ranked(key, q, options, mode) for q in found.queries])
            return merge(*rankings, limit=options.max_results or self.max_results)

        # The question as asked and the question about the person do not depend on
        # each other: asked one after the other they made a bridged search the
        # slowest of all (its p95 at 100k memories was two searches and a lookup).
        results, again = await _together(self._ranked(key, query, options, mode), about_the_person())
        if again is None:
            return results
        return merge(results, again, limit=options.max_results or self.max_results)

    async def _ranked(self, key: UserKey, query: str, options: SearchOptions, mode: str) -> list[Entry]:
        if mode != SEARCH_KEYWORD and self._semantic_ready():
            if mode == SEARCH_SEMANTIC:
                return await self._semantic_search(key, query, options)
            return await self._hybrid_search(key, query, options)
        candidates, stats, scores = await self._keyword_candidates(
            key, query, KEYWORD_SPACE, self._keyword_depth(options)
        )
        return keyword.keyword_search(
            candidates,
            query,
            options,
            min_score=self.min_score,
            default_max=self.max_results,
            stats=stats,
            scores=scores,
        )

    async def _holds_any(self, key: UserKey, words: Sequence[str]) -> bool:
        """Whether one of the user's memories holds one of ``words`` (Chinese
        dictionary words, each a term of its own), asked without segmenting them:
        the index's holders of those terms (every memory while it is not ready),
        read for the words."""
        store = self.store
        if store.capabilities.native_keyword_search:
            index = cast("KeywordIndexStore", store)
            terms = tuple(f"{KEYWORD_SPACE}:{word}" for word in words)
            found, _ = await index.indexed_keyword_candidates(key, KEYWORD_SPACE, terms)
        else:
            found = await store.keyword_candidates(key, " ".join(words))
        return any(word in entry.memory.text for entry in found for word in words)

    async def _holders(self, key: UserKey, words: str) -> list[Entry]:
        """The best ``BRIDGE_HOLDERS`` memories holding one of ``words``, best first."""
        found, stats, scores = await self._keyword_candidates(key, words, KEYWORD_SPACE, BRIDGE_HOLDERS)
        if scores is None:
            scores = keyword.score_entries(found, words, stats)
        ranked = sorted(zip(scores, found, strict=True), key=lambda pair: -pair[0])
        return [entry for score, entry in ranked[:BRIDGE_HOLDERS] if score > 0]

    async def _keyword_candidates(
        self, key: UserKey, query: str, space: str, depth: int | None = None, *, settle: bool = True
    ) -> tuple[list[Entry], KeywordStats | None, list[float] | None]:
        """What keyword scoring reads: from a store that keeps an inverted index
        (search/index.py), the memories holding a query term and the collection's
        statistics; from the others, every active memory (the scorer counts). The
        third item is the candidates' scores in ``space`` when they were computed
        here (the caller need not score them again), else None.

        ``depth``: the caller ranks only the best ``depth`` (None: all of them), so
        the store may return just its best-ranked holders (search/candidates.py);
        when those cannot be shown to hold the true best ``depth``, it is asked again
        for every holder that still could (without ``settle``, the caller decides)."""
        store = self.store
        if store.capabilities.native_keyword_search:
            index = cast("KeywordIndexStore", store)
            terms = query_terms(query, space)
            if terms is not None:
                if depth is None:
                    return (*await index.indexed_keyword_candidates(key, space, terms), None)
                planner = KeywordPlanner(query, space, max(KEYWORD_CANDIDATES, depth), depth)
                found, stats = await index.indexed_keyword_candidates(key, space, terms, planner)
                if stats is None or stats.rank_cutoff is None:
                    return found, stats, None
                scorer = keyword.score_entries if space == KEYWORD_SPACE else keyword.lexical_scores
                scores = scorer(found, query, stats)
                if not settle or planner.complete(scores, stats, depth):
                    return found, stats, scores
                wider = planner.below(scores, depth)
                return (*await index.indexed_keyword_candidates(key, space, terms, wider), None)
        return await store.keyword_candidates(key, query), None, None

    def _hybrid_keyword_depth(self, periods: Sequence[object], options: SearchOptions) -> int | None:
        """How many of the best keyword candidates hybrid search needs: those it may
        re-rank, unless filters, or a date in the query (which lifts every memory of
        that period whatever its keyword rank), can reach past any fixed number.
        (With a date, a store that lists the memories of the period
        (``_period_entries``) tells which are lifted: the ranking then tells how far
        down the others are needed, as without one; for any other store that is
        about every holder.)"""
        if self._filtered(options):
            return None
        if periods and not self.store.capabilities.event_time_lookup:
            return None
        return keyword.HYBRID_RERANK_DEPTH

    async def _period_entries(
        self, key: UserKey, periods: Sequence[tuple[datetime, datetime]], depth: int | None
    ) -> list[Entry] | None:
        """The memories in the periods the query names, when the store can list them
        and the keyword half is bounded (``depth``); None otherwise or when there
        are more than ``PERIOD_MEMORIES`` of them."""
        if not periods or depth is None or not self.store.capabilities.event_time_lookup:
            return None
        store = cast("PeriodStore", self.store)
        return await store.memories_in_periods(key, periods, PERIOD_MEMORIES)

    def _keyword_depth(self, options: SearchOptions) -> int | None:
        """How many of keyword search's best candidates decide its results (None: all,
        when filters or the event-time order may reach past any fixed number)."""
        limit = options.max_results if options.max_results > 0 else self.max_results
        if limit <= 0 or self._filtered(options) or options.order_by_event_time:
            return None
        # Near-duplicates are dropped after ranking: keep room for them.
        return 3 * limit if options.deduplicate else limit

    async def vector_search(
        self, key: UserKey, query: str, options: SearchOptions | None = None
    ) -> list[Entry]:
        """Semantic search only (``search`` with mode "semantic"): score = the cosine
        similarity of query and memory embeddings, calibrated per embedder to a 0–1
        relevance (increasing with the cosine). ``options.similarity_threshold`` (if
        > 0) drops weaker matches; filters, kind fallback, order and dedup apply.
        Without an embedder or a store with vectors: one ConfigError."""
        self._check_search(key, query, options)
        await self._ready()
        if not self._semantic_ready():
            from .model import ConfigError

            raise ConfigError(
                f"semantic search needs an embedder and vectors; the {self.store.name} backend "
                "has none here: set an embedder, or search by keyword"
            )
        if not isinstance(query, str) or not query.strip():
            return []
        return await self._semantic_search(key, query, options or SearchOptions())

    def _semantic_ready(self) -> bool:
        """An embedder and a store that answers nearest-neighbour queries."""
        return self.is_vector_store and self.has_embedder

    @staticmethod
    def _check_search(key: UserKey, query: str, options: SearchOptions | None) -> None:
        validation.check_key(key)
        if isinstance(query, str) and query.strip():
            validation.check_query(query)
        validation.check_search_options(options)
        if options is not None and options.mode and options.mode not in SEARCH_MODES:
            from .model import InvalidMemoryError

            raise InvalidMemoryError(
                f"the search mode must be one of {', '.join(SEARCH_MODES)} (or empty for the default)"
            )

    def _dense_depth(self, options: SearchOptions) -> int:
        limit = options.max_results if options.max_results > 0 else self.max_results
        return max(keyword.HYBRID_DENSE_DEPTH, 5 * limit)

    def _filtered(self, options: SearchOptions) -> bool:
        return bool(options.kind or options.time_after is not None or options.time_before is not None)

    async def _query_vector(self, query: str) -> list[float]:
        """The query's embedding, or the one this search made of it ahead (``_embed_ahead``)."""

        async def alone() -> list[float]:
            return (await self._query_vectors([query]))[0]

        return await shared_read((_QUERY_VECTOR, query), alone)

    def _embed_ahead(self, queries: Sequence[str]) -> None:
        """Embed the queries this search is about to ask, in one call: one batch of
        two costs the model about 1.3 times one query, two calls twice as much
        (benchmarks/README.md, "Thirty-sixth session"); each ranking then finds its
        vector made."""
        texts = list(dict.fromkeys(q.strip() for q in queries))
        if len(texts) > 1 and self._semantic_ready():
            read_together([(_QUERY_VECTOR, text) for text in texts], lambda: self._query_vectors(texts))

    async def _query_vectors(self, queries: Sequence[str]) -> list[list[float]]:
        """The queries' embeddings (``embed_query`` where the embedder tells queries apart)."""
        from .model import BackendError

        embedder = self.embedder
        vectors = await getattr(embedder, "embed_query", embedder.embed)(list(queries))
        dimension = getattr(self.store, "dimension", None)
        if len(vectors) != len(queries) or any(dimension and len(v) != dimension for v in vectors):
            raise BackendError(
                f"the embedder {embedder.name} returned no {dimension}-dimensional vector for the query"
            )
        return vectors

    async def _dense_candidates(
        self, key: UserKey, vector: Sequence[float], options: SearchOptions
    ) -> list[Entry]:
        """The store's nearest neighbours; every active memory when filters are set
        (they apply afterwards, so the nearest ones may all be filtered out)."""
        store = self._vectors
        depth = self._dense_depth(options)
        if self._filtered(options):
            depth = max(depth, await self.store.count(key))
        return await store.vector_candidates(key, vector, depth)

    async def _semantic_search(self, key: UserKey, query: str, options: SearchOptions) -> list[Entry]:
        vector = await self._query_vector(query.strip())
        dense = await self._dense_candidates(key, vector, options)
        calibration = keyword.calibration_for(self.embedder)
        return keyword.dense_results(dense, options, calibration=calibration, default_max=self.max_results)

    async def _hybrid_search(self, key: UserKey, query: str, options: SearchOptions) -> list[Entry]:
        query = query.strip()

        async def nearest() -> list[Entry]:
            return await self._dense_candidates(key, await self._query_vector(query), options)

        # The query's embedding and then its nearest memories (model work and a large
        # product in threads) and the keyword candidates (store I/O, scoring on the
        # loop) do not depend on each other: one runs while the other waits.
        periods = keyword.query_periods(query)
        keyword_depth = self._hybrid_keyword_depth(periods, options)
        (dense, in_periods), (keyword_entries, keyword_stats, keyword_scores) = await _together(
            _together(nearest(), self._period_entries(key, periods, keyword_depth)),
            self._keyword_candidates(key, query, LEXICAL_SPACE, keyword_depth, settle=False),
        )
        if in_periods is None and keyword_depth is not None and periods:
            # More memories in the periods than a store lists: every keyword holder.
            keyword_depth = None
            keyword_entries, keyword_stats = await self._keyword_holders_from(key, query, 0.0)
            keyword_scores = None
        ranking = await self._hybrid_ranking(
            key, query, options, dense, keyword_entries, keyword_stats, keyword_scores, in_periods
        )
        results = ranking.results(options, default_max=self.max_results)
        if keyword_depth is None or keyword_scores is None or keyword_stats is None:
            return results
        cutoff = keyword_stats.rank_cutoff
        if cutoff is None:
            return results
        # The store's first answer left out holders ranked at most ``cutoff``. One may
        # still reach the re-rank or the results (an episode's lift, a re-rank that
        # lowers the best): they are asked for down to the keyword score at which one
        # could, and again if the ranking with them asks for more (every holder after
        # a few rounds). So the ranking is the full scan's, and a tie at the cutoff
        # (hundreds of templated memories at 100k) is read only when it could matter.
        limit = options.max_results if options.max_results > 0 else self.max_results
        after_key = keyword_stats.cutoff_key
        for round_ in range(_KEYWORD_ROUNDS):
            level = ranking.keyword_needed(results, options, limit, cutoff, after_key)
            if level is None or (round_ and level >= cutoff - 1e-9):  # nothing it has not read
                return results
            if round_ == _KEYWORD_ROUNDS - 1:
                level = 0.0
            keyword_entries, keyword_stats = await self._keyword_holders_from(key, query, level)
            keyword_scores = None
            ranking = await self._hybrid_ranking(
                key, query, options, dense, keyword_entries, keyword_stats, keyword_scores, in_periods
            )
            results = ranking.results(options, default_max=self.max_results)
            if level <= 0.0:
                break
            cutoff, after_key = level, None  # every holder ranked from ``level`` is here
        return results

    async def _keyword_holders_from(
        self, key: UserKey, query: str, level: float
    ) -> tuple[list[Entry], KeywordStats | None]:
        """Every holder of a query term (stemmed space) ranked at least ``level``."""
        index = cast("KeywordIndexStore", self.store)
        terms: Sequence[str] = query_terms(query, LEXICAL_SPACE) or []
        planner = KeywordPlanner(query, LEXICAL_SPACE).ranked_from(level)
        return await index.indexed_keyword_candidates(key, LEXICAL_SPACE, terms, planner)

    async def _hybrid_ranking(
        self,
        key: UserKey,
        query: str,
        options: SearchOptions,
        dense: list[Entry],
        keyword_entries: list[Entry],
        keyword_stats: KeywordStats | None,
        keyword_scores: list[float] | None,
        in_periods: list[Entry] | None = None,
    ) -> keyword.HybridRanking:
        """Dense and keyword candidates fused, the best re-ranked by token similarity
        (``in_periods``: every memory in the periods the query names, when known)."""
        embedder = self.embedder
        embed_tokens = getattr(embedder, "embed_tokens", None)
        depth = self._dense_depth(options)
        everything = self._filtered(options) or len(dense) < depth
        # The relevance floor measures the query's background over all the user's
        # memories: when the store returned only the nearest ones, it needs their number
        # (an indexed store's keyword statistics carry it: no second read).
        size = None
        if not everything:
            size = keyword_stats.count if keyword_stats is not None else await self.store.count(key)
        ranking = keyword.HybridRanking(
            keyword_entries,
            dense,
            query,
            dense_complete=everything,
            calibration=keyword.calibration_for(embedder),
            collection_size=size,
            keyword_stats=keyword_stats,
            keyword_scores=keyword_scores,
            period_entries=in_periods,
            # A filtered search reads every memory's cosine whatever its limit.
            dense_view=None if self._filtered(options) else keyword.HYBRID_DENSE_DEPTH,
        )
        if embed_tokens is not None:
            targets = ranking.rerank_targets(options)
            if targets:
                token_vectors = await embed_tokens([query, *(e.memory.text for e in targets)])
                similarities = keyword.token_similarities(token_vectors[0], token_vectors[1:])
                ranking.set_token_similarities(
                    {entry.id: value for entry, value in zip(targets, similarities, strict=True)}
                )
        return ranking
