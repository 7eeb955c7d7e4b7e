"""Property tests of the engine on every backend.

1. Arbitrary input to every operation (text, IDs, app and user names, topics,
   metadata, queries): it succeeds or raises a documented ``MemchatError`` —
   never anything else — and invalid keys, IDs and text are refused with
   ``InvalidKeyError`` / ``InvalidMemoryError``. User B, seeded first, is
   byte-identical afterwards, whatever user A's key or IDs looked like.
2. A state machine: any sequence of operations on user A agrees with a model
   of what A should hold: every add that returned is readable with exactly its
   text, topics and metadata until deleted, updated away or cleared; rejected
   operations change nothing; B is untouched.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from memchat.engine import (
    InvalidKeyError,
    InvalidMemoryError,
    MemchatError,
    Memory,
    MemoryNotFoundError,
    Metadata,
    SearchOptions,
    UserKey,
)
from memchat.engine.ids import build_memory, memory_id_for, patch_memory

from .helpers import OtherUser, seed_other_user
from .strategies import (
    any_key_part,
    any_metadata,
    any_text,
    any_topics,
    given_settings,
    good_key_part,
    good_metadata,
    good_text,
    good_topics,
    has_surrogate,
    id_strategy,
    valid_key_part,
    valid_text,
)

INVALID_INPUT = (InvalidKeyError, InvalidMemoryError)


class Undocumented(AssertionError):
    """An exception that is not a MemchatError escaped the engine."""


def call(rig: Any, work: Any) -> tuple[bool, Any]:
    """(True, result) or (False, MemchatError); anything else fails the test."""
    try:
        return True, rig.run(work)
    except MemchatError as exc:
        return False, exc
    except Exception as exc:
        raise Undocumented(f"undocumented {type(exc).__name__} escaped: {exc!r}") from exc


def valid_id(memory_id: object) -> bool:
    """IDs follow the rules of app names and user ids."""
    return valid_key_part(memory_id)


def valid_key(key: UserKey) -> bool:
    return valid_key_part(key.app) and valid_key_part(key.user)


def valid_query(query: str) -> bool:
    return "\x00" not in query and not has_surrogate(query)


def valid_metadata(metadata: Metadata | None) -> bool:
    if metadata is None:
        return True
    names = list(metadata.participants or ())
    texts = [metadata.kind, metadata.location or "", *names]
    return (
        len(metadata.kind) <= 32
        and len(names) <= 50
        and all(len(p) <= 100 for p in names)
        and len(metadata.location or "") <= 1000
        and all("\x00" not in t and not has_surrogate(t) for t in texts)
    )


def valid_topics(topics: list[str] | None) -> bool:
    return topics is None or (
        len(topics) <= 50 and all(len(t) <= 100 and "\x00" not in t and not has_surrogate(t) for t in topics)
    )


def identity(memory: Memory) -> tuple[Any, ...]:
    """What the canonical ID stands for: everything but the topics."""
    return (memory.text, memory.kind, memory.event_time, memory.participants, memory.location)


def assert_scoped(entries: list[Any], key: UserKey, other: OtherUser) -> None:
    for entry in entries:
        assert (entry.app, entry.user) == (key.app, key.user), f"{key} was given {entry.key}'s memory"
        assert entry.id not in other.ids, f"{key} reached user B's memory {entry.id}"


# -- 1. arbitrary input to every operation -----------------------------------

OPERATIONS = ["add", "update", "delete", "restore", "get", "search", "read", "count", "clear"]


def test_arbitrary_input_gives_success_or_a_documented_error(rig) -> None:
    soft = rig.service(soft_delete=True)
    hard = rig.service(soft_delete=False)

    @given_settings(weight=2)
    @given(data=st.data(), op=st.sampled_from(OPERATIONS), hard_delete=st.booleans())
    def check(data: st.DataObject, op: str, hard_delete: bool) -> None:
        other = rig.run(seed_other_user(soft))
        key = data.draw(other.keys(any_key_part), label="key")
        ids = id_strategy(other.ids_strategy())
        svc = hard if hard_delete else soft
        args: dict[str, Any] = {}
        if op in ("add", "update"):
            args = {"text": data.draw(any_text), "topics": data.draw(any_topics)}
            args["metadata"] = data.draw(any_metadata)
        if op in ("update", "delete", "restore", "get"):
            args["memory_id"] = data.draw(ids, label="memory_id")
        if op == "get":
            args["include_deleted"] = data.draw(st.booleans())
        if op in ("read", "count"):
            args["include_deleted"] = data.draw(st.booleans())
        if op == "read":
            args["limit"] = data.draw(st.integers(-3, 20))
        if op == "search":
            args["query"] = data.draw(st.one_of(any_text, st.sampled_from(["tea", "Bob", "*", "%"])))
            args["options"] = SearchOptions(
                max_results=data.draw(st.integers(-2, 30)),
                hybrid_search=data.draw(st.booleans()),
                kind=data.draw(st.sampled_from(["", "fact", "episode", "zzz"])),
                deduplicate=data.draw(st.booleans()),
            )

        ok, result = call(rig, getattr(svc, op)(key, **args))

        if not valid_key(key):
            assert not ok and isinstance(result, InvalidKeyError), (
                f"{op} with the unusable key {key!r} gave {result!r}, not InvalidKeyError"
            )
        elif "memory_id" in args and not valid_id(args["memory_id"]):
            assert not ok and isinstance(result, INVALID_INPUT), (
                f"{op} with the unusable ID {args['memory_id']!r} gave {result!r}"
            )
        elif op in ("add", "update") and not valid_text(args["text"]):
            assert not ok and isinstance(result, InvalidMemoryError), (
                f"{op} with the unusable text {args['text'][:80]!r} gave {result!r}"
            )
        elif op == "search" and not valid_query(args["query"]):
            assert not ok and isinstance(result, INVALID_INPUT), (
                f"search for {args['query'][:80]!r} gave {result!r}, not a validation error"
            )
        if ok and op in ("add", "get", "restore"):
            assert_scoped([result], key, other)
        if ok and op == "update":
            assert_scoped([result.entry], key, other)
        if ok and op in ("read", "search"):
            assert_scoped(result, key, other)
        if ok and op in ("update", "delete", "restore", "get"):
            assert args["memory_id"] not in other.ids, f"{op} by {key} reached user B's memory"
        rig.run(other.check(soft))

    check()


# -- 2. a model of user A ----------------------------------------------------


def test_operations_on_one_user_match_a_model(rig) -> None:
    soft_svc = rig.service(soft_delete=True)
    hard_svc = rig.service(soft_delete=False)
    texts = st.one_of(good_text, good_text, any_text)

    class UserA(RuleBasedStateMachine):
        """model: canonical ID → (memory, deleted?) for user A."""

        @initialize(soft=st.booleans(), user=good_key_part)
        def start(self, soft: bool, user: str) -> None:
            self.soft = soft
            self.svc = soft_svc if soft else hard_svc
            self.other = rig.run(seed_other_user(soft_svc))
            # Same app as B, a hostile but valid user id, unique per example.
            self.key = UserKey(self.other.key.app, f"{user}-{uuid.uuid4().hex[:8]}")
            self.model: dict[str, tuple[Memory, bool]] = {}

        # helpers

        def run(self, work: Any) -> tuple[bool, Any]:
            return call(rig, work)

        def active(self) -> dict[str, Memory]:
            return {i: m for i, (m, deleted) in self.model.items() if not deleted}

        def draw_id(self, data: st.DataObject) -> str:
            known = sorted(self.model)
            choices = [id_strategy(self.other.ids_strategy())]
            if known:
                ids = st.sampled_from(known)
                choices = [ids, ids, ids.map(str.upper), ids.map(lambda i: i[:12]), id_strategy(ids)]
            return data.draw(st.one_of(*choices), label="memory_id")

        def retire(self, memory_id: str) -> None:
            if self.soft:
                self.model[memory_id] = (self.model[memory_id][0], True)
            else:
                del self.model[memory_id]

        def expect_error(self, ok: bool, result: Any, kinds: Any, what: str) -> None:
            assert not ok and isinstance(result, kinds), f"{what}: expected {kinds}, got {result!r}"

        # rules

        @rule(text=texts, topics=good_topics, metadata=good_metadata)
        def add(self, text: str, topics: list[str] | None, metadata: Metadata | None) -> None:
            ok, result = self.run(self.svc.add(self.key, text, topics=topics, metadata=metadata))
            if not (valid_text(text) and valid_metadata(metadata)):
                self.expect_error(ok, result, InvalidMemoryError, f"add({text[:60]!r}, {metadata!r})")
                return
            memory = build_memory(text, topics, metadata)
            mid = memory_id_for(memory, self.key.app, self.key.user)
            existing = self.model.get(mid)
            if existing is not None and identity(existing[0]) != identity(memory):
                if not existing[1]:  # an active, different memory with the same canonical ID
                    self.expect_error(ok, result, MemchatError, f"add of {memory} over {existing[0]}")
                    return
                if not ok:  # a tombstone of a different memory: refusing is fine too
                    return
            assert ok, f"add({text[:60]!r}, {topics!r}, {metadata!r}) failed: {result!r}"
            assert result.id == mid and result.memory == memory, f"add stored {result.memory} as {result.id}"
            self.model[mid] = (memory, False)

        @rule(data=st.data(), text=texts, topics=good_topics, metadata=good_metadata)
        def update(self, data: st.DataObject, text: str, topics: list[str] | None, metadata: Metadata | None):
            memory_id = self.draw_id(data)
            update = self.svc.update(self.key, memory_id, text, topics=topics, metadata=metadata)
            ok, result = self.run(update)
            if not valid_id(memory_id):
                self.expect_error(ok, result, INVALID_INPUT, f"update of {memory_id!r}")
                return
            if not (valid_text(text) and valid_metadata(metadata)):
                self.expect_error(ok, result, InvalidMemoryError, f"update to {text[:60]!r}, {metadata!r}")
                return
            source = self.model.get(memory_id)
            if source is None or source[1]:
                self.expect_error(ok, result, MemoryNotFoundError, f"update of absent {memory_id}")
                return
            memory = patch_memory(source[0], text, topics, metadata)
            new_id = memory_id_for(memory, self.key.app, self.key.user)
            target = self.model.get(new_id)
            if new_id == memory_id:
                if not ok and identity(memory) != identity(source[0]):
                    return  # same ID for a different memory: refusing is fine
                assert ok, f"in-place update of {memory_id} to {memory} failed: {result!r}"
            elif target is not None and not target[1]:
                self.expect_error(ok, result, MemchatError, f"update of {memory_id} onto active {new_id}")
                return
            elif target is not None and identity(target[0]) != identity(memory) and not ok:
                return  # onto a tombstone of a different memory: refusing is fine
            else:
                assert ok, f"update of {memory_id} to {memory} failed: {result!r}"
            assert result.memory_id == new_id and result.entry.memory == memory
            if new_id != memory_id:
                self.retire(memory_id)
            self.model[new_id] = (memory, False)

        @rule(data=st.data())
        def delete(self, data: st.DataObject) -> None:
            memory_id = self.draw_id(data)
            ok, result = self.run(self.svc.delete(self.key, memory_id))
            if not valid_id(memory_id):
                self.expect_error(ok, result, INVALID_INPUT, f"delete of {memory_id!r}")
            elif memory_id in self.active():
                assert ok, f"delete of {memory_id} failed: {result!r}"
                self.retire(memory_id)
            else:
                self.expect_error(ok, result, MemoryNotFoundError, f"delete of absent {memory_id!r}")

        @rule(data=st.data())
        def restore(self, data: st.DataObject) -> None:
            memory_id = self.draw_id(data)
            ok, result = self.run(self.svc.restore(self.key, memory_id))
            if not valid_id(memory_id):
                self.expect_error(ok, result, INVALID_INPUT, f"restore of {memory_id!r}")
            elif memory_id in self.model:
                assert ok, f"restore of {memory_id} failed: {result!r}"
                assert result.memory == self.model[memory_id][0]
                self.model[memory_id] = (self.model[memory_id][0], False)
            else:
                self.expect_error(ok, result, MemoryNotFoundError, f"restore of absent {memory_id!r}")

        @rule()
        def clear(self) -> None:
            ok, result = self.run(self.svc.clear(self.key))
            assert ok, f"clear failed: {result!r}"
            assert result == len(self.active())
            if self.soft:
                self.model = {i: (m, True) for i, (m, _) in self.model.items()}
            else:
                self.model = {}

        @rule(data=st.data(), include_deleted=st.booleans())
        def get(self, data: st.DataObject, include_deleted: bool) -> None:
            memory_id = self.draw_id(data)
            ok, result = self.run(self.svc.get(self.key, memory_id, include_deleted=include_deleted))
            expected = self.model.get(memory_id)
            if not valid_id(memory_id):
                self.expect_error(ok, result, INVALID_INPUT, f"get of {memory_id!r}")
            elif expected is not None and (include_deleted or not expected[1]):
                assert ok, f"get of {memory_id} failed: {result!r}"
                assert result.memory == expected[0] and result.is_deleted == expected[1]
            else:
                self.expect_error(ok, result, MemoryNotFoundError, f"get of absent {memory_id!r}")

        @rule(query=st.one_of(texts, st.sampled_from(["a", "tea", "张三", "*", "%"])), hybrid=st.booleans())
        def search(self, query: str, hybrid: bool) -> None:
            options = SearchOptions(hybrid_search=hybrid, max_results=50)
            ok, result = self.run(self.svc.search(self.key, query, options))
            if not valid_query(query):
                self.expect_error(ok, result, INVALID_INPUT, f"search for {query[:60]!r}")
                return
            assert ok, f"search for {query[:60]!r} failed: {result!r}"
            active = self.active()
            for entry in result:
                assert entry.id in active, f"search returned {entry.id}, not an active memory of A"
                assert entry.memory == active[entry.id]

        @rule(limit=st.integers(-1, 6), include_deleted=st.booleans())
        def read(self, limit: int, include_deleted: bool) -> None:
            ok, result = self.run(self.svc.read(self.key, limit, include_deleted=include_deleted))
            assert ok, f"read failed: {result!r}"
            pool = self.model if include_deleted else self.active()
            assert len(result) == (min(limit, len(pool)) if limit > 0 else len(pool))
            assert {e.id for e in result} <= set(pool)
            stamps = [e.updated_at for e in result]
            assert stamps == sorted(stamps, reverse=True), "read is not newest first"

        @rule(include_deleted=st.booleans())
        def count(self, include_deleted: bool) -> None:
            ok, result = self.run(self.svc.count(self.key, include_deleted=include_deleted))
            assert ok, f"count failed: {result!r}"
            assert result == (len(self.model) if include_deleted else len(self.active()))

        @invariant()
        def store_matches_model(self) -> None:
            if not hasattr(self, "key"):
                return
            entries = rig.run(self.svc.read(self.key, include_deleted=True))
            stored = {e.id: (e.memory, e.is_deleted) for e in entries}
            assert stored == self.model, f"A's memories differ from the model:\n{stored}\n!=\n{self.model}"

        def teardown(self) -> None:
            if hasattr(self, "other"):
                rig.run(self.other.check(soft_svc))

    run_state_machine_as_test(UserA, settings=given_settings(weight=0.5, stateful=True))


# -- canonical-ID collisions (examples the state machine may not find) -------

COLLISIONS = [
    # participants joined with "," and location after "|location:" give equal pre-images
    (Metadata(participants=["a", "b"]), Metadata(participants=["a,b"])),
    (Metadata(participants=["a"], location="b"), Metadata(participants=["a|location:b"])),
    (Metadata(participants=["a,b"], location="c"), Metadata(participants=["a", "b|location:c"])),
]


@pytest.mark.parametrize("first, second", COLLISIONS, ids=["comma", "location", "both"])
def test_a_colliding_canonical_id_never_overwrites_another_memory(rig, first, second) -> None:
    svc = rig.service(soft_delete=True)
    key = UserKey("hard-app", f"collide-{uuid.uuid4().hex[:8]}")
    a = build_memory("same text", (), first)
    b = build_memory("same text", (), second)
    # The pre-images are the reference's (§2.4), separators unescaped: the IDs are equal.
    assert memory_id_for(a, key.app, key.user) == memory_id_for(b, key.app, key.user)
    kept = rig.run(svc.add(key, "same text", topics=["kept"], metadata=first))
    ok, result = call(rig, svc.add(key, "same text", topics=["new"], metadata=second))
    assert not ok and isinstance(result, MemchatError), f"the colliding add returned {result!r}"
    assert type(result).__name__ == "MemoryIdCollisionError", f"expected MemoryIdCollisionError: {result!r}"
    after = rig.run(svc.get(key, kept.id))
    assert (after.memory, after.updated_at) == (kept.memory, kept.updated_at)


# -- every near-miss key, deterministically -----------------------------------


def test_no_near_miss_key_reaches_another_user(rig) -> None:
    """B's key with different case, padding, wildcards or key-scheme syntax is
    another user (or refused): it finds none of B's memories and changes none."""
    svc = rig.service(soft_delete=True)
    other = rig.run(seed_other_user(svc))
    for key in other.near_key_list():
        for op in ("read", "search", "count", "clear"):
            args = {"search": ("Bob tea DROP",)}.get(op, ())
            ok, result = call(rig, getattr(svc, op)(key, *args))
            assert not ok or result in (0, []), f"{op} for {key!r} reached user B: {result!r}"
        for memory_id in other.ids:
            for op, args in (
                ("get", (memory_id,)),
                ("update", (memory_id, "hijacked")),
                ("restore", (memory_id,)),
                ("delete", (memory_id,)),
            ):
                ok, result = call(rig, getattr(svc, op)(key, *args))
                assert not ok, f"{op} of user B's {memory_id} for {key!r} succeeded: {result!r}"
        rig.run(other.check(svc))
