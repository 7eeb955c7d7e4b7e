"""The SQL stores' inverted index for keyword search (memchat/engine/search/index.py).

Three tables beside the memories table, written in the same transaction as
every change to a memory:

* ``<table>_documents`` (app_name, user_id, doc, memory_id, updated_at,
  created_at): each *active* memory's number among its user's (the next after
  the user's highest, so a number freed by the highest memory's removal may be
  given again), and its two times, kept with every write: a search whose
  candidate limit cuts through holders of equal rank cuts them newest first, as
  results order equal scores, reading their times from this small table
  rather than from the memories' rows (at 100k memories on MariaDB, when
  the rows still held the vectors, 700 of them took 30–100 ms);
* ``<table>_doc_postings`` (app_name, user_id, term, doc, four counts): one row
  per distinct term of each active memory (primary key = the posting list's
  order, so "who holds these terms" is an index range scan). Numbers, not the
  64-character memory IDs: a common term's 40k postings at 100k memories cross
  from the server as a fifth of the text, and need no ID → slot mapping in
  Python (the first read of such a term took 45–60 ms, most of a search's p95);
* ``<table>_stats`` (app_name, user_id): the user's active count and the four
  length sums keyword scoring needs.

A search then reads the user's statistics row (with its ``version``, bumped by
every write), the postings of the query's terms — only those it has not read at
that version (``_sql_postings``) —, ranks their holders in numpy
(``CandidatePlan.choose``), names the best ones' numbers (``_documents``) and reads
their rows, instead of every
row of the user. The terms are the engine's (same tokenisation on every
backend), so the ranking equals a full scan's.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import sqlalchemy as sa

from memchat.engine.model import Entry, UserKey, to_micros
from memchat.engine.search.index import INDEX_VERSION, IndexRecord, KeywordStats, index_record

from ._sql_postings import PostingChange, PostingsCache, UserPostings

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from memchat.engine.search.candidates import KeywordPlanner

__all__ = ["INDEX_META", "TABLE_SUFFIXES", "SQLKeywordIndex", "UserStats"]

#: Meta-table entry holding the index version this table's index was built with.
INDEX_META = "keyword_index"
#: Longest term stored as itself; longer ones are stored as a prefix and a hash.
MAX_TERM = 120
_LENGTHS = ("k_content", "k_topics", "s_content", "s_topics")
_POSTING_COUNTS = ("tf_content", "tf_topics", "content_length", "topic_length")
#: The layout of the tables (1: postings by memory ID; 2: by document number;
#: 3: the documents' times beside their numbers).
LAYOUT = 3
#: The tables the index keeps beside a memories table ``<name>``, as ``<name><suffix>``:
#: this layout's, then older ones' ("_docs": layout 2, "_postings": layout 1,
#: "_terms": index version 1).
TABLE_SUFFIXES = ("_doc_postings", "_documents", "_stats", "_docs", "_postings", "_terms")


def _doc_times(entry: Entry) -> dict[str, int]:
    """The memory's times as its ``_documents`` row holds them (µs, as its own row)."""
    return {"updated_at": to_micros(entry.updated_at), "created_at": to_micros(entry.created_at)}


def _time_pair(times: Mapping[str, int] | None) -> tuple[int, int] | None:
    """``_doc_times`` as the postings cache keeps them: (updated_at, created_at)."""
    return None if times is None else (times["updated_at"], times["created_at"])


def _posting_counts(record: IndexRecord | None) -> dict[str, tuple[int, ...]]:
    """Stored term → the four counts of its posting (none for no record)."""
    counts: dict[str, tuple[int, ...]] = {}
    if record is not None:
        for term, *values in record.postings():
            counts.setdefault(term_key(term), tuple(values))
    return counts


def _posting_rows(key: UserKey, doc: int, counts: Mapping[str, Sequence[int]]) -> list[dict[str, Any]]:
    return [
        {
            "app_name": key.app,
            "user_id": key.user,
            "term": stored,
            "doc": doc,
            **dict(zip(_POSTING_COUNTS, values, strict=True)),
        }
        for stored, values in counts.items()
    ]


