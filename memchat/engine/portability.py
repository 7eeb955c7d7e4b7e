"""Memory portability: export to JSONL, import from it, and migrate between stores.

The file format (``memchat-memories`` version 1), one JSON object per line:

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
import → export gives the same file on every backend.

Import writes each entry as it is (same ID, timestamps and tombstone state)
through the store's atomic section, a batch of one user's entries per section,
and decides per entry (the same on every backend):

* absent from the store → **added**;
* identical to the stored one → **skipped** (so importing twice changes nothing);
* different → the one changed last wins, its last change being the later of
  ``updated_at`` and ``deleted_at``: the file's → **updated**; the store's (or a
  tie) → **skipped** as ``kept`` (a memory edited or deleted after the export is
  not undone by importing an old file).

Import restores data rather than adding memories, so the per-user limit does not
apply. A line that is not a valid memory is reported with its line number and
skipped; every other line is imported. Vectors: a vector from the file is used
when the file's embedder is the target's; otherwise (or when the file has none)
a memory written with new text is embedded by the target service's embedder. A
memory whose ID is already stored keeps its stored vector (an ID stands for its
text). Migration reads the source through the Store protocol only and never
writes to it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import inspect
import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from . import validation
from .model import BackendError, Entry, InvalidMemoryError, MemchatError, Memory, UserKey, utc
from .vectors import META_EMBEDDER

if TYPE_CHECKING:
    from .store import Store, Transaction

    from .service import MemoryService

__all__ = [
    "FORMAT",
    "VERSION",
    "ExportSummary",
    "FileError",
    "ImportReport",
    "MigrationProgress",
    "MigrationReport",
    "decode_record",
    "encode_record",
    "export_lines",
    "import_lines",
    "migrate",
]

FORMAT: Final = "memchat-memories"
VERSION: Final = 1
#: Entries written per atomic section (one user's): big enough that 100k memories
#: take minutes, small enough that a section stays well inside the store's
#: timeout (10 s) on a loaded server and never holds a user's lock for long.
BATCH: Final = 200
#: Tries of one section (each after the last failed, on half as many entries)
#: before a BackendError ends the import or migration.
WRITE_ATTEMPTS: Final = 4
RETRY_PAUSE_S: Final = 1.0
#: Texts embedded per call.
EMBED_BATCH: Final = 64

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


def _dump(data: dict[str, Any]) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def encode_record(entry: Entry, vector: Sequence[float] | None = None) -> str:
    """The line of one entry (no newline); ``vector`` is written as base64 float32."""
    data = _record(entry)
    if vector is not None:
        import numpy as np

        data["vector"] = base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return _dump(data)


def decode_record(line: str, max_text_length: int) -> tuple[Entry, list[float] | None]:
    """The entry (and vector, if any) of one line; ``InvalidMemoryError`` (one
    sentence) when it is not a valid memory."""
    return decode_data(_parse(line), max_text_length)


def _parse(line: str) -> Any:
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
    from .model import Metadata

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


class _Checksum:
    """sha256 over the memory lines without vectors, in file order."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()
        self.count = 0

    def add(self, entry: Entry) -> None:
        self._hash.update(_dump(_record(entry)).encode("utf-8", "surrogatepass") + b"\n")
        self.count += 1

    def hexdigest(self) -> str:
        return "sha256:" + self._hash.hexdigest()


# -- export -------------------------------------------------------------------------


@dataclass
class ExportSummary:
    """Filled in while ``export_lines`` runs: what the file holds."""

    count: int = 0
    users: int = 0
    checksum: str = ""


def _adopt_recorded_dimension(store: Any, recorded: str | None) -> None:
    """Read vectors in the dimension their embedder made them: a store that takes any
    dimension was given the current embedder's, which may be another model's."""
    if not recorded or getattr(store, "fixed_dimension", True):
        return
    with contextlib.suppress(ValueError, KeyError, TypeError):
        store.dimension = int(json.loads(recorded)["dimension"])


async def _user_entries(store: Store, key: UserKey) -> list[Entry]:
    """Every entry of the user, tombstones included, by ID (the file's order)."""
    return sorted(await store.list(key, include_deleted=True), key=lambda e: e.id)


