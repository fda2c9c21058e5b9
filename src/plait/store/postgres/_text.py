"""An encrypted PostgreSQL store's full-text index: keyed hashes of the terms, fed past marks.

A plain PostgreSQL store searches a GIN expression index the engine keeps with the
records (``_search.PG_TEXT_INDEX``). An encrypted one cannot: the database holds no
key to open a sealed payload, nor the search key to hash its terms. So its index is a
table the store's own processes feed (migration 14, D326):

* ``record_tokens``: one row per searched record, keyed by the record's row key (so
  rows that forks share are indexed once), holding a ``tsvector`` of the keyed hashes
  of its terms (``_sealtext``, the very tokens an encrypted SQLite store indexes) at
  their positions, under a GIN index: words and phrases match as on SQLite. The row
  goes with its record (a trigger on the statements that delete records), so every path
  that deletes records (a delete's collection, an erase, retention) takes their tokens
  in its transaction.
* ``record_token_marks``: each owner's highest key indexed. An owner's keys only grow
  at its end while it is live, so the records past a mark are exactly what is not
  indexed. Before a search reads, the records past the marks are opened, hashed and
  written with the moved marks **in one transaction**: a crash leaves records past a
  mark, never an index that disagrees with the records. The append path is untouched.

Snippets are made at query time from the hits' records, opened (the index holds no
text).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Final

from plait.store.sql._rows import SEQ_BITS
from plait.store.sql._sealtext import phrases, snippet
from plait.store.sql._search import INDEXED_KINDS

if TYPE_CHECKING:
    import psycopg

    from plait.store.sql._sealtext import SealedTerms

__all__ = ["PG_SEALED_TEXT", "SEALED_VERSION", "catch_up", "reindex", "search", "vector"]

SEALED_VERSION: Final = 14
"""The schema version that added ``record_tokens``."""

_KINDS_SQL: Final = ", ".join(f"'{k}'" for k in INDEXED_KINDS)

PG_SEALED_TEXT: Final = (
    # The hashed terms of each searched record of an encrypted store; empty in a plain one.
    "CREATE TABLE record_tokens (key BIGINT PRIMARY KEY, body tsvector NOT NULL)",
    "CREATE INDEX record_tokens_body ON record_tokens USING GIN (body)",
    # A record's tokens go in the statement that deletes it, whichever path deletes it.
    # Once per statement, not per row (a cascading foreign key made a delete of many
    # records several times slower, on plain stores too), and nothing to do while the
    # table is empty. Its tables are the schema's it was made in, whoever deletes.
    "CREATE FUNCTION plait_tokens_gone() RETURNS trigger LANGUAGE plpgsql "
    "SET search_path FROM CURRENT AS $$ BEGIN "
    "IF EXISTS (SELECT FROM record_tokens) THEN "
    "DELETE FROM record_tokens t USING gone g WHERE t.key = g.key; END IF; "
    "RETURN NULL; END $$",
    "CREATE TRIGGER records_tokens_gone AFTER DELETE ON records REFERENCING OLD TABLE AS gone "
    "FOR EACH STATEMENT EXECUTE FUNCTION plait_tokens_gone()",
    # A sealed payload (standard base64 of at least a key id, a nonce and a tag: never
    # JSON) gives the engine's own text index nothing, at once: before, each one failed
    # the JSON cast inside a subtransaction and indexed its base64, which cost an
    # encrypted append a good part of its time for an index no search of it reads. Every
    # other payload is read as migration 12 reads it.
    "CREATE OR REPLACE FUNCTION plait_record_text(kind text, payload text) RETURNS text "
    "LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN "
    f"IF kind NOT IN ({_KINDS_SQL}) THEN RETURN NULL; END IF; "
    "IF length(payload) >= 48 AND length(payload) % 4 = 0 "
    "AND payload ~ '^[A-Za-z0-9+/]+={0,2}$' THEN RETURN NULL; END IF; "
    "BEGIN RETURN replace(payload, '\\u0000', '\\u0020')::json ->> 'content'; "
    "EXCEPTION WHEN others THEN RETURN payload; END; END $$",
    # The highest key of each owner whose records are in record_tokens (or looked at).
    "CREATE TABLE record_token_marks (owner BIGINT PRIMARY KEY "
    "REFERENCES sessions (pk) ON DELETE CASCADE, last_key BIGINT NOT NULL)",
)
"""Migration 14 on PostgreSQL: an encrypted store's token table and its marks."""

