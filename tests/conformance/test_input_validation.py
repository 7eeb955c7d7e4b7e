"""Validation at the engine's edge (issue 10), the same on every backend.

- Blank app, user or memory ID is an InvalidKeyError with the reference's words first.
- A NUL or a lone surrogate in any field is one clear error naming the field and the
  fix — the same sentence on all nine backends — raised before the store is touched.
  Identifiers also refuse every other control character.
- Other control characters in content (ESC, BEL, C1 CSI…) are stored and given back
  exactly, with emoji, bidi marks and CJK.
- Two different memories that get the same ID through the ID's separators never
  replace each other: MemoryIdCollisionError, and nothing changes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from memchat.engine import (
    InvalidKeyError,
    InvalidMemoryError,
    MemoryNotFoundError,
    MemoryService,
    Metadata,
    SearchOptions,
    UserKey,
    memory_id,
)
from memchat.engine.model import MemoryIdCollisionError

APP = "memory-chat"
KEY = UserKey(APP, "alice")

SURROGATE = "\ud800"
NUL = "\x00"
#: Refused in identifiers only: tab, newline, ESC, DEL, a C1 control.
CONTROLS = ["\t", "\n", "\x1b", "\x7f", "\x9b"]


class SpyStore:
    """Forwards to a real store and records every method called on it."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return value(*args, **kwargs)

        return call


@pytest.fixture
async def spied(harness):
    """A service over a spied store of this backend: invalid calls must not reach it."""
    spy = SpyStore(harness.make_store())
    svc = MemoryService(spy)
    yield svc, spy
    await svc.close()


def _code(char: str) -> str:
    return f"U+{ord(char):04X}"


def _content_message(field: str, char: str) -> str:
    if char == NUL:
        return f"{field} contains a NUL character (U+0000): remove it and try again"
    surrogate = f"an invalid character (a lone UTF-16 surrogate, {_code(char)})"
    return f"{field} contains {surrogate}: send valid Unicode text"


def _key_message(name: str, char: str) -> str:
    if char == NUL:
        description = "a NUL character (U+0000)"
    elif char == SURROGATE:
        description = f"an invalid character (a lone UTF-16 surrogate, {_code(char)})"
    else:
        description = f"a control character ({_code(char)})"
    fix = (
        "send valid Unicode text"
        if char == SURROGATE
        else "use only printable characters (no tabs, newlines or other control characters)"
    )
    return f"{name} contains {description}: {fix}"


async def _every_call(svc: MemoryService, key: UserKey, mid: str = "0" * 64) -> list[Any]:
    """Every public operation taking a key, as coroutines."""
    return [
        svc.add(key, "text"),
        svc.update(key, mid, "text"),
        svc.delete(key, mid),
        svc.restore(key, mid),
        svc.get(key, mid),
        svc.read(key),
        svc.count(key),
        svc.search(key, "text"),
        svc.clear(key),
    ]


# -- blank and malformed identifiers -------------------------------------------


@pytest.mark.parametrize("blank", ["", " ", "   ", "\u3000"])
async def test_a_blank_app_or_user_is_required_everywhere(spied, blank) -> None:
    svc, spy = spied
    for key, message in (
        (UserKey(blank, "alice"), "appName is required: pass a non-blank app name"),
        (UserKey(APP, blank), "userID is required: pass a non-blank user id"),
        (UserKey(blank, blank), "appName is required: pass a non-blank app name"),
    ):
        for call in await _every_call(svc, key):
            with pytest.raises(InvalidKeyError) as info:
                await call
            assert str(info.value) == message
    assert spy.calls == []


@pytest.mark.parametrize("blank", ["", " ", "  \u3000 "])
async def test_a_blank_memory_id_is_required(spied, blank) -> None:
    svc, spy = spied
    message = "memoryID is required: pass a non-blank memory id"
    for call in (
        svc.update(KEY, blank, "text"),
        svc.delete(KEY, blank),
        svc.restore(KEY, blank),
        svc.get(KEY, blank),
    ):
        with pytest.raises(InvalidKeyError) as info:
            await call
        assert str(info.value) == message
    assert spy.calls == []


@pytest.mark.parametrize("char", [NUL, SURROGATE, *CONTROLS], ids=_code)
async def test_app_and_user_refuse_nul_surrogates_and_controls(spied, char) -> None:
    svc, spy = spied
    for key, name in ((UserKey(f"app{char}x", "alice"), "appName"), (UserKey(APP, f"al{char}ice"), "userID")):
        for call in await _every_call(svc, key):
            with pytest.raises(InvalidKeyError) as info:
                await call
            assert str(info.value) == _key_message(name, char)
    assert spy.calls == []


