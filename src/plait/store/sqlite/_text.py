"""The SQLite store's full-text index: fed from the records past each owner's mark (D300).

An append writes its record and nothing else. The index is brought up to the
committed records before a search reads it, in one transaction: every owner
(a session row's key, whose records are one range of keys that only grows at
its end) has a *mark*, the highest key indexed, and the records of an owner past
its mark are indexed and the mark moved in the transaction that indexes them. A
crash between an append and the next search thus leaves records past a mark,
which the next search indexes; never an index that disagrees with the records.

Finding the owners behind their mark reads every session (an index lookup each).
A search does that only when another connection has committed since this one
last caught up (``PRAGMA data_version``) or on its first search; its own writes
name the owners they wrote to (:attr:`TextFeed.dirty`), so a process that writes
and searches catches up exactly those.

Deletes and repairs are seen by triggers (not on the append path): a row deleted
or rewritten after it was indexed is copied to ``record_text_gone``, and the next
catch-up removes its terms (FTS5's ``delete`` needs the text indexed) and, for a
rewritten row, indexes its new text.

The FTS5 tables are *shards* of 2**SHARD_BITS owners each. FTS5 keeps a deleted
term in its segment until the segment is merged (SQLite 3.40 has no FTS5
``secure-delete``), and a merge leaves copies in pages it keeps: an erase drops the
shards that held the erased rows and makes them again, so its cost is bounded by
a shard, not the store. Catch-ups run with ``secure_delete`` on, so the pages
FTS5's merges free keep no term either.

An encrypted store's shards hold keyed hashes of the terms instead (D324,
``_sealtext``): each record is opened and its text cut and hashed here, as it is
indexed, and the shards keep that hashed text as their own content (external content
would read the records' sealed payloads). A row leaves them by its key; a query is
hashed the same way, and its snippets are made from the hits' records, opened.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final

from plait.store.search import MARK_END, MARK_START
from plait.store.sql._rows import SEQ_BITS
from plait.store.sql._sealtext import match_query, snippet
from plait.store.sql._search import INDEXED_KINDS, index_text

if TYPE_CHECKING:
    from plait.store.sql._sealtext import SealedTerms

__all__ = [
    "SHARD_BITS",
    "SQLITE_TEXT_INDEX",
    "TextFeed",
    "catch_up",
    "forget_erased",
    "index_text",
    "reindex",
    "search_shards",
]

SHARD_BITS: Final = 7
"""Owners per FTS5 table: ``owner >> SHARD_BITS`` names the table holding its rows."""

DIRTY_MAX: Final = 4096
"""Owners a connection remembers writing to before it forgets them (see TextFeed.bound)."""

_KINDS_SQL: Final = ", ".join(f"'{k}'" for k in INDEXED_KINDS)
_MARK: Final = "(SELECT last_key FROM record_text_marks WHERE owner = old.key >> 32)"


SQLITE_TEXT_INDEX: Final = (
    # The highest key indexed (or looked at) of each owner; its rows past it are owed.
    "CREATE TABLE record_text_marks (owner INTEGER PRIMARY KEY, last_key INTEGER NOT NULL)",
    # Rows deleted or rewritten after they were indexed, with the text the index holds.
    "CREATE TABLE record_text_gone (key INTEGER PRIMARY KEY, kind TEXT NOT NULL, "
    "payload TEXT NOT NULL)",
    "CREATE TABLE record_text_shards (shard INTEGER PRIMARY KEY)",
    # What snippets read back by key (external content: the text is not stored twice).
    # SQLite's JSON functions end a string at a NUL: its escape becomes a space's.
    "CREATE VIEW record_text_source AS SELECT key, CASE WHEN json_valid(payload) THEN "
    "json_extract(replace(payload, '\\u0000', '\\u0020'), '$.content') ELSE payload END "
    f"AS body FROM records WHERE kind IN ({_KINDS_SQL})",
    f"CREATE TRIGGER record_text_drop AFTER DELETE ON records WHEN old.kind IN ({_KINDS_SQL}) "
    f"AND old.key <= {_MARK} BEGIN INSERT OR IGNORE INTO record_text_gone (key, kind, payload) "
    "VALUES (old.key, old.kind, old.payload); END",
    # Records are written once; a payload is rewritten only by repairs, never by appends.
    f"CREATE TRIGGER record_text_change AFTER UPDATE OF payload, kind ON records WHEN "
    f"old.key <= {_MARK} BEGIN INSERT OR IGNORE INTO record_text_gone (key, kind, payload) "
    "VALUES (old.key, old.kind, old.payload); END",
)
"""Migration 12 on SQLite: the marks, the rows gone, and the FTS5 shards' list."""

