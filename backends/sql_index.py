"""The SQL stores' inverted index for keyword search (memchat/engine/search/index.py).

Two tables beside the memories table, written in the same transaction as
every change to a memory:

* ``<table>_terms`` (app_name, user_id, term, memory_id): one row per distinct
  term of each *active* memory (primary key = the posting list's order, so
  "who holds these terms" and "how many hold each" are index range scans);
* ``<table>_stats`` (app_name, user_id): the user's active count and the four
  length sums keyword scoring needs.

A search then reads the memories holding one of the query's terms and two
small aggregates instead of every row of the user. The terms are the engine's
(same tokenisation on every backend), so the ranking equals a full scan's.

A store made before the index existed is indexed on open, user by user, each
user inside its own write section (serialised with that user's writers in any
process); until that finishes the store's searches scan as before. The index
version is recorded in the meta table; a version of memchat that does not know
the index ignores these tables (downgrade-safe), and if it added or deleted
memories meanwhile, the active count no longer matches and the next open
re-indexes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from memchat.engine.model import Entry, UserKey
from memchat.engine.search.index import INDEX_VERSION, KeywordStats, index_record

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["INDEX_META", "SQLKeywordIndex"]

#: Meta-table entry holding the index version this table's index was built with.
INDEX_META = "keyword_index"
#: Longest term stored as itself; longer ones are stored as a prefix and a hash.
MAX_TERM = 120
_LENGTHS = ("k_content", "k_topics", "s_content", "s_topics")


def term_key(term: str) -> str:
    """The stored form of a term (long ones shortened, unambiguously)."""
    if len(term) <= MAX_TERM:
        return term
    digest = hashlib.sha1(term.encode("utf-8"), usedforsecurity=False).hexdigest()
    return f"{term[: MAX_TERM - 42]}#{digest}"


class SQLKeywordIndex:
    """The two tables and the statements that keep and read them."""

    def __init__(
        self,
        metadata: sa.MetaData,
        table: sa.Table,
        *,
        short_identifier: Any,
        schema: str | None = None,
        **table_options: Any,
    ) -> None:
        self.table = table
        name = table.name
        self.terms = sa.Table(
            short_identifier(f"{name}_terms"),
            metadata,
            sa.Column("app_name", sa.String(255), primary_key=True),
            sa.Column("user_id", sa.String(255), primary_key=True),
            sa.Column("term", sa.String(128), primary_key=True),
            sa.Column("memory_id", sa.String(64), primary_key=True),
            sa.Index(short_identifier(f"idx_{name}_terms_memory"), "app_name", "user_id", "memory_id"),
            schema=schema,
            **table_options,
        )
        self.stats = sa.Table(
            short_identifier(f"{name}_stats"),
            metadata,
            sa.Column("app_name", sa.String(255), primary_key=True),
            sa.Column("user_id", sa.String(255), primary_key=True),
            sa.Column("active", sa.BigInteger, nullable=False),
            *(sa.Column(column, sa.BigInteger, nullable=False) for column in _LENGTHS),
            # Bumped by every write of the user, in its transaction: what a cached
            # vector matrix is checked against (one primary-key read, no scan).
            sa.Column("version", sa.BigInteger, nullable=False),
            schema=schema,
            **table_options,
        )

    def _user(self, table: sa.Table, key: UserKey) -> sa.ColumnElement[bool]:
        return sa.and_(table.c.app_name == key.app, table.c.user_id == key.user)

    # -- writes ------------------------------------------------------------

    async def replace(
        self,
        conn: AsyncConnection,
        key: UserKey,
        memory_id: str,
        old: Entry | None,
        new: Entry | None,
        *,
        versions: bool = True,
    ) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """The memory was ``old`` and is now ``new`` (None: gone; tombstones hold no
        postings). Returns the user's (version, active count) before and after, or
        None without ``versions`` (one statement fewer: nothing needs them)."""
        before = index_record(old.memory) if old is not None and not old.is_deleted else None
        after = index_record(new.memory) if new is not None and not new.is_deleted else None
        if before == after:
            return await self._add_stats(conn, key, [0, 0, 0, 0, 0], versions=versions)
        if before is not None:
            await conn.execute(
                sa.delete(self.terms).where(self._user(self.terms, key), self.terms.c.memory_id == memory_id)
            )
        if after is not None:
            rows = [
                {"app_name": key.app, "user_id": key.user, "term": t, "memory_id": memory_id}
                for t in dict.fromkeys(term_key(term) for term in after.terms)
            ]
            if rows:  # a memory without a term ("0", "!!") still counts in the statistics
                await conn.execute(sa.insert(self.terms), rows)
        delta = [0, 0, 0, 0, 0]
        for record, sign in ((before, -1), (after, 1)):
            if record is not None:
                delta[0] += sign
                for i, n in enumerate(record.lengths):
                    delta[i + 1] += sign * n
        return await self._add_stats(conn, key, delta, versions=versions)

    async def _add_stats(
        self,
        conn: AsyncConnection,
        key: UserKey,
        delta: Sequence[int],
        *,
        reset: bool = False,
        versions: bool = True,
    ) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """Add ``delta`` (active, four lengths) to the user's statistics (``reset``:
        start from zero) and bump the version. Writers of a user are serialised, so
        read-then-write is safe. Returns ((version, active) before, after), or None
        without ``versions`` (then one UPDATE, or an INSERT for a new user)."""
        s = self.stats
        columns = ("active", *_LENGTHS)
        if not versions and not reset:
            changes = {c: s.c[c] + d for c, d in zip(columns, delta, strict=True)}
            changes["version"] = s.c.version + 1
            result = await conn.execute(sa.update(s).where(self._user(s, key)).values(changes))
            if result.rowcount == 0:  # the user's first write
                values = dict(zip(columns, delta, strict=True))
                await conn.execute(
                    sa.insert(s).values(app_name=key.app, user_id=key.user, version=1, **values)
                )
            return None
        row = (await conn.execute(sa.select(s).where(self._user(s, key)))).first()
        old = [0] * 6 if row is None else [int(row._mapping[c]) for c in (*columns, "version")]
        base = [0] * 5 if reset else old[:5]
        values = {c: b + d for c, b, d in zip(columns, base, delta, strict=True)}
        values["version"] = old[5] + 1
        if row is None:
            await conn.execute(sa.insert(s).values(app_name=key.app, user_id=key.user, **values))
        else:
            await conn.execute(sa.update(s).where(self._user(s, key)).values(values))
        return (old[5], old[0]), (values["version"], values["active"])

    async def clear(self, conn: AsyncConnection, key: UserKey) -> None:
        """The user has no active memory any more (the version moves on)."""
        await conn.execute(sa.delete(self.terms).where(self._user(self.terms, key)))
        await self._add_stats(conn, key, [0, 0, 0, 0, 0], reset=True)

    async def signature(self, conn: AsyncConnection, key: UserKey) -> tuple[int, int]:
        """The user's (version, active count): changes with every write."""
        s = self.stats
        row = (await conn.execute(sa.select(s.c.version, s.c.active).where(self._user(s, key)))).first()
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    async def rebuild_user(self, conn: AsyncConnection, key: UserKey, entries: Sequence[Entry]) -> None:
        """Index the user's active ``entries`` from scratch."""
        await conn.execute(sa.delete(self.terms).where(self._user(self.terms, key)))
        rows: list[dict[str, str]] = []
        totals = [0, 0, 0, 0, 0]
        for entry in entries:
            if entry.is_deleted:
                continue
            record = index_record(entry.memory)
            totals[0] += 1
            for i, n in enumerate(record.lengths):
                totals[i + 1] += n
            rows.extend(
                {"app_name": key.app, "user_id": key.user, "term": t, "memory_id": entry.id}
                for t in dict.fromkeys(term_key(term) for term in record.terms)
            )
            if len(rows) >= 5000:
                await conn.execute(sa.insert(self.terms), rows)
                rows = []
        if rows:
            await conn.execute(sa.insert(self.terms), rows)
        await self._add_stats(conn, key, totals, reset=True)

    # -- reads -------------------------------------------------------------

    async def lookup(
        self, conn: AsyncConnection, key: UserKey, space: str, terms: Sequence[str]
    ) -> tuple[Any, KeywordStats]:
        """(a SELECT of the ``memory_id`` values holding one of ``terms``, the user's
        statistics). Every holder is a candidate, so the scorer counts each term's
        document frequency among the candidates itself."""
        t, s = self.terms, self.stats
        row = (await conn.execute(sa.select(s).where(self._user(s, key)))).first()
        count, lengths = 0, [0, 0, 0, 0]
        if row is not None:
            count, lengths = row.active, [row._mapping[c] for c in _LENGTHS]
        stored = list(dict.fromkeys(term_key(term) for term in terms))
        holders = sa.select(t.c.memory_id).where(self._user(t, key), t.c.term.in_(stored))
        return holders, KeywordStats.of(space, count, lengths)

    async def active_counts_match(self, conn: AsyncConnection) -> bool:
        """Whether the recorded active counts add up to the table's (a writer that
        did not keep the index, e.g. an older memchat, makes them differ)."""
        recorded = (
            await conn.execute(sa.select(sa.func.coalesce(sa.func.sum(self.stats.c.active), 0)))
        ).scalar()
        actual = (
            await conn.execute(
                sa.select(sa.func.count()).select_from(self.table).where(self.table.c.deleted_at.is_(None))
            )
        ).scalar()
        return int(recorded or 0) == int(actual or 0)

    @staticmethod
    def version() -> str:
        return str(INDEX_VERSION)
