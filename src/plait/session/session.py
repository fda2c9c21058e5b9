"""Session: the handle users hold on one stored conversation (a thin facade).

A handle keeps the session's id and the last row it read (its
:class:`~plait.session._head.Head`); every write is a compare-and-set on the head
that row describes, so two writers can never interleave a transcript, and the
first write takes the session's writer lock for this process. Each verb reads the
row once, so a handle shows what is stored, including what another process wrote.

Identity, reads and the transcript writes live here; every other verb is a short
delegation to the part with that one concern: :mod:`~plait.session.writes`,
:mod:`~plait.session.branching`, :mod:`~plait.session.settings`,
:mod:`~plait.session.binding` (the sandbox), :mod:`~plait.session.context`
(context and compaction), :mod:`~plait.session.runs` and
:mod:`~plait.session.export`. Methods that only touch the store are plain calls;
the ones that call a model or run a tool are ``async``.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from plait._checks import check_list
from plait._collector import paused as paused_collector
from plait._time import from_micros
from plait.compaction import Compaction, CompactionPlan, Summarize
from plait.context import ContextReport, ModelInfo, ModelLimits
from plait.errors import InvalidArgumentError, SessionNotFoundError
from plait.lineage import Ancestry
from plait.providers import Provider
from plait.records import (
    EventRecord,
    JSONValue,
    Message,
    Record,
    SummaryRecord,
)
from plait.render import LineageBox
from plait.session import (
    context,
    export,
    reading,
    streaming,
    writes,
)
from plait.session._branch_verbs import BranchVerbs
from plait.session._head import Head
from plait.session._rewind_verbs import RewindVerbs
from plait.session._run_verbs import RunVerbs
from plait.session._values import (
    ScratchpadUpdate,
    Snapshot,
    check_count,
    json_object,
)
from plait.session._workspace_verbs import WorkspaceVerbs
from plait.store import Store
from plait.store.base import ScratchpadEntry, SessionRow
from plait.views import full_history

READ_BATCH = 4096
"""Positions :meth:`Session.iter_history` and :meth:`Session.iter_records` read at a time."""


def _batch(batch: object) -> int:
    n = check_count(batch, "batch")
    if n == 0:
        raise InvalidArgumentError("batch must be at least 1")
    return n


if TYPE_CHECKING:
    from plait.session.host import SessionHost

__all__ = ["ChunkTable", "Session"]


class Session(RunVerbs, WorkspaceVerbs, RewindVerbs, BranchVerbs):
    """A handle on one session: its transcript, lineage, title and scratchpad.

    Get one from a :class:`plait.Client` (``client.session``,
    ``client.sessions.open(id)``, ``client.open(id)``) or from the seed-000
    constructors :meth:`from_agent_prompt` and :meth:`from_user_message`.
    Handles are cheap; a client hands out one handle per session id.
    """

    __slots__ = ("__weakref__", "_head")

    def __init__(self, host: SessionHost, session_id: str, row: SessionRow | None) -> None:
        self._head = Head(self, host, session_id, row)

    # -- seed 000 constructors --------------------------------------------------------------

    @classmethod
    def from_agent_prompt(cls, prompt: str, *, client: SessionHost | None = None) -> Session:
        """Create a stored session holding one ``system`` record (default: in memory).

        Raises:
            InvalidArgumentError: ``prompt`` is not a string.
        """
        return cls._seeded({"role": "system", "content": prompt}, client)

    @classmethod
    def from_user_message(cls, message: str, *, client: SessionHost | None = None) -> Session:
        """Create a stored session holding one ``user`` record (default: in memory)."""
        return cls._seeded({"role": "user", "content": message}, client)

    @classmethod
    def _seeded(cls, message: Mapping[str, JSONValue], client: SessionHost | None) -> Session:
        from plait.session.host import ephemeral_host

        if not isinstance(message.get("content"), str):
            raise InvalidArgumentError("the text must be a string")
        handle = (client if client is not None else ephemeral_host()).new_session()
        handle.inject(message)
        return handle

    # -- identity and state -----------------------------------------------------------------

    @property
    def head(self) -> Head:
        """The head this handle reads and writes through (for the session layer's parts)."""
        return self._head

    @property
    def id(self) -> str:
        """The session id (a UUIDv7 unless the caller chose one)."""
        return self._head.id

    @property
    def host(self) -> SessionHost:
        """The client (or bare host) this handle belongs to."""
        return self._head.host

    @property
    def store(self) -> Store:
        """The store the session lives in."""
        return self._head.store

    @property
    def path(self) -> str:
        """Where the session is stored: the database file, or ``:memory:``."""
        return self._head.store.location

    @property
    def stored(self) -> bool:
        """Whether the session has been written to the store (a new one is not, until used)."""
        return self._head.row is not None

    @property
    def current(self) -> bool:
        """Whether this is its client's current session."""
        return self._head.host.current is self

    @property
    def version(self) -> int:
        """The head version this handle last saw (0 if not stored)."""
        return self._head.row.version if self._head.row is not None else 0

    @property
    def title(self) -> str | None:
        """The stored title, or None."""
        return self._head.fresh().title if self.stored else None

    @property
    def status(self) -> str:
        """``open`` or ``closed``."""
        return self._head.fresh().status if self.stored else "open"

    @property
    def closed(self) -> bool:
        """Whether the session was closed with :meth:`close`."""
        return self.status == "closed"

    @property
    def workspace(self) -> str:
        """The workspace the session belongs to."""
        row = self._head.row
        return row.workspace if row is not None else self._head.host.workspace

    @property
    def parent_session_ids(self) -> tuple[str, ...]:
        """The lineage parents: one for a fork, several for a merge, none for a root."""
        return self._head.row.parent_ids if self._head.row is not None else ()

    @property
    def lineage_operator(self) -> str | None:
        """How the session was made: ``Session.fork``, ``Session.detach``, ...; None for a root."""
        return self._head.row.lineage_operator if self._head.row is not None else None

    @property
    def branched_at(self) -> int | None:
        """For a ``fork_at`` branch, how many messages of its parent it kept."""
        return self._head.row.branched_at if self._head.row is not None else None

    @property
    def created_at(self) -> datetime:
        """When the session was stored (UTC)."""
        return from_micros(self._head.require().created_at_us)

    @property
    def updated_at(self) -> datetime:
        """When the session was last written (UTC)."""
        return from_micros(self._head.fresh().updated_at_us)

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

    def __len__(self) -> int:
        return self.length

    def __repr__(self) -> str:
        row = self._head.row
        return f"<Session {self.id} {f'v{row.version}' if row is not None else 'not stored'}>"

    @property
    def locked(self) -> bool:
        """Whether another process has the session open for writing (then this one only reads).

        Raises:
            StorePartMissingError: the store has no writer locks, so it cannot say (D420).
        """
        return self._head.locked_elsewhere()

    def acquire(self) -> None:
        """Take the session's writer lock for this process now, and keep it until :meth:`release`.

        A write takes it on demand; with ``writer_lock="write"`` a write gives it back
        after, unless it was taken here.

        Raises:
            SessionLockedError: another process holds it (``writer_lock="write"``:
                SessionLockTimeoutError once ``lock_timeout`` passed).
        """
        self._head.ensure_writer()

    @property
    def holds_lock(self) -> bool:
        """Whether this handle holds the session's writer lock (see :attr:`locked`).

        As far as this process knows: a PostgreSQL lock whose connection was cut is
        found lost at the next write, which raises
        :class:`~plait.errors.WriterLockLostError` if another process took it (D232).
        """
        return self._head.writer

    def release(self) -> None:
        """Give up this process's writer lock, so another process may write the session.

        The next write through this handle takes it again (or raises
        :class:`SessionLockedError` if another process took it meanwhile).
        """
        self._head.release()

    def refresh(self) -> Session:
        """Re-read the stored row (a no-op for a session not stored yet).

        Raises:
            SessionNotFoundError: the session was deleted.
        """
        self._head.refresh()
        return self

    # -- reading ----------------------------------------------------------------------------

    @property
    def records(self) -> list[Record]:
        """Every record in view, oldest first (events included)."""
        return context.view(self._head, self._head.fresh())

    @property
    def chunk_table(self) -> ChunkTable:
        """Seed 000's table of records: ``chunk_table.rows``."""
        return ChunkTable(self)

    def tail(self, n: int = 20) -> list[Record]:
        """Return the records of the last ``n`` messages in view, oldest first.

        Messages are counted as :attr:`shown_length` counts them: events are not
        messages, nor is a summary an :meth:`uncompact` hid, so those among (and after)
        the messages come along uncounted. The cost does not grow with the transcript.

        Raises:
            InvalidArgumentError: ``n`` is negative.
        """
        return reading.tail(self._head, check_count(n, "n"))

    def history(self, full: bool = False) -> list[Message]:
        """The conversation's messages, without system prompts or events.

        Args:
            full: False (default) for what the model works with: the newest
                compaction summary, then what followed it. True for every
                message as written, each summary where its compaction ran.

        Raises:
            SessionNotFoundError: the session was never stored.
        """
        # A read and a message per record, all kept: collections would find nothing to free.
        with paused_collector():
            if full:
                row = self._head.fresh()
                lay = row.layout
                items = reading.view_items(self._head, row, lay.view_start, lay.end_seq)
                return full_history(items)
            return context.history_messages(self._head)

    def iter_history(self, full: bool = False, *, batch: int = READ_BATCH) -> Iterator[Message]:
        """:meth:`history`'s messages, read ``batch`` positions at a time.

        What it holds does not grow with the transcript: one batch of records at a
        time. The session's row is read now: the iteration yields what
        :meth:`history` returns now, whatever is written meanwhile. Showing every
        message (``full=True``) of a compacted session reads the part after its first
        summary twice (whether a summary was undone is told by the events after it).

        Raises:
            SessionNotFoundError: the session was never stored, or is deleted while read.
            InvalidArgumentError: ``batch`` is not a positive int.
        """
        return streaming.iter_history(self._head, full, _batch(batch))

    def iter_records(self, *, batch: int = READ_BATCH) -> Iterator[Record]:
        """:attr:`records`, read ``batch`` positions at a time (held: one batch).

        Raises:
            SessionNotFoundError: the session was never stored, or is deleted while read.
            InvalidArgumentError: ``batch`` is not a positive int.
        """
        return streaming.iter_records(self._head, _batch(batch))

    def snapshot(self) -> Snapshot | None:
        """Return a read-only snapshot, or None for a session not stored (seed 003)."""
        return reading.snapshot(self._head)

    def ancestry(self) -> Ancestry:
        """Return ``Ancestry(parent_id, child_ids, root_id)``; a deleted parent ends the walk."""
        return reading.ancestry(self._head)

    def lineage(self) -> list[LineageBox]:
        """The boxes of the session's lineage drawing: its ancestors and descendants."""
        return reading.lineage(self._head, self._head.fresh())

    def stamp(self) -> str | None:
        """A value that changes exactly when the stored session changes, or None if not stored."""
        return self.store.stamp(self.id)

    def scratchpad(self) -> dict[str, JSONValue] | None:
        """Return the session's scratchpad, or None (seed 003)."""
        if not self.stored:
            raise SessionNotFoundError(self.id, "not stored yet")
        pad = self._head.fresh().scratchpad
        return dict(pad) if pad is not None else None

    def scratchpad_history(self) -> list[ScratchpadEntry]:
        """Return every version the scratchpad has had, oldest first."""
        self._head.require()
        return self.store.scratchpad_history(self.id)

    # -- writing the transcript -------------------------------------------------------------

    def inject(
        self, message: Mapping[str, JSONValue], *, expect_version: int | None = None
    ) -> Record:
        """Append one message (seed 003's ``inject``).

        Args:
            message: ``{role, content, tool_calls?, tool_call_id?, tool_name?,
                ok?, meta?}`` with ``role`` one of system, user, assistant, tool, summary.
            expect_version: write only if the head is still this version.

        Raises:
            InvalidMessageError: no role, an unknown role or key, a bad field.
            SessionClosedError: the session was closed.
            StaleSessionError: ``expect_version`` is not the head.
        """
        if expect_version is None:
            record = self._head.append_one(message)
            if record is not None:
                return record
        return self.inject_many([message], expect_version=expect_version)[0]

    def inject_many(
        self, messages: Iterable[Mapping[str, JSONValue]], *, expect_version: int | None = None
    ) -> list[Record]:
        """Append several messages in one transaction; one bad message and none are stored."""
        batch = check_list(messages, "messages")
        if not batch:
            raise InvalidArgumentError("inject_many needs at least one message")
        _, records = self._head.mutate(self._head.messages(batch), expect_version=expect_version)
        return list(records)

    def log_event(
        self,
        name: str,
        data: Mapping[str, JSONValue] | None = None,
        *,
        expect_version: int | None = None,
    ) -> EventRecord:
        """Append an event: something that happened that the model never sees.

        Args:
            name: what happened.
            data: a JSON object about it.
            expect_version: write only if the head is still this version: a compare-and-set.

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

    def rename(self, title: str) -> str:
        """Set the title; returns it as stored (trimmed; blank or over 200 characters: an error)."""
        return writes.rename(self._head, title)

    def reset(self) -> None:
        """Hide the whole transcript from every view; records stay stored (seed 003's ``reset``)."""
        writes.reset(self._head)

    def trim(self, keep_last: int) -> int:
        """Keep only the last ``keep_last`` messages in view; returns how many are kept."""
        return writes.trim(self._head, keep_last)

    def close(self, status: str | Mapping[str, JSONValue] | None = None) -> None:
        """Close the session: it stays readable and forkable, its transcript refuses writes.

        Args:
            status: why, as a string reason or a dict such as ``{"reason": "timeout"}``.
        """
        writes.close(self._head, status)

    def reopen(self) -> None:
        """Reopen a closed session so its transcript can be written again."""
        writes.reopen(self._head)

    def set_scratchpad(
        self,
        scratchpad: Mapping[str, JSONValue],
        *,
        source: str | None = None,
        reason: str | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
    ) -> ScratchpadUpdate:
        """Store a new scratchpad version: a JSON object, who wrote it and why (seed 003)."""
        if scratchpad is None:
            raise InvalidArgumentError("scratchpad must be a dict, not NoneType")
        return writes.set_pad(self._head, scratchpad, source, reason, metadata)

    def clear_scratchpad(
        self,
        *,
        source: str | None = None,
        reason: str | None = None,
        metadata: Mapping[str, JSONValue] | None = None,
    ) -> ScratchpadUpdate:
        """Clear the scratchpad, storing that as a new version (seed 003)."""
        return writes.set_pad(self._head, None, source, reason, metadata)

    # -- context and compaction -------------------------------------------------------------

    def compact_preview(
        self, options: Mapping[str, Any] | None = None, **more: Any
    ) -> CompactionPlan | None:
        """What :meth:`compact` would fold now (None: nothing), writing nothing."""
        return context.preview(self._head, context.merged_options(options, more))

    async def compact(
        self,
        options: Mapping[str, Any] | None = None,
        *,
        summarize: Summarize | None = None,
        provider: Provider | None = None,
        summary_provider: Provider | None = None,
        strategy: str | None = None,
        **more: Any,
    ) -> Compaction | None:
        """Fold the older conversation into one appended summary; :meth:`uncompact` undoes it.

        Args:
            options: seed 003's compaction options; unknown keys are an error.
            summarize: the model call behind the ``llm`` strategy.
            provider: the session's model (then the default strategy is ``llm``).
            summary_provider: a (cheaper) model to summarize with instead.
            strategy: ``compact_strategy`` as a keyword.
            **more: options as keywords.

        Raises:
            NothingToDoError: already compacted to the newest message.
            UnknownOptionError, InvalidArgumentError: bad options.
        """
        opts = context.merged_options(options, more)
        return await context.compact(
            self._head,
            opts,
            summarize=summarize,
            provider=provider,
            summary_provider=summary_provider,
            strategy=strategy,
        )

    def uncompact(self) -> SummaryRecord:
        """Undo the newest compaction (appends ``compaction_undone``); returns its summary.

        Raises:
            NothingToDoError: there is no compaction to undo.
        """
        return context.uncompact(self._head)

    def context(
        self,
        model: str | None = None,
        tools: Iterable[object] | None = None,
        *,
        declared: ModelLimits | Mapping[str, JSONValue] | None = None,
    ) -> ContextReport | None:
        """Measure the context the next request carries, by source (seed 001).

        Args:
            model: the model of the next request (None: the newest reply's model).
            tools: the tool specs offered, for the "Tool schemas" share.
            declared: what the model's server declares of it (a provider's ``limits()``, or
                its JSON form);
                the session's ``model_info`` setting and the environment still win.

        Returns:
            The report, or None before the first reply.
        """
        found = context.measure(self._head, model, tools, declared)
        return found[0] if found is not None else None

    def model_info(
        self,
        model: str | None = None,
        *,
        declared: ModelLimits | Mapping[str, JSONValue] | None = None,
    ) -> ModelInfo:
        """What is known of ``model`` here: window, output limit, tokenizer, and from where.

        The session's ``model_info`` setting wins, then ``PLAIT_CONTEXT_WINDOW`` and the
        other variables of :data:`plait.context.LIMITS_ENV`, then ``declared`` (what the
        model's server says), then the family table.

        Raises:
            InvalidArgumentError: an environment variable holds a bad limit.
        """
        return context.known_model(self._head, model, declared)

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
        """
        return context.compaction_due(self._head, model, tools, declared, reserve)

    def request_messages(self, reads: Collection[str] = ()) -> list[Message]:
        """The messages the next model call sends: the system prompt, then :meth:`history`.

        Args:
            reads: the opaque-item formats the provider reads (``Provider.reads_formats``);
                opaque items of other formats are not sent.
        """
        return context.request_messages(self._head, reads)

    # -- export -----------------------------------------------------------------------------

    def export(
        self, path: str | os.PathLike[str] | None = None, *, follow_symlinks: bool = False
    ) -> str:
        """Write the conversation as one self-contained HTML page; returns the path.

        Every record in view, the request the next turn would send, and the lineage
        as an SVG; it loads nothing and runs no script; every text is escaped.

        Args:
            path: the file (default: ``plait-<id8>.html`` in the workspace). Only a
                regular file is replaced.
            follow_symlinks: a symlink at ``path`` is written through to the regular
                file it names (by default a symlink there is refused).

        Raises:
            InvalidArgumentError: nothing stored, or a bad ``path``. OSError: not written.
        """
        return export.write_export(self._head, path, "html", follow_symlinks=follow_symlinks)

    def export_markdown(
        self, path: str | os.PathLike[str] | None = None, *, follow_symlinks: bool = False
    ) -> str:
        """Write the conversation as one Markdown document; the same content as :meth:`export`."""
        return export.write_export(self._head, path, "md", follow_symlinks=follow_symlinks)


class ChunkTable:
    """Seed 000's name for the transcript: ``chunk_table.rows`` is every record in view."""

    __slots__ = ("_session",)

    def __init__(self, session: Session) -> None:
        self._session = session

    @property
    def rows(self) -> list[Record]:
        """The records in view, oldest first; each has ``.kind`` and ``.payload``."""
        return self._session.records

    def __len__(self) -> int:
        return self._session.head.fresh().layout.size

    def __repr__(self) -> str:
        return f"ChunkTable(session={self._session.id!r})"
