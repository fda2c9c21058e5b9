"""Full-text search across every session, on both SQL stores (D300).

On PostgreSQL the index is a GIN index on an expression of the row, kept by the
engine in the transaction that writes it (an encrypted store's: a table of hashed
terms brought up to the committed records before each search, ``postgres/_text.py``); on
SQLite FTS5 tables brought up to the committed records before each search
(``_litetext``). Either way it holds one entry per record *row*, keyed by the row
key (``owner pk << 32 | seq``); the rows that forks and rewinds share are indexed
once. A hit on a row is then
resolved, here, to every live session whose layout reads that row: the row's
owner and the sessions that inherit from it (found by walking the
``base_owner`` links down, as a delete walks them up), each checked against its
own layout and view.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final

from plait._checks import MAX_INT
from plait.errors import InvalidArgumentError, StoreError
from plait.layout import segments
from plait.store.base import HIDDEN_OPERATOR, SessionRow
from plait.store.search import MARK_END, MARK_START, SearchHit
from plait.store.sql._dialect import Dialect
from plait.store.sql._rows import SEQ_BITS, SEQ_MAX, row_from_columns

if TYPE_CHECKING:
    from plait.store.sql._sealing import Sealer

__all__ = [
    "INDEXED_KINDS",
    "PG_TEXT_INDEX",
    "SQLSearch",
    "index_text",
]

INDEXED_KINDS: Final = ("user", "assistant", "tool", "summary")
"""The record kinds whose text is searched (a system prompt, an event or an opaque
item is not: they are not what a person said or was told)."""

_KINDS_SQL: Final = ", ".join(f"'{k}'" for k in INDEXED_KINDS)

_DECODE: Final = json.JSONDecoder().raw_decode


def index_text(kind: str, payload: str) -> str | None:
    """The text a record gives the index, or None for a record that is not searched.

    The one place a record's stored form (its payload, opened) becomes index terms:
    SQLite's FTS5 tables are fed this text, and a row leaves them with it; an
    encrypted store hashes the terms of this text
    (:meth:`~plait.store.sql._sealtext.SealedTerms.texts`) and builds snippets itself.
    """
    if kind not in INDEXED_KINDS:
        return None
    try:
        # The codec writes one JSON object with nothing around it: read it as it is.
        content = _DECODE(payload)[0].get("content")
    except (ValueError, AttributeError):
        return payload  # a damaged row is indexed as it stands, as PostgreSQL does
    return content if isinstance(content, str) else None


# The payload is JSON text. The escape of a NUL (which PostgreSQL's json operators refuse
# to decode) becomes a space's, as on SQLite; a payload that is no JSON at all (a damaged
# row) is indexed as it stands, so that neither an append nor a repair fails for its text.
# Immutable, as an index expression must be; not parallel safe, since its exception
# block starts a subtransaction.
PG_TEXT_INDEX: Final = (
    "CREATE FUNCTION plait_record_text(kind text, payload text) RETURNS text "
    "LANGUAGE plpgsql IMMUTABLE AS $$ BEGIN "
    f"IF kind NOT IN ({_KINDS_SQL}) THEN RETURN NULL; END IF; "
    "RETURN replace(payload, '\\u0000', '\\u0020')::json ->> 'content'; "
    "EXCEPTION WHEN others THEN RETURN payload; END $$",
    "CREATE INDEX records_text ON records USING GIN "
    "(to_tsvector('simple', plait_record_text(kind, payload))) "
    f"WHERE kind IN ({_KINDS_SQL})",
)
"""How PostgreSQL keeps the index: a GIN index on the records' text as a ``tsvector``."""

PG_REINDEX: Final = ("REINDEX INDEX records_text",)

PG_HITS: Final = (
    "SELECT h.key, h.kind, h.created_at, h.mpos, ts_headline('simple', "
    "plait_record_text(h.kind, h.payload), q, "
    f"'StartSel={MARK_START}, StopSel={MARK_END}, MaxWords=20, MinWords=6') FROM ("
    "SELECT r.key, r.kind, r.payload, r.created_at, r.mpos, q FROM records r, "
    "websearch_to_tsquery('simple', %s) q "
    f"WHERE r.kind IN ({_KINDS_SQL}) "
    "AND to_tsvector('simple', plait_record_text(r.kind, r.payload)) @@ q "
    "ORDER BY r.created_at DESC, r.key DESC LIMIT %s) h ORDER BY h.created_at DESC, h.key DESC"
)


def _descendants(d: Dialect, owners: int) -> str:
    # The owners, every session below them along base_owner, and the layouts that are
    # not such a branch (few: each is read and checked), each through its own index: an
    # OR of the two would scan every session.
    marks = ", ".join("?" * owners)
    return d.sql(
        f"WITH RECURSIVE tree(pk) AS (SELECT pk FROM sessions WHERE pk IN ({marks}) "
        "UNION SELECT s.pk FROM sessions s JOIN tree t ON s.base_owner = t.pk), "
        "picked(pk) AS (SELECT pk FROM tree UNION SELECT pk FROM sessions "
        "WHERE base_owner IS NULL AND bases <> '[]') "
        "{select_row} WHERE s.pk IN (SELECT pk FROM picked) AND {live_s} "
        f"AND (s.lineage_operator IS NULL OR s.lineage_operator <> '{HIDDEN_OPERATOR}')"
    )


