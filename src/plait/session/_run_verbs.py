"""The session's run verbs, as one face of :class:`Session`.

:class:`RunVerbs` is a base of :class:`~plait.session.Session`: each verb is a short
delegation to :mod:`plait.session.runs`, which starts :func:`plait.run.drive` on the
session as its :class:`~plait.run.RunTarget` (:class:`_Driven`: the members the loop
calls, gathered from the session's parts).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Unpack, cast

from plait.compaction import Compaction
from plait.context import ModelLimits
from plait.errors import InvalidArgumentError, NothingToDoError
from plait.providers import Provider, Request
from plait.records import EventRecord, JSONValue, Message, Record
from plait.run import Run, RunOptions, RunResult, RunTarget
from plait.session import context, reading, runs
from plait.session._values import SessionUsage
from plait.tools import ToolContext
from plait.views import ResumeInfo

if TYPE_CHECKING:
    from plait.session._head import Head
    from plait.session.session import Session

__all__ = ["RunVerbs"]


class RunVerbs:
    """Prompting, streaming, steering, resuming, side questions, naming and usage."""

    __slots__ = ()
    _head: Head

    def _target(self) -> RunTarget:
        # A Session is the only class built on this one.
        return _Driven(cast("Session", self))

    # -- runs -------------------------------------------------------------------------------

    async def prompt(self, text: str, **options: Unpack[RunOptions]) -> RunResult:
        """Send ``text`` to the model and run the tool calls it makes until it is done.

        Every step is appended as it happens, so the transcript is valid whenever the
        run stops. Options are :class:`~plait.run.RunOptions` (``provider``, ``tools``,
        ``on_approval``, ``on_question``, ``on_event``, ``timeout``, ``keep_events``,
        ``max_steps``).

        Args:
            text: the user's message.
            **options: the run's options.

        Returns:
            The run's result: its text, finish reason, usage and records.

        Raises:
            InvalidArgumentError: bad arguments (nothing is written).
            SessionBusyError: a run is in progress here (or, on a client, anywhere).
            RunTimeoutError: ``timeout`` passed; ``resume()`` picks the run up.
            ProviderError: the model could not answer (what was recorded stays valid).
        """
        return await runs.start_run(self._head, self._target(), text, streamed=False, **options)

    def stream(self, text: str, **options: Unpack[RunOptions]) -> Run:
        """Start :meth:`prompt` as a :class:`Run` to iterate (errors in arguments at once).

        Args:
            text: the user's message.
            **options: the run's options.

        Returns:
            The run: iterate it for its events, await it for its result.

        Raises:
            InvalidArgumentError, SessionBusyError: as :meth:`prompt`, at once.
        """
        return runs.start_run(self._head, self._target(), text, streamed=True, **options)

    def run(self, text: str, **options: Unpack[RunOptions]) -> RunResult:
        """:meth:`prompt` for code without an event loop: runs it to the end and returns.

        Args:
            text: the user's message.
            **options: the run's options.

        Returns:
            The run's result.

        Raises:
            InvalidArgumentError: called inside a running event loop (await :meth:`prompt`).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.prompt(text, **options))
        raise InvalidArgumentError("run() blocks; inside an event loop, await prompt()")

    def steer(self, message: str) -> None:
        """Add a user message before the next model call of the run in progress (seed 001).

        Args:
            message: the message.

        Raises:
            NothingToDoError: no run is in progress on this session.
        """
        runs.steer(self._head, message)

    def resumable(self) -> ResumeInfo | None:
        """Whether the last request was interrupted, and how :meth:`resume` picks it up.

        It reads the transcript's tail back to the last turn, writing nothing.

        Returns:
            What was interrupted and how it is picked up, or None when nothing was.
        """
        return reading.resumable(self._head)

    async def resume(self, **options: Unpack[RunOptions]) -> RunResult:
        """Pick up an interrupted request (seed 001) and run it to the end.

        Args:
            **options: the run's options.

        Returns:
            The run's result.

        Raises:
            NothingToDoError: nothing was interrupted (the reason says why).
        """
        return await self._resume(streamed=False, **options)

    def resume_stream(self, **options: Unpack[RunOptions]) -> Run:
        """:meth:`resume` as a :class:`Run` to iterate.

        Args:
            **options: the run's options.

        Returns:
            The run.

        Raises:
            NothingToDoError: nothing was interrupted.
        """
        return self._resume(streamed=True, **options)

    def _resume(self, *, streamed: bool, **options: Unpack[RunOptions]) -> Run:
        if not (self._head.row is not None):
            raise NothingToDoError(f"session {self._head.id} has nothing stored to resume")
        if self.resumable() is None:
            raise NothingToDoError(
                f"session {self._head.id} was not interrupted: its last request has its answer"
            )
        return runs.start_run(self._head, self._target(), None, streamed=streamed, **options)

    async def ask(self, question: str, *, provider: Provider | str | None = None) -> str:
        """A side question about the conversation that adds nothing to it (seed 001).

        Args:
            question: the question.
            provider: the model to ask (default: the session's).

        Returns:
            The answer's text.

        Raises:
            InvalidArgumentError: a blank question. ProviderError: the model did not answer.
        """
        return "".join([piece async for piece in self.ask_stream(question, provider=provider)])

    def ask_stream(
        self, question: str, *, provider: Provider | str | None = None
    ) -> AsyncIterator[str]:
        """:meth:`ask` as an async iterator of text pieces.

        Args:
            question: the question.
            provider: the model to ask (default: the session's).

        Returns:
            The answer, piece by piece.

        Raises:
            InvalidArgumentError: a blank question (at once).
        """
        if not isinstance(question, str) or not question.strip():
            raise InvalidArgumentError("a question needs some text")
        model = runs.provider_for(self._head, provider)
        request = Request([*context.request_messages(self._head), Message("user", question)])
        return runs.text_stream(model, request)

    async def name_it(self, *, provider: Provider | str | None = None) -> str | None:
        """Title the session by asking the model, unless it has a title (then that is returned).

        Args:
            provider: the model to ask (default: the session's).

        Returns:
            The title as stored, or None when there is no exchange yet to name.
        """
        return await runs.name_it(self._head, provider)

    @property
    def usage(self) -> SessionUsage:
        """Tokens the session's replies cost, from their ``meta["usage"]`` (in view).

        The sum is kept per session and view, so a call reads only what was written since.
        """
        return runs.usage(self._head)


