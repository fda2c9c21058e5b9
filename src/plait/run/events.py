"""What a run reports: its events, its options and its result.

A run's events are the provider's stream events (text and tool-call deltas,
usage, finish) plus the run's own: :class:`RecordAdded` for every record the
run appends, :class:`ToolStarted` / :class:`ToolFinished` around each tool call,
and :class:`IterationEnd` after each model call and its tools (seed 003's
``iteration_end``). Each has a ``type`` discriminator.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal, TypeAlias, TypedDict

from plait.providers.base import (
    Finish,
    ItemDone,
    Provider,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from plait.providers.settings import ModelSettings
from plait.records import JSONValue, Record, ToolCall
from plait.tools import Offered

__all__ = [
    "Approval",
    "EventHook",
    "IterationEnd",
    "Question",
    "RecordAdded",
    "RunEvent",
    "RunOptions",
    "RunResult",
    "RunSpec",
    "ToolFinished",
    "ToolStarted",
    "event_json",
]


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
    | ReasoningDelta
    | ItemDone
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
    elif isinstance(event, ReasoningDelta):
        out["text"] = event.text
    elif isinstance(event, ItemDone):
        out.update(format=event.format, item=dict(event.item))
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
    tools: Sequence[Offered] | None
    """The tools offered: :class:`~plait.tools.Tool` s and toolsets such as an
    :class:`~plait.tools.MCPServer` (default: shell, read_file, write_file, list_files,
    plus the MCP servers the session's ``mcp_servers`` setting names)."""
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
    model_settings: ModelSettings | Mapping[str, JSONValue] | None
    """How the model should answer (``max_tokens``, ``temperature``, ``tool_choice`` ...),
    laid over the session's stored settings and then stored with the session."""


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
    tools: tuple[Offered, ...]
    """The tools offered (a toolset is opened by the run)."""
    text: str | None = None
    """The new user request, or None to resume."""
    on_approval: Approval | None = None
    """Asked before each tool call."""
    on_question: Question | None = None
    """Answers the model's questions; when given, the ``ask_user`` tool is offered."""
    max_steps: int = 20
    """The most model calls the run may make."""
    settings: ModelSettings = field(default_factory=ModelSettings)
    """How the model should answer, for every model call of the run."""