def reads(row: SessionRow, owner: int, seq: int) -> bool:
    """Whether the session's view shows the row ``(owner, seq)``."""
    layout = row.layout
    if seq < layout.view_start or seq >= layout.end_seq:
        return False
    return any(o == owner for o, _, _ in segments(layout, row.pk, seq, seq + 1))


class SQLSearch:
    """Search over the engine's full-text index, resolved to live sessions."""

    dialect: Dialect
    _sealer: Sealer | None
    """The store's sealer (:class:`~plait.store.sql._sealstore.SQLSealing`); None: not encrypted."""
    _hits_sql: str
    """The engine's query: ``(key, kind, created_at, mpos, snippet)`` newest first, for a
    query text and a limit."""
    _reindex_sql: tuple[str, ...]
    """The statements that rebuild the index from the records."""

    @property
    @abstractmethod
    def code_version(self) -> int:
        """The newest schema version this store was opened with."""
        ...

    @abstractmethod
    def _all(
        self, query: str, params: Sequence[Any], what: str, subject: object = None
    ) -> list[Any]: ...

    def _records_written(self, pk: int) -> None:
        """Note that this store wrote records of owner ``pk``.

        An index fed from the records catches these up; one kept by the engine ignores it.
        """

    def _catch_up(self) -> None:
        """Bring the index up to the committed records.

        An engine that keeps it whole in the records' own transaction has nothing to do.
        """

    def _search_rows(self, query: str, params: Sequence[Any]) -> list[Any]:
        """Run the engine's search query (an engine may run it its own way)."""
        return self._all(query, params, "search")

    @abstractmethod
    def _bad_query(self, exc: StoreError) -> bool:
        """Whether a failed search failed on the query's syntax (the engine's own test)."""
        ...

    def _indexed(self) -> None:
        if self.code_version < 12:
            raise StoreError("this store was opened without its full-text index (migration 12)")

    def search(self, query: str, limit: int = 20, workspace: str | None = None) -> list[SearchHit]:
        """Return up to ``limit`` hits for ``query`` in live sessions, newest message first.

        Args:
            query: the engine's full-text query: words (all must match) and
                ``"quoted phrases"`` mean the same on every store; SQLite also reads
                FTS5's operators (``OR``, ``NOT``, ``prefix*``), PostgreSQL web search's
                (``or``, ``-word``). An encrypted store reads words and phrases
                only (D324, D326).
            limit: at most this many hits (a positive int).
            workspace: only sessions of this workspace; None for every workspace.

        Returns:
            A hit per message and live session that shows it: a message that forks
            share is a hit in each of them.

        Raises:
            InvalidArgumentError: an empty query or a bad limit.
            SearchQueryError: a query the engine cannot parse (or, on an encrypted
                store, one of more than words and phrases).
            StoreError: the store has no full-text index, or the read failed.
        """
        from plait.errors import SearchQueryError

        if not isinstance(query, str) or not query.strip():
            raise InvalidArgumentError("a search needs a non-empty query string")
        if type(limit) is not int or limit < 1:
            raise InvalidArgumentError(f"limit must be a positive int, not {limit!r}")
        self._indexed()
        self._catch_up()
        wanted = min(MAX_INT, limit * 4)
        while True:
            try:
                found = self._search_rows(self._hits_sql, (query, wanted))
            except StoreError as exc:
                if self._bad_query(exc):
                    raise SearchQueryError(f"bad search query {query!r}: {exc}") from exc
                raise
            hits = self._resolve(found, workspace)
            # Rows that no live session shows (deleted, hidden, another workspace) take
            # places in the engine's page: read a longer one until enough are found.
            if len(hits) >= limit or len(found) < wanted or wanted >= MAX_INT:
                return hits[:limit]
            wanted = min(MAX_INT, wanted * 4)

    def _resolve(self, found: list[Any], workspace: str | None) -> list[SearchHit]:
        if not found:
            return []
        owners = sorted({int(r[0]) >> SEQ_BITS for r in found})
        rows = [
            row_from_columns(r, None, self._sealer)
            for r in self._all(_descendants(self.dialect, len(owners)), owners, "search")
        ]
        if workspace is not None:
            rows = [r for r in rows if r.workspace == workspace]
        # Each row is checked only against the hits on owners its layout names.
        readers: dict[int, list[SessionRow]] = defaultdict(list)
        for row in rows:
            for named in {row.pk, *(o for o, _ in row.layout.bases)}:
                readers[named].append(row)
        out: list[SearchHit] = []
        for key, kind, created, mpos, snippet in found:
            owner, seq = int(key) >> SEQ_BITS, int(key) & SEQ_MAX
            for row in readers.get(owner, ()):
                if reads(row, owner, seq):
                    # mpos counts the messages before the row in the whole transcript; a
                    # session's view numbers them from its first shown one.
                    message = int(mpos) - row.layout.view_msgs
                    out.append(
                        SearchHit(
                            row.id, row.title, seq, message, str(kind), str(snippet), int(created)
                        )
                    )
        return out

    @abstractmethod
    def _transaction(self, what: str) -> Any:
        """A write transaction (the engine's)."""
        ...

    def reindex(self) -> None:
        """Rebuild the full-text index from the records (``plait db reindex``).

        Raises:
            StoreError: the store has no full-text index, or the rebuild failed.
        """
        self._indexed()
        with self._transaction("reindex") as conn:
            for statement in self._reindex_sql:
                conn.execute(statement)
