"""What a run reports, and the handle of a run in progress.

The session layer owns the verbs (``Session.prompt``, ``stream``, ``resume`` ...)
and the :class:`Run` handle; ``plait.run`` owns the loop that fills a run with
model calls and tool calls, and registers it with the session layer when it is
imported (``plait`` imports it). So imports still point inward: the session
never imports the loop, it calls the body it was given.

A run's events are the provider's stream events (text and tool-call deltas,
usage, finish) plus the run's own: :class:`RecordAdded` for every record the
run appends, :class:`ToolStarted` / :class:`ToolFinished` around each tool call,
and :class:`IterationEnd` after each model call and its tools (seed 003's
``iteration_end``). Each has a ``type`` discriminator.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar, Literal, Protocol, TypeAlias, TypedDict, cast

from plait.errors import (
    InvalidArgumentError,
    NothingToDoError,
    RunInterruptedError,
    RunTimeoutError,
)
from plait.providers.base import Finish, Provider, TextDelta, ToolCallDelta, Usage
from plait.records import JSONValue, Record, ToolCall
from plait.tools import Tool

__all__ = [
    "Approval",
    "EventHook",
    "IterationEnd",
    "Question",
    "RecordAdded",
    "Run",
    "RunEvent",
    "RunOptions",
    "RunResult",
    "RunSpec",
    "ToolFinished",
    "ToolStarted",
    "check_timeout",
    "current_id",
    "event_json",
]

_CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "plait_current_session", default=None
)


def current_id() -> str | None:
    """The id of the session a run is driving here, or ``None`` outside any run (seed 003).

    Inside a subscriber's callback or a tool it is the session being driven.
    """
    return _CURRENT.get()


@dataclass(frozen=True, slots=True)
class RecordAdded:
    """The run appended a record to the transcript."""

    type: ClassVar[Literal["record"]] = "record"
    record: Record
    """The record, as stored."""


@dataclass(frozen=True, slots=True)
class ToolStarted:
    """A tool call is about to run (after its approval)."""

    type: ClassVar[Literal["tool_start"]] = "tool_start"
    call: ToolCall
    """The call."""


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A tool call has its result (run, denied, unknown or failed)."""

    type: ClassVar[Literal["tool_end"]] = "tool_end"
    call: ToolCall
    """The call."""
    ok: bool
    """Whether it succeeded."""
    content: str
    """The result the model reads."""


@dataclass(frozen=True, slots=True)
class IterationEnd:
    """One model call and the tool calls it asked for are done (seed 003's ``iteration_end``)."""

    type: ClassVar[Literal["iteration_end"]] = "iteration_end"
    step: int
    """Which model call of the run (1, 2, ...)."""
    session_id: str
    """The session being driven."""


RunEvent: TypeAlias = (
    TextDelta
    | ToolCallDelta
    | Usage
    | Finish
    | RecordAdded
    | ToolStarted
    | ToolFinished
    | IterationEnd
)
"""One event of a run: a provider stream event, or one of the run's own."""


def event_json(event: RunEvent) -> dict[str, JSONValue]:
    """A run event as a JSON object with its ``type`` (for ``plait run --json`` and servers).

    A ``record`` event carries ``{"seq", "id", "kind", "created_at_us", "meta", "payload"}``.
    """
    out: dict[str, JSONValue] = {"type": event.type}
    if isinstance(event, TextDelta):
        out["text"] = event.text
    elif isinstance(event, ToolCallDelta):
        out.update(
            index=event.index, id=event.id, name=event.name, arguments_delta=event.arguments_delta
        )
    elif isinstance(event, Usage):
        out.update(event.to_json())
    elif isinstance(event, Finish):
        out["reason"] = event.reason
    elif isinstance(event, RecordAdded):
        r = event.record
        out["record"] = {
            "seq": r.seq,
            "id": r.id,
            "kind": r.kind,
            "created_at_us": r.created_at_us,
            "meta": dict(r.meta),
            "payload": r.payload,
        }
    elif isinstance(event, ToolStarted):
        out["call"] = event.call.to_json()
    elif isinstance(event, ToolFinished):
        out.update(call=event.call.to_json(), ok=event.ok, content=event.content)
    else:
        out.update(step=event.step, session_id=event.session_id)
    return out


Approval: TypeAlias = Callable[[ToolCall], "bool | Awaitable[bool]"]
"""Asked before each tool call runs; False denies it (the model reads that it was denied)."""

Question: TypeAlias = Callable[[str], "str | Awaitable[str]"]
"""Answers a question the model asks the user (the ``ask_user`` tool)."""

EventHook: TypeAlias = Callable[[RunEvent], object]
"""Called with every event of a run, in order."""


class RunOptions(TypedDict, total=False):
    """The keyword arguments every way of running takes (``prompt``, ``stream``, ``resume`` ...)."""

    provider: Provider | str | None
    """A provider or a spec (``"openai:gpt-4o-mini"``); default: the session's model, else
    :func:`plait.providers.select_provider`'s choice."""
    tools: Sequence[Tool] | None
    """The tools offered (default: shell, read_file, write_file, list_files)."""
    on_approval: Approval | None
    """Asked before each tool call; False records a denied result."""
    on_question: Question | None
    """Answers the model's questions; when given, the ``ask_user`` tool is offered."""
    on_event: EventHook | None
    """Called with every event of the run, in order."""
    timeout: float | None
    """Seconds the whole run may take (RunTimeoutError after)."""
    keep_events: bool
    """Keep every event in ``RunResult.events``."""
    max_steps: int
    """The most model calls the run may make (default 20)."""


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a run did."""

    text: str
    """The final reply's text."""
    records: tuple[Record, ...]
    """Every record the run appended, in order."""
    steps: int
    """Model calls made."""
    usage: dict[str, int] = field(default_factory=dict)
    """Tokens summed over the run's replies (``input_tokens``, ``output_tokens``, ...)."""
    finish_reason: str = "stop"
    """Why the last reply ended; ``max_steps`` when the run stopped at the step limit."""
    events: tuple[RunEvent, ...] = ()
    """Every event of the run, when it was started with ``keep_events=True``."""


@dataclass(frozen=True, slots=True)
class RunSpec:
    """Everything the loop needs to drive one run; built by the session layer."""

    provider: Provider
    """The model."""
    tools: tuple[Tool, ...]
    """The tools offered."""
    text: str | None = None
    """The new user request, or None to resume."""
    on_approval: Approval | None = None
    """Asked before each tool call."""
    on_question: Question | None = None
    """Answers the model's questions; when given, the ``ask_user`` tool is offered."""
    max_steps: int = 20
    """The most model calls the run may make."""


_END = object()


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
    ) -> None:
        check_timeout(timeout)
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
        try:
            if self._timeout is None:
                result = await self._body(self)
            else:
                try:
                    async with asyncio.timeout(self._timeout) as scope:
                        result = await self._body(self)
                except TimeoutError as exc:
                    if scope.expired():
                        raise RunTimeoutError(self._session.id, self._timeout) from exc
                    raise
        finally:
            self._finished = True
            if self._queue is not None:
                self._queue.put_nowait(_END)
            if self._on_done is not None:
                self._on_done()
        return replace(result, events=tuple(self._kept)) if self._keep else result

    def emit(self, event: RunEvent) -> None:
        """Report an event: kept, queued for the iterator, and passed to every hook."""
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
            Whatever the run raised (ProviderError ...).
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
