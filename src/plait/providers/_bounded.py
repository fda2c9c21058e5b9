"""The bounded reader: a provider's stream held to its request's caps and idle timeout.

Private: import :func:`bounded` from :mod:`plait.providers.base`.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from plait.errors import ProviderStalledError, ReplyTooLargeError
from plait.providers._stream import (
    MAX_REPLY_CALLS,
    ItemDone,
    Provider,
    ReasoningDelta,
    Request,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
)


class _Budget:
    """What one reply has kept so far, against its request's caps."""

    def __init__(self, provider: str, request: Request) -> None:
        self.provider, self.request = provider, request
        self.kept = 0
        self.calls: dict[int, int] = {}
        self.items = 0

    def _keep(self, n: int, what: str) -> None:
        self.kept += n
        if self.kept > self.request.max_reply_chars:
            raise ReplyTooLargeError(self.provider, what, self.request.max_reply_chars)

    def take(self, event: StreamEvent) -> bool:
        """Count ``event``; whether it brought something new (usage does not).

        Raises:
            ReplyTooLargeError: it passes a cap.
        """
        if isinstance(event, TextDelta):
            self._keep(len(event.text), "text")
        elif isinstance(event, ReasoningDelta):
            self._keep(len(event.text), "reasoning")
        elif isinstance(event, ToolCallDelta):
            size = self.calls.get(event.index)
            if size is None and len(self.calls) >= MAX_REPLY_CALLS:
                raise ReplyTooLargeError(self.provider, "tool calls", MAX_REPLY_CALLS)
            size = (size or 0) + len(event.arguments_delta)
            cap = self.request.max_tool_arguments_chars
            if size > cap:
                raise ReplyTooLargeError(self.provider, "tool call arguments", cap)
            self.calls[event.index] = size
            self._keep(len(event.arguments_delta), "tool call arguments")
        elif isinstance(event, ItemDone):
            self.items += 1
            if self.items > MAX_REPLY_CALLS:
                raise ReplyTooLargeError(self.provider, "items", MAX_REPLY_CALLS)
        elif isinstance(event, Usage):
            return False
        return True


async def bounded(provider: Provider, request: Request) -> AsyncGenerator[StreamEvent, None]:
    """``provider.stream(request)``, held to the request's caps and idle timeout.

    The stream is closed the moment the reply passes ``request.max_reply_chars`` (its text,
    reasoning and call arguments together), one call's arguments pass
    ``request.max_tool_arguments_chars``, or its calls or items pass :data:`MAX_REPLY_CALLS`;
    and when it sends no text, reasoning, arguments, item or finish for
    ``request.idle_timeout`` seconds (keep-alives never arrive here, and a server that
    repeats its usage is still idle). So a server that streams without end costs a run
    at most the caps, and one that sends nothing holds it at most the idle timeout.

    Raises:
        ReplyTooLargeError: the reply passed one of its caps.
        ProviderStalledError: the stream sent nothing new for its idle timeout.
        ProviderError: the provider failed.
    """
    loop = asyncio.get_running_loop()
    budget = _Budget(provider.name, request)
    stream = provider.stream(request)
    events = aiter(stream)
    idle = _Idle(loop, request.idle_timeout)
    try:
        while True:
            event = await idle.next(events, provider)
            if event is None:
                return
            if budget.take(event):
                idle.deadline = loop.time() + idle.seconds
            yield event
    finally:
        idle.close()
        # Closed here, not when collected: a stream given up on lets its connection go now.
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()


class _Idle:
    """The idle timeout of one stream: one timer, moved on as events bring something new.

    One timer for the stream, not one per event: a cancelled timer stays in the loop's
    queue until its time, and the context it was made in (the session a run drives) with
    it; this one is made in an empty context and cancelled when the stream ends.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        self.loop, self.seconds = loop, seconds
        self.deadline = loop.time() + seconds
        self._waiting: asyncio.Task[Any] | None = None
        self._fired = False
        self._handle = self._arm()

    def _arm(self) -> asyncio.TimerHandle:
        return self.loop.call_at(self.deadline, self._check, context=contextvars.Context())

    def _check(self) -> None:
        if self.loop.time() < self.deadline:
            self._handle = self._arm()  # something new came meanwhile
        elif self._waiting is not None:
            self._fired = True
            self._waiting.cancel()
        # Else the reader is busy with an event: the next wait checks the deadline itself.

    async def next(self, events: AsyncIterator[StreamEvent], provider: Provider) -> Any:
        """The next event, None at the end; ProviderStalledError past the deadline."""
        if self.loop.time() >= self.deadline:
            raise self._stalled(provider)
        task = asyncio.current_task()
        cancelling = task.cancelling() if task is not None else 0
        self._waiting = task
        try:
            return await anext(events)
        except StopAsyncIteration:
            return None
        except asyncio.CancelledError:
            if self._fired and task is not None and task.uncancel() <= cancelling:
                raise self._stalled(provider) from None
            raise
        finally:
            self._waiting = None

    def _stalled(self, provider: Provider) -> ProviderStalledError:
        url = getattr(provider, "base_url", None)
        return ProviderStalledError(provider.name, self.seconds, url)

    def close(self) -> None:
        """Cancel the timer."""
        self._handle.cancel()
