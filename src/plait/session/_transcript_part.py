"""``session.transcript``: the stored log beyond the seed verbs, and how it is viewed.

:class:`SessionTranscript` reads the records and the views of them
(:mod:`~plait.session.reading`, :mod:`~plait.session.streaming`,
:mod:`~plait.session.context`), appends what the seed verbs do not (several
messages at once, events), reopens, undoes a compaction, and rewinds in place
(:mod:`~plait.session.rewinding`, D115; with the files through
:mod:`~plait.session.checkpoints`, D149).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from plait._checks import check_list
from plait._time import from_micros
from plait.compaction import CompactionPlan
from plait.context import ModelLimits
from plait.errors import InvalidArgumentError
from plait.lineage import Ancestry
from plait.records import EventRecord, JSONLike, JSONValue, Message, Record, SummaryRecord
from plait.render import LineageBox
from plait.session import checkpoints, context, reading, rewinding, streaming, writes
from plait.session._part import Part
from plait.session._values import Snapshot, check_count, json_object

__all__ = ["READ_BATCH", "SessionTranscript"]

READ_BATCH = 4096
"""Positions :meth:`SessionTranscript.iter_history` and ``iter_records`` read at a time."""


def _batch(batch: object) -> int:
    n = check_count(batch, "batch")
    if n == 0:
        raise InvalidArgumentError("batch must be at least 1")
    return n


class SessionTranscript(Part):
    """The session's stored log: its records, their views, their state and rewinds.

    Reached as ``session.transcript``; made on each access, it holds only the handle.
    """

    __slots__ = ()

    # -- state ------------------------------------------------------------------------------

    @property
    def stored(self) -> bool:
        """Whether the session has been written to the store (a new one is not, until used)."""
        return self._head.row is not None

    @property
    def status(self) -> str:
        """``open`` or ``closed``.

        Raises:
            SessionNotFoundError: the stored session is gone.
        """
        return self._head.fresh().status if self.stored else "open"

    @property
    def closed(self) -> bool:
        """Whether the session was closed with :meth:`Session.close`."""
        return self.status == "closed"

    def reopen(self) -> None:
        """Reopen a closed session so its transcript can be written again.

        Raises:
            SessionNotFoundError: the session is not stored.
        """
        writes.reopen(self._head)

    @property
    def created_at(self) -> datetime:
        """When the session was stored (UTC).

        Raises:
            SessionNotFoundError: the session was never stored.
        """
        return from_micros(self._head.require().created_at_us)

    @property
    def updated_at(self) -> datetime:
        """When the session was last written (UTC).

        Raises:
            SessionNotFoundError: the session was never stored, or is gone.
        """
        return from_micros(self._head.fresh().updated_at_us)

    @property
    def branched_at(self) -> int | None:
        """For a ``fork_at`` branch, how many messages of its parent it kept."""
        return self._head.row.branched_at if self._head.row is not None else None

    # -- reading ----------------------------------------------------------------------------

    @property
    def records(self) -> list[Record]:
        """Every record in view, oldest first (events included).

        Raises:
            SessionNotFoundError: the session was never stored, or is gone.
        """
        return context.view(self._head, self._head.fresh())

    @property
    def length(self) -> int:
        """How many messages are in view (events are not counted).

        Raises:
            SessionNotFoundError: the session was never stored, or is gone.
        """
        return self._head.fresh().layout.length

    @property
    def shown_length(self) -> int:
        """How many messages in view a person sees.

        :attr:`length` less the summaries an :meth:`uncompact` hid and the user messages
        an agent added (``added``): no history shows them (they keep their place in the
        numbering ``fork_at`` counts).

        Raises:
            SessionNotFoundError: the session was never stored, or is gone.
        """
        return reading.shown_length(self._head)

    def tail(self, n: int = 20) -> list[Record]:
        """Return the records of the last ``n`` messages in view, oldest first.

        Messages are counted as :attr:`shown_length` counts them: events are not
        messages, nor is a summary an :meth:`uncompact` hid, so those among (and after)
        the messages come along uncounted. The cost does not grow with the transcript.

        Args:
            n: how many messages.

        Returns:
            Their records, with the events and hidden summaries among them.

        Raises:
            InvalidArgumentError: ``n`` is negative.
        """
        return reading.tail(self._head, check_count(n, "n"))

    def iter_history(self, full: bool = False, *, batch: int = READ_BATCH) -> Iterator[Message]:
        """:meth:`Session.history`'s messages, read ``batch`` positions at a time.

        What it holds does not grow with the transcript: one batch of records at a
        time. The session's row is read now: the iteration yields what
        ``history`` returns now, whatever is written meanwhile. Showing every
        message (``full=True``) of a compacted session reads the part after its first
        summary twice (whether a summary was undone is told by the events after it).

        Args:
            full: as for :meth:`Session.history`.
            batch: positions read at a time.

        Returns:
            An iterator of the messages.

        Raises:
            SessionNotFoundError: the session was never stored, or is deleted while read.
            InvalidArgumentError: ``batch`` is not a positive int.
        """
        return streaming.iter_history(self._head, full, _batch(batch))

    def iter_records(self, *, batch: int = READ_BATCH) -> Iterator[Record]:
        """:attr:`records`, read ``batch`` positions at a time (held: one batch).

        Args:
            batch: positions read at a time.

        Returns:
            An iterator of the records in view.

        Raises:
            SessionNotFoundError: the session was never stored, or is deleted while read.
            InvalidArgumentError: ``batch`` is not a positive int.
        """
        return streaming.iter_records(self._head, _batch(batch))

    def request_messages(self, reads: Collection[str] = ()) -> list[Message]:
        """The messages the next model call sends: the system prompt, then the history.

        Args:
            reads: the opaque-item formats the provider reads (``Provider.reads_formats``);
                opaque items of other formats are not sent.

        Returns:
            The request's messages.
        """
        return context.request_messages(self._head, reads)

    def snapshot(self) -> Snapshot | None:
        """Return a read-only snapshot, or None for a session not stored (seed 003)."""
        return reading.snapshot(self._head)

    def ancestry(self) -> Ancestry:
        """Return ``Ancestry(parent_id, child_ids, root_id)``; a deleted parent ends the walk.

        Raises:
            SessionNotFoundError: the session was never stored.
        """
        return reading.ancestry(self._head)

    def lineage(self) -> list[LineageBox]:
        """The boxes of the session's lineage drawing: its ancestors and descendants.

        Raises:
            SessionNotFoundError: the session was never stored, or is gone.
        """
        return reading.lineage(self._head, self._head.fresh())

    # -- appending --------------------------------------------------------------------------

    def inject_many(
        self, messages: Iterable[Mapping[str, JSONValue]], *, expect_version: int | None = None
    ) -> list[Record]:
        """Append several messages in one transaction; one bad message and none are stored.

        Args:
            messages: messages as :meth:`Session.inject` takes them.
            expect_version: write only if the head is still this version.

        Returns:
            The stored records, in order.

        Raises:
            InvalidArgumentError: no messages. InvalidMessageError: a bad message.
            SessionClosedError: the session was closed.
            StaleSessionError: ``expect_version`` is not the head.
        """
        batch = check_list(messages, "messages")
        if not batch:
            raise InvalidArgumentError("inject_many needs at least one message")
        _, records = self._head.mutate(self._head.messages(batch), expect_version=expect_version)
        return list(records)

    def log_event(
        self,
        name: str,
        data: Mapping[str, JSONLike] | None = None,
        *,
        expect_version: int | None = None,
    ) -> EventRecord:
        """Append an event: something that happened that the model never sees.

        Args:
            name: what happened.
            data: a JSON object about it.
            expect_version: write only if the head is still this version: a compare-and-set.

        Returns:
            The stored event.

        Raises:
            InvalidArgumentError: a blank name or data that is not a JSON object.
            StaleSessionError: ``expect_version`` is not the head.
        """
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgumentError("an event needs a non-blank name")
        payload = json_object(data or {}, "event data")
        record = self._head.event(name, payload, expect_version=expect_version)
        assert isinstance(record, EventRecord)
        return record

    # -- compaction -------------------------------------------------------------------------

    def compact_preview(
        self, options: Mapping[str, Any] | None = None, **more: Any
    ) -> CompactionPlan | None:
        """What :meth:`Session.compact` would fold now, writing nothing.

        Args:
            options: seed 003's compaction options.
            **more: options as keywords.

        Returns:
            The plan, or None when there is nothing to fold.

        Raises:
            UnknownOptionError, InvalidArgumentError: bad options.
        """
        return context.preview(self._head, context.merged_options(options, more))

    def uncompact(self) -> SummaryRecord:
        """Undo the newest compaction (appends ``compaction_undone``); returns its summary.

        Raises:
            NothingToDoError: there is no compaction to undo.
        """
        return context.uncompact(self._head)

    def compaction_due(
        self,
        model: str | None = None,
        tools: Iterable[object] | None = None,
        *,
        declared: ModelLimits | Mapping[str, JSONValue] | None = None,
        reserve: int | None = None,
    ) -> bool:
        """Whether the context, with room for the reply, is at the ``compact_percent`` mark.

        Args:
            model: the model of the next request.
            tools: the tool specs offered.
            declared: what the model's server declares of it.
            reserve: the tokens the reply may take (the run's ``max_tokens``); without it
                the model's output limit when known.

        Returns:
            True when the session should be compacted before the next request.
        """
        return context.compaction_due(self._head, model, tools, declared, reserve)

    # -- rewinding --------------------------------------------------------------------------

    def rewind(
        self, keep_first: int, *, expect_version: int | None = None, files: bool = False
    ) -> str:
        """Move the head back in place: keep the first ``keep_first`` messages, keep the id.

        Messages are counted as :meth:`Session.fork_at` counts them (events are not
        messages; opaque items are). The session keeps its id, title, settings and view
        state (a compaction undone stays undone); what it held before stays reachable as
        a *hidden head* in the lineage, so :meth:`undo_rewind` can bring it back. Atomic,
        and its cost does not grow with the transcript or the number of sessions.

        Args:
            keep_first: how many messages to keep.
            expect_version: rewind only if the head is still this version.
            files: also bring the workspace back to the files as they were after those
                messages (from the workspace checkpoints); the files as they are now are
                saved first, so ``undo_rewind(files=True)`` brings them back (D149).

        Returns:
            The id of the hidden head that keeps the old head.

        Raises:
            InvalidArgumentError: a negative count, or more messages than the session has.
            NothingToDoError: nothing lies past that message; with ``files``, no
                checkpoint tells the files at that message.
            SessionBusyError: a run is driving the session.
            SessionClosedError: the session is closed.
            StaleSessionError: ``expect_version`` is not the head.
        """
        if not isinstance(files, bool):
            raise InvalidArgumentError(f"files is True or False, not {files!r}")
        if files:
            return checkpoints.rewind_with_files(
                self._session,
                keep_first,
                expect_version,
                lambda version: rewinding.rewind(self._head, keep_first, version),
            )
        return rewinding.rewind(self._head, keep_first, expect_version)

    def undo_rewind(
        self,
        branch_id: str | None = None,
        *,
        expect_version: int | None = None,
        files: bool = False,
    ) -> str:
        """Give the id back to a hidden head (the newest by default), undoing a rewind.

        What the session held until now becomes a hidden head in turn. With
        ``files=True`` the workspace gets back the files that head ends with (what a
        ``rewind(..., files=True)`` saved), after the files as they are now are saved.

        Args:
            branch_id: the hidden head to bring back (default: the newest).
            expect_version: undo only if the head is still this version.
            files: also bring back the files that head ends with.

        Returns:
            The id of the hidden head that keeps what the session held until now.

        Raises:
            NothingToDoError: there is no rewind to undo.
            InvalidArgumentError: ``branch_id`` is not one of the session's hidden heads.
        """
        if not isinstance(files, bool):
            raise InvalidArgumentError(f"files is True or False, not {files!r}")
        if files:
            return checkpoints.undo_rewind_with_files(
                self._session,
                branch_id,
                expect_version,
                lambda version: rewinding.undo_rewind(self._head, branch_id, version),
            )
        return rewinding.undo_rewind(self._head, branch_id, expect_version)

    def hidden_heads(self) -> list[str]:
        """The ids of the heads earlier rewinds left hidden, the most recent first."""
        return [row.id for row in rewinding.hidden_heads(self._head)]
