"""Running tallies: what a transcript holds up to each record, so a report reads O(1) rows.

Counted once (design principle 2), and added once too. Beside its token count, every counted
record row keeps a :class:`Tally` of the lineage up to and including it: the tokens and the
number of user, assistant and tool messages at positions ``[0, seq]``, and the positions of the
newest system prompt, the newest visible compaction summary, the newest reply and the newest
reply that carried the provider's usage; and, since no request sends them, the tokens and
number of cut-off replies and how many messages no history shows. A position is shared
by every branch whose layout reaches it, with the same prefix before it, so a tally is valid
for all of them; a merge copies rows, and the copies get their own.

A context report then needs only the tally at the head and the one just before the history
view starts: ``tokens = head - before``, whatever the transcript's length.

Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from plait.errors import InvalidArgumentError
from plait.records import COMPACTION_UNDONE, EventRecord, Record, UserRecord, is_cut_off

__all__ = ["SUMMARY_UNKNOWN", "TALLIED_KINDS", "Tally"]

TALLIED_KINDS: Final = ("user", "assistant", "tool", "opaque")
"""The kinds whose tokens and items a tally sums, in this order."""

SUMMARY_UNKNOWN: Final = -2
"""``Tally.summary`` when an ``uncompact`` hid a summary that was not the visible one.

The tally cannot follow such a change; a report then falls back to reading the view.
"""

_INDEX: Final = {kind: i for i, kind in enumerate(TALLIED_KINDS)}


@dataclass(frozen=True, slots=True)
class Tally:
    """The lineage at positions ``[0, seq]``: running sums and the newest special records."""

    system: int = -1
    """Position of the newest system prompt, or -1."""
    summary: int = -1
    """Position of the newest summary no ``uncompact`` hid, -1, or :data:`SUMMARY_UNKNOWN`."""
    reply: int = -1
    """Position of the newest assistant record, or -1."""
    usage: int = -1
    """Position of the newest assistant record whose meta carries ``usage``, or -1."""
    tokens: tuple[int, int, int, int] = (0, 0, 0, 0)
    """Tokens of the user, assistant, tool and opaque records (:data:`TALLIED_KINDS`)."""
    items: tuple[int, int, int, int] = (0, 0, 0, 0)
    """How many user, assistant, tool and opaque records."""
    cut: tuple[int, int] = (0, 0)
    """Tokens and number of the assistant records that were cut off (``CUT_OFF``): counted
    in ``tokens`` and ``items`` too, but never sent to the model again."""
    hidden: int = 0
    """Messages no history shows: the summaries an ``uncompact`` hid, and the user
    messages an agent added (``UserRecord.added``)."""

    def to_json(self) -> str:
        """Encode as the compact JSON array a store keeps: ``[system, summary, ...]``."""
        return json.dumps(
            [
                self.system,
                self.summary,
                self.reply,
                self.usage,
                *self.tokens,
                *self.items,
                *self.cut,
                self.hidden,
            ],
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> Tally:
        """Decode :meth:`to_json`'s array.

        A 10-item array, written before opaque items were tallied, has no opaque sums:
        they are 0 (no such record existed then). A 12-item array, written before cut-off
        replies and hidden summaries were tallied, counts none of them (as reports did then).

        Raises:
            InvalidArgumentError: text that is not such an array.
        """
        try:
            v = json.loads(text)
            if not isinstance(v, list) or len(v) not in (10, 12, 15):
                raise ValueError("not a 10-, 12- or 15-item array")
            if not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
                raise ValueError("not all integers")
        except ValueError as exc:
            raise InvalidArgumentError(f"not a stored tally: {text!r} ({exc})") from exc
        if len(v) == 10:
            return cls(v[0], v[1], v[2], v[3], (v[4], v[5], v[6], 0), (v[7], v[8], v[9], 0))
        cut, hidden = ((v[12], v[13]), v[14]) if len(v) == 15 else ((0, 0), 0)
        tokens, items = (v[4], v[5], v[6], v[7]), (v[8], v[9], v[10], v[11])
        return cls(v[0], v[1], v[2], v[3], tokens, items, cut, hidden)

    def advance(
        self, record: Record, tokens: int, summary_before: Callable[[int], int | None]
    ) -> Tally:
        """Return the tally after ``record``, which costs ``tokens``.

        Args:
            record: the record at the next position.
            tokens: its stored count.
            summary_before: ``summary_before(p)`` is the ``summary`` of the tally at position
                ``p`` (None if unknown); an ``uncompact`` of the visible summary at ``s``
                makes the visible one ``summary_before(s - 1)`` again.
        """
        kind = record.kind
        i = _INDEX.get(kind)
        if i is not None:
            t = list(self.tokens)
            n = list(self.items)
            t[i] += tokens
            n[i] += 1
            reply, usage, cut = self.reply, self.usage, self.cut
            if kind == "assistant":
                reply = record.seq
                if isinstance(record.meta.get("usage"), dict):
                    usage = record.seq
                if is_cut_off(record):
                    cut = (cut[0] + tokens, cut[1] + 1)
            hidden = self.hidden
            if kind == "user" and isinstance(record, UserRecord) and record.added is not None:
                hidden += 1  # sent to the model, but not said by the person
            return Tally(
                self.system,
                self.summary,
                reply,
                usage,
                (t[0], t[1], t[2], t[3]),
                (n[0], n[1], n[2], n[3]),
                cut,
                hidden,
            )
        if kind == "system":
            return replace(self, system=record.seq)
        if kind == "summary":
            return replace(self, summary=record.seq)
        if isinstance(record, EventRecord) and record.name == COMPACTION_UNDONE:
            named = record.data.get("summary_seq")
            if not isinstance(named, int) or isinstance(named, bool) or named < 0:
                return self  # names no summary: hides nothing
            summary = SUMMARY_UNKNOWN
            if named == self.summary and self.summary >= 0:
                before = summary_before(self.summary - 1) if self.summary > 0 else -1
                summary = before if before is not None else SUMMARY_UNKNOWN
            return replace(self, summary=summary, hidden=self.hidden + 1)
        return self