@dataclass(frozen=True, slots=True)
class UserStats:
    """One user's row of ``<table>_stats``."""

    #: Bumped by every write of the user (see ``SQLKeywordIndex.stats``).
    version: int
    active: int
    #: The four length sums, in ``_LENGTHS`` order.
    lengths: tuple[int, ...]


#: A posting's two counts of one field packed in one integer: tf << 32 | length.
_HIGH = 1 << 32


#: Separates the (number, memory ID) pairs of aggregated names: no memory ID holds a
#: control character (engine/validation.py), and one that does anyway is caught by
#: the count check (``_named``) and read row by row.
_ID_SEPARATOR = "\x1f"


def _named(count: int, joined: str | None) -> dict[int, str] | None:
    """Aggregated names ("doc memory_id" joined by ``_ID_SEPARATOR``) as doc → memory
    ID; None when they do not add up to ``count``."""
    if count == 0:
        return {}
    pairs = (joined or "").split(_ID_SEPARATOR)
    if len(pairs) != count:
        return None
    found = {}
    for pair in pairs:
        doc, _, memory_id = pair.partition(" ")
        found[int(doc)] = memory_id
    return found


def _by_term(rows: Sequence[Any], terms: int) -> list[tuple[Any, Any]]:
    """Posting rows (term number, doc, four counts) as each term's (docs array,
    counts array), for term numbers 0 … ``terms`` - 1."""
    grouped: list[tuple[list[int], list[Any]]] = [([], []) for _ in range(terms)]
    for which, doc, *counts in rows:
        docs, rest = grouped[which]
        docs.append(int(doc))
        rest.append(counts)
    return [
        (np.array(docs, dtype=np.int64), np.array(rest, dtype=np.float64).reshape(len(docs), 4))
        for docs, rest in grouped
    ]