async def export_lines(
    store: Store,
    *,
    users: Iterable[UserKey] | None = None,
    with_vectors: bool = False,
    summary: ExportSummary | None = None,
) -> AsyncIterator[str]:
    """The export of ``store``, line by line without newlines: every user's
    memories, or those of ``users``. Opens the store if need be; reads only."""
    summary = summary if summary is not None else ExportSummary()
    await store.open()
    embedder = await store.read_meta(META_EMBEDDER) if with_vectors else None  # type: ignore[attr-defined]
    _adopt_recorded_dimension(store, embedder)
    yield _dump({"format": FORMAT, "version": VERSION, "embedder": embedder})
    checksum = _Checksum()
    keys = sorted(set(users), key=lambda k: (k.app, k.user)) if users is not None else await store.users()
    for key in keys:
        entries = await _user_entries(store, key)
        summary.users += bool(entries)
        for start in range(0, len(entries), BATCH):
            batch = entries[start : start + BATCH]
            vectors = await store.vectors(key, [e.id for e in batch]) if with_vectors else {}
            for entry in batch:
                checksum.add(entry)
                yield encode_record(entry, vectors.get(entry.id))
    summary.count, summary.checksum = checksum.count, checksum.hexdigest()
    yield _dump({"end": FORMAT, "count": checksum.count, "checksum": summary.checksum})


# -- writing entries as they are -------------------------------------------------------


@dataclass
class ImportReport:
    """What an import (or a migration's copy) did."""

    added: int = 0
    updated: int = 0
    #: Already stored exactly so.
    unchanged: int = 0
    #: Stored in a version changed later than (or as late as) the file's: kept.
    kept: int = 0
    #: (line number, one sentence) of every line that was not imported.
    errors: list[tuple[int, str]] = field(default_factory=list)
    #: Problems with the file as a whole that lost nothing (a missing closing line…).
    warnings: list[str] = field(default_factory=list)
    #: Memories written without a vector (the target has no embedder): filled in
    #: the next time the store is opened with one.
    unembedded: int = 0

    @property
    def skipped(self) -> int:
        return self.unchanged + self.kept

    @property
    def lines_skipped(self) -> int:
        return len(self.errors)


def _last_change(entry: Entry) -> datetime:
    return max(entry.updated_at, entry.deleted_at or entry.updated_at)


def _decide(stored: Entry | None, incoming: Entry) -> str:
    if stored is None:
        return "added"
    if replace(stored, score=0.0) == incoming:
        return "unchanged"
    return "updated" if _last_change(incoming) > _last_change(stored) else "kept"


def _merged(first: dict[str, Any], rest: dict[str, Any]) -> dict[str, Any]:
    counts = {name: first["counts"][name] + rest["counts"][name] for name in first["counts"]}
    written = {**first["written"], **rest["written"]}
    return {"counts": counts, "written": written, "unembedded": first["unembedded"] + rest["unembedded"]}