_BEHIND: Final = (
    "SELECT s.pk, coalesce(m.last_key, (s.pk << 32) - 1) FROM sessions s "
    "LEFT JOIN record_text_marks m ON m.owner = s.pk WHERE EXISTS (SELECT 1 FROM records r "
    "WHERE r.key > coalesce(m.last_key, (s.pk << 32) - 1) AND r.key < ((s.pk + 1) << 32))"
)
_MARK_OF: Final = "SELECT last_key FROM record_text_marks WHERE owner = ?"
_PAST: Final = (
    "SELECT key, id, kind, payload, meta FROM records WHERE key > ? AND key < ? ORDER BY key"
)
_UPTO: Final = "SELECT key, id, kind, payload, meta FROM records WHERE key >= ? AND key <= ?"
_SET_MARK: Final = "INSERT OR REPLACE INTO record_text_marks (owner, last_key) VALUES (?, ?)"
_ANY_GONE: Final = "SELECT 1 FROM record_text_gone LIMIT 1"


@dataclass(slots=True)
class TextFeed:
    """What one connection knows of the index's feed (used under the store's lock)."""

    version: int | None = None
    """``PRAGMA data_version`` when this connection last caught up; None: never."""
    dirty: set[int] = field(default_factory=set)
    """The owners this connection wrote records to since (appends add theirs)."""

    def bound(self) -> None:
        """Forget the owners once there are many: the next search reads every mark.

        Called now and then (at each checkpoint), so that a process that writes to
        many sessions and never searches does not keep a key for each.
        """
        if len(self.dirty) > DIRTY_MAX:
            self.version = None
            self.dirty.clear()


def _table(shard: int) -> str:
    return f"record_text_{shard}"


def _shard(key: int) -> int:
    return key >> (SEQ_BITS + SHARD_BITS)


def _shards(db: sqlite3.Connection) -> list[int]:
    return [int(s) for (s,) in db.execute("SELECT shard FROM record_text_shards ORDER BY shard")]


def _ensure(db: sqlite3.Connection, shard: int, made: set[int], sealed: bool) -> str:
    if shard not in made:
        # Hashed terms are kept as the table's own content: they are no more than the
        # index reveals, and the records hold only sealed text.
        source = "" if sealed else "content='record_text_source', content_rowid='key', "
        db.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {_table(shard)} USING fts5(body, "
            f"{source}tokenize='unicode61 remove_diacritics 2')"
        )
        db.execute("INSERT OR IGNORE INTO record_text_shards (shard) VALUES (?)", (shard,))
        made.add(shard)
    return _table(shard)


def _texts(rows: Iterable[Any], terms: SealedTerms | None) -> Iterator[tuple[int, str]]:
    """``(key, index text)`` of each ``(key, id, kind, payload, meta)`` row searched."""
    if terms is not None:
        yield from terms.texts(rows, index_text)
        return
    for key, _, kind, payload, _ in rows:
        text = index_text(kind, payload)
        if text is not None:
            yield key, text


def _add(
    db: sqlite3.Connection, rows: Iterable[Any], made: set[int], terms: SealedTerms | None
) -> None:
    batch: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for key, text in _texts(rows, terms):
        batch[_shard(key)].append((key, text))
    for shard, items in batch.items():
        table = _ensure(db, shard, made, terms is not None)
        db.executemany(f"INSERT INTO {table} (rowid, body) VALUES (?, ?)", items)


def _flush_gone(db: sqlite3.Connection, made: set[int], terms: SealedTerms | None) -> set[int]:
    """Take the rows gone out of the index (and index a rewritten row's new text).

    Returns:
        The shards that held them.
    """
    touched: set[int] = set()
    gone = db.execute("SELECT key, kind, payload FROM record_text_gone").fetchall()
    if not gone:
        return touched
    for key, kind, payload in gone:
        shard = _shard(key)
        if terms is not None:  # the shard keeps its content: a row leaves by its key
            if shard in made:
                db.execute(f"DELETE FROM {_table(shard)} WHERE rowid = ?", (key,))
                touched.add(shard)
            continue
        text = index_text(kind, payload)
        if text is not None:
            db.execute(
                f"INSERT INTO {_ensure(db, shard, made, False)} ({_table(shard)}, rowid, body) "
                "VALUES ('delete', ?, ?)",
                (key, text),
            )
            touched.add(shard)
    again = db.execute(
        "SELECT r.key, r.id, r.kind, r.payload, r.meta FROM record_text_gone g "
        "JOIN records r ON r.key = g.key"
    ).fetchall()
    _add(db, again, made, terms)
    owners = {int(k) >> SEQ_BITS for k, _, _ in gone}
    # An owner whose session row is gone has no rows left to index: its mark goes too.
    db.executemany(
        "DELETE FROM record_text_marks WHERE owner = ?1 "
        "AND NOT EXISTS (SELECT 1 FROM sessions WHERE pk = ?1)",
        [(o,) for o in owners],
    )
    db.execute("DELETE FROM record_text_gone")
    return touched


