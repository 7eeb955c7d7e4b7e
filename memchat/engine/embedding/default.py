"""The offline default: e5's vectors, MiniLM's static word-piece vectors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..pieces import PieceVectors
from .e5 import E5_IDENTITY, E5_NAME, E5Embedder
from .protocol import DEFAULT_DIMENSION


class DefaultEmbedder:
    """The offline default: multilingual-e5-small makes every vector (memories
    and queries, any language, across languages); static all-MiniLM-L6-v2 word
    pieces (engine/pieces.py) feed hybrid search's token similarity, which e5's
    engine does not expose and which costs a tokenisation, not a model run.

    Its ``identity`` is e5's: the vectors a store keeps are e5's. The model and
    the piece table load lazily, each on its first use; :meth:`load` loads both
    (an application calls it in a worker thread after its first frame).
    """

    dimension = DEFAULT_DIMENSION
    identity = E5_IDENTITY

    def __init__(self, e5: E5Embedder | None = None, pieces: PieceVectors | None = None) -> None:
        self.e5 = e5 if e5 is not None else E5Embedder()
        self.pieces = pieces if pieces is not None else PieceVectors()
        self.name = f"{E5_NAME}; token similarity {self.pieces.name}"

    def load(self) -> None:
        """Load the model and the piece table now (blocking)."""
        self.e5.load()
        self.pieces.load()

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        return self.e5.embed_sync(texts)

    def embed_query_sync(self, texts: Sequence[str]) -> list[list[float]]:
        return self.e5.embed_query_sync(texts)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.e5.embed(texts)

    async def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.e5.embed_query(texts)

    async def embed_tokens(self, texts: Sequence[str]) -> list[Any]:
        return await self.pieces.embed_tokens(texts)