class _Writer:
    """Writes entries verbatim into the target service's store, a batch of one
    user's entries per atomic section, and counts what it did."""

    def __init__(self, service: MemoryService, file_embedder: str | None, report: ImportReport) -> None:
        self.service, self.store, self.report = service, service.store, report
        self.file_embedder = file_embedder
        self.target_embedder: str | None = None
        #: What the target holds, per user (read once, kept up to date by our writes).
        self._stored: dict[UserKey, dict[str, Entry]] = {}
        #: Entries per atomic section: BATCH, halved after each failed section.
        self.section_size = BATCH

    async def start(self) -> None:
        await self.service.open()
        read_meta = getattr(self.store, "read_meta", None)
        self.target_embedder = await read_meta(META_EMBEDDER) if read_meta is not None else None

    @property
    def embeds(self) -> bool:
        return self.service.is_vector_store and self.service.has_embedder

    def usable(self, vector: list[float] | None) -> bool:
        """A vector from the source fits the target: same embedder, same dimension."""
        return (
            vector is not None
            and self.file_embedder is not None
            and self.file_embedder == self.target_embedder
            and len(vector) == getattr(self.store, "dimension", len(vector))
        )

    async def stored(self, key: UserKey) -> dict[str, Entry]:
        if key not in self._stored:
            self._stored[key] = {e.id: e for e in await self.store.list(key, include_deleted=True)}
        return self._stored[key]

    async def write(self, key: UserKey, items: Sequence[tuple[Entry, list[float] | None]]) -> None:
        stored = await self.stored(key)
        vectors: dict[str, list[float]] = {}
        to_embed: list[Entry] = []
        for entry, vector in items:
            before = stored.get(entry.id)
            if _decide(before, entry) not in ("added", "updated"):
                continue
            if self.usable(vector):
                vectors[entry.id] = vector  # type: ignore[assignment]
            elif before is None or before.memory.text != entry.memory.text:
                to_embed.append(entry)
        if to_embed and self.embeds:
            for start in range(0, len(to_embed), EMBED_BATCH):
                chunk = to_embed[start : start + EMBED_BATCH]
                made = await self.service.embed_texts([e.memory.text for e in chunk])
                vectors.update((e.id, v) for e, v in zip(chunk, made, strict=True))
        done = 0
        while done < len(items):
            chunk = items[done : done + self.section_size]
            outcome = await self._atomic(key, chunk, vectors)
            for name, count in outcome["counts"].items():
                setattr(self.report, name, getattr(self.report, name) + count)
            self.report.unembedded += outcome["unembedded"]
            stored.update(outcome["written"])
            done += len(chunk)

    async def _atomic(
        self, key: UserKey, items: Sequence[tuple[Entry, list[float] | None]], vectors: dict[str, list[float]]
    ) -> dict[str, Any]:
        """One section, run again after a lost connection or a timeout (a long
        migration outlives a server restart or a busy spell): it is all-or-nothing
        and decides every entry on what it reads, so running it twice writes once.
        After a failure the sections get smaller (for good): on a loaded server a
        smaller one fits the store's timeout."""
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                return await self.store.atomic(key, self._section(items, vectors))
            except BackendError:
                if attempt == WRITE_ATTEMPTS:
                    raise
                self.section_size = max(1, self.section_size // 2)
                await asyncio.sleep(RETRY_PAUSE_S * attempt)
                if len(items) > self.section_size:
                    first = await self._atomic(key, items[: self.section_size], vectors)
                    rest = await self._atomic(key, items[self.section_size :], vectors)
                    return _merged(first, rest)
        raise AssertionError("unreachable")

    def _section(
        self, items: Sequence[tuple[Entry, list[float] | None]], vectors: dict[str, list[float]]
    ) -> Callable[[Transaction], Any]:
        async def work(tx: Transaction) -> dict[str, Any]:
            # Decided again on what the section reads: another writer may have come first.
            counts = {"added": 0, "updated": 0, "unchanged": 0, "kept": 0}
            written: dict[str, Entry] = {}
            unembedded = 0
            for entry, _ in items:
                before = await tx.get(entry.id)
                decision = _decide(before, entry)
                counts[decision] += 1
                if decision in ("added", "updated"):
                    vector = vectors.get(entry.id)
                    new_text = before is None or before.memory.text != entry.memory.text
                    unembedded += vector is None and new_text
                    await tx.put(entry, vector)
                    written[entry.id] = entry
            return {"counts": counts, "written": written, "unembedded": unembedded}

        return work


# -- import ---------------------------------------------------------------------------


def _header(line: str) -> dict[str, Any]:
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


async def import_lines(
    service: MemoryService, lines: Iterable[str], *, batch_size: int = BATCH
) -> ImportReport:
    """Import an export (its lines, with or without newlines) into ``service``'s
    store; see the module docstring for what is added, updated or skipped.
    ``FileError`` when the first line is not the header; nothing is written then."""
    report = ImportReport()
    numbered = ((number, line.rstrip("\r\n")) for number, line in enumerate(lines, start=1))
    header: dict[str, Any] | None = None
    for _, line in numbered:
        if line.strip():
            header = _header(line)
            break
    if header is None:
        raise FileError("the file is empty: make it with `memchat memory export`")
    writer = _Writer(service, header["embedder"], report)
    await writer.start()
    pending: dict[UserKey, list[tuple[Entry, list[float] | None]]] = {}
    checksum = _Checksum()
    trailer: dict[str, Any] | None = None
    for number, line in numbered:
        if not line.strip():
            continue
        if trailer is not None:
            report.errors.append((number, "a line after the closing line"))
            continue
        try:
            data = _parse(line)
            if isinstance(data, dict) and "end" in data:
                trailer = data
                continue
            entry, vector = decode_data(data, service.max_text_length)
        except MemchatError as exc:
            report.errors.append((number, str(exc)))
            continue
        checksum.add(entry)
        batch = pending.setdefault(entry.key, [])
        batch.append((entry, vector))
        if len(batch) >= batch_size:
            await writer.write(entry.key, pending.pop(entry.key))
    for key, batch in pending.items():
        await writer.write(key, batch)
    if trailer is None:
        report.warnings.append("the file has no closing line: it may have been cut short")
    elif not report.errors and (
        trailer.get("count") != checksum.count or trailer.get("checksum") != checksum.hexdigest()
    ):
        report.warnings.append(
            f"the file's closing line promises {trailer.get('count')} memories with another checksum "
            f"than the {checksum.count} read: it may have been edited or cut short"
        )
    return report


# -- migrate ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MigrationProgress:
    """``done`` of ``total`` memories copied."""

    done: int
    total: int

    @property
    def percent(self) -> int:
        return 100 if self.total <= 0 else min(100, self.done * 100 // self.total)


@dataclass
class MigrationReport:
    copy: ImportReport = field(default_factory=ImportReport)
    users: int = 0
    source_count: int = 0
    #: How many of the source's memories the target holds afterwards.
    target_count: int = 0
    source_checksum: str = ""
    target_checksum: str = ""
    #: The source's vectors were copied (same embedder) rather than made again.
    vectors_copied: bool = False

    @property
    def verified(self) -> bool:
        return self.source_count == self.target_count and self.source_checksum == self.target_checksum


async def _report(progress: Callable[[MigrationProgress], Any] | None, state: MigrationProgress) -> None:
    if progress is not None:
        result = progress(state)
        if inspect.isawaitable(result):
            await result


async def migrate(
    source: Store,
    target: MemoryService,
    *,
    batch_size: int = BATCH,
    progress: Callable[[MigrationProgress], Any] | None = None,
) -> MigrationReport:
    """Copy every user's memories (tombstones included) from ``source`` (opened
    here; only read) into ``target``'s store, by ``import_lines``' rules, then
    read them back from the target and compare count and checksum. Vectors are
    copied when both stores' vectors come from the same embedder, else the
    target's embedder makes them."""
    await source.open()
    read_meta = getattr(source, "read_meta", None)
    source_embedder = await read_meta(META_EMBEDDER) if read_meta is not None else None
    _adopt_recorded_dimension(source, source_embedder)
    report = MigrationReport()
    writer = _Writer(target, source_embedder, report.copy)
    await writer.start()
    report.vectors_copied = source_embedder is not None and source_embedder == writer.target_embedder
    keys = await source.users()
    total = sum([await source.count(key, include_deleted=True) for key in keys])
    await _report(progress, MigrationProgress(0, total))
    source_sum, target_sum = _Checksum(), _Checksum()
    done = 0
    for key in keys:
        entries = await _user_entries(source, key)
        report.users += bool(entries)
        for start in range(0, len(entries), batch_size):
            batch = entries[start : start + batch_size]
            vectors = await source.vectors(key, [e.id for e in batch]) if report.vectors_copied else {}
            for entry in batch:
                source_sum.add(entry)
            await writer.write(key, [(e, vectors.get(e.id)) for e in batch])
            done += len(batch)
            await _report(progress, MigrationProgress(min(done, max(total, done)), max(total, done)))
        copied = {e.id: e for e in await target.store.list(key, include_deleted=True)}
        for entry in entries:
            if entry.id in copied:
                target_sum.add(copied[entry.id])
    report.source_count, report.target_count = source_sum.count, target_sum.count
    report.source_checksum, report.target_checksum = source_sum.hexdigest(), target_sum.hexdigest()
    return report
