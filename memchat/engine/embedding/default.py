"""The offline default: e5's and USE's vectors blended, MiniLM's static word pieces."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ..pieces import PieceVectors
from .blend import BLEND_IDENTITY, BLEND_MODEL, BlendProjection
from .e5 import E5_CACHED_QUERIES, E5_NAME, E5Embedder
from .protocol import DEFAULT_DIMENSION
from .query_cache import QueryCache
from .use import USE_NAME, USEEmbedder, use_text


class DefaultEmbedder:
    """The offline default. Every vector (memories and queries, any language,
    across languages) is a blend of multilingual-e5-small's and USE
    multilingual's (embedding/blend.py): two models miss fewer paraphrases than
    one. Static all-MiniLM-L6-v2 word pieces (engine/pieces.py) feed hybrid
    search's token similarity, which costs a tokenisation, not a model run.

    Its ``identity`` names both models and the projection: a store of e5's
    vectors alone is re-embedded when it opens. The models and the tables load
    lazily, each on its first use; :meth:`load` loads them all (an application
    calls it in a worker thread after its first frame).
    """

    dimension = DEFAULT_DIMENSION
    identity = BLEND_IDENTITY
    #: The model whose calibration applies (engine/search/dense.py).
    dense_model = BLEND_MODEL

    def __init__(
        self,
        e5: E5Embedder | None = None,
        pieces: PieceVectors | None = None,
        use: USEEmbedder | None = None,
        blend: BlendProjection | None = None,
    ) -> None:
        self.e5 = e5 if e5 is not None else E5Embedder()
        self.pieces = pieces if pieces is not None else PieceVectors()
        self.use = use if use is not None else USEEmbedder()
        self.blend = blend if blend is not None else BlendProjection()
        #: Blended query vectors by the text the models read (USE reads the most of it).
        self._queries = QueryCache()
        # The name starts with the blend's model key, so that a wrapper that copies
        # only the name (a cache, a benchmark's) still finds the blend's calibration.
        self.name = f"{BLEND_MODEL} ({E5_NAME} and {USE_NAME}); token similarity {self.pieces.name}"

    def load(self) -> None:
        """Load the models and the tables now (blocking)."""
        self.e5.load()
        self.use.load()
        self.blend.load()
        self.pieces.load()

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return self.blend.project(self.e5.embed_sync(texts), self.use.embed_rows(texts)).tolist()

    def embed_query_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of search queries; a single query the models read before comes
        from the cache (the vector made then: both models are deterministic)."""
        if not texts:
            return []
        if (cached := self._cached(texts)) is not None:
            return cached
        return self._blended(texts, self.e5.embed_query_sync(texts), self.use.embed_rows(texts))

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self.embed_sync, list(texts))

    async def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        texts = list(texts)
        # One chat turn often asks the same query twice (the preload's search, then the
        # model's memory_search): a cached vector needs no model and no worker thread.
        if (cached := self._cached(texts)) is not None:
            return cached
        e5_rows, use_rows = await asyncio.gather(
            self.e5.embed_query(texts), asyncio.to_thread(self.use.embed_rows, texts)
        )
        return self._blended(texts, e5_rows, use_rows)

    def _cached(self, texts: Sequence[str]) -> list[list[float]] | None:
        """The vector of a single query the models read before (both are deterministic)."""
        if len(texts) == 1 and (cached := self._queries.get(use_text(texts[0]))) is not None:
            return [cached]
        return None

    def _blended(self, texts: Sequence[str], e5_rows: Any, use_rows: Any) -> list[list[float]]:
        """The queries' blended vectors, each kept for its next search (a search may
        embed the questions it asks together: retrieval.py)."""
        vectors = self.blend.project(e5_rows, use_rows).tolist()
        for text, vector in zip(texts, vectors, strict=True):
            self._queries.put(use_text(text), vector, keep=E5_CACHED_QUERIES)
        return vectors

    def forget_queries(self) -> None:
        """Empty the query caches, the blend's and e5's (a benchmark measures the
        models, not the caches)."""
        self._queries.clear()
        self.e5.forget_queries()

    async def embed_tokens(self, texts: Sequence[str]) -> list[Any]:
        return await self.pieces.embed_tokens(texts)
