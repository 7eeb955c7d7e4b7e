"""The offline default: e5's and USE's vectors blended, MiniLM's static word pieces."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from ..pieces import PieceVectors
from .blend import BLEND_IDENTITY, BLEND_MODEL, BlendProjection
from .e5 import E5_NAME, E5Embedder
from .protocol import DEFAULT_DIMENSION
from .use import USE_NAME, USEEmbedder


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
        # The name starts with the blend's model key, so that a wrapper that copies
        # only the name (a cache, a benchmark's) still finds the blend's calibration.
        self.name = f"{BLEND_MODEL} ({E5_NAME} and {USE_NAME}); token similarity {self.pieces.name}"

    def load(self) -> None:
        """Load the models and the tables now (blocking)."""
        self.e5.load()
        self.use.load()
        self.blend.load()
        self.pieces.load()

    def _blended(self, e5_rows: Any, texts: Sequence[str]) -> list[list[float]]:
        return self.blend.project(e5_rows, self.use.embed_rows(texts)).tolist()

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        return self._blended(self.e5.embed_sync(texts), texts) if texts else []

    def embed_query_sync(self, texts: Sequence[str]) -> list[list[float]]:
        return self._blended(self.e5.embed_query_sync(texts), texts) if texts else []

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self.embed_sync, list(texts))

    async def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        texts = list(texts)
        # e5 answers a repeated query from its cache without a thread; USE's part is ~2 ms.
        e5_rows, use_rows = await asyncio.gather(
            self.e5.embed_query(texts), asyncio.to_thread(self.use.embed_rows, texts)
        )
        return self.blend.project(e5_rows, use_rows).tolist()

    async def embed_tokens(self, texts: Sequence[str]) -> list[Any]:
        return await self.pieces.embed_tokens(texts)
