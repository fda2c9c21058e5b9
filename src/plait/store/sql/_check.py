"""The store's health check: what is damaged, by session and record, without stopping at it.

:func:`check` runs over a :class:`~plait.store.sql._store.SQLStore` through its own
read hooks. Every read is its own statement (or snapshot), and a damaged one
(:class:`StoreCorruptError`, which the engines raise for a page that does not
decode) becomes a :class:`Problem` instead of ending the check, so one damaged
page or row is reported together with everything else that is wrong.

The plain check runs the engine's own check and decodes every live session row
and every record (payload, meta and token tally). The deep check also checks
each row's layout and settings against the rows that exist, and decodes each
scratchpad history. Where a range of records cannot
be read at all, it reads them one by one to name each record lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from plait.context import Tally
from plait.errors import InvalidArgumentError, PlaitError, StoreCorruptError
from plait.layout import segments
from plait.records import decode_record
from plait.store.base import SessionRow
from plait.store.sql._rows import SEQ_BITS, SEQ_MAX, row_from_columns

if TYPE_CHECKING:
    from plait.store.sql._store import SQLStore

__all__ = ["Problem", "check"]

_SHIFT: Final = SEQ_BITS
_CHUNK: Final = 512
"""Records one read of the deep check decodes."""
_STATUSES: Final = frozenset({"open", "closed"})
_SETTINGS: Final = "settings"  # the session layer's key for what branches inherit


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing the check found wrong.

    Attributes:
        what: what is wrong, in a sentence.
        session_id: the session it affects, or None for the store as a whole.
        seq: the record's position in the session, when one record is affected.
        record_id: that record's id, when it could be read.
        kept: messages in view before the first damaged record of its session, all
            readable (what a branch keeping them saves), when the deep check knows.
        engine: the database's own check found it (a page, an index), not plait's.
    """

    what: str
    session_id: str | None = None
    seq: int | None = None
    record_id: str | None = None
    kept: int | None = None
    engine: bool = False

    def __str__(self) -> str:
        where: list[str] = []
        if self.session_id is not None:
            where.append(f"session {self.session_id}")
        if self.seq is not None:
            where.append(f"record {self.seq}")
        if self.record_id is not None:
            where.append(f"(id {self.record_id})")
        return f"{' '.join(where)}: {self.what}" if where else self.what

    def to_json(self) -> dict[str, Any]:
        """The problem as a JSON object (every field, None where it does not apply)."""
        return {
            "session_id": self.session_id,
            "seq": self.seq,
            "record_id": self.record_id,
            "what": self.what,
            "kept": self.kept,
            "engine": self.engine,
        }


_Found = tuple[int, str | None, str, int]
"""A damaged record: ``(seq, record id or None, what, messages before it)``.

The messages are counted from the start of the range it was found in.
"""


class _Ranges:
    """The record ranges already decoded, per owner, and what was found in them.

    Branches share their parents' rows: a range another session's check has
    decoded is not decoded again, and its problems are reported for this one too.
    """

    def __init__(self) -> None:
        self._done: dict[int, list[tuple[int, int, list[_Found]]]] = {}

    def found(self, owner: int, a: int, b: int) -> list[_Found] | None:
        """What was found in ``[a, b)`` of ``owner``, if a range holding it was decoded."""
        for lo, hi, problems in self._done.get(owner, ()):
            if lo <= a and b <= hi:
                return [p for p in problems if a <= p[0] < b]
        return None

    def add(self, owner: int, a: int, b: int, problems: list[_Found]) -> None:
        """Note what was found in ``[a, b)`` of ``owner``."""
        self._done.setdefault(owner, []).append((a, b, problems))


