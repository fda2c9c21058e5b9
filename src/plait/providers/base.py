"""The streaming protocol every model provider speaks.

A provider takes a :class:`Request` (the messages, the tools, the model and the
sampling settings) and streams :data:`StreamEvent` values back:

* :class:`TextDelta` -- a piece of the reply's text;
* :class:`ToolCallDelta` -- a piece of one tool call, keyed by its ``index``: the
  first delta of a call usually carries its ``id`` and ``name``, the following ones
  pieces of its JSON ``arguments``;
* :class:`ReasoningDelta` -- a piece of the model's reasoning text (``reasoning_content``
  of chat completions, a Responses reasoning summary, an Anthropic thinking block): kept
  with the reply, never part of its text;
* :class:`ItemDone` -- a whole provider item plait has no kind for (a Responses reasoning
  item, an Anthropic thinking block), to be stored verbatim as an opaque item and sent
  back to a provider that reads its ``format``;
* :class:`Usage` -- the token counts of the reply so far (a later ``Usage`` replaces
  an earlier one: they are totals, not increments);
* :class:`Finish` -- why the reply ended. It is always the last event; a stream that
  ends without one was cut off.

Each event is a frozen dataclass with a ``type`` discriminator, so a consumer can
``match`` on the class or switch on ``event.type``. :func:`complete` turns a whole
stream into a :class:`Reply`.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

from plait._ids import new_id
from plait.context import ModelLimits
from plait.errors import (
    ProviderError,
    ProviderResponseError,
    ProviderStalledError,
    ReplyTooLargeError,
    ScriptExhaustedError,
    ToolArgumentsError,
)
from plait.providers._bounded import bounded
from plait.providers._stream import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_REPLY_CHARS,
    DEFAULT_MAX_TOOL_ARGUMENTS_CHARS,
    DEFAULT_MAX_TOOL_OUTPUT_CHARS,
    FINISH_REASONS,
    Finish,
    FinishReason,
    ItemDone,
    Provider,
    ReasoningDelta,
    Request,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    reads_formats,
)
from plait.providers._stream import MAX_REPLY_CALLS as MAX_REPLY_CALLS
from plait.providers._stream import check_cap as check_cap
from plait.providers._stream import check_idle as check_idle
from plait.records import Message, ToolCall

_log = logging.getLogger("plait")

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_REPLY_CHARS",
    "DEFAULT_MAX_TOOL_ARGUMENTS_CHARS",
    "DEFAULT_MAX_TOOL_OUTPUT_CHARS",
    "FINISH_REASONS",
    "SUMMARY_PREFIX",
    "Finish",
    "FinishReason",
    "ItemDone",
    "Provider",
    "ProviderError",
    "ProviderResponseError",
    "ProviderStalledError",
    "ReasoningDelta",
    "Reply",
    "ReplyTooLargeError",
    "Request",
    "ScriptExhaustedError",
    "StreamEvent",
    "TextDelta",
    "ToolArgumentsError",
    "ToolCallDelta",
    "ToolSpec",
    "Usage",
    "arguments_json",
    "bounded",
    "complete",
    "declared_limits",
    "summary_text",
    "reads_formats",
]


# The provider errors are plait.errors' own, re-exported here and by plait.providers.
# The request, the events and the Provider protocol are in _stream.py; bounded() (the
# caps and the idle timeout held as a stream arrives) in _bounded.py.


@dataclass(frozen=True, slots=True)
class Reply:
    """A whole reply, as :func:`complete` assembles it from a stream."""

    text: str = ""
    """The reply's text."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tool calls it made, in index order, arguments decoded."""
    usage: Usage | None = None
    """Its token counts, when the provider reported them."""
    finish_reason: FinishReason = "stop"
    """Why it ended."""
    model: str | None = None
    """The model that served it, as the API named it (when it did)."""
    response_id: str | None = None
    """The API's id of the response (when it gave one)."""
    reasoning: str = ""
    """The model's reasoning text, when it showed any."""
    items: tuple[ItemDone, ...] = ()
    """Provider items to keep verbatim, in the order they came (they precede the reply)."""


@dataclass(slots=True)
class _PendingCall:
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)


