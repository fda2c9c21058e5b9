"""What a host's writers know of their sessions' transcripts without asking the store.

A :class:`Memo` holds, for one epoch of a session's row (its ``pk`` and
``row_version``: a trim, a reset or a rewind starts another; an append does not), a
run of records up to the head as read or appended, the counts already stored, and a
few records read by position. Records are immutable, so what a memo holds stays true
for its epoch whoever writes meanwhile, the writer lock taken or not: a row read
fresh tells whether a memo still describes it.

:class:`Memos` keeps them per session for a host, the most recently used ones only
(:data:`MEMOS_KEPT`), so a session run again and again (a server gives its lock up
after every run, and may make a new handle for the next) does not read and decode its
whole transcript for each run.

:class:`Caches` is everything a host remembers of stored sessions to save a read:
its :class:`Memos`, each view's usage summed so far, and the system prompts a trim
or reset hid. Each entry is keyed by what makes it true (a row's ``pk``, never its
id, which a deleted session gives back for reuse) and bounded.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from plait.context import Tally
from plait.records import Record
from plait.session._values import SessionUsage
from plait.store.base import SessionRow

__all__ = ["MEMOS_KEPT", "SUMS_KEPT", "WINDOW_MAX", "Caches", "Memo", "Memos"]

WINDOW_MAX: Final = 4096
"""The most records a memo's window holds (a longer request is read from the store)."""
MEMOS_KEPT: Final = 32
"""The sessions a host keeps memos of (the most recently used)."""
SUMS_KEPT: Final = 1024
"""The session views a host keeps a usage sum and a hidden system prompt of (each)."""


@dataclass(slots=True)
class Memo:
    """What a writer's head knows of its transcript without asking the store again.

    Valid for one epoch of the row: the same ``pk`` and ``row_version`` (a change of
    the row itself, such as a trim, a reset or a rewind, starts a new epoch; an
    append does not). Records are immutable, so a position read or written in the
    epoch stays what it was.
    """

    pk: int
    """The row's store key."""
    row_version: int
    """The row version the memo belongs to."""
    counted_end: int = 0
    """Positions before this are counted, and their counts stored."""
    tally: Tally | None = None
    """The tally at ``counted_end - 1`` (None when nothing is counted)."""
    tallies: dict[int, Tally] = field(default_factory=dict)
    """Tallies this head counted, by position (within the window)."""
    window_lo: int = 0
    """``window`` holds the records at positions ``[window_lo, window_lo + len(window))``."""
    window: list[Record] = field(default_factory=list)
    """A contiguous run of records up to the head, as read or appended by this head."""
    extra: dict[int, Record] = field(default_factory=dict)
    """A few records read by position outside the window (system prompt, summary)."""
    seeded: bool = False
    """Whether ``window`` holds what a read found (until then appends are not kept)."""

    def valid_for(self, row: SessionRow) -> bool:
        """Whether the memo describes ``row``'s epoch."""
        return self.pk == row.pk and self.row_version == row.row_version

    @property
    def window_end(self) -> int:
        """One past the window's last position."""
        return self.window_lo + len(self.window)

    def record(self, seq: int) -> Record | None:
        """The record at ``seq`` if the memo holds it."""
        if self.seeded and self.window_lo <= seq < self.window_end:
            return self.window[seq - self.window_lo]
        return self.extra.get(seq)

    def records(self, lo: int, hi: int) -> list[Record] | None:
        """The records at ``[lo, hi)`` if the window holds them all, else None."""
        if self.seeded and self.window_lo <= lo and hi <= self.window_end:
            return self.window[lo - self.window_lo : hi - self.window_lo]
        return None

    def extend(self, records: Sequence[Record]) -> None:
        """Records appended at the head: kept when they continue a window a read seeded.

        A window that outgrows what one request carries is let go (the next request
        reads), so a writer that only appends holds no more than that in memory.
        """
        if not self.seeded or not records or records[0].seq != self.window_end:
            return
        if len(self.window) + len(records) > WINDOW_MAX:
            self.seeded, self.window = False, []
            return
        self.window.extend(records)

    def seed(self, lo: int, records: Sequence[Record]) -> None:
        """Records read at ``[lo, ...)`` up to the head become the window."""
        self.seeded = len(records) <= WINDOW_MAX
        self.window_lo, self.window = lo, list(records) if self.seeded else []
        # The tally just before the window is what a report subtracts: keep it too.
        self.tallies = {p: t for p, t in self.tallies.items() if p >= lo - 1}