@pytest.mark.parametrize("char", [NUL, SURROGATE, *CONTROLS], ids=_code)
async def test_a_memory_id_refuses_nul_surrogates_and_controls(spied, char) -> None:
    svc, spy = spied
    bad = "a" * 10 + char + "b" * 10
    for call in (
        svc.update(KEY, bad, "text"),
        svc.delete(KEY, bad),
        svc.restore(KEY, bad),
        svc.get(KEY, bad),
    ):
        with pytest.raises(InvalidKeyError) as info:
            await call
        assert str(info.value) == _key_message("memoryID", char)
    assert spy.calls == []


async def test_identifier_lengths_are_capped_and_unknown_ids_are_not_found(make_service) -> None:
    svc = make_service()
    with pytest.raises(InvalidKeyError) as info:
        await svc.get(KEY, "f" * 256)
    assert str(info.value) == (
        "memoryID is 256 characters, longer than the limit of 255: use a shorter memory id"
    )
    with pytest.raises(InvalidKeyError, match=r"^userID is 256 characters"):
        await svc.read(UserKey(APP, "u" * 256))
    await svc.add(KEY, "Alice likes tea")
    # Well-formed but unknown: not found, on every backend, whatever its column width.
    for unknown in ("f" * 255, "0" * 64, "not an id 🙂", "rtl\u200fmark", "a'; DROP TABLE x; --"):
        with pytest.raises(MemoryNotFoundError):
            await svc.get(KEY, unknown)
        with pytest.raises(MemoryNotFoundError):
            await svc.delete(KEY, unknown)
        with pytest.raises(MemoryNotFoundError):
            await svc.update(KEY, unknown, "text")
    assert [e.memory.text for e in await svc.read(KEY)] == ["Alice likes tea"]


# -- NUL and lone surrogates in content ------------------------------------------


def _content_calls(svc: MemoryService, field: str, bad: str) -> list[Any]:
    mid = "0" * 64
    episode = {"kind": "episode", "participants": ["Ann"], "location": "Paris"}
    if field == "the memory text":
        return [svc.add(KEY, f"Alice {bad} likes tea"), svc.update(KEY, mid, f"Alice {bad}")]
    if field == "a topic":
        return [svc.add(KEY, "text", topics=["ok", f"to{bad}pic"]), svc.update(KEY, mid, "t", [bad])]
    if field == "the memory kind":
        metadata = Metadata(**{**episode, "kind": f"epi{bad}"})
    elif field == "a participant":
        metadata = Metadata(**{**episode, "participants": ["Ann", f"B{bad}ob"]})
    elif field == "the location":
        metadata = Metadata(**{**episode, "location": f"Par{bad}is"})
    elif field == "the search query":
        return [svc.search(KEY, f"tea {bad}"), svc.search(KEY, bad, SearchOptions(hybrid_search=True))]
    elif field == "the search kind":
        return [svc.search(KEY, "tea", SearchOptions(kind=f"fa{bad}ct", kind_fallback=True))]
    else:
        raise AssertionError(field)
    return [svc.add(KEY, "text", metadata=metadata), svc.update(KEY, mid, "text", metadata=metadata)]


CONTENT_FIELDS = [
    "the memory text",
    "a topic",
    "the memory kind",
    "a participant",
    "the location",
    "the search query",
    "the search kind",
]


@pytest.mark.parametrize("field", CONTENT_FIELDS)
@pytest.mark.parametrize("char", [NUL, SURROGATE, "\udfff"], ids=_code)
async def test_nul_or_a_lone_surrogate_in_content_is_one_clear_error(spied, field, char) -> None:
    svc, spy = spied
    for call in _content_calls(svc, field, char):
        with pytest.raises(InvalidMemoryError) as info:
            await call
        assert str(info.value) == _content_message(field, char)
    assert spy.calls == []


async def test_vector_search_validates_the_query_first(spied) -> None:
    svc, spy = spied
    # Before anything else, also before "this backend has no vector index".
    with pytest.raises(InvalidMemoryError, match=r"^the search query contains an invalid character"):
        await svc.vector_search(KEY, f"tea {SURROGATE}")
    with pytest.raises(InvalidKeyError, match=r"^userID is required"):
        await svc.vector_search(UserKey(APP, " "), "tea")
    assert spy.calls == []


