"""Where counting stopped, and the tallies there, for many sessions at once (both SQL stores).

A listing shows each session's message count as a person sees it (summaries an
``uncompact`` hid and messages an agent added left out), which takes each row's counted
end and two stored tallies. Asked a row at a time, a page of 20 sessions is some 80 round
trips on PostgreSQL; :class:`SQLCounts` answers the page from one snapshot, and an engine
may answer each half in one statement (:meth:`SQLCounts._counted_ends_in`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from plait.context import Tally
from plait.errors import InvalidArgumentError, StoreCorruptError
from plait.layout import segments, segments_backward
from plait.store.base import SessionRow
from plait.store.sql._rows import SEQ_BITS, SEQ_MAX

if TYPE_CHECKING:
    from plait.store.sql._dialect import Connection, Statements

__all__ = ["SQLCounts", "counted_ranges", "decode_tally"]


def decode_tally(row: SessionRow, seq: int, text: str) -> Tally:
    """The stored tally at ``seq`` of ``row``, decoded.

    Raises:
        StoreCorruptError: the text is not a tally.
    """
    try:
        return Tally.from_json(text)
    except InvalidArgumentError as exc:
        raise StoreCorruptError(f"session {row.id!r}: tally at position {seq}: {exc}") from exc


def counted_ranges(row: SessionRow) -> Iterator[tuple[int, int]]:
    """The key ranges of the row's segments, the newest first (where a counted end is sought).

    Lazy, as :func:`~plait.layout.segments_backward` is: a scan that stops at the first
    counted range costs the segments it looks at, not the depth of a chain of branches.
    """
    if row.layout.end_seq <= 0:
        return iter(())
    return (
        ((owner << SEQ_BITS) | a, (owner << SEQ_BITS) | b)
        for owner, a, b in segments_backward(row.layout, row.pk)
    )


def _subject(rows: Sequence[SessionRow]) -> str:
    """What a failed read names: the session, or how many."""
    return rows[0].id if len(rows) == 1 else f"{len(rows)} sessions"


class SQLCounts:
    """Counted ends and tallies, a row's or a page's, over an engine's connections (a mixin).

    A row's verbs (:meth:`counted_end`, :meth:`tallies`) are a page of one.
    """

    __slots__ = ()

    if TYPE_CHECKING:
        _q: Statements

        def _snapshot(
            self, what: str, subject: object = None
        ) -> AbstractContextManager[Connection]: ...

        def _check_open(self) -> None: ...

        def _tally_rows(self, session_id: str, keys: list[int]) -> list[tuple[int, str]]: ...

    def counted_end(self, row: SessionRow) -> int:
        """Return one past the newest counted position (a backward scan of the uncounted tail)."""
        return self.counted_ends([row])[0]

    def tallies(self, row: SessionRow, positions: Sequence[int]) -> dict[int, Tally]:
        """Return the stored tallies at these positions (point reads by key)."""
        return self.tallies_at([(row, positions)])[0]

    def counted_ends(self, rows: Sequence[SessionRow]) -> list[int]:
        """For each row, one past its newest counted position (0: none counted), in order.

        Raises:
            StoreError: the store is closed or the read failed.
        """
        if not any(row.layout.end_seq > 0 for row in rows):
            self._check_open()
            return [0] * len(rows)
        with self._snapshot("count", _subject(rows)) as conn:
            tops = self._counted_ends_in(conn, [counted_ranges(row) for row in rows])
        return [(top & SEQ_MAX) + 1 if top is not None else 0 for top in tops]

    def _counted_ends_in(
        self, conn: Connection, ranges: list[Iterable[tuple[int, int]]]
    ) -> list[int | None]:
        """Each row's newest counted key: a range scan a segment, stopping at the first found."""
        out: list[int | None] = []
        for row_ranges in ranges:
            top: int | None = None
            for lo, hi in row_ranges:
                found = conn.execute(self._q.counted, (lo, hi)).fetchone()
                if found is not None:
                    top = int(found[0])
                    break
            out.append(top)
        return out

    def tallies_at(
        self, wanted: Sequence[tuple[SessionRow, Sequence[int]]]
    ) -> list[dict[int, Tally]]:
        """For each ``(row, positions)``, the stored tallies at those positions, in order.

        Raises:
            StoreCorruptError: a stored tally does not decode.
            StoreError: the store is closed or the read failed.
        """
        keyed: list[dict[int, int]] = []
        for row, positions in wanted:
            keys: dict[int, int] = {}
            for seq in dict.fromkeys(positions):
                parts = segments(row.layout, row.pk, seq, seq + 1) if seq >= 0 else []
                if parts:
                    keys[(parts[0][0] << SEQ_BITS) | seq] = seq
            keyed.append(keys)
        every = sorted({key for keys in keyed for key in keys})
        if not every:
            self._check_open()
            return [{} for _ in wanted]
        found = dict(self._tally_rows(_subject([row for row, _ in wanted]), every))
        return [
            {
                seq: decode_tally(row, seq, found[key])
                for key, seq in keys.items()
                if key in found
            }
            for (row, _), keys in zip(wanted, keyed, strict=True)
        ]
