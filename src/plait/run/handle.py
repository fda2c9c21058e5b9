"""The handle of a run in progress, and which session a task is driving.

A :class:`Run` is made by the session layer (``Session.stream`` ...) around the
loop's body; iterate it for its events, await it for its result.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator, Sequence
from dataclasses import replace
from typing import Protocol, cast

from plait._ids import new_id
from plait.errors import (
    InvalidArgumentError,
    NothingToDoError,
    RunInterruptedError,
    RunTimeoutError,
)
from plait.run.events import (
    EndReason,
    EventHook,
    IterationEnd,
    RunEnded,
    RunEvent,
    RunResult,
    ToolFinished,
    end_reason,
)

__all__ = ["Run", "as_current", "check_timeout", "current_id"]

_CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "plait_current_session", default=None
)


def current_id() -> str | None:
    """The id of the session a run is driving here, or ``None`` outside any run (seed 003).

    Inside a subscriber's callback or a tool it is the session being driven.
    """
    return _CURRENT.get()


@contextlib.contextmanager
def as_current(session_id: str) -> Iterator[None]:
    """Make :func:`current_id` name ``session_id`` inside the block (entries nest).

    Seed 003's ``current_id()`` is "the innermost active session": a run sets it
    for the session it drives, and the service layer sets it when code enters a
    session on a caller's behalf.
    """
    token = _CURRENT.set(session_id)
    try:
        yield
    finally:
        _CURRENT.reset(token)


_END = object()

_log = logging.getLogger("plait")


def check_timeout(timeout: object) -> None:
    """Raise InvalidArgumentError unless ``timeout`` is None or a positive number of seconds."""
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        raise InvalidArgumentError(f"timeout must be a positive number of seconds: {timeout!r}")


class _Driven(Protocol):
    @property
    def id(self) -> str: ...


class Run:
    """A run in progress: iterate it for its events, await it for its :class:`RunResult`.

    It starts at once when made inside a running event loop, else when first
    iterated or awaited. Cancelling the task that awaits it (or :meth:`cancel`)
    stops it; what it recorded stays valid, and ``session.resume()`` picks it up.
    """

    def __init__(
        self,
        session: _Driven,
        body: Callable[[Run], Awaitable[RunResult]],
        *,
        timeout: float | None = None,
        keep_events: bool = False,
        streamed: bool = False,
        hooks: Sequence[EventHook] = (),
        on_done: Callable[[], None] | None = None,
        run_id: str | None = None,
    ) -> None:
        check_timeout(timeout)
        if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()):
            raise InvalidArgumentError(f"a run id is a non-blank string, not {run_id!r}")
        self.id = run_id or new_id()
        """The run's id: given by whoever started it (a server), else a new one."""
        self._session = session
        self._body = body
        self._timeout = None if timeout is None else float(timeout)
        self._keep = keep_events
        self._kept: list[RunEvent] = []
        self._queue: asyncio.Queue[object] | None = asyncio.Queue() if streamed else None
        self._hooks = tuple(hooks)
        self._on_done = on_done
        self._steering: list[str] = []
        self._task: asyncio.Task[RunResult] | None = None
        self._finished = False
        self._cancelled = False
        self._steps = 0  # model calls answered so far, for the ending of a run that failed
        self._denied = 0
        with contextlib.suppress(RuntimeError):  # no running loop: start on first use
            asyncio.get_running_loop()
            self._start()

    @property
    def session_id(self) -> str:
        """The session the run drives."""
        return self._session.id

    @property
    def done(self) -> bool:
        """Whether the run has ended (finished, failed or was cancelled)."""
        return self._finished

    def _start(self) -> asyncio.Task[RunResult]:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._main())
        return self._task

    async def _main(self) -> RunResult:
        _CURRENT.set(self._session.id)  # this task's own context: nothing to reset
        ending: RunEnded | None = None
        try:
            try:
                result = await self._timed()
            except RunTimeoutError:
                ending = self._ended("timeout", timeout=self._timeout)
                raise
            except asyncio.CancelledError:
                ending = self._ended("cancelled")
                raise
            except Exception as exc:
                ending = self._ended("error", error=str(exc) or type(exc).__name__)
                raise
            ending = RunEnded(
                end_reason(result.finish_reason),
                result.steps,
                self._denied,
                repeated=result.repeated,
                repeats=result.repeats,
            )
        finally:
            if ending is not None:
                try:
                    self.emit(ending)  # the last event, whatever ended the run
                except Exception:  # a hook's bug must not hide how the run ended
                    _log.exception("a hook of session %s failed on its run's end", self.session_id)
            self._finished = True
            if self._queue is not None:
                self._queue.put_nowait(_END)
            if self._on_done is not None:
                self._on_done()
        return replace(result, events=tuple(self._kept)) if self._keep else result

    async def _timed(self) -> RunResult:
        if self._timeout is None:
            return await self._body(self)
        try:
            async with asyncio.timeout(self._timeout) as scope:
                return await self._body(self)
        except TimeoutError as exc:
            if scope.expired():
                raise RunTimeoutError(self._session.id, self._timeout) from exc
            raise

    def _ended(
        self, reason: EndReason, *, timeout: float | None = None, error: str = ""
    ) -> RunEnded:
        return RunEnded(reason, self._steps, self._denied, timeout, error)

    def emit(self, event: RunEvent) -> None:
        """Report an event: kept, queued for the iterator, and passed to every hook."""
        if isinstance(event, IterationEnd):
            self._steps = event.step
        elif isinstance(event, ToolFinished) and event.denied:
            self._denied += 1
        if self._keep:
            self._kept.append(event)
        if self._queue is not None:
            self._queue.put_nowait(event)
        for hook in self._hooks:
            hook(event)

    def steer(self, message: str) -> None:
        """Send a message to the run: it is added as a user message before the next model call.

        Raises:
            InvalidArgumentError: a blank message.
            NothingToDoError: the run has ended.
        """
        if not isinstance(message, str) or not message.strip():
            raise InvalidArgumentError("a steering message needs some text")
        if self._finished:
            raise NothingToDoError("the run has ended; there is nothing to steer")
        self._steering.append(message)

    def take_steering(self) -> list[str]:
        """The steering messages sent since the last call (for the loop)."""
        taken, self._steering = self._steering, []
        return taken

    @property
    def steering_pending(self) -> bool:
        """Whether steering messages wait for the next model call."""
        return bool(self._steering)

    def cancel(self) -> None:
        """Stop the run; what it recorded stays valid.

        Whoever awaits or iterates the run gets :class:`RunInterruptedError`.
        """
        if self._task is not None and not self._finished:
            self._cancelled = True
            self._task.cancel()

    async def _outcome(self, task: asyncio.Task[RunResult]) -> RunResult:
        try:
            return await task
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if self._cancelled and task.cancelled() and (me is None or not me.cancelling()):
                raise RunInterruptedError(self._session.id) from None
            raise  # the caller itself was cancelled: let it unwind

    async def result(self) -> RunResult:
        """Wait for the run to end and return its result.

        Raises:
            RunInterruptedError: :meth:`cancel` stopped it.
            RunTimeoutError: it passed its timeout.
            PlaitError: whatever else the run raised (a ProviderError ...).
        """
        return await self._outcome(self._start())

    def __await__(self) -> Generator[object, None, RunResult]:
        return self.result().__await__()

    def __aiter__(self) -> AsyncIterator[RunEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[RunEvent]:
        if self._queue is None:
            raise InvalidArgumentError("this run was not started as a stream; await it instead")
        task = self._start()
        while True:
            event = await self._queue.get()
            if event is _END:
                break
            yield cast(RunEvent, event)
        await self._outcome(task)  # the run's error, if it failed
