"""Field checks at the engine's edge: one validation for all nine backends.

``MemoryService`` calls these before any I/O, so every backend sees only
values it can store, and every caller (library, tools, CLI, extractor) gets
the same clear error for the same bad value.

Rules
    Identifiers (app, user, memory ID): required and not blank (empty or
    whitespace only), at most 255 characters, no control character
    (Unicode category Cc: NUL, tab, newline, ESC, DEL, C1…) and no lone
    UTF-16 surrogate. Errors are ``InvalidKeyError``.

    Content (memory text, each topic, kind, each participant, location, the
    search query and the search kind): no NUL and no lone UTF-16 surrogate;
    those no backend can store the same way. Everything else is stored as
    given: newlines, tabs, other C0/C1 controls, emoji, bidi marks, CJK.
    (Display code neutralises controls when it shows them.) Errors are
    ``InvalidMemoryError``. Sizes are checked here too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from .model import (
    MAX_KEY_LENGTH,
    InvalidKeyError,
    InvalidMemoryError,
    Metadata,
    SearchOptions,
    UserKey,
)

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_KIND_LENGTH",
    "MAX_LOCATION_LENGTH",
    "MAX_TOPICS",
    "MAX_TOPIC_LENGTH",
    "check_content",
    "check_key",
    "check_memory_id",
    "check_metadata",
    "check_query",
    "check_search_options",
    "check_text",
    "check_topics",
]

#: A canonical ID is 64 hex digits; anything longer than this is not an ID.
MAX_ID_LENGTH = 255
MAX_TOPICS = 50
MAX_TOPIC_LENGTH = 100
MAX_KIND_LENGTH = 32
MAX_LOCATION_LENGTH = 1000

#: NUL or a lone surrogate: what no content field may contain.
_BAD_CONTENT = re.compile("[\x00\ud800-\udfff]")
#: Any control character (category Cc) or a lone surrogate: not in an identifier.
_BAD_IDENTIFIER = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def _describe(char: str) -> str:
    code = f"U+{ord(char):04X}"
    if char == "\x00":
        return f"a NUL character ({code})"
    if "\ud800" <= char <= "\udfff":
        return f"an invalid character (a lone UTF-16 surrogate, {code})"
    return f"a control character ({code})"


def check_content(value: str, field: str) -> None:
    """``field`` names the value in the sentence, e.g. "the memory text"."""
    match = _BAD_CONTENT.search(value)
    if match is None:
        return
    char = match.group()
    fix = "remove it and try again" if char == "\x00" else "send valid Unicode text"
    raise InvalidMemoryError(f"{field} contains {_describe(char)}: {fix}")


def _check_identifier(value: Any, name: str, label: str, limit: int) -> None:
    """``name`` is the reference's name (appName…), ``label`` the plain words (app name…)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidKeyError(f"{name} is required: pass a non-blank {label}")
    if len(value) > limit:
        raise InvalidKeyError(
            f"{name} is {len(value)} characters, longer than the limit of {limit}: use a shorter {label}"
        )
    match = _BAD_IDENTIFIER.search(value)
    if match is not None:
        char = match.group()
        fix = (
            "send valid Unicode text"
            if "\ud800" <= char <= "\udfff"
            else "use only printable characters (no tabs, newlines or other control characters)"
        )
        raise InvalidKeyError(f"{name} contains {_describe(char)}: {fix}")


def check_key(key: UserKey) -> None:
    """App first, then user (the reference's order)."""
    if not isinstance(key, UserKey):
        raise InvalidKeyError("appName is required: pass a UserKey(app, user)")
    _check_identifier(key.app, "appName", "app name", MAX_KEY_LENGTH)
    _check_identifier(key.user, "userID", "user id", MAX_KEY_LENGTH)


def check_memory_id(memory_id: Any) -> None:
    _check_identifier(memory_id, "memoryID", "memory id", MAX_ID_LENGTH)


def check_text(text: Any, max_length: int) -> None:
    if not isinstance(text, str) or not text.strip():
        raise InvalidMemoryError("memory text is required: pass a non-empty string")
    check_content(text, "the memory text")
    if len(text) > max_length:
        raise InvalidMemoryError(
            f"memory text is {len(text)} characters, over the limit of {max_length}: "
            "store a concise fact instead"
        )


def check_topics(topics: Iterable[str] | None) -> list[str]:
    """The topics as a list (``None`` → empty)."""
    if topics is None:
        return []
    if isinstance(topics, (str, bytes)) or not isinstance(topics, Iterable):
        raise InvalidMemoryError("topics must be a list of strings")
    topics = list(topics)
    if not all(isinstance(t, str) for t in topics):
        raise InvalidMemoryError("topics must be a list of strings")
    if len(topics) > MAX_TOPICS:
        raise InvalidMemoryError(f"{len(topics)} topics given, at most {MAX_TOPICS} are allowed")
    for topic in topics:
        check_content(topic, "a topic")
    if any(len(t) > MAX_TOPIC_LENGTH for t in topics):
        raise InvalidMemoryError(f"a topic is longer than {MAX_TOPIC_LENGTH} characters: shorten it")
    return topics


def check_metadata(metadata: Metadata | None) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, Metadata):
        raise InvalidMemoryError("metadata must be a memchat.engine.Metadata")
    if not isinstance(metadata.kind, str) or len(metadata.kind) > MAX_KIND_LENGTH:
        raise InvalidMemoryError(f"memory kind must be a string of at most {MAX_KIND_LENGTH} characters")
    check_content(metadata.kind, "the memory kind")
    if metadata.event_time is not None and not isinstance(metadata.event_time, datetime):
        raise InvalidMemoryError("event_time must be a datetime")
    participants = metadata.participants or ()
    if isinstance(participants, (str, bytes)) or not isinstance(participants, Iterable):
        raise InvalidMemoryError("participants must be a list of names (strings)")
    participants = list(participants)
    if not all(isinstance(p, str) for p in participants):
        raise InvalidMemoryError("participants must be a list of names (strings)")
    if len(participants) > MAX_TOPICS or any(len(p) > MAX_TOPIC_LENGTH for p in participants):
        raise InvalidMemoryError(
            f"at most {MAX_TOPICS} participants of at most {MAX_TOPIC_LENGTH} characters are allowed"
        )
    for participant in participants:
        check_content(participant, "a participant")
    location = metadata.location or ""
    if not isinstance(location, str) or len(location) > MAX_LOCATION_LENGTH:
        raise InvalidMemoryError(f"location must be a string of at most {MAX_LOCATION_LENGTH} characters")
    check_content(location, "the location")


def check_query(query: str) -> None:
    """A search query (already known to be a non-blank string)."""
    check_content(query, "the search query")


def check_search_options(options: SearchOptions | None) -> None:
    if options is None:
        return
    if not isinstance(options, SearchOptions):
        raise InvalidMemoryError("search options must be a memchat.engine.SearchOptions")
    if not isinstance(options.kind, str):
        raise InvalidMemoryError('the search kind must be a string such as "fact" or "episode"')
    check_content(options.kind, "the search kind")
