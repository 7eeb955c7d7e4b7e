"""Core value types of the memory engine.

Everything here is plain data: no I/O, no backend knowledge. Times are always
timezone-aware UTC ``datetime`` values with microsecond precision.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

KIND_FACT = "fact"
KIND_EPISODE = "episode"

#: Maximum length of an app name or user id, so they fit every backend's key
#: column (VARCHAR(255) in MySQL) and cannot be used to blow up a key.
MAX_KEY_LENGTH = 255


class MemchatError(Exception):
    """Base class of every error the engine raises on purpose."""


class InvalidKeyError(MemchatError, ValueError):
    """An app name, user id or memory id is missing or unusable."""


class MemoryNotFoundError(MemchatError, LookupError):
    """The memory does not exist for this (app, user), or is deleted."""

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        super().__init__(f"memory with id {memory_id} not found")


class MemoryConflictError(MemchatError):
    """An update would rotate onto an ID that is already an active memory."""

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        super().__init__(f"memory with id {memory_id} already exists")


class MemoryIdCollisionError(MemchatError):
    """Two different memories of one user have the same canonical ID.

    The reference's ID pre-image joins fields with separators (``,`` between
    participants, ``|location:`` …) that the fields themselves may contain, so
    two different memories can hash alike. The engine refuses the write
    instead of letting the second memory replace the first."""

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        super().__init__(
            f"a different memory already has the id {memory_id}: both get the same id because the text, "
            "participants or location contains the id's separators (such as ',' or '|location:'); "
            "nothing was changed: remove those separators and try again"
        )


class MemoryLimitError(MemchatError):
    """Adding would exceed the per-user memory limit."""

    def __init__(self, user: str, limit: int, current: int) -> None:
        self.user, self.limit, self.current = user, limit, current
        super().__init__(
            f"memory limit exceeded for user {user}, limit: {limit}, current: {current}; "
            "delete or update existing memories, or raise the limit"
        )


class InvalidMemoryError(MemchatError, ValueError):
    """The memory content or metadata is unusable (empty text, bad time…)."""


class BackendError(MemchatError):
    """A storage backend failed: unreachable, misconfigured, or an I/O error."""


class ConfigError(MemchatError, ValueError):
    """A configuration value (backend name, DSN, option) is invalid."""


def utc(value: datetime) -> datetime:
    """Return ``value`` as an aware UTC datetime (naive values are taken as UTC)."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def to_micros(value: datetime) -> int:
    """Microseconds since the Unix epoch: the portable on-disk time format."""
    value = utc(value)
    delta = value - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def from_micros(value: int | None) -> datetime | None:
    if value is None:
        return None
    return _EPOCH + timedelta(microseconds=int(value))


@dataclass(frozen=True, slots=True)
class UserKey:
    """Isolation scope: every memory belongs to exactly one (app, user)."""

    app: str
    user: str

    def validate(self) -> None:
        """Raise ``InvalidKeyError`` unless app and user are usable identifiers
        (not blank, at most 255 characters, no control character or lone
        surrogate). App is checked first, then user, as in the reference."""
        from .validation import check_key

        check_key(self)


@dataclass(frozen=True, slots=True)
class Metadata:
    """Episodic metadata supplied on add or update (reference §1.3, §2.2)."""

    kind: str = ""
    event_time: datetime | None = None
    participants: tuple[str, ...] | list[str] | None = None
    location: str = ""

    def is_empty(self) -> bool:
        return not (
            self.kind or self.event_time is not None or self.participants or (self.location or "").strip()
        )


@dataclass(frozen=True, slots=True)
class Memory:
    """The content of one memory. Topics are tags and never part of its identity."""

    text: str
    topics: tuple[str, ...] = ()
    kind: str = KIND_FACT
    event_time: datetime | None = None
    participants: tuple[str, ...] = ()
    location: str = ""

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"memory": self.text, "topics": list(self.topics), "kind": self.kind}
        if self.event_time is not None:
            data["event_time"] = utc(self.event_time).isoformat()
        if self.participants:
            data["participants"] = list(self.participants)
        if self.location:
            data["location"] = self.location
        return data


@dataclass(frozen=True, slots=True)
class Entry:
    """One stored memory of one (app, user)."""

    id: str
    app: str
    user: str
    memory: Memory
    created_at: datetime
    updated_at: datetime
    deleted_at: datetime | None = None
    #: Search relevance; 0.0 outside search results.
    score: float = 0.0

    @property
    def key(self) -> UserKey:
        return UserKey(self.app, self.user)

    @property
    def is_deleted(self) -> bool:
        return self.deleted_at is not None

    @property
    def newest_first(self) -> tuple[int, int, str]:
        """Sort key of the one "newest first" order (reference §1.5): updated_at desc,
        created_at desc, ID asc. Search results order equal scores by it."""
        return (-to_micros(self.updated_at), -to_micros(self.created_at), self.id)

    def with_score(self, score: float) -> Entry:
        return replace(self, score=score)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "app_name": self.app,
            "user_id": self.user,
            "memory": self.memory.to_dict(),
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }
        if self.deleted_at is not None:
            data["deleted_at"] = self.deleted_at.isoformat()
        if self.score:
            data["score"] = self.score
        return data


SEARCH_HYBRID = "hybrid"
SEARCH_SEMANTIC = "semantic"
SEARCH_KEYWORD = "keyword"
#: Every search mode, the default first.
SEARCH_MODES = (SEARCH_HYBRID, SEARCH_SEMANTIC, SEARCH_KEYWORD)


@dataclass(frozen=True, slots=True)
class SearchOptions:
    """Search knobs (reference §1.6). Zero values mean "use the default"."""

    kind: str = ""
    time_after: datetime | None = None
    time_before: datetime | None = None
    max_results: int = 0
    similarity_threshold: float = 0.0
    order_by_event_time: bool = False
    kind_fallback: bool = False
    deduplicate: bool = False
    #: Deprecated spelling of ``mode="hybrid"`` (the reference's HybridSearch flag).
    hybrid_search: bool = False
    hybrid_rrf_k: int = 0
    #: How to rank: "hybrid" (meaning and keywords fused), "semantic" (meaning
    #: only), "keyword" (the reference's keyword scoring only), or "" for the
    #: service's default (hybrid whenever it has an embedder, else keyword).
    mode: str = ""

    def resolved_mode(self, default: str) -> str:
        """The mode this search runs in, given the service's default."""
        if self.mode:
            return self.mode
        return SEARCH_HYBRID if self.hybrid_search else default


@dataclass(slots=True)
class UpdateResult:
    """The effective ID after an update (it rotates when the identity changes)."""

    memory_id: str
    entry: Entry | None = field(default=None, repr=False)
