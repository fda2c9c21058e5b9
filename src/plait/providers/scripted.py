"""A provider that plays back replies written in advance: for tests, demos and replays.

It ships in the package (house style: test doubles are part of the library) and
needs no network, no key and no extra.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, TypeAlias

from plait.context import ModelLimits
from plait.errors import InvalidArgumentError
from plait.providers.base import (
    Finish,
    ItemDone,
    ReasoningDelta,
    Reply,
    Request,
    ScriptExhaustedError,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
    arguments_json,
)
from plait.records import ToolCall

__all__ = ["ScriptedProvider", "ScriptedReply"]

ScriptedReply: TypeAlias = str | Reply | Sequence[StreamEvent]
"""One scripted answer: plain text, a whole :class:`Reply`, or the exact events to stream."""

_EVENT_TYPES = (TextDelta, ToolCallDelta, ReasoningDelta, ItemDone, Usage, Finish)


def _pieces(text: str, parts: int = 3) -> list[str]:
    """Split ``text`` into up to ``parts`` non-empty pieces, so consumers see real deltas."""
    if not text:
        return []
    size = max(1, -(-len(text) // parts))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _reply_events(reply: Reply) -> list[StreamEvent]:
    events: list[StreamEvent] = [TextDelta(piece) for piece in _pieces(reply.text)]
    for index, call in enumerate(reply.tool_calls):
        raw = arguments_json(call)
        half = len(raw) // 2
        events.append(ToolCallDelta(index, call.id, call.name, raw[:half]))
        events.append(ToolCallDelta(index, arguments_delta=raw[half:]))
    if reply.usage is not None:
        events.append(reply.usage)
    events.append(Finish(reply.finish_reason, reply.model, reply.response_id))
    return events


def _check(reply: object, position: int) -> ScriptedReply:
    if isinstance(reply, str | Reply):
        return reply
    if isinstance(reply, Sequence) and all(isinstance(e, _EVENT_TYPES) for e in reply):
        return list(reply)
    raise InvalidArgumentError(
        f"scripted reply #{position} must be a str, a Reply or a list of stream events, "
        f"got {reply!r}"
    )


class ScriptedProvider:
    """Streams the replies it was given, one per request, in order.

    A text reply streams as a few :class:`TextDelta` pieces then ``Finish("stop")``;
    a :class:`Reply` streams its text, each tool call as two deltas (id and name with
    the first half of the JSON arguments, then the rest), its usage, and its finish
    reason; a list of events is streamed exactly as given (so a test can script a
    malformed or cut-off stream). Every request is kept in :attr:`requests`.

    Args:
        replies: the answers, in the order they will be given.
        model: the model name it reports.
        context_window: a window to declare through ``limits()``, as a server would.
        output_limit: an output limit to declare likewise.
        reads_formats: the opaque-item formats to be sent, as a provider that reads them
            would declare.

    Raises:
        InvalidArgumentError: a reply of another type.
    """

    def __init__(
        self,
        replies: Iterable[ScriptedReply] = (),
        *,
        model: str = "scripted",
        context_window: int | None = None,
        output_limit: int | None = None,
        reads_formats: Iterable[str] = (),
    ) -> None:
        self._replies = [_check(r, i) for i, r in enumerate(replies)]
        self._served = 0
        self._model = model
        self._limits = ModelLimits(context_window=context_window, output_limit=output_limit)
        self.reads_formats: frozenset[str] = frozenset(reads_formats)
        """The opaque-item formats its requests carry (none by default), as a provider
        that reads them would declare."""
        self.requests: list[Request] = []
        """Every request received, oldest first (including one that found no reply)."""

    @property
    def name(self) -> str:
        """``scripted``."""
        return "scripted"

    @property
    def model(self) -> str:
        """The model name given at construction (``scripted`` by default)."""
        return self._model

    async def limits(self) -> ModelLimits | None:
        """The window and output limit it was given, as a server would declare them."""
        return None if self._limits.empty else self._limits

    @property
    def remaining(self) -> int:
        """How many replies are left."""
        return len(self._replies) - self._served

    def add(self, *replies: ScriptedReply) -> None:
        """Append more replies to the script.

        Raises:
            InvalidArgumentError: a reply of another type.
        """
        start = len(self._replies)
        self._replies.extend(_check(r, start + i) for i, r in enumerate(replies))

    @classmethod
    def from_replay(
        cls, responses: Iterable[Mapping[str, Any]], *, model: str = "scripted"
    ) -> ScriptedProvider:
        """A provider that answers with a plait bundle's recorded replies.

        Args:
            responses: a bundle's ``replay.responses`` list (see
                :mod:`plait.interop.bundle`): ``{"content", "tool_calls": [{"id",
                "name", "arguments"}], "usage"?}`` per assistant reply. Arguments a
                ``replay-only`` bundle removed (``null``) replay as ``{}``.
            model: the model name it reports.

        Returns:
            The provider; a reply with tool calls finishes with ``tool_calls``,
            any other with ``stop``.

        Raises:
            InvalidArgumentError: an entry of the wrong shape.
        """
        replies: list[ScriptedReply] = []
        for i, entry in enumerate(responses):
            if not isinstance(entry, Mapping):
                raise InvalidArgumentError(f"replay response #{i} must be an object")
            content = entry.get("content") or ""
            raw_calls = entry.get("tool_calls") or []
            if not isinstance(content, str) or not isinstance(raw_calls, list):
                raise InvalidArgumentError(
                    f"replay response #{i}: 'content' must be a string, 'tool_calls' a list"
                )
            calls: list[ToolCall] = []
            for j, call in enumerate(raw_calls):
                ok = isinstance(call, Mapping)
                ok = ok and isinstance(call.get("id"), str) and isinstance(call.get("name"), str)
                arguments = call.get("arguments") if ok else None
                if not ok or not isinstance(arguments, Mapping | None):
                    raise InvalidArgumentError(
                        f"replay response #{i}, tool call #{j}: needs string 'id' and 'name' "
                        "and object 'arguments'"
                    )
                calls.append(ToolCall(call["id"], call["name"], dict(arguments or {})))
            usage = entry.get("usage")
            replies.append(
                Reply(
                    content,
                    tuple(calls),
                    Usage.from_json(usage) if isinstance(usage, Mapping) else None,
                    "tool_calls" if calls else "stop",
                )
            )
        return cls(replies, model=model)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Record ``request`` and stream the next scripted reply.

        Raises:
            ScriptExhaustedError: no reply is left.
        """
        self.requests.append(request)
        if self._served >= len(self._replies):
            raise ScriptExhaustedError(self._served)
        reply = self._replies[self._served]
        self._served += 1
        if isinstance(reply, str):
            events: Sequence[StreamEvent] = [
                *(TextDelta(p) for p in _pieces(reply)),
                Finish("stop"),
            ]
        elif isinstance(reply, Reply):
            events = _reply_events(reply)
        else:
            events = reply
        for event in events:
            # Yield to the loop between events, as a network stream would, so consumers
            # that interleave work (steering, cancellation) are exercised.
            await asyncio.sleep(0)
            yield event

    def __repr__(self) -> str:
        return f"ScriptedProvider(model={self._model!r}, remaining={self.remaining})"