def catch_up(db: sqlite3.Connection, feed: TextFeed, terms: SealedTerms | None = None) -> None:
    """Index every committed record past its owner's mark, and drop the rows gone.

    Runs outside any transaction of the connection, under the store's lock; writes
    (in one transaction) only when something is owed, so a search over an index
    that is up to date takes no write lock. ``terms``: an encrypted store's hasher.
    """
    version = int(db.execute("PRAGMA data_version").fetchone()[0])
    if version != feed.version:  # another connection wrote, or this one never looked
        owners = [int(o) for o, _ in db.execute(_BEHIND)]
    else:
        owners = sorted(feed.dirty)
    if not owners and db.execute(_ANY_GONE).fetchone() is None:
        feed.version, feed.dirty = version, set()
        return
    with _overwriting(db):
        _index(db, owners, terms)
    # Whatever another connection committed after `version` was read changes it again.
    feed.version, feed.dirty = version, set()


@contextmanager
def _overwriting(db: sqlite3.Connection) -> Iterator[None]:
    """One write transaction in which every page or cell freed is overwritten.

    FTS5 merges its segments as they grow, freeing the pages of the old ones: left as
    they were, a term (of a session erased later) would stay readable in free pages
    that no erase knows of. ``secure_delete`` zeroes them as they are freed.
    """
    before = int(db.execute("PRAGMA secure_delete").fetchone()[0])
    db.execute("PRAGMA secure_delete = ON")
    try:
        db.execute("BEGIN IMMEDIATE")
        try:
            yield
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise
    finally:
        db.execute(f"PRAGMA secure_delete = {before}")


def _index(db: sqlite3.Connection, owners: list[int], terms: SealedTerms | None) -> None:
    made = set(_shards(db))
    _flush_gone(db, made, terms)
    for owner in owners:
        # Read again in the write transaction: another connection may have caught up.
        found = db.execute(_MARK_OF, (owner,)).fetchone()
        mark = int(found[0]) if found else (owner << SEQ_BITS) - 1
        rows = db.execute(_PAST, (mark, (owner + 1) << SEQ_BITS)).fetchall()
        if rows:
            _add(db, rows, made, terms)
            db.execute(_SET_MARK, (owner, int(rows[-1][0])))


def forget_erased(db: sqlite3.Connection, terms: SealedTerms | None = None) -> None:
    """Inside an erase's transaction (``secure_delete`` on): no term of its rows stays.

    FTS5 deletes a row by writing a marker beside the segment that still holds its
    terms, and even a merge of the segments (``optimize``) leaves copies of cells that
    the b-tree moved in the unused space of pages it keeps. So each FTS5 table that
    held a row gone is dropped (every page of it freed, and overwritten as it is
    freed) and made again from the records its owners still have. A table holds at
    most 2**SHARD_BITS owners: an erase costs what those tables hold, whatever the
    store's size.
    """
    touched = sorted({_shard(int(k)) for (k,) in db.execute("SELECT key FROM record_text_gone")})
    if not touched:
        return
    made = set(_shards(db))
    db.execute("DELETE FROM record_text_gone")
    # An owner whose session row is gone has no rows left to index: its mark goes too.
    db.execute(
        "DELETE FROM record_text_marks "
        "WHERE NOT EXISTS (SELECT 1 FROM sessions WHERE pk = record_text_marks.owner)"
    )
    for shard in touched:
        if shard in made:
            db.execute(f"DROP TABLE {_table(shard)}")
            made.discard(shard)
        lo, hi = shard << SHARD_BITS, (shard + 1) << SHARD_BITS
        marks = db.execute(
            "SELECT owner, last_key FROM record_text_marks WHERE owner >= ? AND owner < ?",
            (lo, hi),
        ).fetchall()
        _ensure(db, shard, made, terms is not None)
        for owner, last in marks:
            rows = db.execute(_UPTO, (int(owner) << SEQ_BITS, int(last))).fetchall()
            _add(db, rows, made, terms)


