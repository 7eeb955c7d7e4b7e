"""Canonical memory IDs and metadata normalisation (reference §2).

The ID must be byte-for-byte identical to the reference implementation's so
that memories written by either can be addressed by the other.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime

from .model import KIND_FACT, Memory, Metadata, utc


def normalize_participants(names: Iterable[str] | None) -> tuple[str, ...]:
    """Trim, drop empties, sort case-insensitively (byte order on ties), and
    drop case-insensitive duplicates keeping the first in sorted order."""
    if not names:
        return ()
    trimmed = [n.strip() for n in names if isinstance(n, str) and n.strip()]
    trimmed.sort(key=lambda n: (n.lower(), n.encode("utf-8")))
    seen: set[str] = set()
    result: list[str] = []
    for name in trimmed:
        folded = name.lower()
        if folded not in seen:
            seen.add(folded)
            result.append(name)
    return tuple(result)


def normalize_topics(topics: Iterable[str] | None) -> tuple[str, ...]:
    """Topics are free tags: keep order, drop blanks and exact repeats."""
    if not topics:
        return ()
    result: list[str] = []
    for topic in topics:
        if isinstance(topic, str) and topic.strip() and topic.strip() not in result:
            result.append(topic.strip())
    return tuple(result)


def _has_event_metadata(event_time: datetime | None, participants: tuple[str, ...], location: str) -> bool:
    return event_time is not None or bool(participants) or bool(location.strip())


def identity_kind(memory: Memory) -> str:
    """The kind segment of the pre-image: legacy plain facts write none."""
    if memory.kind and memory.kind != KIND_FACT:
        return memory.kind
    if _has_event_metadata(memory.event_time, memory.participants, memory.location):
        return KIND_FACT
    return ""


def format_event_time(value: datetime) -> str:
    """UTC, seconds precision: the ID's event_time segment."""
    return utc(value).strftime("%Y-%m-%dT%H:%M:%SZ")


def memory_id_for(memory: Memory, app: str, user: str) -> str:
    """The reference's ID, byte for byte. Its pre-image joins fields with
    separators (``|location:``, ``,`` between participants…) that the fields
    may contain, so two different memories can share an ID; MemoryService
    detects that on every write and refuses it (MemoryIdCollisionError)."""
    parts = [f"memory:{memory.text}", f"|app:{app}", f"|user:{user}"]
    kind = identity_kind(memory)
    if kind:
        parts.append(f"|kind:{kind}")
    if memory.event_time is not None:
        parts.append(f"|event_time:{format_event_time(memory.event_time)}")
    participants = normalize_participants(memory.participants)
    if participants:
        parts.append("|participants:" + ",".join(participants))
    location = memory.location.strip()
    if location:
        parts.append(f"|location:{location}")
    return hashlib.sha256("".join(parts).encode("utf-8")).hexdigest()


def memory_id(
    text: str,
    app: str,
    user: str,
    metadata: Metadata | None = None,
) -> str:
    """The canonical ID of ``text`` for (app, user) with optional metadata."""
    return memory_id_for(build_memory(text, (), metadata), app, user)


def normalize_memory(memory: Memory) -> Memory:
    """Effective kind (empty → fact), normalised participants, trimmed location."""
    return Memory(
        text=memory.text,
        topics=normalize_topics(memory.topics),
        kind=memory.kind or KIND_FACT,
        event_time=utc(memory.event_time) if memory.event_time is not None else None,
        participants=normalize_participants(memory.participants),
        location=(memory.location or "").strip(),
    )


def _normalized(
    text: str,
    topics: Iterable[str] | None,
    kind: str,
    event_time: datetime | None,
    participants: tuple[str, ...],
    location: str,
) -> Memory:
    """The fields the add and update paths settled on, as one normalised Memory."""
    return normalize_memory(
        Memory(
            text=text,
            topics=tuple(topics or ()),
            kind=kind,
            event_time=event_time,
            participants=participants,
            location=location,
        )
    )


def build_memory(text: str, topics: Iterable[str] | None, metadata: Metadata | None) -> Memory:
    """The add path (``ApplyMetadata``): supplied metadata replaces every field."""
    kind, event_time, location = "", None, ""
    participants: tuple[str, ...] = ()
    if metadata is not None:
        kind = metadata.kind or ""
        event_time = metadata.event_time
        participants = normalize_participants(metadata.participants)
        location = (metadata.location or "").strip()
        if not kind and _has_event_metadata(event_time, participants, location):
            kind = KIND_FACT
    return _normalized(text, topics, kind, event_time, participants, location)


def patch_memory(
    current: Memory, text: str, topics: Iterable[str] | None, metadata: Metadata | None
) -> Memory:
    """The update path (``ApplyMemoryUpdate`` + ``ApplyMetadataPatch``).

    Text and topics are replaced (``None`` topics become empty, as the
    reference); metadata is a patch: only non-empty supplied fields overwrite.
    """
    kind, event_time = current.kind, current.event_time
    participants, location = current.participants, current.location
    if metadata is not None:
        if metadata.kind:
            kind = metadata.kind
        if metadata.event_time is not None:
            event_time = metadata.event_time
        supplied = normalize_participants(metadata.participants)
        if supplied:
            participants = supplied
        if (metadata.location or "").strip():
            location = metadata.location.strip()
    return _normalized(text, topics, kind, event_time, participants, location)