class Memos:
    """A host's memos, one per session, the :data:`MEMOS_KEPT` most recently used."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, Memo] = OrderedDict()
        self._lock = threading.Lock()

    def for_row(self, session_id: str, row: SessionRow) -> Memo:
        """The memo of ``row``'s epoch (a new one when the one kept is of another)."""
        with self._lock:
            memo = self._kept.get(session_id)
            if memo is None or not memo.valid_for(row):
                memo = self._kept[session_id] = Memo(row.pk, row.row_version)
            self._kept.move_to_end(session_id)
            while len(self._kept) > MEMOS_KEPT:
                self._kept.popitem(last=False)
            return memo

    def appended(self, session_id: str, row: SessionRow, records: Sequence[Record]) -> None:
        """``records`` were appended, making ``row``: the memo of its epoch keeps them."""
        with self._lock:
            memo = self._kept.get(session_id)
        if memo is not None and memo.valid_for(row):
            memo.extend(records)


class Caches:
    """What a host remembers of stored sessions, so it does not read it again.

    The writers' memos (:class:`Memos`), the usage summed so far of each view, and
    the system prompt a trim or reset hid from each view (the prefix before a view's
    start never changes). The memos are the :data:`MEMOS_KEPT` most recently used;
    the sums and the prompts, keyed by the row's ``pk`` and view start, the
    :data:`SUMS_KEPT` most recently used of each.
    """

    def __init__(self) -> None:
        self._memos = Memos()
        self._sums: OrderedDict[tuple[int, int], tuple[int, SessionUsage]] = OrderedDict()
        self._hidden: OrderedDict[tuple[int, int], str | None] = OrderedDict()
        self._lock = threading.Lock()

    def memo(self, session_id: str, row: SessionRow) -> Memo:
        """The memo of ``row``'s epoch (a new one when the one kept is of another)."""
        return self._memos.for_row(session_id, row)

    def appended(self, session_id: str, row: SessionRow, records: Sequence[Record]) -> None:
        """``records`` were appended, making ``row``: the memo of its epoch keeps them."""
        self._memos.appended(session_id, row, records)

    def usage_sum(self, row: SessionRow) -> tuple[int, SessionUsage] | None:
        """The position the usage of ``row``'s view was summed to, and the sum; None if none."""
        key = (row.pk, row.layout.view_start)
        with self._lock:
            found = self._sums.get(key)
            if found is not None:
                self._sums.move_to_end(key)
            return found

    def remember_usage(self, row: SessionRow, end: int, total: SessionUsage) -> None:
        """Keep the usage of ``row``'s view summed to ``end`` (the least recently used go)."""
        with self._lock:
            self._sums[(row.pk, row.layout.view_start)] = (end, total)
            self._sums.move_to_end((row.pk, row.layout.view_start))
            while len(self._sums) > SUMS_KEPT:
                self._sums.popitem(last=False)

    def hidden_system(self, row: SessionRow, read: Callable[[], str | None]) -> str | None:
        """The system prompt before ``row``'s view start: remembered, or ``read()`` once."""
        key = (row.pk, row.layout.view_start)
        with self._lock:
            if key in self._hidden:
                self._hidden.move_to_end(key)
                return self._hidden[key]
        found = read()  # a store read: outside the lock
        with self._lock:
            self._hidden[key] = found
            while len(self._hidden) > SUMS_KEPT:
                self._hidden.popitem(last=False)
        return found
