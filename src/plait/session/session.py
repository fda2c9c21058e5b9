"""Session: the handle users hold on one stored conversation (a thin facade).

A handle keeps the session's id and the last row it read (its
:class:`~plait.session._head.Head`); every write is a compare-and-set on the head
that row describes, so two writers can never interleave a transcript, and the
first write takes the session's writer lock for this process. Each verb reads the
row once, so a handle shows what is stored, including what another process wrote.

The handle's own members are the seeds' verbs: identity, the history, the
transcript writes, context and compaction, export here; runs, the sandbox and
branching in the three faces it is built from (``_run_verbs``, ``_sandbox_verbs``,
``_branch_verbs``). Everything else is reached through one of five parts, each a
small object with one concern (D400): ``transcript``, ``workspace``,
``settings``, ``scratchpad`` and ``live``. Every verb is a short delegation to the
module of its concern (:mod:`~plait.session.writes`, :mod:`~plait.session.context`,
:mod:`~plait.session.export`, ...). Methods that only touch the store are plain
calls; the ones that call a model or run a tool are ``async``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from plait._collector import paused as paused_collector
from plait.compaction import Compaction, Summarize
from plait.context import ContextReport, ModelLimits
from plait.errors import InvalidArgumentError
from plait.providers import Provider
from plait.records import JSONLike, JSONValue, Message, Record
from plait.session import context, export, reading, writes
from plait.session._branch_verbs import BranchVerbs
from plait.session._head import Head
from plait.session._live_part import SessionLive
from plait.session._part import head_of
from plait.session._run_verbs import RunVerbs
from plait.session._sandbox_verbs import SandboxVerbs
from plait.session._scratchpad_part import SessionScratchpad
from plait.session._settings_part import SessionSettings
from plait.session._transcript_part import SessionTranscript
from plait.session._workspace_part import SessionWorkspace
from plait.store.base import SessionRow
from plait.views import full_history

if TYPE_CHECKING:
    from plait.session.host import HostOwner, SessionHost

__all__ = ["ChunkTable", "Session"]


class Session(RunVerbs, SandboxVerbs, BranchVerbs):
    """A handle on one session: its transcript, lineage, title and scratchpad.

    Get one from a :class:`plait.Client` (``client.session``,
    ``client.sessions.open(id)``, ``client.open(id)``) or from the seed-000
    constructors :meth:`from_agent_prompt` and :meth:`from_user_message`.
    Handles are cheap; a client hands out one handle per session id.

    Its own members are the verbs the seeds name; the rest are reached through its
    parts: :attr:`transcript`, :attr:`workspace`, :attr:`settings`,
    :attr:`scratchpad` and :attr:`live` (D400).
    """

    __slots__ = ("__weakref__", "_head")

    def __init__(self, host: SessionHost, session_id: str, row: SessionRow | None) -> None:
        self._head = Head(self, host, session_id, row)

    # -- seed 000 constructors --------------------------------------------------------------

    @classmethod
    def from_agent_prompt(
        cls, prompt: str, *, client: SessionHost | HostOwner | None = None
    ) -> Session:
        """Create a stored session holding one ``system`` record (default: in memory).

        ``client`` is a :class:`plait.Client` (or the host one owns).

        Args:
            prompt: the agent's prompt.
            client: the client to store it with (default: an in-memory one).

        Returns:
            The new session.

        Raises:
            InvalidArgumentError: ``prompt`` is not a string.
        """
        return cls._seeded({"role": "system", "content": prompt}, client)

    @classmethod
    def from_user_message(
        cls, message: str, *, client: SessionHost | HostOwner | None = None
    ) -> Session:
        """Create a stored session holding one ``user`` record (default: in memory).

        ``client`` is a :class:`plait.Client` (or the host one owns).

        Args:
            message: the user's message.
            client: the client to store it with (default: an in-memory one).

        Returns:
            The new session.

        Raises:
            InvalidArgumentError: ``message`` is not a string.
        """
        return cls._seeded({"role": "user", "content": message}, client)

    @classmethod
    def _seeded(
        cls, message: Mapping[str, JSONValue], client: SessionHost | HostOwner | None
    ) -> Session:
        from plait.session.host import host_for

        if not isinstance(message.get("content"), str):
            raise InvalidArgumentError("the text must be a string")
        handle = host_for(client).new_session()
        handle.inject(message)
        return handle

    # -- identity and state -----------------------------------------------------------------

    @property
    def id(self) -> str:
        """The session id (a UUIDv7 unless the caller chose one)."""
        return self._head.id

    @property
    def path(self) -> str:
        """Where the session is stored: the database file, or ``:memory:``."""
        return self._head.store.location

    @property
    def current(self) -> bool:
        """Whether this is its client's current session."""
        return self._head.host.current is self

    @property
    def title(self) -> str | None:
        """The stored title, or None.

        Raises:
            SessionNotFoundError: the stored session is gone.
        """
        return self._head.fresh().title if self._head.row is not None else None

    @property
    def parent_session_ids(self) -> tuple[str, ...]:
        """The lineage parents: one for a fork, several for a merge, none for a root."""
        return self._head.row.parent_ids if self._head.row is not None else ()

    @property
    def lineage_operator(self) -> str | None:
        """How the session was made: ``Session.fork``, ``Session.detach``, ...; None for a root."""
        return self._head.row.lineage_operator if self._head.row is not None else None

    @property
    def locked(self) -> bool:
        """Whether another process has the session open for writing (then this one only reads).

        Raises:
            StorePartMissingError: the store has no writer locks, so it cannot say (D420).
        """
        return self._head.locked_elsewhere()

    def __len__(self) -> int:
        return self._head.fresh().layout.length

    def __repr__(self) -> str:
        row = self._head.row
        return f"<Session {self.id} {f'v{row.version}' if row is not None else 'not stored'}>"

    # -- the parts --------------------------------------------------------------------------

    @property
    def transcript(self) -> SessionTranscript:
        """The stored log beyond the seed verbs: records, views, events, rewinds."""
        return SessionTranscript(self)

    @property
    def workspace(self) -> SessionWorkspace:
        """The files: the workspace's name, anchor, policy, roots and checkpoints."""
        return SessionWorkspace(self)

    @property
    def settings(self) -> SessionSettings:
        """The session settings, a read-only mapping, with the verbs that set them.

        Reading the mapping raises SessionNotFoundError once the stored session is gone.
        """
        return SessionSettings(self)

    @property
    def scratchpad(self) -> SessionScratchpad:
        """The scratchpad: ``session.scratchpad()`` returns it; ``set``, ``clear``, ``history``."""
        return SessionScratchpad(self)

    @property
    def live(self) -> SessionLive:
        """The session in running processes now: runs, subscribers, the writer lock."""
        return SessionLive(self)

    # -- reading ----------------------------------------------------------------------------

    @property
    def chunk_table(self) -> ChunkTable:
        """Seed 000's table of records: ``chunk_table.rows``."""
        return ChunkTable(self)

    def history(self, full: bool = False) -> list[Message]:
        """The conversation's messages, without system prompts or events.

        Args:
            full: False (default) for what the model works with: the newest
                compaction summary, then what followed it. True for every
                message as written, each summary where its compaction ran.

        Returns:
            The messages, oldest first.

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

    # -- writing the transcript -------------------------------------------------------------

    def inject(
        self, message: Mapping[str, JSONValue], *, expect_version: int | None = None
    ) -> Record:
        """Append one message (seed 003's ``inject``).

        Args:
            message: ``{role, content, tool_calls?, tool_call_id?, tool_name?,
                ok?, meta?}`` with ``role`` one of system, user, assistant, tool, summary.
            expect_version: write only if the head is still this version.

        Returns:
            The stored record.

        Raises:
            InvalidMessageError: no role, an unknown role or key, a bad field.
            SessionClosedError: the session was closed.
            StaleSessionError: ``expect_version`` is not the head.
        """
        if expect_version is None:
            record = self._head.append_one(message)
            if record is not None:
                return record
        return self.transcript.inject_many([message], expect_version=expect_version)[0]

    def rename(self, title: str) -> str:
        """Set the title.

        Args:
            title: the new title.

        Returns:
            The title as stored (trimmed).

        Raises:
            InvalidArgumentError: a blank title or one over 200 characters.
        """
        return writes.rename(self._head, title)

    def reset(self) -> None:
        """Hide the whole transcript from every view; records stay stored (seed 003's ``reset``).

        Raises:
            SessionClosedError: the session was closed.
        """
        writes.reset(self._head)

    def trim(self, keep_last: int) -> int:
        """Keep only the last ``keep_last`` messages in view.

        Args:
            keep_last: how many messages to keep.

        Returns:
            How many are kept.

        Raises:
            InvalidArgumentError: ``keep_last`` is negative.
        """
        return writes.trim(self._head, keep_last)

    def close(self, status: str | Mapping[str, JSONLike] | None = None) -> None:
        """Close the session: it stays readable and forkable, its transcript refuses writes.

        ``session.transcript.reopen()`` opens it again.

        Args:
            status: why, as a string reason or a dict such as ``{"reason": "timeout"}``.
        """
        writes.close(self._head, status)

    # -- context and compaction -------------------------------------------------------------

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
        """Fold the older conversation into one appended summary.

        ``session.transcript.uncompact()`` undoes it; ``session.transcript.compact_preview()``
        tells what it would fold.

        Args:
            options: seed 003's compaction options; unknown keys are an error.
            summarize: the model call behind the ``llm`` strategy.
            provider: the session's model (then the default strategy is ``llm``).
            summary_provider: a (cheaper) model to summarize with instead.
            strategy: ``compact_strategy`` as a keyword.
            **more: options as keywords.

        Returns:
            The compaction, or None when there was nothing to fold.

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

    # -- export -----------------------------------------------------------------------------

    def export(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        format: str = "html",
        follow_symlinks: bool = False,
    ) -> str:
        """Write the conversation as one self-contained HTML page or one Markdown document.

        Every record in view, the request the next turn would send, and the lineage
        (as an SVG in HTML); the page loads nothing and runs no script; every text is
        escaped.

        Args:
            path: the file (default: ``plait-<id8>.html`` or ``.md`` in the workspace).
                Only a regular file is replaced.
            format: ``html`` (default) or ``markdown``.
            follow_symlinks: a symlink at ``path`` is written through to the regular
                file it names (by default a symlink there is refused).

        Returns:
            The path written.

        Raises:
            InvalidArgumentError: nothing stored, a bad ``path`` or an unknown ``format``.
            OSError: not written.
        """
        kinds: dict[object, Literal["html", "md"]] = {"html": "html", "markdown": "md"}
        kind = kinds.get(format) if isinstance(format, str) else None
        if kind is None:
            raise InvalidArgumentError(f"format is 'html' or 'markdown', not {format!r}")
        return export.write_export(self._head, path, kind, follow_symlinks=follow_symlinks)


class ChunkTable:
    """Seed 000's name for the transcript: ``chunk_table.rows`` is every record in view."""

    __slots__ = ("_session",)

    def __init__(self, session: Session) -> None:
        self._session = session

    @property
    def rows(self) -> list[Record]:
        """The records in view, oldest first; each has ``.kind`` and ``.payload``."""
        return self._session.transcript.records

    def __len__(self) -> int:
        return head_of(self._session).fresh().layout.size

    def __repr__(self) -> str:
        return f"ChunkTable(session={self._session.id!r})"