def _unpack(row: Any) -> tuple[Any, Any] | None:
    """One term's aggregated postings (term number, holder count, then either one
    string joining each posting's "doc content topics", or three strings joining
    the docs, the contents and the topics apart; a field's two counts packed as
    "tf << 32 | length") as (docs array, counts array); None when the parts do not
    add up to the count (a server that cut a long aggregate short)."""
    _, count, *joined = row
    count = int(count or 0)
    if count == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 4), dtype=np.float64)
    if not all(joined):
        return None
    if len(joined) == 1:
        numbers = np.fromstring(joined[0], dtype=np.int64, sep=" ")
        if len(numbers) != 3 * count:
            return None
        numbers = numbers.reshape(count, 3)
        docs, content, topics = numbers[:, 0], numbers[:, 1], numbers[:, 2]
    else:
        docs, content, topics = (np.fromstring(part, dtype=np.int64, sep=" ") for part in joined)
        if not len(docs) == len(content) == len(topics) == count:
            return None
    counts = np.empty((count, 4), dtype=np.float64)
    counts[:, 0], counts[:, 2] = np.divmod(content, _HIGH)
    counts[:, 1], counts[:, 3] = np.divmod(topics, _HIGH)
    return docs, counts


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
        postings_apart: bool = False,
        **table_options: Any,
    ) -> None:
        self.table = table
        #: Aggregate a term's docs and counts as three strings (see _packed_postings).
        self.postings_apart = postings_apart
        name = table.name
        # Layout 3: the "_doc_postings" and "_documents" tables. The "_docs" (layout
        # 2), "_terms" (index version 1) and "_postings" (layout 1) tables of an older
        # memchat are left to it.
        self.docs = sa.Table(
            short_identifier(f"{name}_documents"),
            metadata,
            sa.Column("app_name", sa.String(255), nullable=False),
            sa.Column("user_id", sa.String(255), nullable=False),
            sa.Column("doc", sa.Integer, nullable=False),
            sa.Column("memory_id", sa.String(64), nullable=False),
            # The memory's row's two times (µs), as ``Entry.newest_first`` reads them.
            sa.Column("updated_at", sa.BigInteger, nullable=False),
            sa.Column("created_at", sa.BigInteger, nullable=False),
            sa.PrimaryKeyConstraint("app_name", "user_id", "doc"),
            sa.Index(
                short_identifier(f"{name}_documents_memory"), "app_name", "user_id", "memory_id", unique=True
            ),
            schema=schema,
            sqlite_with_rowid=False,
            **table_options,
        )
        self.terms = sa.Table(
            short_identifier(f"{name}_doc_postings"),
            metadata,
            sa.Column("app_name", sa.String(255), nullable=False),
            sa.Column("user_id", sa.String(255), nullable=False),
            sa.Column("term", sa.String(128), nullable=False),
            sa.Column("doc", sa.Integer, nullable=False),
            # The term's count in the content and the topics, and the memory's two
            # lengths in the term's space: what BM25 needs to rank the holders.
            *(sa.Column(c, sa.Integer, nullable=False) for c in _POSTING_COUNTS),
            # PostgreSQL: the counts ride in the key's index (INCLUDE), so a term's
            # postings are an index-only range scan. Its heap is in write order: a
            # common term's 40k postings sat on 27k pages (160 ms against 15 ms).
            sa.PrimaryKeyConstraint(
                "app_name", "user_id", "term", "doc", postgresql_include=list(_POSTING_COUNTS)
            ),
            # No index by memory: a memory's postings are deleted by their primary
            # keys (its old terms are known), and with one a planner without table
            # statistics (SQLite) read every posting of the user to group by memory.
            schema=schema,
            # SQLite: the rows live in the primary key's b-tree, so a term's postings
            # are read with their counts in one range scan.
            sqlite_with_rowid=False,
            **table_options,
        )
        #: The postings read per user at the user's version (``_sql_postings``).
        self.postings = PostingsCache()
        #: The postings statement per number of query terms (``_postings``).
        self._postings_statements: dict[int, Any] = {}
        self._packed_statements: dict[int, Any] = {}
        stats = self.stats = sa.Table(
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
        self._stats_statement = sa.select(stats).where(
            stats.c.app_name == sa.bindparam("app"), stats.c.user_id == sa.bindparam("user")
        )
        docs = self.docs
        of_user = sa.and_(docs.c.app_name == sa.bindparam("app"), docs.c.user_id == sa.bindparam("user"))
        self._numbers_statement = sa.select(
            sa.select(docs.c.doc)
            .where(of_user, docs.c.memory_id == sa.bindparam("memory_id"))
            .scalar_subquery(),
            sa.select(sa.func.max(docs.c.doc)).where(of_user).scalar_subquery(),
        )
        numbered = docs.c.doc.in_(sa.bindparam("docs", expanding=True))
        self._names_statement = sa.select(docs.c.doc, docs.c.memory_id).where(of_user, numbered)
        # One row, as for the postings (_packed_postings): a search names up to a few
        # hundred numbers, and MariaDB's driver made each row an object in Python.
        named = sa.cast(docs.c.doc, sa.String) + sa.literal_column("' '", sa.String) + docs.c.memory_id
        self._packed_names_statement = sa.select(
            sa.func.count(), sa.func.aggregate_strings(named, _ID_SEPARATOR)
        ).where(of_user, numbered)
        # The times of numbered memories ("doc updated_at created_at", one row): a
        # search whose candidate limit cuts a tie cuts it newest first, as results
        # order equal scores, so the engine need not read the ones left out.
        space = sa.literal_column("' '", sa.String)
        timed = (
            sa.cast(docs.c.doc, sa.String)
            + space
            + sa.cast(docs.c.updated_at, sa.String)
            + space
            + sa.cast(docs.c.created_at, sa.String)
        )
        self._packed_times_statement = sa.select(
            sa.func.count(), sa.func.aggregate_strings(timed, " ")
        ).where(of_user, numbered)

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
        changes: list[PostingChange] | None = None,
    ) -> tuple[tuple[int, int], tuple[int, int]] | None:
        """The memory was ``old`` and is now ``new`` (None: gone; tombstones hold no
        postings). Returns the user's (version, active count) before and after, or
        None without ``versions`` (one statement fewer: nothing needs them).
        ``changes`` is told the memory's postings before and after (the write
        section brings this process's cached postings along with them)."""
        before = index_record(old.memory) if old is not None and not old.is_deleted else None
        after = index_record(new.memory) if new is not None and not new.is_deleted else None
        times = _doc_times(new) if new is not None and after is not None else None
        if before is None and after is None:
            return await self._add_stats(conn, key, [0, 0, 0, 0, 0], versions=versions)
        t, d = self.terms, self.docs
        doc, highest = await self._numbers(conn, key, memory_id)
        # The memory's new times on its number (kept with every write that leaves it active).
        retimed = None
        if doc is not None and times is not None:
            retimed = sa.update(d).where(self._user(d, key), d.c.doc == doc).values(times)
        if before == after:
            # The same postings (the same text again, or other metadata): only the
            # times move, and with them the memory's place in a tie.
            if retimed is not None:
                assert doc is not None and times is not None
                await conn.execute(retimed)
                if changes is not None:
                    changes.append(PostingChange(doc, memory_id, {}, {}, _time_pair(times)))
            return await self._add_stats(conn, key, [0, 0, 0, 0, 0], versions=versions)
        after_counts = _posting_counts(after)
        if doc is None and times is not None:
            # Writers of a user are serialised: no other write takes this number meanwhile.
            doc = highest + 1
            await conn.execute(
                sa.insert(d).values(app_name=key.app, user_id=key.user, doc=doc, memory_id=memory_id, **times)
            )
        elif retimed is not None:
            await conn.execute(retimed)
        if doc is not None:
            if changes is not None:
                changes.append(
                    PostingChange(doc, memory_id, _posting_counts(before), after_counts, _time_pair(times))
                )
            if before is not None:
                old_terms = list(dict.fromkeys(term_key(term) for term in before.terms))
                for start in range(0, len(old_terms), 500):
                    chunk = old_terms[start : start + 500]
                    await conn.execute(
                        sa.delete(t).where(self._user(t, key), t.c.term.in_(chunk), t.c.doc == doc)
                    )
            if after is None:
                await conn.execute(sa.delete(d).where(self._user(d, key), d.c.doc == doc))
            else:
                rows = _posting_rows(key, doc, after_counts)
                if rows:  # a memory without a term ("0", "!!") still counts in the statistics
                    await conn.execute(sa.insert(t), rows)
        delta = [0, 0, 0, 0, 0]
        for record, sign in ((before, -1), (after, 1)):
            if record is not None:
                delta[0] += sign
                for i, n in enumerate(record.lengths):
                    delta[i + 1] += sign * n
        return await self._add_stats(conn, key, delta, versions=versions)

    async def _numbers(self, conn: AsyncConnection, key: UserKey, memory_id: str) -> tuple[int | None, int]:
        """(the memory's document number, None without one; the user's highest, 0 for none)."""
        row = (
            await conn.execute(
                self._numbers_statement, {"app": key.app, "user": key.user, "memory_id": memory_id}
            )
        ).one()
        return (None if row[0] is None else int(row[0])), int(row[1] or 0)

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
        await conn.execute(sa.delete(self.docs).where(self._user(self.docs, key)))
        await self._add_stats(conn, key, [0, 0, 0, 0, 0], reset=True)

    async def user_stats(self, conn: AsyncConnection, key: UserKey) -> UserStats:
        """The user's statistics row (zeros for a user never written)."""
        row = (await conn.execute(self._stats_statement, {"app": key.app, "user": key.user})).first()
        if row is None:
            return UserStats(0, 0, (0, 0, 0, 0))
        return UserStats(int(row.version), int(row.active), tuple(int(row._mapping[c]) for c in _LENGTHS))

    async def signature(self, conn: AsyncConnection, key: UserKey) -> tuple[int, int]:
        """The user's (version, active count): changes with every write."""
        s = self.stats
        row = (await conn.execute(sa.select(s.c.version, s.c.active).where(self._user(s, key)))).first()
        return (0, 0) if row is None else (int(row[0]), int(row[1]))

    async def rebuild_user(self, conn: AsyncConnection, key: UserKey, entries: Sequence[Entry]) -> None:
        """Index the user's active ``entries`` from scratch."""
        await conn.execute(sa.delete(self.terms).where(self._user(self.terms, key)))
        await conn.execute(sa.delete(self.docs).where(self._user(self.docs, key)))
        rows: list[dict[str, Any]] = []
        numbered: list[dict[str, Any]] = []
        totals = [0, 0, 0, 0, 0]
        for entry in entries:
            if entry.is_deleted:
                continue
            record = index_record(entry.memory)
            totals[0] += 1
            for i, n in enumerate(record.lengths):
                totals[i + 1] += n
            doc = totals[0]
            numbered.append(
                {
                    "app_name": key.app,
                    "user_id": key.user,
                    "doc": doc,
                    "memory_id": entry.id,
                    **_doc_times(entry),
                }
            )
            rows.extend(_posting_rows(key, doc, _posting_counts(record)))
            if len(rows) >= 5000:
                await conn.execute(sa.insert(self.terms), rows)
                rows = []
            if len(numbered) >= 5000:
                await conn.execute(sa.insert(self.docs), numbered)
                numbered = []
        for table, batch in ((self.terms, rows), (self.docs, numbered)):
            if batch:
                await conn.execute(sa.insert(table), batch)
        await self._add_stats(conn, key, totals, reset=True)

    # -- reads -------------------------------------------------------------

    async def lookup(
        self,
        conn: AsyncConnection,
        key: UserKey,
        space: str,
        terms: Sequence[str],
        planner: KeywordPlanner | None,
        user: UserStats,
    ) -> tuple[Any, KeywordStats]:
        """(the ``memory_id`` values of the candidates — a SELECT, or a list when
        ranked —, the statistics from ``user``). Without a ``planner`` every holder of a
        term is a candidate and the scorer counts document frequencies itself; with
        one, the statistics carry them and only the best-ranked holders come back."""
        t = self.terms
        count, lengths = user.active, user.lengths
        stored = {term: term_key(term) for term in terms}
        wanted = list(dict.fromkeys(stored.values()))
        if planner is None:
            d = self.docs
            numbers = sa.select(t.c.doc).where(self._user(t, key), t.c.term.in_(wanted))
            matching = sa.select(d.c.memory_id).where(self._user(d, key), d.c.doc.in_(numbers))
            return matching, KeywordStats.of(space, count, lengths)
        # The postings of the query's terms (those not read at this version yet: one
        # statement), ranked here in numpy (CandidatePlan.choose): counting each term's
        # holders and ranking them in SQL took two statements a query, the second one
        # built and evaluated afresh each time.
        known = self.postings.at(key, user.version)
        # Taken before the read: a write of this process may bring ``known`` to its
        # next version while the read is under way (it replaces a term's arrays, never
        # changes them; a number it frees and gives again names a memory the engine
        # then scores as it reads it).
        parts = {term: postings for term in wanted if (postings := known.get(term)) is not None}
        missing = [term for term in wanted if term not in parts]
        if missing:
            params: dict[str, Any] = {"app": key.app, "user": key.user}
            params.update((f"term{i}", term) for i, term in enumerate(missing))
            packed = (await conn.execute(self._packed_postings(len(missing)), params)).all()
            read = [_unpack(row) for row in sorted(packed, key=lambda row: int(row[0]))]
            if any(part is None for part in read):  # row by row (see _unpack)
                rows = (await conn.execute(self._postings(len(missing)), params)).all()
                read = list(_by_term(rows, len(missing)))
            for i, part in enumerate(read):
                assert part is not None
                parts[missing[i]] = known.add(missing[i], part[0], part[1], user.version)
        holders, which, counts = UserPostings.columns([parts[term] for term in wanted])
        held = np.bincount(which, minlength=len(wanted))
        df = {term: int(held[wanted.index(stored_term)]) for term, stored_term in stored.items()}
        stats = KeywordStats.of(space, count, lengths, df)
        plan = planner.plan(stats, stored)
        if plan.min_rank < 0 and plan.depth is None and plan.limit is not None and len(holders) <= plan.limit:
            # No more postings than candidates wanted: every holder.
            docs = list(dict.fromkeys(holders.tolist()))
            named = await self._names(conn, key, known, docs, user.version)
            return [named[doc] for doc in docs if doc in named], stats
        if not len(holders):
            return [], stats
        ranks = plan.rank_holders(holders, which, wanted, counts, int(holders.max()) + 1)
        # Ties are broken by memory ID, as on every store: the contenders are named first.
        contenders = plan.contenders(ranks)[0].tolist()
        named = await self._names(conn, key, known, contenders, user.version)
        unnamed = [doc for doc in contenders if doc not in named]
        if unnamed:  # freed by a write after the statistics were read: not a candidate
            ranks[unnamed] = 0.0
        tied = plan.tied(ranks).tolist()
        times = await self._newest_first(conn, key, known, tied, named, user.version) if tied else None
        chosen = plan.choose(named, holders, which, wanted, counts, ranks=ranks, newest_first=times)
        return chosen.ids, chosen.stats(stats)

    async def _newest_first(
        self,
        conn: AsyncConnection,
        key: UserKey,
        known: UserPostings,
        docs: Sequence[int],
        named: Mapping[int, str],
        version: int,
    ) -> dict[str, tuple[int, int, str]] | None:
        """``Entry.newest_first`` of the memories numbered ``docs`` (those known, then
        the rest read in batches of 500), by memory ID; None when one is missing
        (a write after the statistics were read: the tie then goes by ID)."""
        kept, read = known.times, {}
        unknown = [doc for doc in docs if doc not in kept]
        for start in range(0, len(unknown), 500):
            params = {"app": key.app, "user": key.user, "docs": unknown[start : start + 500]}
            count, joined = (await conn.execute(self._packed_times_statement, params)).one()
            values = np.array((joined or "").split(), dtype=np.int64).reshape(-1, 3)
            if len(values) != int(count or 0):
                return None
            found = {int(doc): (int(updated), int(created)) for doc, updated, created in values.tolist()}
            read.update(found)
            known.time(found, version)
        result = {}
        for doc in docs:
            when, memory_id = kept.get(doc) or read.get(doc), named.get(doc)
            if when is None or memory_id is None:
                return None
            result[memory_id] = (-when[0], -when[1], memory_id)
        return result

    async def _names(
        self, conn: AsyncConnection, key: UserKey, known: UserPostings, docs: Sequence[int], version: int
    ) -> dict[int, str]:
        """The memory IDs of document numbers ``docs`` (those known, then the rest
        read in batches of 500; a number no memory holds is left out)."""
        names = known.names
        named = {doc: names[doc] for doc in docs if doc in names}
        unknown = [doc for doc in docs if doc not in named]
        for start in range(0, len(unknown), 500):
            params = {"app": key.app, "user": key.user, "docs": unknown[start : start + 500]}
            count, joined = (await conn.execute(self._packed_names_statement, params)).one()
            found = _named(int(count or 0), joined)
            if found is None:  # an ID holding the separator: row by row
                rows = await conn.execute(self._names_statement, params)
                found = {int(doc): memory_id for doc, memory_id in rows}
            named.update(found)
            known.name(found, version)
        return named

    def _postings(self, terms: int) -> sa.CompoundSelect[Any] | sa.Select[Any]:
        """The postings of ``terms`` terms (bound as ``term0``…), each row (the term's
        number, memory ID, its four counts); made once per number of terms (the
        row-by-row read, when :meth:`_packed_postings` does not add up)."""
        t = self.terms
        return self._per_term(
            self._postings_statements, terms, lambda: [t.c.doc, *(t.c[c] for c in _POSTING_COUNTS)]
        )

    def _packed_postings(self, terms: int) -> sa.CompoundSelect[Any] | sa.Select[Any]:
        """:meth:`_postings` aggregated in the server: one row per term, (the term's
        number, its holder count, and each posting's "doc content topics" joined,
        a field's two counts packed as "tf << 32 | length"). A common term's tens of
        thousands of postings then cross to Python as one string parsed in C, not as
        as many rows made into objects one by one (at 100k memories 3–5× faster).

        MariaDB: one aggregate of "doc content topics" strings (23 ms against 42
        for 40k with one aggregate per column; three took 75 ms against 67 for 42k).
        SQLite and PostgreSQL (``postings_apart``): three aggregates, the docs, the
        contents and the topics apart, each an aggregate of one number: making a
        string of three per posting was most of SQLite's work (36 ms against 70 for
        a 42k-posting term; PostgreSQL 42 against 47). The aggregates of one row
        read its postings in one pass, so their parts come in the same order."""
        t = self.terms

        def packed(tf: str, length: str) -> Any:
            high = sa.literal_column(str(_HIGH), sa.BigInteger)
            return sa.cast(sa.cast(t.c[tf], sa.BigInteger) * high + t.c[length], sa.String)

        def columns() -> list[Any]:
            holders = sa.func.count().label("holders")
            if self.postings_apart:
                return [
                    holders,
                    sa.func.aggregate_strings(sa.cast(t.c.doc, sa.String), " ").label("docs"),
                    sa.func.aggregate_strings(packed("tf_content", "content_length"), " ").label("content"),
                    sa.func.aggregate_strings(packed("tf_topics", "topic_length"), " ").label("topics"),
                ]
            space = sa.literal_column("' '", sa.String)
            # ``+`` on strings: || in SQLite and PostgreSQL, concat() in MySQL.
            posting = (
                sa.cast(t.c.doc, sa.String)
                + space
                + packed("tf_content", "content_length")
                + space
                + packed("tf_topics", "topic_length")
            )
            return [holders, sa.func.aggregate_strings(posting, " ").label("postings")]

        return self._per_term(self._packed_statements, terms, columns)

    def _per_term(
        self, made: dict[int, Any], terms: int, columns: Callable[[], Sequence[Any]]
    ) -> sa.CompoundSelect[Any] | sa.Select[Any]:
        """``columns()`` of each of ``terms`` terms (bound as ``term0``…), after the
        term's number; kept in ``made`` per number of terms.

        One branch per term, each an equality on the primary key's prefix, joined
        by UNION ALL: a planner without table statistics (a freshly filled
        PostgreSQL table) otherwise read every posting of the user and filtered
        the terms (0.5 s at 10k memories)."""
        statement = made.get(terms)
        if statement is None:
            t = self.terms
            user = sa.and_(t.c.app_name == sa.bindparam("app"), t.c.user_id == sa.bindparam("user"))
            branches = [
                sa.select(sa.literal_column(str(i), sa.Integer).label("which"), *columns()).where(
                    user, t.c.term == sa.bindparam(f"term{i}")
                )
                for i in range(terms)
            ]
            statement = made[terms] = branches[0] if terms == 1 else sa.union_all(*branches)
        return statement

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
        return f"{INDEX_VERSION}.{LAYOUT}"
