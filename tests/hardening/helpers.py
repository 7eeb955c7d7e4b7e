"""Seeding another user and proving they were not touched."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from memchat.engine import Entry, MemoryService, Metadata, UserKey

#: What user B holds (seeded afresh for every example, so a failure shrinks to
#: the example that caused it): text a backend could mangle, metadata, a tombstone.
B_MEMORIES: list[tuple[str, list[str], Metadata | None]] = [
    (
        "Bob hiked with Ann 🙂 张三",
        ["trips"],
        Metadata(
            kind="episode",
            event_time=datetime(2024, 5, 7, 10, 30, tzinfo=UTC),
            participants=["Ann", "Bob"],
            location="Alps",
        ),
    ),
    ("  '; DROP TABLE memories; -- %_ * KEYS * \x1b[31m\x07\x85  ", ["sql", "ünïcode"], None),
    ("tombstone of Bob", ["gone"], None),
]


def entry_view(entry: Entry) -> tuple[Any, ...]:
    """Everything stored about one memory (not its search score)."""
    return (
        entry.id,
        entry.app,
        entry.user,
        entry.memory,
        entry.created_at,
        entry.updated_at,
        entry.deleted_at,
    )


@dataclass
class OtherUser:
    """User B: seeded first, then checked byte for byte after the example."""

    key: UserKey
    ids: list[str]
    snapshot: dict[str, tuple[Any, ...]]

    def ids_strategy(self) -> st.SearchStrategy[str]:
        return st.sampled_from(self.ids)

    async def check(self, svc: MemoryService) -> None:
        entries = await svc.read(self.key, include_deleted=True)
        now = {e.id: entry_view(e) for e in entries}
        assert now == self.snapshot, f"user B {self.key} changed: was {self.snapshot}, now {now}"
        assert await svc.count(self.key, include_deleted=True) == len(self.snapshot)

    def keys(self, any_key_part: st.SearchStrategy[str]) -> st.SearchStrategy[UserKey]:
        """Keys for user A's operations: near B's, in B's app, or anything."""
        return st.one_of(
            self.near_keys(),
            st.builds(UserKey, any_key_part, any_key_part),
            st.builds(UserKey, st.just(self.key.app), any_key_part),
        )

    def near_keys(self) -> st.SearchStrategy[UserKey]:
        return st.sampled_from(self.near_key_list())

    def near_key_list(self) -> list[UserKey]:
        """Keys that differ from B's only a little: case, padding, wildcards, key-scheme syntax."""
        a, u = self.key.app, self.key.user
        pairs = [
            (a, u.upper()),
            (a, u + " "),
            (a, " " + u),
            (a + " ", u),
            (a.upper(), u),
            (a, u[:-1]),
            (a, u[:-1] + "%"),
            (a, u[:-1] + "_"),
            (a, u[:-1] + "*"),
            (a, u + "*"),
            (a, u + "\x00"),
            (a, u + "\u200b"),
            (a + ":" + u, u),
            (a + ":", u),
            (a, ":" + u),
            (a + "|user:" + u, u),
            (a + ":" + u.split("-")[0], u.split("-", 1)[1]),
            (u, a),
            ("*", "*"),
            ("%", "%"),
        ]
        return [UserKey(*p) for p in pairs]


def new_other_user() -> UserKey:
    tag = uuid.uuid4().hex[:10]
    return UserKey(f"hard-app-{tag}", f"bob-{tag}")


async def seed_other_user(svc: MemoryService) -> OtherUser:
    """Seed B through a soft-delete service (so B also has a tombstone)."""
    key = new_other_user()
    ids = []
    for text, topics, metadata in B_MEMORIES:
        ids.append((await svc.add(key, text, topics=topics, metadata=metadata)).id)
    await svc.delete(key, ids[-1])
    entries = await svc.read(key, include_deleted=True)
    snapshot = {e.id: entry_view(e) for e in entries}
    assert len(snapshot) == len(B_MEMORIES)
    return OtherUser(key, ids, snapshot)
