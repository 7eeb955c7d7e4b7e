"""Plain data shared by the extractor, the update policies and the workers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from ..model import KIND_FACT, Entry, Metadata, UserKey
from ..tools.base import ToolName


class OperationType(StrEnum):
    """What one extracted operation does (a ``str``: ``"add"``, ``"update"``, …)."""

    ADD = "add"
    UPDATE = "update"
    DELETE = "delete"
    CLEAR = "clear"


#: Operation type → the memory tool whose "enabled" setting allows it.
OPERATION_TOOLS: dict[OperationType, ToolName] = {
    OperationType.ADD: ToolName.ADD,
    OperationType.UPDATE: ToolName.UPDATE,
    OperationType.DELETE: ToolName.DELETE,
    OperationType.CLEAR: ToolName.CLEAR,
}
TOOL_OPERATIONS: dict[str, OperationType] = {tool: op for op, tool in OPERATION_TOOLS.items()}


class UpdatePolicy(StrEnum):
    """How extracted operations meet the stored memories (reference §6.5)."""

    MERGE_SIMILAR = "merge_similar"
    PRESERVE_HISTORY = "preserve_history"
    APPEND_ONLY = "append_only"


MERGE_SIMILAR = UpdatePolicy.MERGE_SIMILAR
PRESERVE_HISTORY = UpdatePolicy.PRESERVE_HISTORY
APPEND_ONLY = UpdatePolicy.APPEND_ONLY
POLICIES: tuple[str, ...] = tuple(policy.value for policy in UpdatePolicy)

Message = Mapping[str, Any]


class ExtractionError(Exception):
    """Extraction failed as a whole (no model, model error, callback error):
    nothing is written and the messages stay pending for the next run."""


@dataclass(frozen=True, slots=True)
class Operation:
    """One change the extractor asks for, with real memory IDs (the model only
    ever sees local numbers; the extractor maps them back)."""

    type: OperationType
    memory: str = ""
    #: The real ID of the memory an update or delete is about.
    memory_id: str = ""
    topics: tuple[str, ...] = ()
    #: "" on an update keeps the stored kind (patch semantics).
    kind: str = ""
    event_time: datetime | None = None
    participants: tuple[str, ...] = ()
    location: str = ""
    #: The existing entry an update or delete refers to, when known (for reports).
    target: Entry | None = field(default=None, compare=False)

    @property
    def tool(self) -> str:
        # A custom extractor's unknown type stays as it is (the worker reports it).
        return str(OPERATION_TOOLS.get(self.type, self.type))

    def metadata(self) -> Metadata:
        return Metadata(
            kind=self.kind or (KIND_FACT if self.type == OperationType.ADD else ""),
            event_time=self.event_time,
            participants=self.participants or None,
            location=self.location,
        )


@dataclass(frozen=True, slots=True)
class Extraction:
    """What an extractor returns: the operations, and the warnings about the
    parts of the model's output it had to skip."""

    operations: tuple[Operation, ...] = ()
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ExtractionContext:
    """What a checker sees (reference ``ExtractionContext``)."""

    key: UserKey
    #: The pending user/assistant messages (tool traffic already filtered out).
    messages: tuple[Message, ...]
    #: Time of the newest message of the last successful extraction; None the first time.
    last_extract_at: datetime | None
    #: The current time (UTC), so interval checkers are testable.
    now: datetime


Checker = Callable[[ExtractionContext], bool]


@runtime_checkable
class Extractor(Protocol):
    """Turns new conversation messages into memory operations."""

    #: One of POLICIES; custom extractors without it get merge_similar.
    policy: str

    def should_extract(self, context: ExtractionContext) -> bool: ...

    async def extract(
        self,
        messages: Sequence[Message],
        existing: Sequence[Entry],
        *,
        enabled: frozenset[str] | None = None,
        reference_date: datetime | None = None,
    ) -> Extraction: ...


# -- what the UI is told -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExtractionStarted:
    """A background extraction began for ``messages`` new messages."""

    key: UserKey
    session_id: str
    messages: int


class JobState(StrEnum):
    """What became of a session's messages offered for extraction (``submit``)."""

    QUEUED = "queued"
    #: A queued job will take them.
    COALESCED = "coalesced"
    #: The worker's queue is full; queued as soon as it has room.
    DEFERRED = "deferred"
    #: The checkers said not yet.
    WAITING = "waiting"
    NOTHING_NEW = "nothing new"
    #: No user to extract for.
    SKIPPED = "skipped"
    CLOSED = "closed"
    #: The Runner's own outcomes: auto extraction is off, or the hand-over raised.
    OFF = "off"
    FAILED = "failed"


class ExtractionStatus(StrEnum):
    """How a background extraction ended (``ExtractionFinished.status``)."""

    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class ExtractionFinished:
    """A background extraction ended; what it changed.

    ``status``: "ok" (the messages are done with, even if single operations
    failed: see ``errors``), "failed" or "timeout" (the messages stay pending
    and are offered again with the next extraction), "cancelled" (the app
    closed). ``updated`` pairs the previous entry (None if unknown) with the new one.
    """

    key: UserKey
    session_id: str
    status: ExtractionStatus
    messages: int = 0
    added: tuple[Entry, ...] = ()
    updated: tuple[tuple[Entry | None, Entry], ...] = ()
    deleted: tuple[Entry, ...] = ()
    #: How many memories a clear operation removed (0 if none ran).
    cleared: int = 0
    #: Parts of the model's output that were invalid and skipped.
    skipped: tuple[str, ...] = ()
    #: Operations that failed, or why the whole job failed.
    errors: tuple[str, ...] = ()
    elapsed: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == ExtractionStatus.OK

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.deleted or self.cleared)

    def summary(self) -> str:
        """``+1 added, 1 updated, 1 deleted`` (or ``no changes``), for one status line."""
        parts = []
        if self.added:
            parts.append(f"+{len(self.added)} added")
        if self.updated:
            parts.append(f"{len(self.updated)} updated")
        if self.deleted:
            parts.append(f"{len(self.deleted)} deleted")
        if self.cleared:
            parts.append(f"{self.cleared} cleared")
        return ", ".join(parts) or "no changes"


ExtractionEvent = ExtractionStarted | ExtractionFinished
Listener = Callable[[ExtractionEvent], Any]