class _Driven:
    """A session as the loop drives it: the :class:`~plait.run.RunTarget` members.

    Args:
        session: the session the run is on.
    """

    __slots__ = ("_session",)

    def __init__(self, session: Session) -> None:
        self._session = session

    @property
    def id(self) -> str:
        """The session id."""
        return self._session.id

    @property
    def self_compaction(self) -> bool:
        """Whether the self-compaction tool is offered."""
        return self._session.settings.self_compaction

    def inject(self, message: Mapping[str, JSONValue]) -> Record:
        """Append one message; returns the stored record."""
        return self._session.inject(message)

    def log_event(self, name: str, data: Mapping[str, JSONValue] | None = None) -> EventRecord:
        """Append an event the model never sees."""
        return self._session.transcript.log_event(name, data)

    def tail(self, n: int = 20) -> list[Record]:
        """The records of the last ``n`` messages in view."""
        return self._session.transcript.tail(n)

    def resumable(self) -> ResumeInfo | None:
        """How an interrupted request would be picked up, or None."""
        return self._session.resumable()

    def request_messages(self, reads: Collection[str] = ()) -> list[Message]:
        """The messages the next model call sends."""
        return self._session.transcript.request_messages(reads)

    def compaction_due(
        self,
        model: str | None = None,
        tools: Iterable[object] | None = None,
        *,
        declared: ModelLimits | None = None,
        reserve: int | None = None,
    ) -> bool:
        """Whether the context, with ``reserve`` tokens kept for the reply, is at the mark."""
        return self._session.transcript.compaction_due(
            model, tools, declared=declared, reserve=reserve
        )

    async def compact(self, *, provider: Any = None) -> Compaction | None:
        """Fold the older part of the conversation into a summary."""
        return await self._session.compact(provider=provider)

    def tool_context(self) -> ToolContext:
        """Where tools run: the sandbox folder and the mounted roots."""
        return self._session.workspace.tool_context()

    def workspace_checkpoint(self, context: ToolContext) -> str | None:
        """Checkpoint the files of ``context``'s workspace now (None: none kept)."""
        return self._session.workspace.checkpoint(context)