def check(store: SQLStore, *, deep: bool = False) -> list[Problem]:
    """Check the store: every problem found, the store's own first (empty when all is well).

    Args:
        store: the store.
        deep: also check every row's layout, settings and scratchpad history (every
            record is decoded either way).

    Raises:
        StoreError: the store is closed or cannot be reached (damage is reported, not raised).
    """
    store._check_open()
    problems = _engine(store)
    q = store._q
    try:
        keys = store._all(
            store.dialect.sql("SELECT pk, id, {live} FROM sessions ORDER BY pk"), (), "list rows"
        )
    except StoreCorruptError as exc:
        problems.append(Problem(f"the table of sessions cannot be read: {_why(exc)}", engine=True))
        return problems
    every = {int(pk) for pk, _, _ in keys}
    ranges = _Ranges()
    for pk, sid, live in keys:
        if not live:
            continue
        try:
            r = store._one(q.row_by_pk, (pk,), "read the row of", sid)
        except StoreCorruptError as exc:
            what = f"its row or its newest record cannot be read: {_why(exc)}"
            problems.append(Problem(what, sid))
            continue
        if r is None:
            continue  # deleted since it was listed
        try:
            row = row_from_columns(r, None, store._sealer)
        except StoreCorruptError as exc:
            problems.append(Problem(str(exc), sid if isinstance(sid, str) else repr(sid)))
            continue
        if deep:
            found = _row_problems(store, row, every)
            problems.extend(found)
            if found:
                continue  # a layout that does not hold cannot say which records to read
            problems.extend(_records(store, row, ranges))
        else:
            # Every record is decoded by the plain check too: a payload that cannot be
            # read is the damage a user meets first, and decoding costs little more
            # than counting (the deep check adds the rows' layouts and settings).
            problems.extend(_records(store, row, ranges))
    try:
        orphans = store._all(q.orphans, (), "find rows without a session")
    except StoreCorruptError as exc:
        what = f"rows that belong to no session cannot be looked for: {_why(exc)}"
        problems.append(Problem(what, engine=True))
    else:
        for (owner,) in orphans:
            problems.append(Problem(f"rows of owner {owner} belong to no session (unreadable)"))
    return problems


def _engine(store: SQLStore) -> list[Problem]:
    """The database's own integrity check, as problems (its failing is one too)."""
    try:
        with store._snapshot("check the database") as conn:
            lines = store._engine_problems(conn)
    except StoreCorruptError as exc:
        return [Problem(f"the database's own check stopped: {_why(exc)}", engine=True)]
    return [Problem(f"the database's own check: {line}", engine=True) for line in lines]


def _row_problems(store: SQLStore, row: SessionRow, every: set[int]) -> list[Problem]:
    """What is wrong with a decoded row itself: layout, status, settings, scratchpads."""
    out: list[str] = []
    lay = row.layout
    start = 0
    for owner, height in lay.bases:
        if owner not in every:
            out.append(f"its layout reads rows of owner {owner}, which no session row keeps")
        if height < start:
            out.append(f"its layout's shared segments are out of order ({lay.bases})")
        start = height
    if not start <= lay.end_seq:
        out.append(f"its layout ends at {lay.end_seq}, before its shared rows ({start})")
    if not 0 <= lay.view_start <= lay.end_seq or not 0 <= lay.view_msgs <= lay.end_msgs:
        out.append(
            f"its view ({lay.view_start}, {lay.view_msgs} messages) is outside its "
            f"{lay.end_seq} records ({lay.end_msgs} messages)"
        )
    if row.status not in _STATUSES:
        out.append(f"its status is {row.status!r}, not one of {sorted(_STATUSES)}")
    settings = row.metadata.get(_SETTINGS)
    if settings is not None and not isinstance(settings, dict):
        out.append(f"its settings are a {type(settings).__name__}, not a JSON object")
    try:
        store.scratchpad_history(row.id)
    except StoreCorruptError as exc:
        out.append(f"its scratchpad history cannot be read: {_why(exc)}")
    return [Problem(what, row.id) for what in out]


