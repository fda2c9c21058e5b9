"""Model settings: how a model should answer, one typed and validated object.

A run takes them (``prompt(..., model_settings=...)``), a session keeps the ones it
was last given (like the model it was last given), and each provider maps them onto
its API: ``max_tokens``, ``temperature``, ``top_p``, ``tool_choice``, ``stop``,
``seed``, and ``extra_body`` / ``extra_headers`` for what plait does not name. How the
SDK calls the API is set here too: ``timeout`` and ``max_retries`` per request, and
``prompt_cache`` (Anthropic's ``cache_control`` on the stable prefix).

What a run keeps of a reply is bounded too, whatever the server sends: ``max_reply_chars``,
``max_tool_arguments_chars``, ``max_tool_output_chars`` and ``idle_timeout`` (each left
unset is plait's default, never unbounded).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Final

from plait._checks import check_int
from plait.errors import InvalidArgumentError, UnknownOptionError
from plait.providers.base import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_REPLY_CHARS,
    DEFAULT_MAX_TOOL_ARGUMENTS_CHARS,
    DEFAULT_MAX_TOOL_OUTPUT_CHARS,
    Request,
    ToolSpec,
    check_cap,
    check_idle,
)
from plait.records import JSONValue, Message, dumps

__all__ = ["TOOL_CHOICES", "ModelSettings"]

TOOL_CHOICES: Final = ("auto", "none", "required")
"""The tool choices every provider understands; any other string names one tool."""

_MAX_STOP: Final = 16


def _number(name: str, value: object, lo: float, hi: float) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentError(f"{name} must be a number, not {type(value).__name__}")
    if not lo <= float(value) <= hi:
        raise InvalidArgumentError(f"{name} must be between {lo} and {hi}, got {value}")
    return float(value)


def _integer(name: str, value: object, lo: int, hi: int) -> int | None:
    return None if value is None else check_int(value, name, lo=lo, hi=hi)


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """How the model should answer; every field left ``None`` (or empty) is the API's default.

    Raises:
        InvalidArgumentError: a value out of range or of the wrong type.
    """

    max_tokens: int | None = None
    """The most tokens a reply may have."""
    temperature: float | None = None
    """Sampling temperature, 0 to 2."""
    top_p: float | None = None
    """Nucleus sampling, 0 to 1."""
    tool_choice: str | None = None
    """``auto``, ``none``, ``required``, or the name of the one tool to call."""
    stop: tuple[str, ...] = ()
    """Sequences that end the reply (at most 16)."""
    seed: int | None = None
    """A sampling seed, for providers that take one."""
    extra_body: Mapping[str, JSONValue] = field(default_factory=dict)
    """Fields sent as they are in the request body."""
    extra_headers: Mapping[str, str] = field(default_factory=dict)
    """HTTP headers sent with the request."""
    timeout: float | None = None
    """Seconds before the SDK abandons one request (the provider's own when unset)."""
    max_retries: int | None = None
    """How often the SDK retries a request that failed to connect or got 429/5xx."""
    prompt_cache: bool | None = None
    """Mark the stable prefix for the provider's prompt cache (Anthropic's
    ``cache_control``; on by default there; OpenAI caches by itself)."""
    max_reply_chars: int | None = None
    """The characters one reply may carry, text, reasoning and tool-call arguments together
    (default 4 Mi); past it the run ends with ``ReplyTooLargeError``, the reply so far kept
    as cut off, for ``resume()`` to ask again."""
    max_tool_arguments_chars: int | None = None
    """The characters one tool call's arguments may have (default 1 Mi), likewise."""
    max_tool_output_chars: int | None = None
    """The characters of one tool's output that are kept and sent (default 1 Mi); longer
    output is cut, and says how much was."""
    idle_timeout: float | None = None
    """Seconds a model's stream may send nothing new before the run gives it up with
    ``ProviderStalledError`` (default 600; keep-alives are not new)."""

    def __post_init__(self) -> None:
        for cap in ("max_reply_chars", "max_tool_arguments_chars", "max_tool_output_chars"):
            if getattr(self, cap) is not None:
                check_cap(cap, getattr(self, cap))
        if self.idle_timeout is not None:
            object.__setattr__(self, "idle_timeout", check_idle(self.idle_timeout))
        _integer("max_tokens", self.max_tokens, 1, 10_000_000)
        _integer("max_retries", self.max_retries, 0, 20)
        if self.prompt_cache is not None and not isinstance(self.prompt_cache, bool):
            raise InvalidArgumentError("prompt_cache must be true or false")
        set_ = object.__setattr__
        set_(self, "temperature", _number("temperature", self.temperature, 0.0, 2.0))
        set_(self, "top_p", _number("top_p", self.top_p, 0.0, 1.0))
        set_(self, "timeout", _number("timeout", self.timeout, 0.001, 86_400.0))
        _integer("seed", self.seed, -(2**63), 2**63 - 1)
        choice = self.tool_choice
        if choice is not None and (not isinstance(choice, str) or not choice.strip()):
            raise InvalidArgumentError("tool_choice must be auto, none, required or a tool name")
        stop = self.stop
        if isinstance(stop, str):
            stop = (stop,)
        if not isinstance(stop, tuple | list) or not all(isinstance(s, str) and s for s in stop):
            raise InvalidArgumentError("stop must be a list of non-empty strings")
        if len(stop) > _MAX_STOP:
            raise InvalidArgumentError(f"stop takes at most {_MAX_STOP} sequences")
        set_(self, "stop", tuple(stop))
        if not isinstance(self.extra_body, Mapping):
            raise InvalidArgumentError("extra_body must be a JSON object")
        dumps(dict(self.extra_body))
        set_(self, "extra_body", dict(self.extra_body))
        headers = self.extra_headers
        if not isinstance(headers, Mapping) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in headers.items()
        ):
            raise InvalidArgumentError("extra_headers must map header names to strings")
        set_(self, "extra_headers", dict(headers))

    @classmethod
    def from_json(cls, data: object) -> ModelSettings:
        """Read settings from a JSON object (the stored form; also ``-o key value`` pairs).

        Raises:
            UnknownOptionError: a key that is not a setting.
            InvalidArgumentError: not an object, or a bad value.
        """
        if isinstance(data, ModelSettings):
            return data
        if not isinstance(data, Mapping):
            raise InvalidArgumentError(f"model settings must be a dict, not {type(data).__name__}")
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(names))
        if unknown:
            raise UnknownOptionError("model settings", unknown, names)
        values: dict[str, Any] = {k: v for k, v in data.items() if v is not None}
        if "stop" in values and isinstance(values["stop"], list):
            values["stop"] = tuple(values["stop"])
        return cls(**values)

    def to_json(self) -> dict[str, JSONValue]:
        """The settings that are set, as a JSON object (``from_json`` reads it back)."""
        out: dict[str, JSONValue] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value == () or value == {}:
                continue
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    def over(self, base: ModelSettings) -> ModelSettings:
        """These settings laid over ``base``: what is set here wins, extras are merged."""
        changes: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in ("extra_body", "extra_headers"):
                changes[f.name] = {**getattr(base, f.name), **value}
            elif value is not None and value != ():
                changes[f.name] = value
        return replace(base, **changes)

    def check_tools(self, names: Iterable[str]) -> None:
        """Raise InvalidArgumentError if ``tool_choice`` names a tool not among ``names``."""
        choice = self.tool_choice
        if choice is not None and choice not in TOOL_CHOICES and choice not in set(names):
            raise InvalidArgumentError(f"tool_choice names {choice!r}, which is not offered")

    def request(self, messages: list[Message], tools: list[ToolSpec]) -> Request:
        """The model call these settings describe, for ``messages`` and ``tools``.

        Raises:
            InvalidArgumentError: ``tool_choice`` names a tool that is not offered.
        """
        self.check_tools(t.name for t in tools)
        return Request(
            messages,
            tools=tools,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            extra=dict(self.extra_body),
            top_p=self.top_p,
            tool_choice=self.tool_choice,
            stop=self.stop,
            seed=self.seed,
            headers=dict(self.extra_headers),
            timeout=self.timeout,
            max_retries=self.max_retries,
            prompt_cache=self.prompt_cache,
            max_reply_chars=self.max_reply_chars or DEFAULT_MAX_REPLY_CHARS,
            max_tool_arguments_chars=(
                self.max_tool_arguments_chars or DEFAULT_MAX_TOOL_ARGUMENTS_CHARS
            ),
            idle_timeout=self.idle_timeout or DEFAULT_IDLE_TIMEOUT,
        )

    @property
    def tool_output_cap(self) -> int:
        """The characters of one tool's output a run keeps (the default when unset)."""
        return self.max_tool_output_chars or DEFAULT_MAX_TOOL_OUTPUT_CHARS

    @property
    def empty(self) -> bool:
        """Whether nothing is set."""
        return not self.to_json()
