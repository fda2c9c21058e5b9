"""Copy-on-write transcript layouts: which stored rows make up a session.

Pure: no I/O. A session's transcript is the prefix of its base's transcript it
branched from, plus the rows it wrote itself. The base's prefix is in turn its
own base's prefix plus its rows, so a layout is a short list of *segments*,
each a run of positions ``[lo, hi)`` whose rows were written by one owner
session. A fork copies that list (a few integers), never a record: its cost
does not depend on how long the transcript is.

Positions (``seq``) are shared: the record at position ``p`` has the same
``seq`` in every branch whose layout reaches it. Trim and reset move
``view_start`` forward; the rows before it stay stored and other branches
keep them.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from operator import itemgetter

from plait.records import Record, SummaryRecord

__all__ = [
    "Layout",
    "Probe",
    "Segment",
    "branch",
    "branched_from",
    "find_message",
    "merge_copies",
    "segments",
    "segments_backward",
    "shared_prefix",
]

Segment = tuple[int, int, int]
"""``(owner, lo, hi)``: the rows at positions ``[lo, hi)`` were written by ``owner``."""

Probe = Callable[[int], tuple[int, bool]]
"""Look up position ``seq``: return ``(messages before it, whether it is a message)``."""


@dataclass(slots=True)
class Layout:
    """Where the rows of one session's transcript live, and what its view shows.

    A value: never changed in place (every change makes a new one). It is not a
    frozen dataclass only because one is built per record appended, and a frozen
    one costs five times more to build.
    """

    bases: tuple[tuple[int, int], ...] = ()
    """Inherited segments as ``(owner, hi)``; each starts where the previous ends (first at 0)."""
    end_seq: int = 0
    """One past the last position (the next record's ``seq``)."""
    end_msgs: int = 0
    """Messages (non-event records) at positions ``[0, end_seq)``."""
    view_start: int = 0
    """The first position the session's views show; trim and reset move it forward."""
    view_msgs: int = 0
    """Messages at positions ``[0, view_start)``."""
    @property
    def own_lo(self) -> int:
        """The first position of the rows the session wrote itself."""
        return self.bases[-1][1] if self.bases else 0

    @property
    def length(self) -> int:
        """Messages in view (events are not counted)."""
        return self.end_msgs - self.view_msgs

    @property
    def size(self) -> int:
        """Records in view, events included."""
        return self.end_seq - self.view_start

    def appended(self, records: int, messages: int) -> Layout:
        """Return the layout after appending ``records`` rows of which ``messages`` are messages."""
        return Layout(
            self.bases,
            self.end_seq + records,
            self.end_msgs + messages,
            self.view_start,
            self.view_msgs,
        )


def segments(layout: Layout, own: int, lo: int, hi: int) -> list[Segment]:
    """Return the segments covering positions ``[lo, hi)``, clipped, in order.

    Args:
        layout: the session's layout.
        own: the owner key of the session itself (for the rows it wrote).
        lo: first position wanted.
        hi: one past the last position wanted.
    """
    bases = layout.bases
    n = len(bases)
    # Segments ending at or before lo contribute nothing, nor do those after the first
    # that reaches hi: two binary searches, so a read near the head of a long chain of
    # branches costs the segments it reads, not the chain's length.
    i = bisect_right(bases, lo, key=_end) if n and lo > 0 else 0
    stop = bisect_left(bases, hi, lo=i, key=_end) if n else 0
    picked = bases[i : stop + 1] if stop < n else (*bases[i:], (own, layout.end_seq))
    start = bases[i - 1][1] if i else 0
    out: list[Segment] = []
    for owner, end in picked:
        a = start if start > lo else lo
        b = end if end < hi else hi
        if a < b:
            out.append((owner, a, b))
        start = end
    return out


def segments_backward(layout: Layout, own: int) -> Iterator[Segment]:
    """Yield the non-empty segments of positions ``[0, end_seq)``, the newest first.

    Lazily: a backward scan that stops early (the newest counted position, say)
    costs the segments it looks at, not the length of a chain of branches.
    """
    bases = layout.bases
    hi = layout.end_seq
    owner = own
    for i in range(len(bases), -1, -1):
        if i < len(bases):
            owner, hi = bases[i]
        lo = bases[i - 1][1] if i else 0
        if lo < hi:
            yield owner, lo, hi


_end: Callable[[tuple[int, int]], int] = itemgetter(1)
"""A segment's end: the bisections' key (a C callable, called about ten times a search)."""


def _prefix(
    layout: Layout, own: int, cut: int
) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...] | None]:
    """The segments of positions ``[0, cut)`` as ``(owner, hi)``, the empty ones left out.

    The whole segments before the cut are kept as they are (a slice of the
    tuple), so a branch of a session deep in a chain of branches copies its
    segment list without walking it. Returned with the tuple of those kept
    segments when one segment was added after them (else None): see
    :attr:`Layout.cut_from`.
    """
    bases = layout.bases
    if cut <= 0:
        return (), None
    # The first segment that reaches the cut; every one before it ends short of it.
    i = bisect_left(bases, cut, key=_end)
    if i < len(bases) and bases[i][1] == cut:
        # The cut ends a segment: the pairs up to it are the source's own, the very
        # objects (all of them, the tuple itself, for a branch of a session that has
        # written nothing since it branched).
        return bases[: i + 1], None
    kept = bases[:i]
    start = kept[-1][1] if kept else 0
    owner = bases[i][0] if i < len(bases) else own
    if start >= cut:
        return kept, None
    # A concatenation copies the pairs once (unpacking into a display copies them twice).
    return kept + ((owner, cut),), kept  # noqa: RUF005