async def test_invalid_content_changes_nothing_stored(make_service) -> None:
    svc = make_service(soft_delete=True)
    entry = await svc.add(KEY, "Alice likes tea", ["drinks"])
    for bad in (NUL, SURROGATE):
        with pytest.raises(InvalidMemoryError):
            await svc.update(KEY, entry.id, f"Alice likes {bad}")
        with pytest.raises(InvalidMemoryError):
            await svc.add(KEY, "Alice met Bob", metadata=Metadata(participants=["Bob", bad]))
        with pytest.raises(InvalidMemoryError):
            await svc.search(KEY, f"tea{bad}")
    assert await svc.read(KEY, include_deleted=True) == [entry]


# -- what is accepted is stored exactly ------------------------------------------

#: C0/C1 controls other than NUL, emoji (with ZWJ), bidi marks, CJK, combining marks.
ODD_TEXT = (
    "bell\x07 esc\x1b[31mred\x1b[0m csi\x9b2J del\x7f bs\x08 "
    "emoji 🙂👩\u200d👩\u200d👧 rtl \u200fעברית\u200e العربية CJK 张三喜欢茶 e\u0301\ttab\nline"
)


async def test_other_controls_and_odd_unicode_round_trip_exactly(make_service) -> None:
    svc = make_service()
    topics = ["esc\x1b[2J", "🙂", "张三", "rtl\u200f", "c1\x85\x9b"]
    metadata = Metadata(
        kind="episode",
        participants=["Ann\x1b[1m", "张三", "عمر\u200f"],
        location="Caf\u00e9 \x07 \U0001f3d4\ufe0f 東京",
    )
    entry = await svc.add(KEY, ODD_TEXT, topics=topics, metadata=metadata)
    assert entry.id == memory_id(ODD_TEXT, KEY.app, KEY.user, metadata)
    [stored] = await svc.read(KEY)
    assert stored.memory == entry.memory
    assert stored.memory.text == ODD_TEXT
    assert stored.memory.topics == tuple(topics)
    assert stored.memory.location == metadata.location
    assert set(stored.memory.participants) == set(metadata.participants)
    assert (await svc.get(KEY, entry.id)).memory == entry.memory
    # Re-adding the same memory is not a collision: it refreshes it.
    again = await svc.add(KEY, ODD_TEXT, topics=topics, metadata=metadata)
    assert again.id == entry.id and await svc.count(KEY) == 1
    # Queries with such characters are fine too, and find it.
    for query in ("张三喜欢茶", "esc\x1b[31mred", "emoji 🙂"):
        hits = await svc.search(KEY, query)
        assert all(h.id == entry.id for h in hits)
    assert [h.id for h in await svc.search(KEY, "张三喜欢茶 bell")] == [entry.id]
    if svc.is_vector_store:
        hits = await svc.search(KEY, "张三喜欢茶 bell", SearchOptions(hybrid_search=True))
        assert [h.id for h in hits] == [entry.id]
    # Update keeps them too.
    result = await svc.update(KEY, entry.id, ODD_TEXT + "\x1b", topics=topics)
    assert (await svc.get(KEY, result.memory_id)).memory.text == ODD_TEXT + "\x1b"


@pytest.mark.parametrize("mode", ["hybrid", "semantic", "keyword"])
async def test_letters_unicode_folds_to_ascii_search_like_any_other(make_service, mode) -> None:
    """The long s, the Kelvin sign and the Turkish dotted and dotless i match s, k
    and i when Unicode case is ignored: "my huſband's mother" raised KeyError in
    the relation lookup on every backend."""
    svc = make_service()
    entry = await svc.add(KEY, "Alice's husband Tom bakes sourdough.")
    for query in ("my huſband's mother", "where does my ſiſ live", "my ſonK", "my İ father"):
        hits = await svc.search(KEY, query, SearchOptions(mode=mode))
        assert all(h.id == entry.id for h in hits)


@pytest.mark.parametrize(
    "user", ["rtl\u200fuser", "ユーザー🙂", "with space", "a" * 255, "tab-less\u00a0nbsp"]
)
async def test_printable_identifiers_are_accepted(make_service, user) -> None:
    svc = make_service()
    key = UserKey(f"app {user[:10]}", user)
    entry = await svc.add(key, "kept")
    assert [e.id for e in await svc.read(key)] == [entry.id]
    assert (await svc.get(key, entry.id)).memory.text == "kept"


# -- ID collisions through the separators -------------------------------------------


