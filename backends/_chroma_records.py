"""How the Chroma store keeps a memory: one record per (app, user, memory
ID), its document the memory text, its metadata every other field (times in
microseconds, reference §4.11) except those at the default a reader assumes
when the key is absent (kind "fact", no place, no event time); and the filters
that select a user's records."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from memchat.engine.model import KIND_FACT, Entry, Memory, UserKey, from_micros, to_micros

T = TypeVar("T")

SCHEMA_VERSION = 1
#: Collection metadata keys.
MARK_BACKEND, MARK_SCHEMA, MARK_DIMENSION = "memchat_backend", "memchat_schema_version", "memchat_dimension"
#: Prefix of the metadata keys holding ``write_meta`` records.
MARK_META = "memchat_meta_"
#: Metadata key set (to ``dense_tag``) only on an active memory with a real
#: embedding: the nearest-neighbour query's filter is this one clause, as Chroma
#: spends about as much on each clause of a filter as on the search itself.
DENSE_KEY = "memchat_dense"


def record_id(key: UserKey, memory_id: str) -> str:
    """The Chroma ID of a memory: the hash of (app, user, memory ID)."""
    return hashlib.sha256(f"{key.app}\0{key.user}\0{memory_id}".encode()).hexdigest()


def user_filter(key: UserKey, *, active: bool, embedded: bool = False) -> dict[str, Any]:
    clauses: list[dict[str, Any]] = [{"app_name": key.app}, {"user_id": key.user}]
    if active:
        clauses.append({"deleted_at_us": 0})
    if embedded:
        clauses.append({"has_embedding": True})
    return {"$and": clauses}


def dense_tag(app: str, user: str) -> str:
    """The ``DENSE_KEY`` value of a user's searchable records."""
    return hashlib.sha256(f"{app}\0{user}".encode()).hexdigest()[:32]


def dense_filter(key: UserKey) -> dict[str, Any]:
    """The user's active memories with a real embedding (as ``user_filter(key,
    active=True, embedded=True)``, in one clause)."""
    return {DENSE_KEY: dense_tag(key.app, key.user)}


def record_metadata(entry: Entry, has_embedding: bool) -> dict[str, Any]:
    m = entry.memory
    searchable = has_embedding and entry.deleted_at is None
    # None removes a key (an upsert merges metadata into the stored record). A key
    # whose value is the default a reader assumes when it is absent is left out: the
    # server spends about as much per key of every record it returns (400 records
    # with 15 keys read in 28 ms, with 10 in 22: benchmarks/README.md), and an older
    # memchat reads those keys with the same defaults.
    return {
        MARK_SCHEMA: None,  # the collection's metadata says the layout
        "app_name": entry.app,
        "user_id": entry.user,
        "memory_id": entry.id,
        "kind": None if (m.kind or KIND_FACT) == KIND_FACT else m.kind,
        "has_event_time": True if m.event_time is not None else None,
        "event_time_us": to_micros(m.event_time) if m.event_time is not None else None,
        "topics": list(m.topics) or None,
        "participants": list(m.participants) or None,
        "location": m.location or None,
        "created_at_us": to_micros(entry.created_at),
        "updated_at_us": to_micros(entry.updated_at),
        "deleted_at_us": to_micros(entry.deleted_at) if entry.deleted_at is not None else 0,
        "has_embedding": has_embedding,
        DENSE_KEY: dense_tag(entry.app, entry.user) if searchable else None,
    }


def record_entry(document: str | None, meta: Mapping[str, Any]) -> Entry:
    memory = Memory(
        text=document or "",
        topics=tuple(meta.get("topics") or ()),
        kind=meta.get("kind") or KIND_FACT,
        event_time=from_micros(meta.get("event_time_us")) if meta.get("has_event_time") else None,
        participants=tuple(meta.get("participants") or ()),
        location=meta.get("location") or "",
    )
    deleted = int(meta.get("deleted_at_us") or 0)
    return Entry(
        id=str(meta["memory_id"]),
        app=str(meta["app_name"]),
        user=str(meta["user_id"]),
        memory=memory,
        created_at=_time(meta["created_at_us"]),
        updated_at=_time(meta["updated_at_us"]),
        deleted_at=from_micros(deleted) if deleted else None,
    )


def chunks(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def pages(
    collection: Any,
    where: Mapping[str, Any],
    include: list[str],
    size: int,
    stopped: Any = None,
    pause: Callable[[], None] | None = None,
) -> Iterator[dict[str, Any]]:
    """Every record matching ``where``, ``size`` at a time (``get`` answers, with
    ``include``), until done or ``stopped`` (a ``threading.Event``) is set;
    ``pause`` is called before each page (a background read yielding to searches).

    The IDs first, in one request, then the records by ID: paging the filtered
    query by offset makes the server walk every record before the page again,
    so reading 10k records took 2.4 s in 500s by offset against 1.1 s by ID,
    and a page at offset 50,000 took 254 ms against 92 (a kept 100k collection,
    benchmarks/README.md "Twenty-fifth session"). All the IDs of 100k records
    come back in one request in 0.3-0.6 s."""
    ids = collection.get(where=where, include=[])["ids"]
    for batch in chunks(ids, size):
        if pause is not None:
            pause()
        if stopped is not None and stopped.is_set():
            return
        yield collection.get(ids=list(batch), include=include) if include else {"ids": list(batch)}


def fingerprint(entry: Entry) -> tuple[Any, ...]:
    """What a record must read back as: every stored field, times in microseconds."""
    m = entry.memory

    def us(value: datetime | None) -> int | None:
        return to_micros(value) if value is not None else None

    return (
        entry.id, entry.app, entry.user, m.text, tuple(m.topics), m.kind or KIND_FACT, us(m.event_time),
        tuple(m.participants), m.location or "",
        us(entry.created_at), us(entry.updated_at), us(entry.deleted_at),
    )  # fmt: skip


def _time(micros: Any) -> datetime:
    """A time the record always holds, as a datetime."""
    return from_micros(int(micros)) or datetime.fromtimestamp(0)
