"""The write buffer of the write sections that send nothing until they commit
(the in-memory and Redis stores): reads see the section's own writes first,
and a ``put`` without a vector after a ``remove`` in the same section does
not bring the removed vector back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from memchat.engine.model import Entry

V = TypeVar("V")


class BufferedWrites(Generic[V]):
    """``_writes``: memory ID → the entry written, or None: removed.
    ``_vectors``: memory ID → the new vector as the store keeps it (``V``),
    or None: drop the stored one. A subclass says how a vector is kept
    (``_keep_vector``) and how a stored entry is read (``_stored``)."""

    def __init__(self) -> None:
        self._writes: dict[str, Entry | None] = {}
        self._vectors: dict[str, V | None] = {}

    def _keep_vector(self, vector: Sequence[float]) -> V:
        raise NotImplementedError

    async def _stored(self, memory_id: str) -> Entry | None:
        """The entry as stored before this section."""
        raise NotImplementedError

    async def get(self, memory_id: str) -> Entry | None:
        if memory_id in self._writes:
            return self._writes[memory_id]
        return await self._stored(memory_id)

    async def put(self, entry: Entry, vector: Sequence[float] | None = None) -> None:
        if vector is not None:
            self._vectors[entry.id] = self._keep_vector(vector)
        elif entry.id in self._writes and self._writes[entry.id] is None:
            self._vectors[entry.id] = None  # removed earlier in this section: nothing to keep
        self._writes[entry.id] = entry

    async def remove(self, memory_id: str) -> None:
        self._writes[memory_id] = None
        self._vectors[memory_id] = None
