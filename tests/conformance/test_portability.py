"""Export, import and migration on every backend (memchat/engine/portability.py).

The file made from a reference set of memories (several apps and users,
episodic metadata, tombstones, Chinese text) is imported into the backend and
exported again: the two files are the same, byte for byte. Importing twice
changes nothing; a conflicting memory goes to whichever side changed last; a
bad line is reported by number and the rest imported. Migration copies every
user (vectors too when both sides use one embedder), verifies count and
checksum, and leaves the source as it was. The stores' two methods behind it,
``users()`` and ``vectors()``, are checked directly.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from backends import create
from memchat.engine import MemoryService, Metadata, UserKey
from memchat.engine.portability import FileError, export_lines, import_lines, migrate

from .test_vectors import HashEmbedder

ALICE = UserKey("app-one", "alice")
BOB = UserKey("app-one", "bob")
CAROL = UserKey("app:two", "carol {x}")  # key syntax in the names: a store must not garble them
GONE = UserKey("app-one", "only-tombstones")


class _Clock:
    """A clock that moves one second per call, so every time in the file is known."""

    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, 0, 123456, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


async def _fill(svc: MemoryService) -> None:
    await svc.add(ALICE, "Alice likes green tea", topics=["drinks"])
    await svc.add(
        ALICE,
        "Alice met Bob in Lisbon",
        topics=["travel", "people"],
        metadata=Metadata(
            kind="episode",
            event_time=datetime(2025, 6, 2, 14, 30, tzinfo=UTC),
            participants=["Alice", "Bob"],
            location="Lisbon",
        ),
    )
    gone = await svc.add(ALICE, "Alice used to smoke")
    await svc.delete(ALICE, gone.id)  # a tombstone
    await svc.add(BOB, "张三喜欢 Go 语言编程", topics=["编程"])
    await svc.add(CAROL, 'Carol\'s line\nhas a newline and "quotes"')
    only = await svc.add(GONE, "Nothing left here")
    await svc.delete(GONE, only.id)


async def _reference_file(**options: Any) -> list[str]:
    """The export of the reference memories, made on the in-process store."""
    async with MemoryService(
        create("inmemory"), soft_delete=True, limit=0, clock=_Clock(), embedder=HashEmbedder()
    ) as svc:
        await _fill(svc)
        return [line async for line in export_lines(svc.store, **options)]


async def _export(store: Any, **options: Any) -> list[str]:
    return [line async for line in export_lines(store, **options)]


def service(harness: Any, embedder: Any = None, **options: Any) -> MemoryService:
    return MemoryService(
        harness.make_store(), embedder=embedder or HashEmbedder(), soft_delete=True, limit=0, **options
    )


async def test_the_store_lists_its_users_and_hands_back_vectors(harness) -> None:
    embedder = HashEmbedder()
    async with service(harness, embedder) as svc:
        assert await svc.store.users() == []
        await _fill(svc)
        assert await svc.store.users() == sorted([ALICE, BOB, CAROL, GONE], key=lambda k: (k.app, k.user))
        entries = await svc.read(ALICE, include_deleted=True)
        ids = [e.id for e in entries]
        vectors = await svc.store.vectors(ALICE, [*ids, "f" * 64])
        assert set(vectors) == set(ids)  # the tombstone's too; an unknown ID is left out
        for entry in entries:
            assert vectors[entry.id] == pytest.approx(embedder.vector(entry.memory.text), abs=1e-6)
        assert await svc.store.vectors(BOB, ids) == {}  # another user's IDs: nothing
        await svc.store.clear(BOB, deleted_at=None)
        assert BOB not in await svc.store.users()


async def test_export_import_export_gives_the_same_file(harness) -> None:
    reference = await _reference_file()
    header, *records, end = reference
    assert json.loads(header) == {"format": "memchat-memories", "version": 1, "embedder": None}
    assert json.loads(end)["count"] == len(records) == 6
    assert sum(json.loads(r)["deleted_at"] is not None for r in records) == 2
    async with service(harness) as svc:
        report = await import_lines(svc, reference)
        assert (report.added, report.updated, report.skipped, report.errors) == (6, 0, 0, [])
        assert await _export(svc.store) == reference
        # The memories are usable as memories: read, searched and restored like any other.
        [tea] = [e for e in await svc.read(ALICE) if "tea" in e.memory.text]
        assert (await svc.search(ALICE, "green tea"))[0].id == tea.id
        [smoke] = [e for e in await svc.read(ALICE, include_deleted=True) if e.is_deleted]
        assert (await svc.restore(ALICE, smoke.id)).deleted_at is None


async def test_importing_twice_changes_nothing(harness) -> None:
    reference = await _reference_file()
    async with service(harness) as svc:
        await import_lines(svc, reference)
        again = await import_lines(svc, reference)
        assert (again.added, again.updated, again.unchanged, again.kept) == (0, 0, 6, 0)
        assert await _export(svc.store) == reference


async def test_a_conflict_goes_to_the_side_changed_last(harness) -> None:
    reference = await _reference_file()
    records = [json.loads(line) for line in reference[1:-1]]
    tea = next(r for r in records if r["text"] == "Alice likes green tea")
    async with service(harness) as svc:
        await import_lines(svc, reference)
        # The store's copy is deleted after the export: an old file does not bring it back.
        await svc.delete(ALICE, tea["id"])
        report = await import_lines(svc, reference)
        assert (report.kept, report.updated) == (1, 0)
        assert (await svc.get(ALICE, tea["id"], include_deleted=True)).is_deleted
        # A file whose copy changed later wins.
        newer = dict(tea, topics=["tea"], updated_at="2027-01-01T00:00:00.000000+00:00")
        report = await import_lines(svc, [reference[0], json.dumps(newer)])
        assert (report.updated, report.kept) == (1, 0)
        stored = await svc.get(ALICE, tea["id"])
        assert stored.memory.topics == ("tea",) and stored.deleted_at is None
        assert stored.created_at == datetime.fromisoformat(tea["created_at"])
        assert report.warnings == ["the file has no closing line: it may have been cut short"]


async def test_a_bad_line_is_reported_by_number_and_nothing_else_is_lost(harness) -> None:
    reference = await _reference_file()
    lines = list(reference)
    lines.insert(2, '{"app": "app-one", "user": "alice", "id": "abc"')  # cut short
    lines.insert(4, json.dumps(dict(json.loads(reference[1]), text="")))  # empty text
    lines.insert(5, json.dumps(dict(json.loads(reference[1]), created_at="yesterday")))
    async with service(harness) as svc:
        report = await import_lines(svc, lines)
        assert [number for number, _ in report.errors] == [3, 5, 6]
        assert report.errors[0][1].startswith("not JSON")
        assert "memory text is required" in report.errors[1][1]
        assert "created_at 'yesterday' is not an ISO 8601 time" in report.errors[2][1]
        assert report.added == 6
        assert await _export(svc.store) == reference
        with pytest.raises(FileError, match="not a memchat export"):
            await import_lines(svc, reference[1:])


async def test_vectors_travel_with_the_file_when_the_embedder_is_the_same(harness) -> None:
    embedder = HashEmbedder()
    async with service(harness, embedder) as svc:
        await _fill(svc)
        exported = await _export(svc.store, with_vectors=True)
        assert "test-hash-embedder/a/384" in json.loads(exported[0])["embedder"]
    same, other = HashEmbedder(), HashEmbedder("b")
    async with MemoryService(create("inmemory"), embedder=same, limit=0) as copy:
        await import_lines(copy, exported)
        assert same.calls == []  # nothing embedded again
        assert await _export(copy.store, with_vectors=True) == exported
    async with MemoryService(create("inmemory"), embedder=other, limit=0) as copy:
        report = await import_lines(copy, exported)
        assert report.added == 6 and sum(len(c) for c in other.calls) == 6
        entries = await copy.read(ALICE, include_deleted=True)
        vectors = await copy.store.vectors(ALICE, [e.id for e in entries])
        for entry in entries:
            assert vectors[entry.id] == pytest.approx(other.vector(entry.memory.text), abs=1e-6)


async def test_migration_copies_every_user_verifies_and_leaves_the_source(harness, tmp_path) -> None:
    embedder = HashEmbedder()
    async with service(harness, embedder) as svc:
        await _fill(svc)
        before = await _export(svc.store, with_vectors=True)
    source = harness.make_store()
    seen: list[Any] = []
    target_store = create("sqlite", dsn=f"sqlite:///{tmp_path / 'target.db'}")
    async with MemoryService(target_store, embedder=HashEmbedder(), limit=0) as target:
        report = await migrate(source, target, progress=seen.append, batch_size=2)
        assert report.verified and report.vectors_copied
        assert (report.users, report.source_count, report.target_count) == (4, 6, 6)
        assert report.copy.added == 6
        assert (seen[0].done, seen[-1].done, seen[-1].total) == (0, 6, 6)
        assert await _export(target.store, with_vectors=True) == before
        again = await migrate(source, target)
        assert again.verified and again.copy.unchanged == 6 and again.copy.added == 0
    await source.close()
    async with service(harness, embedder) as svc:
        assert await _export(svc.store, with_vectors=True) == before  # the source is untouched
    other = HashEmbedder("b")
    source = harness.make_store()
    async with MemoryService(create("inmemory"), embedder=other, limit=0) as target:
        report = await migrate(source, target)
        assert report.verified and not report.vectors_copied
        entries = await target.read(CAROL)
        vectors = await target.store.vectors(CAROL, [e.id for e in entries])
        assert vectors[entries[0].id] == pytest.approx(other.vector(entries[0].memory.text), abs=1e-6)
    await source.close()


async def test_migration_reports_a_target_that_kept_a_newer_copy(harness, tmp_path) -> None:
    async with service(harness) as svc:
        await _fill(svc)
    source = harness.make_store()
    target = MemoryService(create("inmemory"), embedder=HashEmbedder(), limit=0, soft_delete=True)
    async with target:
        await migrate(source, target)
        [tea] = [e for e in await target.read(ALICE) if "tea" in e.memory.text]
        await target.delete(ALICE, tea.id)
        report = await migrate(source, target)
        assert not report.verified and report.copy.kept == 1
        assert report.source_count == report.target_count == 6
        assert report.source_checksum != report.target_checksum
        assert (await target.get(ALICE, tea.id, include_deleted=True)).is_deleted
    await source.close()


def test_records_hold_every_field() -> None:
    from memchat.engine.model import Entry, Memory
    from memchat.engine.portability import decode_record, encode_record

    when = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    entry = Entry(
        "a" * 64, "app", "user",
        Memory("text", ("t1", "t2"), "episode", when, ("P",), "Here"),
        when, when + timedelta(seconds=1), when + timedelta(seconds=2),
    )  # fmt: skip
    line = encode_record(entry, [0.5, -0.25])
    decoded, vector = decode_record(line, 10_000)
    assert decoded == entry and vector == [0.5, -0.25]
    assert decode_record(encode_record(replace(entry, deleted_at=None)), 10_000)[1] is None