MAX_POSITION: Final = 16383
"""The highest position a ``tsvector`` keeps (later terms share it: phrases past it fail)."""
MAX_POSITIONS: Final = 256
"""Positions a ``tsvector`` keeps per lexeme (later ones are dropped; the word still matches)."""
MAX_LEXEMES: Final = 60_000
"""Distinct terms indexed per record: a ``tsvector``'s lexemes take at most 1 MiB."""
_TRIES: Final = 3
"""Catch-ups tried when a delete races one (each a transaction of its own)."""
OWNERS_PER_READ: Final = 256
"""Owners whose records past their marks one statement reads."""
ROWS_PER_READ: Final = 2000
"""Records a catch-up fetches at a time (a first one reads the whole store)."""

_BEHIND: Final = (
    "SELECT s.pk, coalesce(m.last_key, (s.pk << 32) - 1) FROM sessions s "
    "LEFT JOIN record_token_marks m ON m.owner = s.pk WHERE EXISTS (SELECT 1 FROM records r "
    "WHERE r.key > coalesce(m.last_key, (s.pk << 32) - 1) AND r.key < ((s.pk + 1) << 32))"
)
# Payload and meta only of the rows searched: an event or an opaque item only moves a mark.
_PAST: Final = (
    "SELECT r.key, r.id, r.kind, "
    f"CASE WHEN r.kind IN ({_KINDS_SQL}) THEN r.payload END, "
    f"CASE WHEN r.kind IN ({_KINDS_SQL}) THEN r.meta END "
    "FROM unnest(%s::bigint[], %s::bigint[]) AS m(owner, mark) "
    "JOIN records r ON r.key > m.mark AND r.key < ((m.owner + 1) << 32)"
)
# Only for records still there, each locked against a delete until this commits: a delete
# that committed first is not indexed, and one that waits takes these tokens with it.
_ADD: Final = (
    "WITH u AS (SELECT * FROM unnest(%s::bigint[], %s::text[]) AS u(k, b)), "
    "kept AS (SELECT r.key FROM records r JOIN u ON r.key = u.k FOR KEY SHARE OF r) "
    "INSERT INTO record_tokens (key, body) SELECT u.k, u.b::tsvector FROM u "
    "JOIN kept ON kept.key = u.k ON CONFLICT (key) DO UPDATE SET body = excluded.body"
)
_SET_MARKS: Final = (
    "INSERT INTO record_token_marks (owner, last_key) "
    "SELECT * FROM unnest(%s::bigint[], %s::bigint[]) "
    "ON CONFLICT (owner) DO UPDATE SET last_key = excluded.last_key"
)
_HITS: Final = (
    "SELECT r.key, r.id, r.kind, r.payload, r.meta, r.created_at, r.mpos "
    "FROM record_tokens t JOIN records r ON r.key = t.key WHERE t.body @@ %s::tsquery "
    "ORDER BY r.created_at DESC, r.key DESC LIMIT %s"
)


def vector(tokens: Sequence[str]) -> str:
    """A record's hashed terms, in order, as a ``tsvector`` literal with their positions."""
    # Built as strings as it goes: this runs for every term a catch-up indexes.
    at: dict[str, str] = {}
    repeats: dict[str, int] = {}
    last = str(MAX_POSITION)
    for i, token in enumerate(tokens, 1):
        where = str(i) if i < MAX_POSITION else last
        found = at.get(token)
        if found is None:
            if len(at) < MAX_LEXEMES:
                at[token] = where
            continue
        n = repeats.get(token, 1)
        # Past the last position every term shares it: it is kept once.
        if n < MAX_POSITIONS and not found.endswith(last):
            at[token] = f"{found},{where}"
            repeats[token] = n + 1
    # Tokens are hex digits: nothing in them needs quoting or escaping.
    return " ".join([f"{t}:{p}" for t, p in at.items()])