def _collisions(key: UserKey) -> list[tuple[tuple[str, Metadata | None], tuple[str, Metadata | None]]]:
    """Pairs of different memories whose reference IDs are equal."""
    tail = f"|app:{key.app}|user:{key.user}"
    return [
        (
            ("Met friends", Metadata(kind="episode", participants=["a,b"])),
            ("Met friends", Metadata(kind="episode", participants=["a", "b"])),
        ),
        (
            (f"X{tail}|kind:fact|location:Paris", None),
            ("X", Metadata(location=f"Paris{tail}")),
        ),
        (
            ("Met friends", Metadata(participants=["a|location:b"])),
            ("Met friends", Metadata(participants=["a"], location="b")),
        ),
    ]


def _collision_message(mid: str) -> str:
    return (
        f"a different memory already has the id {mid}: both get the same id because the text, "
        "participants or location contains the id's separators (such as ',' or '|location:'); "
        "nothing was changed: remove those separators and try again"
    )


@pytest.mark.parametrize("case", [0, 1, 2])
@pytest.mark.parametrize("order", ["forward", "reverse"])
async def test_add_refuses_a_different_memory_with_the_same_id(make_service, case, order) -> None:
    svc = make_service()
    first, second = _collisions(KEY)[case]
    if order == "reverse":
        first, second = second, first
    assert memory_id(*first[:1], KEY.app, KEY.user, first[1]) == memory_id(
        second[0], KEY.app, KEY.user, second[1]
    )
    entry = await svc.add(KEY, first[0], ["one"], first[1])
    with pytest.raises(MemoryIdCollisionError) as info:
        await svc.add(KEY, second[0], ["two"], second[1])
    assert str(info.value) == _collision_message(entry.id)
    assert await svc.read(KEY, include_deleted=True) == [entry]
    # The tools report it as an error result; they never raise.
    add = next(t for t in svc.tools() if t.name == "memory_add")
    args: dict[str, Any] = {"memory": second[0], "topics": ["two"]}
    if second[1] is not None:
        meta = second[1]
        args.update(memory_kind=meta.kind or None, participants=meta.participants, location=meta.location)
    result = await add.run(json.dumps(args), KEY)
    assert result.is_error and "nothing was changed" in json.loads(result.content)["error"]
    assert await svc.read(KEY, include_deleted=True) == [entry]


async def test_add_refuses_to_revive_a_different_tombstone(make_service) -> None:
    svc = make_service(soft_delete=True)
    first, second = _collisions(KEY)[0]
    entry = await svc.add(KEY, first[0], metadata=first[1])
    await svc.delete(KEY, entry.id)
    [tombstone] = await svc.read(KEY, include_deleted=True)
    with pytest.raises(MemoryIdCollisionError):
        await svc.add(KEY, second[0], metadata=second[1])
    assert await svc.read(KEY, include_deleted=True) == [tombstone]
    assert await svc.count(KEY) == 0


@pytest.mark.parametrize("soft", [False, True])
async def test_update_refuses_to_rotate_onto_a_different_memory(make_service, soft) -> None:
    svc = make_service(soft_delete=soft)
    first, second = _collisions(KEY)[0]
    target = await svc.add(KEY, first[0], metadata=first[1])
    source = await svc.add(KEY, "Met friends", metadata=Metadata(kind="episode", participants=["c"]))
    with pytest.raises(MemoryIdCollisionError) as info:
        await svc.update(KEY, source.id, second[0], metadata=second[1])
    assert str(info.value) == _collision_message(target.id)
    assert sorted(await svc.read(KEY, include_deleted=True), key=lambda e: e.id) == sorted(
        [target, source], key=lambda e: e.id
    )
    if soft:
        # A tombstone of a different memory is not revived either.
        await svc.delete(KEY, target.id)
        before = sorted(await svc.read(KEY, include_deleted=True), key=lambda e: e.id)
        with pytest.raises(MemoryIdCollisionError):
            await svc.update(KEY, source.id, second[0], metadata=second[1])
        assert sorted(await svc.read(KEY, include_deleted=True), key=lambda e: e.id) == before


async def test_update_refuses_a_same_id_rewrite_into_a_different_memory(make_service) -> None:
    svc = make_service()
    first, second = _collisions(KEY)[1]
    entry = await svc.add(KEY, first[0], metadata=first[1])
    with pytest.raises(MemoryIdCollisionError):
        await svc.update(KEY, entry.id, second[0], metadata=second[1])
    assert await svc.read(KEY) == [entry]
    # The same memory with new topics is an ordinary update.
    result = await svc.update(KEY, entry.id, first[0], topics=["kept"])
    assert result.memory_id == entry.id
    assert (await svc.get(KEY, entry.id)).memory.topics == ("kept",)
