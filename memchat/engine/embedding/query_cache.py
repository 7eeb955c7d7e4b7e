"""Query vectors kept by the exact text a model reads, least recently used dropped."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class QueryCache:
    """A search's query vector, kept (float32) by the text the model reads: the
    same question again costs a lookup and gets the same vector. Thread-safe."""

    def __init__(self) -> None:
        self._vectors: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> list[float] | None:
        with self._lock:
            vector = self._vectors.get(text)
            if vector is None:
                return None
            self._vectors.move_to_end(text)
        return vector.tolist()  # type: ignore[no-any-return,unused-ignore]  # a new list each time: a caller may change its copy

    def put(self, text: str, vector: Any, keep: int) -> None:
        """Keep ``vector`` for ``text``, and at most ``keep`` vectors in all."""
        import numpy as np

        with self._lock:
            self._vectors[text] = np.asarray(vector, dtype=np.float32)
            while len(self._vectors) > keep:
                self._vectors.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._vectors.clear()
