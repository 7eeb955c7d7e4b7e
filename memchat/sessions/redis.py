"""Sessions on the memories' Redis server, under the same key prefix.

Keys of one (app, user), all with the user's hash tag (one cluster slot)::

    <prefix>:sess:{<app>:<user>}              sorted set: session id → last activity (µs)
    <prefix>:sess:{<app>:<user>}:<id>         hash: title, created_at, updated_at, counts, model, backend
    <prefix>:sess:{<app>:<user>}:<id>:rec     list: the records, one JSON object each, in order
    <prefix>:sess:{<app>:<user>}:inputs       list: what was typed (newest 1000)

An append is one MULTI/EXEC (RPUSH the records, HSETNX the fields a new
session starts with, HINCRBY the counts, ZADD the activity), so a record's
position is its place in the list and two writers never collide. The
connection, timeouts and error sentences are the memory store's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from backends.redis import RedisStore, escape_key_part, join_prefix
from memchat.engine.model import UserKey, from_micros

from .model import SessionInfo, SessionNotFoundError, SessionRecord, micros, now_utc, storable
from .store import INPUT_HISTORY, check_title, matches, search_text

#: Set the title only where the session exists: a rename never brings a deleted one back.
RENAME_SCRIPT = (
    "if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'title', ARGV[1]) "
    "return redis.call('HGETALL', KEYS[1]) end return {}"
)


class RedisSessionStore:
    name = "redis"

    def __init__(self, store: RedisStore, *, owns_store: bool = False) -> None:
        self.store = store
        self._owns_store = owns_store

    def describe(self) -> str:
        return self.store.describe()

    async def open(self) -> None:
        await self.store.open()

    async def close(self) -> None:
        if self._owns_store:
            await self.store.close()

    # -- keys ------------------------------------------------------------

    def _base(self, key: UserKey) -> str:
        tag = f"{escape_key_part(key.app)}:{escape_key_part(key.user)}"
        return f"{join_prefix(self.store.key_prefix)}sess:{{{tag}}}"

    def _info_key(self, key: UserKey, session_id: str) -> str:
        return f"{self._base(key)}:{escape_key_part(session_id)}"

    def _records_key(self, key: UserKey, session_id: str) -> str:
        return self._info_key(key, session_id) + ":rec"

    @staticmethod
    def _info(session_id: str, fields: dict[str, str]) -> SessionInfo:
        return SessionInfo(
            id=session_id,
            title=fields.get("title", ""),
            created_at=from_micros(int(fields.get("created_at") or 0)) or now_utc(),
            updated_at=from_micros(int(fields.get("updated_at") or 0)) or now_utc(),
            message_count=int(fields.get("message_count") or 0),
            record_count=int(fields.get("record_count") or 0),
            model=fields.get("model", ""),
            backend=fields.get("backend", ""),
        )

    async def _run(self, action: str, fn: Any) -> Any:
        return await self.store.run(action, fn)

    # -- SessionStore ----------------------------------------------------

    async def append(
        self, key: UserKey, session: SessionInfo, records: Sequence[SessionRecord]
    ) -> SessionInfo:
        info_key, records_key = self._info_key(key, session.id), self._records_key(key, session.id)
        updated = micros(records[-1].created_at if records else now_utc())

        async def write(client: Any) -> SessionInfo:
            async with client.pipeline(transaction=True) as pipe:
                pipe.hsetnx(info_key, "title", storable(session.title))
                pipe.hsetnx(info_key, "created_at", micros(session.created_at))
                fields: dict[str, int | str] = {"updated_at": updated}
                if session.model:
                    fields["model"] = session.model
                if session.backend:
                    fields["backend"] = session.backend
                pipe.hset(info_key, mapping=fields)
                pipe.hincrby(info_key, "message_count", sum(r.counted for r in records))
                pipe.hincrby(info_key, "record_count", len(records))
                if records:
                    pipe.rpush(records_key, *(_encode(r) for r in records))
                pipe.zadd(self._base(key), {session.id: updated})
                pipe.hgetall(info_key)
                replies = await pipe.execute()
            return self._info(session.id, replies[-1])

        return await self._run("saving the session", write)

    async def get(self, key: UserKey, session_id: str) -> SessionInfo | None:
        async def fetch(client: Any) -> SessionInfo | None:
            fields = await client.hgetall(self._info_key(key, session_id))
            return self._info(session_id, fields) if fields else None

        return await self._run("reading sessions", fetch)

    async def records(self, key: UserKey, session_id: str) -> list[SessionRecord]:
        async def fetch(client: Any) -> list[str]:
            return await client.lrange(self._records_key(key, session_id), 0, -1)

        return [_decode(raw, i) for i, raw in enumerate(await self._run("reading sessions", fetch))]

    async def rename(self, key: UserKey, session_id: str, title: str) -> SessionInfo:
        title = check_title(title)
        info_key = self._info_key(key, session_id)

        async def write(client: Any) -> dict[str, str]:
            flat = await client.eval(RENAME_SCRIPT, 1, info_key, title)
            return dict(zip(flat[::2], flat[1::2], strict=True))

        fields = await self._run("renaming the session", write)
        if not fields:
            raise SessionNotFoundError(session_id)
        return self._info(session_id, fields)

    async def delete(self, key: UserKey, session_id: str) -> None:
        async def write(client: Any) -> int:
            async with client.pipeline(transaction=True) as pipe:
                pipe.delete(self._info_key(key, session_id))
                pipe.delete(self._records_key(key, session_id))
                pipe.zrem(self._base(key), session_id)
                replies = await pipe.execute()
            return int(replies[0])

        if not await self._run("deleting the session", write):
            raise SessionNotFoundError(session_id)

    async def add_input(self, key: UserKey, text: str) -> None:
        inputs = self._base(key) + ":inputs"

        async def write(client: Any) -> None:
            async with client.pipeline(transaction=True) as pipe:
                pipe.rpush(inputs, storable(text))
                pipe.ltrim(inputs, -INPUT_HISTORY, -1)
                await pipe.execute()

        await self._run("saving the input history", write)

    async def inputs(self, key: UserKey, limit: int = INPUT_HISTORY) -> list[str]:
        if limit <= 0:
            return []
        return await self._run(
            "reading the input history", lambda c: c.lrange(self._base(key) + ":inputs", -limit, -1)
        )

    # Last in the class: below it, ``list`` would name this method, not the builtin.
    async def list(self, key: UserKey, *, query: str = "", limit: int = 0) -> list[SessionInfo]:
        async def fetch(client: Any) -> list[tuple[SessionInfo, list[str]]]:
            ids = await client.zrevrange(self._base(key), 0, -1)
            async with client.pipeline(transaction=False) as pipe:
                for session_id in ids:
                    pipe.hgetall(self._info_key(key, session_id))
                    if query:
                        pipe.lrange(self._records_key(key, session_id), 0, -1)
                replies = await pipe.execute()
            step = 2 if query else 1
            return [
                (self._info(session_id, replies[i * step]), replies[i * step + 1] if query else [])
                for i, session_id in enumerate(ids)
                if replies[i * step]
            ]

        found = await self._run("reading sessions", fetch)
        infos = [
            info
            for info, raws in found
            if not query or matches(query, info.title, [search_text(_decode(raw, 0)) for raw in raws])
        ]
        infos.sort(key=lambda info: (info.updated_at, info.id), reverse=True)
        return infos[:limit] if limit > 0 else infos


def _encode(record: SessionRecord) -> str:
    return json.dumps({"at": micros(record.created_at), "r": record.payload()}, ensure_ascii=False)


def _decode(raw: str, seq: int) -> SessionRecord:
    value = json.loads(raw)
    return SessionRecord.from_payload(value["r"], int(value["at"]), seq)