def branch(layout: Layout, own: int, cut: int, cut_msgs: int) -> Layout:
    """Return the layout of a branch that shares positions ``[0, cut)`` of ``layout``.

    Args:
        layout: the source session's layout.
        own: the source session's owner key.
        cut: how many positions the branch shares (``<= layout.end_seq``).
        cut_msgs: how many messages lie before ``cut``.

    Returns:
        A layout whose rows are all inherited (no rows of its own yet), whose
        view starts where the source's does (or at ``cut`` if that is earlier).
    """
    if not 0 <= cut <= layout.end_seq:
        raise ValueError(f"cut {cut} outside [0, {layout.end_seq}]")
    bases, kept = _prefix(layout, own, cut)
    view_start, view_msgs = layout.view_start, layout.view_msgs
    if view_start > cut:
        view_start, view_msgs = cut, cut_msgs
    if kept is not None:
        _branched[0] = (bases, kept)
    return Layout(bases, cut, cut_msgs, view_start, view_msgs)


_Pairs = tuple[tuple[int, int], ...]
_branched: list[tuple[_Pairs, _Pairs] | None] = [None]
# The last branch's pairs with the tuple they repeat before their last (replaced whole,
# so a reader in another thread sees one branch's or another's, never a mix).


def branched_from(bases: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...] | None:
    """The very tuple whose pairs ``bases`` repeats before its last, or None.

    Known for the pairs of the latest :func:`branch` only (one entry, by identity), so
    that a store writing that branch spells its layout from the source's text without
    comparing a thousand pairs. None for any other (an appended or replaced layout's, a
    branch made before another): a store then works it out as before.
    """
    last = _branched[0]
    return last[1] if last is not None and last[0] is bases else None


def shared_prefix(a: Layout, a_own: int, b: Layout, b_own: int) -> int:
    """Return how many leading positions two layouts share row for row.

    Two branches share a position only when both read the very same stored row
    there; equal text written twice is not shared.
    """
    sa = segments(a, a_own, 0, a.end_seq)
    sb = segments(b, b_own, 0, b.end_seq)
    i = j = pos = 0
    while i < len(sa) and j < len(sb):
        (oa, _, ha), (ob, _, hb) = sa[i], sb[j]
        if oa != ob:
            break
        pos = min(ha, hb)
        if ha == pos:
            i += 1
        if hb == pos:
            j += 1
    return pos


def find_message(layout: Layout, ordinal: int, probe: Probe) -> int:
    """Return the position of the message with the given ordinal (0-based, counted from 0).

    Each position holds at most one message, so a position ``d`` messages short
    of the target is at least ``d`` positions before it; jumping by that
    deficit needs one probe per run of events in between, not one per record.

    Args:
        layout: the session's layout.
        ordinal: the wanted message's number among all messages of the lineage,
            ``layout.view_msgs <= ordinal < layout.end_msgs``.
        probe: reads one position.

    Raises:
        ValueError: if the ordinal is outside the view.
    """
    if not layout.view_msgs <= ordinal < layout.end_msgs:
        raise ValueError(f"message {ordinal} outside [{layout.view_msgs}, {layout.end_msgs})")
    pos = layout.view_start + (ordinal - layout.view_msgs)
    while pos < layout.end_seq:
        before, is_message = probe(pos)
        if before == ordinal and is_message:
            return pos
        pos += max(1, ordinal - before)
    raise ValueError(f"message {ordinal} not found before position {layout.end_seq}")


def _moved(p: int, shared: int, start: int, pos: int) -> int:
    """Where position ``p`` of a merged-in branch lands in the merged transcript.

    Positions in the shared prefix stay; the copied tail ``[start, ...)`` moves
    to ``pos``; a position in between (hidden in that branch) lands at ``pos``.
    """
    if p < shared:
        return p
    return p - start + pos if p >= start else pos


def merge_copies(tail: Sequence[Record], shared: int, start: int, pos: int) -> list[Record]:
    """The copies a merge appends for one merged-in branch.

    ``tail`` is that branch's records from ``start`` (past the prefix of ``shared``
    positions it has in common with the merge's first parent, and inside its view);
    they land at ``pos`` onwards. A summary's folded range moves with them, so it
    still names the same records in the merged transcript.
    """
    offset = pos - start
    copies: list[Record] = []
    for record in tail:
        if isinstance(record, SummaryRecord):
            record = replace(
                record,
                folds_from=_moved(record.folds_from, shared, start, pos),
                folds_to=_moved(record.folds_to, shared, start, pos),
            )
        copies.append(replace(record, seq=record.seq + offset))
    return copies
