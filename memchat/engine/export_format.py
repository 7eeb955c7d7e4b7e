"""The export file format: ``memchat-memories`` version 1, one JSON object per line.

* a header ``{"format": "memchat-memories", "version": 1, "embedder": …}``;
  ``embedder`` is the identity of the model that made the vectors in the file
  (``engine/vectors.py``), or null when the file has none;
* one line per memory, tombstones included, users sorted by (app, user) and a
  user's memories by ID: ``app``, ``user``, ``id``, ``text``, ``topics``,
  ``kind``, ``event_time``, ``participants``, ``location``, ``created_at``,
  ``updated_at``, ``deleted_at`` (times ISO 8601 UTC with microseconds, null
  when absent) and, with ``with_vectors``, ``vector`` (base64 of little-endian
  float32);
* a closing line ``{"end": "memchat-memories", "count": N, "checksum": "sha256:…"}``,
  so a truncated file is noticed. The checksum covers the memory lines without
  their vectors; migration compares the same checksum of source and target.

Nothing in a line depends on the backend or on when it was written, so export →
import → export gives the same file on every backend. Reading and writing whole
files, and what import decides per memory, are engine/portability.py's.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from . import validation
from .model import Entry, InvalidMemoryError, MemchatError, Memory, Metadata, UserKey, utc

__all__ = [
    "FORMAT",
    "VERSION",
    "Checksum",
    "FileError",
    "decode_data",
    "decode_record",
    "dump",
    "encode_record",
    "parse_header",
    "parse_line",
]

FORMAT: Final = "memchat-memories"
VERSION: Final = 1

_FIELDS = (
    "app", "user", "id", "text", "topics", "kind", "event_time", "participants", "location",
    "created_at", "updated_at", "deleted_at",
)  # fmt: skip


class FileError(MemchatError):
    """The file as a whole cannot be imported (not an export, or a newer version)."""


# -- one line ---------------------------------------------------------------------


def _time(value: datetime | None) -> str | None:
    return None if value is None else utc(value).isoformat(timespec="microseconds")


def _parse_time(value: Any, name: str, *, required: bool) -> datetime | None:
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise InvalidMemoryError(f"{name} must be an ISO 8601 time such as 2026-01-31T12:00:00+00:00")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidMemoryError(f"{name} {value[:40]!r} is not an ISO 8601 time") from None
    if parsed.tzinfo is None:
        raise InvalidMemoryError(f"{name} {value[:40]!r} has no time zone: add +00:00 for UTC")
    return utc(parsed)


def _record(entry: Entry) -> dict[str, Any]:
    m = entry.memory
    return {
        "app": entry.app,
        "user": entry.user,
        "id": entry.id,
        "text": m.text,
        "topics": list(m.topics),
        "kind": m.kind or "fact",
        "event_time": _time(m.event_time),
        "participants": list(m.participants),
        "location": m.location or "",
        "created_at": _time(entry.created_at),
        "updated_at": _time(entry.updated_at),
        "deleted_at": _time(entry.deleted_at),
    }


def dump(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def encode_record(entry: Entry, vector: Sequence[float] | None = None) -> str:
    """The line of one entry (no newline); ``vector`` is written as base64 float32."""
    data = _record(entry)
    if vector is not None:
        import numpy as np

        data["vector"] = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return dump(data)


def decode_record(line: str, max_text_length: int) -> tuple[Entry, list[float] | None]:
    """The entry (and vector, if any) of one line; ``InvalidMemoryError`` (one
    sentence) when it is not a valid memory."""
    return decode_data(parse_line(line), max_text_length)


def parse_line(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError as exc:
        raise InvalidMemoryError(f"not JSON ({exc})") from None


def decode_data(data: Any, max_text_length: int) -> tuple[Entry, list[float] | None]:
    """``decode_record`` of a line already parsed."""
    if not isinstance(data, dict):
        raise InvalidMemoryError("not a JSON object")
    missing = [name for name in ("app", "user", "id", "text", "created_at", "updated_at") if name not in data]
    if missing:
        raise InvalidMemoryError(f"missing {', '.join(missing)}")
    unknown = sorted(set(data) - {*_FIELDS, "vector"})
    if unknown:
        raise InvalidMemoryError(f"unknown field {', '.join(unknown)}")
    key = UserKey(data["app"], data["user"])
    validation.check_key(key)
    validation.check_memory_id(data["id"])
    validation.check_text(data["text"], max_text_length)
    topics = validation.check_topics(data.get("topics"))
    kind = data.get("kind") or "fact"
    participants = data.get("participants") or []
    location = data.get("location") or ""
    validation.check_metadata(Metadata(kind=kind, participants=participants, location=location))
    memory = Memory(
        text=data["text"],
        topics=tuple(topics),
        kind=kind,
        event_time=_parse_time(data.get("event_time"), "event_time", required=False),
        participants=tuple(participants),
        location=location,
    )
    entry = Entry(
        id=data["id"],
        app=key.app,
        user=key.user,
        memory=memory,
        created_at=_parse_time(data["created_at"], "created_at", required=True),  # type: ignore[arg-type]
        updated_at=_parse_time(data["updated_at"], "updated_at", required=True),  # type: ignore[arg-type]
        deleted_at=_parse_time(data.get("deleted_at"), "deleted_at", required=False),
    )
    return entry, _decode_vector(data.get("vector"))


def _decode_vector(value: Any) -> list[float] | None:
    if value is None:
        return None
    import numpy as np

    try:
        raw = base64.b64decode(value, validate=True) if isinstance(value, str) else b""
    except ValueError:
        raw = b""
    if not raw or len(raw) % 4:
        raise InvalidMemoryError("vector must be base64 of little-endian float32 values")
    vector = np.frombuffer(raw, dtype="<f4")
    if not np.all(np.isfinite(vector)):
        raise InvalidMemoryError("vector holds NaN or infinite values")
    return vector.astype(float).tolist()


class Checksum:
    """sha256 over the memory lines without vectors, in file order."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.count = 0

    def add(self, entry: Entry) -> None:
        self._hash.update(dump(_record(entry)).encode("utf-8", "surrogatepass") + b"\n")
        self.count += 1

    def hexdigest(self) -> str:
        return "sha256:" + self._hash.hexdigest()


def parse_header(line: str) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except ValueError:
        data = None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise FileError(
            "this is not a memchat export: its first line is not the memchat-memories header; "
            "make the file with `memchat memory export`"
        )
    version = data.get("version")
    if not isinstance(version, int) or version < 1 or version > VERSION:
        raise FileError(
            f"this export is format version {version!r}, newer than this memchat reads ({VERSION}): "
            "upgrade memchat to import it"
        )
    embedder = data.get("embedder")
    return {"embedder": embedder if isinstance(embedder, str) else None}
