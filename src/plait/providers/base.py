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

import asyncio
import contextvars
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal, Protocol, TypeAlias, get_args, runtime_checkable

from plait._ids import new_id
from plait.context import ModelLimits
from plait.errors import (
    InvalidArgumentError,
    ProviderError,
    ProviderResponseError,
    ProviderStalledError,
    ReplyTooLargeError,
    ScriptExhaustedError,
    ToolArgumentsError,
)
from plait.records import JSONValue, Message, ToolCall

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


# -- errors ----------------------------------------------------------------------------
# They derive from PlaitError like every other plait error; they live here (not in
# plait.errors) while the providers layer is new, and are re-exported by plait.providers.


# -- bounds ----------------------------------------------------------------------------
# A model server is another program: nothing it streams may grow a run without bound, and
# nothing it holds back may hold a run for ever. What is kept of a reply is therefore
# capped as it arrives (a cap passed ends the stream at once), and a stream that sends
# nothing new for the idle timeout is abandoned.

DEFAULT_MAX_REPLY_CHARS: Final = 4 * 1024 * 1024
"""The characters one reply may carry, its text, reasoning and tool-call arguments together
(a model writes far fewer; a stored record holds at most 8 Mi characters)."""

DEFAULT_MAX_TOOL_ARGUMENTS_CHARS: Final = 1024 * 1024
"""The characters one tool call's streamed arguments may have."""

DEFAULT_MAX_TOOL_OUTPUT_CHARS: Final = 1024 * 1024
"""The characters of one tool's output a run keeps (longer output is cut, and says so)."""

DEFAULT_IDLE_TIMEOUT: Final = 600.0
"""Seconds a provider's stream may send nothing new (keep-alives and usage are not new)
before the run gives up on it: as long as the SDKs wait for a server that sends nothing."""

MAX_REPLY_CALLS: Final = 1024
"""The tool calls (and, apart, the verbatim items) one reply may have."""


def check_cap(name: str, value: object) -> int:
    """``value`` as a positive character cap, or InvalidArgumentError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= 2**40:
        raise InvalidArgumentError(f"{name} must be a positive int, got {value!r}")
    return value


def check_idle(value: object) -> float:
    """``value`` as a positive number of seconds, or InvalidArgumentError."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 86_400:
        raise InvalidArgumentError(f"idle_timeout must be 0 to 86400 seconds, got {value!r}")
    return float(value)


# -- request ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the model may call, described by a JSON schema."""

    name: str
    """The name the model calls it by."""
    description: str = ""
    """What the tool does, for the model."""
    parameters: Mapping[str, JSONValue] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    """A JSON schema (an ``object``) for the arguments."""

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> ToolSpec:
        """Build a spec from ``{"name", "description"?, "parameters"?}``.

        Raises:
            InvalidArgumentError: no string ``name``, unknown keys, or ``parameters``
                that is not an object.
        """
        unknown = set(spec) - {"name", "description", "parameters"}
        if unknown:
            raise InvalidArgumentError(f"unknown tool spec keys: {', '.join(sorted(unknown))}")
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError("a tool spec needs a non-empty string 'name'")
        description = spec.get("description", "")
        if not isinstance(description, str):
            raise InvalidArgumentError(f"tool {name!r}: 'description' must be a string")
        parameters = spec.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(parameters, Mapping):
            raise InvalidArgumentError(f"tool {name!r}: 'parameters' must be a JSON schema object")
        return cls(name, description, dict(parameters))

    def to_dict(self) -> dict[str, JSONValue]:
        """Return ``{"name", "description", "parameters"}``."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
        }


@dataclass(frozen=True, slots=True)
class Request:
    """One model call: what the model sees and how it should answer."""

    messages: Sequence[Message]
    """The conversation, system prompt(s) included, oldest first."""
    tools: Sequence[ToolSpec] = ()
    """The tools the model may call."""
    model: str | None = None
    """The model to use; ``None`` means the provider's own ``model``."""
    max_tokens: int | None = None
    """The most tokens the reply may have; ``None`` is the provider's default."""
    temperature: float | None = None
    """Sampling temperature; ``None`` is the API's default."""
    extra: Mapping[str, JSONValue] = field(default_factory=dict)
    """Provider-specific request fields, sent as they are (in the JSON body)."""
    top_p: float | None = None
    """Nucleus sampling; ``None`` is the API's default."""
    tool_choice: str | None = None
    """``auto``, ``none``, ``required`` or one tool's name; ``None`` is the API's default."""
    stop: tuple[str, ...] = ()
    """Sequences that end the reply."""
    seed: int | None = None
    """A sampling seed (providers without one ignore it)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra HTTP headers for this request."""
    timeout: float | None = None
    """Seconds before the SDK abandons this request; ``None`` is the provider's own."""
    max_retries: int | None = None
    """The SDK's retries of this request; ``None`` is the provider's own."""
    prompt_cache: bool | None = None
    """Mark the stable prefix for the prompt cache (providers that need marks); ``None`` is
    the provider's default."""
    max_reply_chars: int = DEFAULT_MAX_REPLY_CHARS
    """The characters the reply may carry (text, reasoning and call arguments together);
    :func:`complete` raises :class:`ReplyTooLargeError` past it."""
    max_tool_arguments_chars: int = DEFAULT_MAX_TOOL_ARGUMENTS_CHARS
    """The characters one tool call's arguments may have (likewise)."""
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    """Seconds the stream may send nothing new; :func:`complete` raises
    :class:`ProviderStalledError` past it."""

    def __post_init__(self) -> None:
        check_cap("max_reply_chars", self.max_reply_chars)
        check_cap("max_tool_arguments_chars", self.max_tool_arguments_chars)
        object.__setattr__(self, "idle_timeout", check_idle(self.idle_timeout))
        if self.max_tokens is not None and self.max_tokens <= 0:
            raise InvalidArgumentError(f"max_tokens must be positive, got {self.max_tokens}")
        timeout, retries = self.timeout, self.max_retries
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0
        ):
            raise InvalidArgumentError(f"timeout must be a positive number, got {timeout!r}")
        if retries is not None and (
            isinstance(retries, bool) or not isinstance(retries, int) or retries < 0
        ):
            raise InvalidArgumentError(f"max_retries must be an int >= 0, got {retries!r}")
        if self.prompt_cache is not None and not isinstance(self.prompt_cache, bool):
            raise InvalidArgumentError("prompt_cache must be True, False or None")
        tools = tuple(ToolSpec.from_dict(t) if isinstance(t, Mapping) else t for t in self.tools)
        for tool in tools:
            if not isinstance(tool, ToolSpec):
                raise InvalidArgumentError(f"tools must be ToolSpec or dicts, got {tool!r}")
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise InvalidArgumentError(f"tool names must be unique, got {names}")
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "stop", tuple(self.stop))
        for message in self.messages:
            if not isinstance(message, Message):
                raise InvalidArgumentError(f"messages must be plait Messages, got {message!r}")