def behind(conn: psycopg.Connection[tuple[Any, ...]]) -> list[tuple[int, int]]:
    """``(owner, mark)`` of every owner with records past its mark (one index probe each)."""
    return [(int(o), int(m)) for o, m in conn.execute(_BEHIND).fetchall()]


def _feed(
    conn: psycopg.Connection[tuple[Any, ...]],
    owners: list[tuple[int, int]],
    terms: SealedTerms,
    index_text: Callable[[str, str], str | None],
) -> None:
    """Index the records past the marks of ``owners`` and move the marks (one transaction).

    The records stream through a server-side cursor: a first catch-up of a large store
    holds a few thousand at a time.
    """
    for i in range(0, len(owners), OWNERS_PER_READ):
        part = owners[i : i + OWNERS_PER_READ]
        moved: dict[int, int] = {}
        with conn.cursor(name="plait_token_feed") as cur:
            cur.execute(_PAST, ([o for o, _ in part], [m for _, m in part]))
            while rows := cur.fetchmany(ROWS_PER_READ):
                for row in rows:
                    key = int(row[0])
                    owner = key >> SEQ_BITS
                    if key > moved.get(owner, -1):
                        moved[owner] = key
                searched = [r for r in rows if r[3] is not None]
                texts = terms.texts(searched, index_text)
                items = [(k, vector(t.split())) for k, t in texts if t]
                if items:
                    conn.execute(_ADD, ([k for k, _ in items], [v for _, v in items]))
        if moved:
            conn.execute(_SET_MARKS, (list(moved), list(moved.values())))


def catch_up(
    conn: psycopg.Connection[tuple[Any, ...]],
    lock: int,
    terms: SealedTerms,
    index_text: Callable[[str, str], str | None],
) -> bool:
    """Index every committed record past its owner's mark, with the marks, in one transaction.

    ``conn`` is an autocommit connection. Nothing is written when nothing is owed.
    Catch-ups take turns on a transaction-scoped advisory lock (``lock``), and read
    the marks again once they hold it: another may have caught up meanwhile.

    Returns:
        Whether anything was owed.
    """
    from psycopg import errors as pgerrors

    if not behind(conn):
        return False
    for attempt in range(_TRIES):
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s::bigint)", (lock,))
                _feed(conn, behind(conn), terms, index_text)
            return True
        except (pgerrors.ForeignKeyViolation, pgerrors.DeadlockDetected):
            # A delete took a session row after it was read (its mark's key), or
            # waited on a record this locked while this waited on it: nothing of this
            # transaction stays, and the next one reads past the delete.
            if attempt == _TRIES - 1:
                raise
    return True


def reindex(
    conn: psycopg.Connection[tuple[Any, ...]],
    lock: int,
    terms: SealedTerms,
    index_text: Callable[[str, str], str | None],
) -> None:
    """Drop every token and mark and index every record again, in one transaction."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s::bigint)", (lock,))
        conn.execute("DELETE FROM record_tokens")
        conn.execute("DELETE FROM record_token_marks")
        _feed(conn, behind(conn), terms, index_text)


def tsquery(groups: Sequence[Sequence[str]]) -> str:
    """Hashed phrases as a ``tsquery``: each phrase's tokens adjacent, every phrase present."""
    return " & ".join("(" + " <-> ".join(f"'{t}'" for t in g) + ")" for g in groups)


def search(
    conn: psycopg.Connection[tuple[Any, ...]],
    query: str,
    wanted: int,
    terms: SealedTerms,
    index_text: Callable[[str, str], str | None],
) -> list[Any]:
    """``(key, kind, created_at, mpos, snippet)`` of the newest ``wanted`` matches.

    Sent unprepared, as a plain store's search is (a generic plan cannot tell a rare
    token from a common one).

    Raises:
        SearchQueryError: a query of more than words and phrases (see ``_sealtext``).
    """
    groups, looked_for = phrases(query, terms.hash)
    if not groups:
        return []
    found = conn.execute(_HITS, (tsquery(groups), wanted), prepare=False).fetchall()
    out: list[Any] = []
    for key, _, kind, payload, _, created, mpos in terms.opened(found):
        text = index_text(str(kind), str(payload)) or ""
        out.append((key, kind, created, mpos, snippet(text, looked_for, terms.hash)))
    return out

