"""Memory portability: export to JSONL, import from it, and migrate between stores.

The file format (``memchat-memories`` version 1, one JSON object per line) is
engine/export_format.py's. Nothing in a line depends on the backend or on when
it was written, so export → import → export gives the same file on every backend.

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
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, cast

from .export_format import (
    FORMAT,
    VERSION,
    Checksum,
    FileError,
    decode_data,
    decode_record,
    dump,
    encode_record,
    parse_header,
    parse_line,
)
from .model import BackendError, Entry, MemchatError, UserKey
from .vectors import META_EMBEDDER, DoneOfTotal, report_progress

if TYPE_CHECKING:
    from .service import MemoryService
    from .store import Store, Transaction, VectorStore

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

# -- export -------------------------------------------------------------------------


@dataclass
class ExportSummary:
    """Filled in while ``export_lines`` runs: what the file holds."""

    count: int = 0
    users: int = 0
    checksum: str = ""


def _adopt_recorded_dimension(store: Store, recorded: str | None) -> None:
    """Read vectors in the dimension their embedder made them: a store that takes any
    dimension was given the current embedder's, which may be another model's."""
    if not recorded or getattr(store, "fixed_dimension", True):
        return
    with contextlib.suppress(ValueError, KeyError, TypeError):
        cast("VectorStore", store).dimension = int(json.loads(recorded)["dimension"])


async def _read_embedder(store: Store) -> str | None:
    """The identity of the embedder that made the store's vectors (None: not recorded)."""
    if not hasattr(store, "read_meta"):
        return None
    return await cast("VectorStore", store).read_meta(META_EMBEDDER)


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
    embedder = await _read_embedder(store) if with_vectors else None
    _adopt_recorded_dimension(store, embedder)
    yield dump({"format": FORMAT, "version": VERSION, "embedder": embedder})
    checksum = Checksum()
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
    yield dump({"end": FORMAT, "count": checksum.count, "checksum": summary.checksum})


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


_DECISIONS = ("added", "updated", "unchanged", "kept")


@dataclass
class _Outcome:
    """What one atomic section did: entries per decision, the entries written,
    and how many of them were written without a vector."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(_DECISIONS, 0))
    written: dict[str, Entry] = field(default_factory=dict)
    unembedded: int = 0

    def merged(self, rest: _Outcome) -> _Outcome:
        counts = {name: self.counts[name] + rest.counts[name] for name in self.counts}
        return _Outcome(counts, {**self.written, **rest.written}, self.unembedded + rest.unembedded)


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
        self.target_embedder = await _read_embedder(self.store)

    @property
    def embeds(self) -> bool:
        return self.service.is_vector_store and self.service.has_embedder

    def usable(self, vector: list[float]) -> bool:
        """A vector from the source fits the target: same embedder, same dimension."""
        return (
            self.file_embedder is not None
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
            if vector is not None and self.usable(vector):
                vectors[entry.id] = vector
            elif before is None or before.memory.text != entry.memory.text:
                to_embed.append(entry)
        if to_embed and self.embeds:
            for start in range(0, len(to_embed), EMBED_BATCH):
                chunk = to_embed[start : start + EMBED_BATCH]
                made = await self.service.embed_texts([e.memory.text for e in chunk])
                vectors.update((e.id, v) for e, v in zip(chunk, made, strict=True))
        done = 0
        while done < len(items):
            section = items[done : done + self.section_size]
            outcome = await self._atomic(key, section, vectors)
            for name, count in outcome.counts.items():
                setattr(self.report, name, getattr(self.report, name) + count)
            self.report.unembedded += outcome.unembedded
            stored.update(outcome.written)
            done += len(section)

    async def _atomic(
        self, key: UserKey, items: Sequence[tuple[Entry, list[float] | None]], vectors: dict[str, list[float]]
    ) -> _Outcome:
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
                    return first.merged(rest)
        raise AssertionError("unreachable")

    def _section(
        self, items: Sequence[tuple[Entry, list[float] | None]], vectors: dict[str, list[float]]
    ) -> Callable[[Transaction], Awaitable[_Outcome]]:
        async def work(tx: Transaction) -> _Outcome:
            # Decided again on what the section reads: another writer may have come first.
            outcome = _Outcome()
            for entry, _ in items:
                before = await tx.get(entry.id)
                decision = _decide(before, entry)
                outcome.counts[decision] += 1
                if decision in ("added", "updated"):
                    vector = vectors.get(entry.id)
                    new_text = before is None or before.memory.text != entry.memory.text
                    outcome.unembedded += vector is None and new_text
                    await tx.put(entry, vector)
                    outcome.written[entry.id] = entry
            return outcome

        return work


# -- import ---------------------------------------------------------------------------


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
            header = parse_header(line)
            break
    if header is None:
        raise FileError("the file is empty: make it with `memchat memory export`")
    writer = _Writer(service, header["embedder"], report)
    await writer.start()
    pending: dict[UserKey, list[tuple[Entry, list[float] | None]]] = {}
    checksum = Checksum()
    trailer: dict[str, Any] | None = None
    for number, line in numbered:
        if not line.strip():
            continue
        if trailer is not None:
            report.errors.append((number, "a line after the closing line"))
            continue
        try:
            data = parse_line(line)
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
class MigrationProgress(DoneOfTotal):
    """``done`` of ``total`` memories copied."""

    done: int
    total: int


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


async def migrate(
    source: Store,
    target: MemoryService,
    *,
    batch_size: int = BATCH,
    progress: Callable[[MigrationProgress], object] | None = None,
) -> MigrationReport:
    """Copy every user's memories (tombstones included) from ``source`` (opened
    here; only read) into ``target``'s store, by ``import_lines``' rules, then
    read them back from the target and compare count and checksum. Vectors are
    copied when both stores' vectors come from the same embedder, else the
    target's embedder makes them."""
    await source.open()
    source_embedder = await _read_embedder(source)
    _adopt_recorded_dimension(source, source_embedder)
    report = MigrationReport()
    writer = _Writer(target, source_embedder, report.copy)
    await writer.start()
    report.vectors_copied = source_embedder is not None and source_embedder == writer.target_embedder
    keys = await source.users()
    total = sum([await source.count(key, include_deleted=True) for key in keys])
    await report_progress(progress, MigrationProgress(0, total))
    source_sum, target_sum = Checksum(), Checksum()
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
            await report_progress(progress, MigrationProgress(min(done, max(total, done)), max(total, done)))
        copied = {e.id: e for e in await target.store.list(key, include_deleted=True)}
        for entry in entries:
            if entry.id in copied:
                target_sum.add(copied[entry.id])
    report.source_count, report.target_count = source_sum.count, target_sum.count
    report.source_checksum, report.target_checksum = source_sum.hexdigest(), target_sum.hexdigest()
    return report