# -- events ----------------------------------------------------------------------------

FinishReason: TypeAlias = Literal["stop", "tool_calls", "length", "content_filter", "error"]
"""Why a reply ended: done, wants its tool calls run, hit ``max_tokens``, was filtered,
or the provider reported an error in the stream."""

FINISH_REASONS: tuple[FinishReason, ...] = get_args(FinishReason)


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A piece of the reply's text."""

    type: ClassVar[Literal["text_delta"]] = "text_delta"
    text: str
    """The text, to append to what came before."""


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of one tool call; the deltas of one call share its ``index``."""

    type: ClassVar[Literal["tool_call_delta"]] = "tool_call_delta"
    index: int
    """Which call of the reply this piece belongs to (0, 1, ...)."""
    id: str | None = None
    """The call's id, usually only on its first delta."""
    name: str | None = None
    """The tool's name, usually only on its first delta."""
    arguments_delta: str = ""
    """A piece of the JSON arguments, to append to what came before."""


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A piece of the model's reasoning, shown apart from the reply's text."""

    type: ClassVar[Literal["reasoning_delta"]] = "reasoning_delta"
    text: str
    """The reasoning text, to append to what came before."""


@dataclass(frozen=True, slots=True)
class ItemDone:
    """A whole provider item plait has no kind for, kept verbatim (an opaque item)."""

    type: ClassVar[Literal["item_done"]] = "item_done"
    format: str
    """Which provider's items these are (``openai-responses``, ``anthropic``)."""
    item: Mapping[str, JSONValue]
    """The item as the API gave it (a JSON object)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one reply (plait's ``meta["usage"]`` shape, decision D29)."""

    type: ClassVar[Literal["usage"]] = "usage"
    input_tokens: int = 0
    """Every prompt token the provider counted, cached ones included."""
    output_tokens: int = 0
    """The tokens the model wrote."""
    cached_tokens: int = 0
    """The part of ``input_tokens`` served from the provider's cache."""

    def to_json(self) -> dict[str, JSONValue]:
        """Return ``{"input_tokens", "output_tokens", "cached_tokens"}`` for ``meta["usage"]``."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Usage:
        """Read a ``meta["usage"]`` object; a count that is not a non-negative int is 0."""

        def count(key: str) -> int:
            value = data.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                return value
            return 0

        return cls(count("input_tokens"), count("output_tokens"), count("cached_tokens"))


@dataclass(frozen=True, slots=True)
class Finish:
    """The reply ended; always the last event of a stream."""

    type: ClassVar[Literal["finish"]] = "finish"
    reason: FinishReason
    """Why it ended."""
    model: str | None = None
    """The model that served the reply, as the API named it (when it did)."""
    response_id: str | None = None
    """The API's id of the response (when it gave one)."""


StreamEvent: TypeAlias = TextDelta | ToolCallDelta | ReasoningDelta | ItemDone | Usage | Finish
"""One event of a provider's stream."""


# -- provider --------------------------------------------------------------------------


@runtime_checkable
class Provider(Protocol):
    """A model behind the streaming protocol.

    A provider that can read some opaque items (provider items plait stores verbatim,
    :class:`plait.OpaqueRecord`) says so with an optional ``reads_formats`` attribute,
    a set of format names; requests carry those items to it as ``Message`` objects with
    role ``opaque``, and no other provider ever gets them (:func:`reads_formats`).
    """

    @property
    def name(self) -> str:
        """The provider's kind: ``openai``, ``anthropic``, ``scripted`` ..."""
        ...

    @property
    def model(self) -> str:
        """The model it calls when the request names none."""
        ...

    def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Send ``request`` and yield the reply as events, :class:`Finish` last.

        Implementations are async generators (``async def`` with ``yield``).

        Raises:
            ProviderError: the API failed (its error chained).
        """
        ...


def reads_formats(provider: object) -> frozenset[str]:
    """The opaque-item formats ``provider`` reads: its ``reads_formats``, or none.

    Anything but a collection of strings counts as none, so an odd attribute can
    never send an item to a model that cannot read it.
    """
    formats = getattr(provider, "reads_formats", None)
    if isinstance(formats, str) or not isinstance(formats, Iterable):
        return frozenset()
    return frozenset(f for f in formats if isinstance(f, str))


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