def reindex(db: sqlite3.Connection, feed: TextFeed, terms: SealedTerms | None = None) -> None:
    """Drop the FTS5 tables and the marks, and index every record again, in one transaction."""
    version = int(db.execute("PRAGMA data_version").fetchone()[0])
    with _overwriting(db):
        for shard in _shards(db):
            db.execute(f"DROP TABLE {_table(shard)}")
        for table in ("record_text_shards", "record_text_marks", "record_text_gone"):
            db.execute(f"DELETE FROM {table}")
        _index(db, [int(o) for o, _ in db.execute(_BEHIND).fetchall()], terms)
    feed.version, feed.dirty = version, set()


def _newest(shard: int) -> str:
    t = _table(shard)
    return (
        f"SELECT t.rowid, r.created_at FROM {t} t JOIN records r ON r.key = t.rowid "
        f"WHERE {t} MATCH ? ORDER BY r.created_at DESC, t.rowid DESC LIMIT ?"
    )


def _shown(shard: int) -> str:
    t = _table(shard)
    # The keys as one JSON list: one statement text per shard, kept by the cache.
    return (
        f"SELECT t.rowid, r.kind, r.created_at, r.mpos, "
        f"snippet({t}, 0, '{MARK_START}', '{MARK_END}', '\u2026', 16) "
        f"FROM {t} t JOIN records r ON r.key = t.rowid "
        f"WHERE {t} MATCH ? AND t.rowid IN (SELECT value FROM json_each(?))"
    )


_ARMS: Final = 200
"""Shards one search statement reads (SQLite allows 500 arms in a compound select)."""


@lru_cache(maxsize=16)
def _newest_sql(shards: tuple[int, ...]) -> str:
    # One statement for many shards, so that the statement cache keeps a few of them,
    # not one per shard; each arm is its shard's newest matches.
    arms = " UNION ALL ".join(f"SELECT * FROM ({_newest(s)})" for s in shards)
    return f"{arms} ORDER BY 2 DESC, 1 DESC LIMIT ?"


def search_shards(
    db: sqlite3.Connection, query: str, wanted: int, terms: SealedTerms | None = None
) -> list[Any]:
    """``(key, kind, created_at, mpos, snippet)`` of the newest ``wanted`` matches.

    The newest are found first, by key and time alone; snippets (FTS5 reads each
    matched row's text back and tokenises it again) are made for those only.
    ``terms``: an encrypted store's hasher (the query is hashed, snippets made here).

    Raises:
        SearchQueryError: on an encrypted store, a query of more than words and phrases.
    """
    looked_for: frozenset[str] = frozenset()
    if terms is not None:
        query, looked_for = match_query(query, terms.hash)
        if not query:
            return []
    shards = _shards(db)
    newest: list[tuple[int, int]] = []
    for i in range(0, len(shards), _ARMS):
        part = tuple(shards[i : i + _ARMS])
        newest.extend(db.execute(_newest_sql(part), (query, wanted) * len(part) + (wanted,)))
    newest.sort(key=lambda r: (r[1], r[0]), reverse=True)
    by_shard: dict[int, list[int]] = defaultdict(list)
    for key, _ in newest[:wanted]:
        by_shard[_shard(int(key))].append(int(key))
    found: list[Any] = []
    if terms is not None:
        keys = [k for ks in by_shard.values() for k in ks]
        found = _sealed_snippets(db, keys, looked_for, terms)
    for shard, keys in by_shard.items() if terms is None else ():
        found.extend(db.execute(_shown(shard), (query, json.dumps(keys))))
    found.sort(key=lambda r: (r[2], r[0]), reverse=True)
    return found


_HIT_ROWS: Final = (
    "SELECT key, id, kind, payload, meta, created_at, mpos FROM records "
    "WHERE key IN (SELECT value FROM json_each(?))"
)


def _sealed_snippets(
    db: sqlite3.Connection, keys: list[int], looked_for: frozenset[str], terms: SealedTerms
) -> list[Any]:
    """The hits' rows with snippets made from their records, opened (see ``_sealtext``)."""
    out: list[Any] = []
    for key, _, kind, payload, _, created, mpos in terms.opened(
        db.execute(_HIT_ROWS, (json.dumps(keys),)).fetchall()
    ):
        text = index_text(str(kind), str(payload)) or ""
        out.append((key, kind, created, mpos, snippet(text, looked_for, terms.hash)))
    return out
