"""Canonical IDs: byte-identical to the reference (§2.4) and normalisation (§2.1–§2.2)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memchat.engine import InvalidKeyError, Metadata, UserKey, memory_id
from memchat.engine.ids import build_memory, normalize_participants, patch_memory
from memchat.engine.validation import check_memory_id

MAY_1 = datetime(2024, 5, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "app", "user", "metadata", "expected"),
    [
        (
            "User likes coffee",
            "test-app",
            "user-1",
            None,
            "3102230037d4eec7b4e713ccded4bf31f75d0401cf485998052b234f158eb22a",
        ),
        (
            "User likes coffee",
            "test-app",
            "user-1",
            Metadata(kind="fact"),
            "3102230037d4eec7b4e713ccded4bf31f75d0401cf485998052b234f158eb22a",
        ),
        (
            "User met Alice",
            "test-app",
            "user-1",
            Metadata(kind="episode", event_time=MAY_1, participants=["Alice"], location="Kyoto"),
            "368e55b92accc209e1e840780fde1397ff8adc895c5386af6acf07eb856944c7",
        ),
        (
            "User met friends",
            "test-app",
            "user-1",
            Metadata(kind="episode", event_time=MAY_1, participants=["Bob", " Alice ", "Bob"]),
            "63652057f92f0cdb41e8023567de8ee04a502a71b5494eeff678823f0763cc71",
        ),
        (
            "Lives in Berlin",
            "memory-chat",
            "user",
            Metadata(location=" Berlin "),
            "f4629ef909e8e40c6944a938cd5681a3c8f11de721cfbce599c9e5ebeff35a6e",
        ),
    ],
)
def test_reference_worked_examples(text, app, user, metadata, expected) -> None:
    assert memory_id(text, app, user, metadata) == expected


def test_id_is_64_lowercase_hex_and_sensitive_to_text_app_user() -> None:
    base = memory_id("Likes tea", "app", "u")
    assert len(base) == 64 and base == base.lower() and int(base, 16) >= 0
    assert memory_id("Likes tea ", "app", "u") != base  # text is never trimmed
    assert memory_id("likes tea", "app", "u") != base  # nor case-folded
    assert memory_id("Likes tea", "app2", "u") != base
    assert memory_id("Likes tea", "app", "u2") != base


def test_event_time_is_utc_to_the_second() -> None:
    plus8 = timezone(timedelta(hours=8))
    a = Metadata(kind="episode", event_time=datetime(2024, 5, 1, 8, 0, 0, tzinfo=plus8))
    b = Metadata(kind="episode", event_time=datetime(2024, 5, 1, 0, 0, 0, 999_999, tzinfo=UTC))
    c = Metadata(kind="episode", event_time=datetime(2024, 5, 1, 0, 0, 1, tzinfo=UTC))
    assert memory_id("x", "a", "u", a) == memory_id("x", "a", "u", b) != memory_id("x", "a", "u", c)


def test_participant_order_case_duplicates_and_blanks_do_not_matter() -> None:
    assert normalize_participants(["bob", "Alice", " alice ", "", "  ", "Bob"]) == ("Alice", "Bob")
    one = Metadata(participants=["Bob", "Alice"])
    two = Metadata(participants=[" Alice", "Bob", "alice", ""])
    assert memory_id("Met", "a", "u", one) == memory_id("Met", "a", "u", two)


def test_add_path_replaces_and_defaults_the_kind() -> None:
    plain = build_memory("x", ["t"], None)
    assert plain.kind == "fact" and plain.topics == ("t",)
    custom = build_memory("x", None, Metadata(kind="habit"))
    assert custom.kind == "habit"
    assert memory_id("x", "a", "u", Metadata(kind="habit")) != memory_id("x", "a", "u")


def test_update_path_patches_only_supplied_fields() -> None:
    stored = build_memory(
        "x", ["t"], Metadata(kind="episode", event_time=MAY_1, participants=["A"], location="Kyoto")
    )
    patched = patch_memory(stored, "y", None, Metadata(location="  ", participants=[]))
    assert (patched.kind, patched.event_time, patched.participants, patched.location) == (
        "episode",
        MAY_1,
        ("A",),
        "Kyoto",
    )
    assert patched.topics == ()
    moved = patch_memory(stored, "y", ["n"], Metadata(location="Osaka"))
    assert moved.location == "Osaka" and moved.topics == ("n",)


# -- issue 10: the ID stays the reference's; identifiers are validated ------------


def test_separators_in_fields_can_give_two_memories_one_id() -> None:
    """Kept byte-identical to the reference, so these pairs share an ID; the
    service refuses the second (MemoryIdCollisionError, tests/conformance)."""
    app, user = "memory-chat", "alice"
    tail = f"|app:{app}|user:{user}"
    pairs = [
        (("Met", Metadata(participants=["a,b"])), ("Met", Metadata(participants=["a", "b"]))),
        ((f"X{tail}|kind:fact|location:Paris", None), ("X", Metadata(location=f"Paris{tail}"))),
        (
            ("Met", Metadata(participants=["a|location:b"])),
            ("Met", Metadata(participants=["a"], location="b")),
        ),
    ]
    for (text1, meta1), (text2, meta2) in pairs:
        assert memory_id(text1, app, user, meta1) == memory_id(text2, app, user, meta2)


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (UserKey("", "u"), "appName is required: pass a non-blank app name"),
        (UserKey("  ", "u"), "appName is required: pass a non-blank app name"),
        (UserKey("a", "\u3000"), "userID is required: pass a non-blank user id"),
        (UserKey(" ", " "), "appName is required: pass a non-blank app name"),
        (UserKey(None, "u"), "appName is required: pass a non-blank app name"),  # type: ignore[arg-type]
        (
            UserKey("a" * 256, "u"),
            "appName is 256 characters, longer than the limit of 255: use a shorter app name",
        ),
        (
            UserKey("a", "al\tice"),
            "userID contains a control character (U+0009): "
            "use only printable characters (no tabs, newlines or other control characters)",
        ),
        (
            UserKey("a\x00", "u"),
            "appName contains a NUL character (U+0000): "
            "use only printable characters (no tabs, newlines or other control characters)",
        ),
        (
            UserKey("a", "u\udc80"),
            "userID contains an invalid character (a lone UTF-16 surrogate, U+DC80): send valid Unicode text",
        ),
    ],
)
def test_user_key_validation_sentences(key: UserKey, message: str) -> None:
    with pytest.raises(InvalidKeyError) as info:
        key.validate()
    assert str(info.value) == message


def test_printable_keys_and_ids_are_valid() -> None:
    for part in ("alice", "with space", "ユーザー🙂", "rtl\u200fmark", "a" * 255, "*", "%"):
        UserKey(part, part).validate()
        check_memory_id(part)
    for bad, fragment in (
        ("", "memoryID is required"),
        ("x" * 256, "memoryID is 256 characters"),
        ("a\nb", r"U\+000A"),
    ):
        with pytest.raises(InvalidKeyError, match=fragment):
            check_memory_id(bad)
