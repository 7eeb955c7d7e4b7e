"""What a saved conversation is: its summary (``SessionInfo``) and the records
it is made of (``SessionRecord``), plus the errors of the session stores.

A record is one of:

* ``message``: an OpenAI-format message exactly as the model saw it (user,
  assistant with its tool calls, tool result), with display details in
  ``meta`` (a tool result's ``name``, ``is_error`` and ``elapsed``);
* ``stats``: one turn's statistics and the model that answered;
* ``error``: an error said during a turn (shown again, never sent to the model).

Only ``message`` records go back to the model when a session is resumed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from memchat.engine.model import MemchatError, from_micros, to_micros

KINDS = ("message", "stats", "error")
#: Characters of the first message kept as a session's title.
TITLE_LENGTH = 60


class SessionNotFoundError(MemchatError, LookupError):
    """No saved session has this id for this (app, user)."""

    def __init__(self, session_id: str, hint: str = "") -> None:
        self.session_id = session_id
        super().__init__(
            f"no saved session {session_id!r} for this user: "
            + (hint or "`memchat sessions list` shows the saved ones")
        )


#: What no database column can hold as text: NUL (PostgreSQL) and lone surrogates (UTF-8).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """``text`` with NUL and lone surrogates (undecodable input) as U+FFFD, for
    columns searched or shown as text; records keep the exact text as JSON escapes."""
    return _UNSTORABLE.sub("\ufffd", text)


def now_utc() -> datetime:
    return datetime.now(UTC)


def make_title(text: str) -> str:
    """A session's default title: the first line of its first message, shortened."""
    line = " ".join(storable(str(text or "")).split())
    if len(line) > TITLE_LENGTH:
        line = line[: TITLE_LENGTH - 1].rstrip() + "…"
    return line or "(untitled)"


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """One saved conversation, as a list shows it."""

    id: str
    title: str = ""
    created_at: datetime = field(default_factory=now_utc)
    updated_at: datetime = field(default_factory=now_utc)
    #: User and assistant messages with text (tool traffic not counted).
    message_count: int = 0
    #: Records of any kind (the next record's position).
    record_count: int = 0
    model: str = ""
    backend: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "created_at": self.created_at.isoformat(timespec="microseconds"),
            "updated_at": self.updated_at.isoformat(timespec="microseconds"),
            "message_count": self.message_count,
            "model": self.model,
            "backend": self.backend,
        }

    def renamed(self, title: str) -> SessionInfo:
        return replace(self, title=title)


@dataclass(frozen=True, slots=True)
class SessionRecord:
    kind: str
    data: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)
    created_at: datetime = field(default_factory=now_utc)
    #: Position in the session (0, 1, …), set by the store.
    seq: int = -1

    @property
    def role(self) -> str:
        return str(self.data.get("role", "")) if self.kind == "message" else ""

    @property
    def counted(self) -> bool:
        """Counted in ``SessionInfo.message_count``: the user's messages and answers with text."""
        return self.role == "user" or (self.role == "assistant" and bool(self.data.get("content")))

    def payload(self) -> str:
        """The record as stored: one JSON object (kind, data, meta)."""
        value = {"kind": self.kind, "data": self.data, "meta": self.meta}
        text = json.dumps(value, ensure_ascii=False)
        # Lone surrogates cannot be encoded: then every non-ASCII character is escaped.
        return json.dumps(value) if _UNSTORABLE.search(text) else text

    @classmethod
    def from_payload(cls, text: str, created_at: int, seq: int) -> SessionRecord:
        value = json.loads(text)
        return cls(
            kind=value["kind"],
            data=value.get("data") or {},
            meta=value.get("meta") or {},
            created_at=from_micros(created_at) or now_utc(),
            seq=seq,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "kind": self.kind,
            "data": self.data,
            "meta": self.meta,
            "created_at": self.created_at.isoformat(timespec="microseconds"),
        }


def title_of(records: list[SessionRecord] | tuple[SessionRecord, ...]) -> str:
    """The title a new session gets from its first records (its first user message)."""
    for record in records:
        if record.role == "user":
            return make_title(str(record.data.get("content") or ""))
    return "(untitled)"


def micros(value: datetime) -> int:
    return to_micros(value)


__all__ = [
    "KINDS",
    "SessionInfo",
    "SessionNotFoundError",
    "SessionRecord",
    "make_title",
    "micros",
    "now_utc",
    "title_of",
]
