"""The words of the streaming protocol: the request, the events and the ``Provider`` protocol.

The caps a request carries (and their defaults) are here with it; :mod:`._bounded` holds a
stream to them. Private: import these names from :mod:`plait.providers.base`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal, Protocol, TypeAlias, get_args, runtime_checkable

from plait.errors import (
    InvalidArgumentError,
)
from plait.records import JSONValue, Message

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
    :class:`plait.records.OpaqueRecord`) says so with an optional ``reads_formats`` attribute,
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