def _finish_call(provider: str, index: int, pending: _PendingCall) -> ToolCall:
    call_id = pending.id or f"call_{new_id()}"
    if not pending.name:
        raise ProviderResponseError(provider, f"tool call #{index} ({call_id!r}) has no name")
    raw = "".join(pending.arguments)
    if not raw.strip():
        return ToolCall(call_id, pending.name, {})
    try:
        arguments = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ToolArgumentsError(
            provider, pending.name, call_id, raw, f"are not valid JSON ({exc.msg})"
        ) from exc
    if not isinstance(arguments, dict):
        raise ToolArgumentsError(provider, pending.name, call_id, raw, "are not a JSON object")
    return ToolCall(call_id, pending.name, arguments)



async def complete(provider: Provider, request: Request) -> Reply:
    """Run ``request`` on ``provider`` and assemble the streamed events into a :class:`Reply`.

    Text deltas are joined. Tool-call deltas are grouped by ``index``: the first
    non-empty ``id`` and ``name`` of a call win (a server that repeats them on every
    delta is fine), its ``arguments_delta`` pieces are joined and decoded as JSON
    (empty arguments are ``{}``); a call that never got an id gets a fresh one. The
    last :class:`Usage` is the reply's usage. The stream is read through
    :func:`bounded`: what is kept is capped as it arrives, and an idle stream is given up.

    Args:
        provider: the model to ask.
        request: what to ask it.

    Returns:
        The reply.

    Raises:
        ToolArgumentsError: a tool call's arguments are not a JSON object.
        ReplyTooLargeError: the reply passed one of its caps.
        ProviderStalledError: the stream sent nothing new for its idle timeout.
        ProviderResponseError: a tool call without a name, or the stream ended
            without a :class:`Finish` (it was cut off).
        ProviderError: the provider failed.
    """
    text: list[str] = []
    reasoning: list[str] = []
    items: list[ItemDone] = []
    calls: dict[int, _PendingCall] = {}
    usage: Usage | None = None
    finish: Finish | None = None
    events = bounded(provider, request)
    try:
        async for event in events:
            if finish is not None:
                raise ProviderResponseError(provider.name, f"event after finish: {event!r}")
            if isinstance(event, TextDelta):
                text.append(event.text)
            elif isinstance(event, ToolCallDelta):
                pending = calls.setdefault(event.index, _PendingCall())
                if event.id and not pending.id:
                    pending.id = event.id
                if event.name and not pending.name:
                    pending.name = event.name
                if event.arguments_delta:
                    pending.arguments.append(event.arguments_delta)
            elif isinstance(event, ReasoningDelta):
                reasoning.append(event.text)
            elif isinstance(event, ItemDone):
                items.append(event)
            elif isinstance(event, Usage):
                usage = event
            elif isinstance(event, Finish):
                finish = event
            else:
                raise ProviderResponseError(provider.name, f"not a stream event: {event!r}")
    finally:
        await events.aclose()
    if finish is None:
        raise ProviderResponseError(provider.name, "the stream ended without a finish (cut off)")
    tool_calls = tuple(_finish_call(provider.name, i, calls[i]) for i in sorted(calls))
    return Reply(
        "".join(text),
        tool_calls,
        usage,
        finish.reason,
        finish.model,
        finish.response_id,
        "".join(reasoning),
        tuple(items),
    )


async def declared_limits(provider: Provider) -> ModelLimits | None:
    """What ``provider`` says of its model's window and output limit, or None.

    A provider may have an ``async limits()`` method (OpenAI-compatible servers read it from
    the server, the embedded model knows its own); one that has none, or that cannot say
    (its server does not answer), declares nothing and plait uses its family table.
    """
    probe = getattr(provider, "limits", None)
    if probe is None or not callable(probe):
        return None
    try:
        found = await probe()
    except ProviderError as exc:
        _log.info("%s: no model limits: %s", provider.name, exc)
        return None
    return found if isinstance(found, ModelLimits) else None


SUMMARY_PREFIX = "[Summary of the earlier conversation]\n"
"""What a ``summary`` message's text is sent after: APIs have no summary role, so an
adapter sends it as a user message that says what it is."""


def summary_text(message: Message) -> str:
    """The text a ``summary`` message is sent as (``SUMMARY_PREFIX`` then the summary)."""
    return SUMMARY_PREFIX + message.text


def arguments_json(call: ToolCall) -> str:
    """A tool call's arguments as the compact JSON string the wire formats carry."""
    return json.dumps(dict(call.arguments), ensure_ascii=False, separators=(",", ":"))
