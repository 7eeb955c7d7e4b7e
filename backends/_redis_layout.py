"""Where the Redis store keeps a user's memories and how.

Key layout
----------
Every (app, user) owns two hashes of entries, a hash of vectors and a
version counter, all carrying one Redis Cluster hash tag ``{…}`` so that all
of a user's keys live in one slot (a WATCH / MULTI over them is legal on a
cluster)::

    <prefix>:mem:{<app>:<user>}            active entries    field = memory id
    <prefix>:mem:{<app>:<user>}:deleted    tombstones        field = memory id
    <prefix>:mem:{<app>:<user>}:vec        embeddings        field = memory id, value = float32 bytes
    <prefix>:mem:{<app>:<user>}:version    bumped by every write of the user
    <prefix>:mem:{<app>:<user>}:kw:…       keyword search's inverted index (redis_index.py)

A vector is written in the same MULTI/EXEC as its entry; a tombstone keeps
its vector (for restore). ``vector_candidates`` ranks the user's vectors
exactly in numpy over a per-user matrix cached in the process while the
version counter is unchanged (so another process's writes are seen at the
next search). ``<prefix>:meta`` is a hash of store records (``read_meta``).

The value of a field is the entry as JSON: ``id``, ``app_name``, ``user_id``,
``memory`` (``memory`` text, ``topics``, ``kind``, ``event_time``,
``participants``, ``location``), ``created_at``, ``updated_at`` and
``deleted_at``, times as ISO 8601 UTC strings with microseconds. Counting the
active memories is ``HLEN`` of the first hash; nothing ever scans keys.

``<app>`` and ``<user>`` are percent-encoded (UTF-8 bytes, ``%XX``) wherever
they hold ``%``, ``:``, ``{``, ``}``, a glob character (``* ? [ ] \\``), a
space, or any non-printable character. The reference spells the key
``mem:{app:user}`` raw, where app ``"a:b"`` + user ``"c"`` and app ``"a"`` +
user ``"b:c"`` share one key; with the escaping the mapping is injective, the
only ``{``/``}`` in a key are the tag's own, and a KEYS/SCAN pattern built
from one user's key can match no other user's keys. Plain names (letters,
digits, ``-``, ``_``, ``.``, non-ASCII letters) are kept as they are, so the
keys stay readable in ``redis-cli``.

The prefix is ``key_prefix`` (or ``REDIS_KEY_PREFIX``; default
``"memchat"``); no second colon is added when it already ends with ``:``, and
an empty prefix gives the reference's bare ``mem:{app:user}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import redis.asyncio as aioredis

from memchat.engine.model import Entry, Memory, UserKey, utc

_ESCAPED = frozenset("%:{}*?[]\\ ")


def escape_key_part(text: str) -> str:
    """Percent-encode the characters that could break a key's structure."""
    out: list[str] = []
    for ch in text:
        if ch in _ESCAPED or not ch.isprintable():
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
        else:
            out.append(ch)
    return "".join(out)


def join_prefix(prefix: str) -> str:
    """``"memchat"`` → ``"memchat:"``; ``"a:"`` stays; ``""`` stays empty."""
    return prefix if not prefix or prefix.endswith(":") else prefix + ":"


@dataclass(frozen=True, slots=True)
class UserKeys:
    """The Redis keys of one (app, user)."""

    active: str
    deleted: str
    vectors: str
    version: str


def user_keys(prefix: str, key: UserKey) -> UserKeys:
    base = f"{join_prefix(prefix)}mem:{{{escape_key_part(key.app)}:{escape_key_part(key.user)}}}"
    return keys_of_base(base)


def keys_of_base(base: str) -> UserKeys:
    return UserKeys(active=base, deleted=base + ":deleted", vectors=base + ":vec", version=base + ":version")


def user_of_base(base: str) -> UserKey:
    """The (app, user) a base key ``…mem:{<app>:<user>}`` names (``escape_key_part``
    reversed: the escaped parts hold no raw ``:``, ``{`` or ``}``)."""
    inner = base[base.rindex("{") + 1 : -1]
    app, _, user = inner.partition(":")
    return UserKey(unquote(app, errors="surrogatepass"), unquote(user, errors="surrogatepass"))


def glob_escape(text: str) -> str:
    """``text`` as a literal in a KEYS/SCAN pattern."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


def _time(value: datetime | None) -> str | None:
    return None if value is None else utc(value).isoformat(timespec="microseconds")


def _parse_time(value: Any) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, int | float):  # microseconds since the epoch
        seconds, micros = divmod(int(value), 1_000_000)
        return datetime.fromtimestamp(seconds, UTC).replace(microsecond=micros)
    return utc(datetime.fromisoformat(str(value).replace("Z", "+00:00")))


def encode_entry(entry: Entry) -> str:
    m = entry.memory
    return json.dumps(
        {
            "id": entry.id,
            "app_name": entry.app,
            "user_id": entry.user,
            "memory": {
                "memory": m.text,
                "topics": list(m.topics),
                "kind": m.kind,
                "event_time": _time(m.event_time),
                "participants": list(m.participants),
                "location": m.location,
            },
            "created_at": _time(entry.created_at),
            "updated_at": _time(entry.updated_at),
            "deleted_at": _time(entry.deleted_at),
        },
        separators=(",", ":"),
    )


def decode_entry(raw: str, key: UserKey) -> Entry:
    """An entry from its JSON; the scope is the key it was read under."""
    data = json.loads(raw)
    m = data.get("memory") or {}
    memory = Memory(
        text=m.get("memory", ""),
        topics=tuple(m.get("topics") or ()),
        kind=m.get("kind") or "fact",
        event_time=_parse_time(m.get("event_time")),
        participants=tuple(m.get("participants") or ()),
        location=m.get("location") or "",
    )
    created = _parse_time(data.get("created_at"))
    updated = _parse_time(data.get("updated_at")) or created
    if updated is None:
        raise ValueError("an entry without created_at or updated_at")
    return Entry(
        id=data["id"],
        app=key.app,
        user=key.user,
        memory=memory,
        created_at=created or updated,
        updated_at=updated,
        deleted_at=_parse_time(data.get("deleted_at")),
    )


async def user_bases(client: aioredis.Redis, prefix: str) -> list[str]:
    """The base key of every user with entries under ``prefix``, sorted."""
    pattern = glob_escape(f"{join_prefix(prefix)}mem:") + "{*"
    bases: set[str] = set()
    async for name in client.scan_iter(match=pattern, count=1000):
        base, brace, rest = name.rpartition("}")
        if brace and rest in ("", ":deleted"):
            bases.add(base + brace)
    return sorted(bases)


async def missing_vectors(client: Any, base: str) -> tuple[UserKeys, list[str]]:
    """The keys of the user at ``base`` and the IDs of its entries without a vector, sorted."""
    keys = keys_of_base(base)
    async with client.pipeline(transaction=True) as pipe:
        pipe.hkeys(keys.active).hkeys(keys.deleted).hkeys(keys.vectors)
        active, deleted, embedded = await pipe.execute()
    have = set(embedded)
    return keys, sorted(m for m in {*active, *deleted} if m not in have)