def _records(store: SQLStore, row: SessionRow, ranges: _Ranges) -> list[Problem]:
    """Decode every record of the session, segment by segment (the deep check)."""
    out: list[Problem] = []
    lay = row.layout
    before: int | None = 0  # messages before the segment, while every record so far decoded
    for owner, a, b in segments(lay, row.pk, 0, lay.end_seq):
        found = ranges.found(owner, a, b)
        total: int | None = None
        if found is None:
            found, total = _decode(store, owner, a, b)
            ranges.add(owner, a, b, found)
        shared = "" if owner == row.pk else " (a row it shares with the session it branched from)"
        for seq, rid, what, messages in found:
            kept = None if before is None else max(before + messages - lay.view_msgs, 0)
            out.append(Problem(what + shared, row.id, seq, rid, kept=kept))
            before = None
        before = None if before is None or total is None else before + total
    return out


def _decode(store: SQLStore, owner: int, a: int, b: int) -> tuple[list[_Found], int]:
    """Decode the records at ``[a, b)`` of one owner: what is wrong, and the messages read."""
    base = owner << _SHIFT
    problems: list[_Found] = []
    messages = 0
    select = store.dialect.sql(
        "SELECT key, id, kind, payload, meta, created_at, tokens, running FROM records "
        "WHERE key >= ? AND key < ? ORDER BY key"
    )
    for lo in range(a, b, _CHUNK):
        hi = min(lo + _CHUNK, b)
        try:
            rows = store._all(select, (base | lo, base | hi), "read records")
        except StoreCorruptError:
            rows = _one_by_one(store, base, lo, hi)
        expected = lo
        for found in rows:
            seq = int(found[0]) & SEQ_MAX
            for gone in range(expected, seq):
                problems.append((gone, None, "the record is missing", messages))
            expected = seq + 1
            if len(found) == 2:  # unreadable (see _one_by_one)
                problems.append((seq, None, f"the record cannot be read: {found[1]}", messages))
                continue
            _, rid, kind, payload, meta, created, tokens, running = found
            try:
                if store._sealer is not None:  # an encrypted store's row is opened first
                    _, rid, kind, payload, meta, *_ = store._sealer.open_rows([found])[0]
                decode_record(
                    kind, payload, seq=seq, id=rid, created_at_us=created, meta=meta, tokens=tokens
                )
            except StoreCorruptError as exc:
                # The decoder names the position the problem already carries.
                what = str(exc).removeprefix(f"record seq={seq} ")
                rid = rid if isinstance(rid, str) else None
                problems.append((seq, rid, f"the record does not decode: {what}", messages))
                continue
            if running is not None:
                try:
                    Tally.from_json(running)
                except (InvalidArgumentError, TypeError) as exc:
                    problems.append(
                        (seq, rid, f"its token tally cannot be decoded: {exc}", messages)
                    )
            messages += kind != "event"
        for gone in range(expected, hi):
            problems.append((gone, None, "the record is missing", messages))
    return problems, messages


def _one_by_one(store: SQLStore, base: int, lo: int, hi: int) -> list[tuple[Any, ...]]:
    """Read ``[lo, hi)`` a record at a time: each row, or ``(key, why)`` for one unreadable."""
    point = store.dialect.sql(
        "SELECT key, id, kind, payload, meta, created_at, tokens, running FROM records "
        "WHERE key = ?"
    )
    rows: list[tuple[Any, ...]] = []
    for seq in range(lo, hi):
        try:
            found = store._one(point, (base | seq,), "read a record")
        except StoreCorruptError as exc:
            rows.append((base | seq, _why(exc)))
            continue
        if found is not None:
            rows.append(tuple(found))
    return rows


def _why(exc: StoreCorruptError) -> str:
    """What the database said (a driver's error), else the error's own text.

    The store's message around a driver error advises running this check; in
    the check's own report that is noise.
    """
    cause = exc.__cause__
    return str(cause) if cause is not None and not isinstance(cause, PlaitError) else str(exc)
