"""The session's run verbs, as one face of :class:`Session`.

:class:`RunVerbs` is a base of :class:`~plait.session.Session`: each verb is a short
delegation to :mod:`plait.session.runs`, which starts :func:`plait.run.drive` on the
session as its :class:`~plait.run.RunTarget`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Unpack, cast

from plait.errors import InvalidArgumentError, NothingToDoError
from plait.providers import Provider, Request
from plait.records import Message
from plait.run import EventHook, Run, RunOptions, RunResult, RunTarget
from plait.session import context, reading, runs
from plait.session._values import SessionUsage
from plait.views import ResumeInfo

if TYPE_CHECKING:
    from plait.session._head import Head

__all__ = ["RunVerbs"]


class RunVerbs:
    """Prompting, streaming, resuming, side questions, naming, usage and subscribers."""

    __slots__ = ()
    _head: Head

    def _target(self) -> RunTarget:
        # A Session (the only class built on this one) has every member the loop uses.
        return cast(RunTarget, self)

    # -- runs -------------------------------------------------------------------------------

    async def prompt(self, text: str, **options: Unpack[RunOptions]) -> RunResult:
        """Send ``text`` to the model and run the tool calls it makes until it is done.

        Every step is appended as it happens, so the transcript is valid whenever the
        run stops. Options are :class:`~plait.run.RunOptions` (``provider``, ``tools``,
        ``on_approval``, ``on_question``, ``on_event``, ``timeout``, ``keep_events``,
        ``max_steps``).

        Raises:
            InvalidArgumentError: bad arguments (nothing is written).
            SessionBusyError: a run is in progress here (or, on a client, anywhere).
            RunTimeoutError: ``timeout`` passed; ``resume()`` picks the run up.
            ProviderError: the model could not answer (what was recorded stays valid).
        """
        return await runs.start_run(self._head, self._target(), text, streamed=False, **options)

    def stream(self, text: str, **options: Unpack[RunOptions]) -> Run:
        """Start :meth:`prompt` as a :class:`Run` to iterate (errors in arguments at once)."""
        return runs.start_run(self._head, self._target(), text, streamed=True, **options)

    def run(self, text: str, **options: Unpack[RunOptions]) -> RunResult:
        """:meth:`prompt` for code without an event loop: runs it to the end and returns.

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

        Raises:
            NothingToDoError: no run is in progress on this session.
        """
        runs.steer(self._head, message)

    @property
    def running(self) -> bool:
        """Whether a run is in progress on this session in this process."""
        return self._head.host.runs.running(self._head.id)

    def resumable(self) -> ResumeInfo | None:
        """Whether the last request was interrupted, and how :meth:`resume` picks it up.

        It reads the transcript's tail back to the last turn, writing nothing.
        """
        return reading.resumable(self._head)

    async def resume(self, **options: Unpack[RunOptions]) -> RunResult:
        """Pick up an interrupted request (seed 001) and run it to the end.

        Raises:
            NothingToDoError: nothing was interrupted (the reason says why).
        """
        return await self._resume(streamed=False, **options)

    def resume_stream(self, **options: Unpack[RunOptions]) -> Run:
        """:meth:`resume` as a :class:`Run` to iterate."""
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
        """A side question about the conversation that adds nothing to it (seed 001)."""
        return "".join([piece async for piece in self.ask_stream(question, provider=provider)])

    def ask_stream(
        self, question: str, *, provider: Provider | str | None = None
    ) -> AsyncIterator[str]:
        """:meth:`ask` as an async iterator of text pieces (a blank question fails at once)."""
        if not isinstance(question, str) or not question.strip():
            raise InvalidArgumentError("a question needs some text")
        model = runs.provider_for(self._head, provider)
        request = Request([*context.request_messages(self._head), Message("user", question)])
        return runs.text_stream(model, request)

    async def name_it(self, *, provider: Provider | str | None = None) -> str | None:
        """Title the session by asking the model, unless it has a title (then that is returned).

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

    def subscribe(self, callback: EventHook) -> Callable[[], None]:
        """Call ``callback`` with every event of every run on this session (seed 003).

        Subscribers live in this process, on this client; a fork does not copy them.
        A failing callback is logged and the run goes on.

        Returns:
            A function that removes the subscription.
        """
        if not callable(callback):
            raise InvalidArgumentError("a subscriber must be callable")
        return self._head.host.runs.subscribe(self._head.id, callback)
