"""What a run reports: its events, its options and its result.

A run's events are the provider's stream events (text and tool-call deltas,
usage, finish) plus the run's own: :class:`RecordAdded` for every record the
run appends, :class:`ToolStarted` / :class:`ToolFinished` around each tool call,
:class:`IterationEnd` after each model call and its tools (seed 003's
``iteration_end``), and :class:`RunEnded` last, however the run ended (done, the
step limit, the output limit, a timeout, a cancel, an error). Each has a ``type``
discriminator.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final, Literal, TypeAlias, TypedDict

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
    "DENIED",
    "EndReason",
    "EventHook",
    "IterationEnd",
    "Question",
    "RecordAdded",
    "RunEnded",
    "RunEvent",
    "RunOptions",
    "RunResult",
    "RunSpec",
    "ToolFinished",
    "ToolStarted",
    "end_reason",
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
    denied: bool = False
    """Whether the call was denied (by ``on_approval``) rather than run."""


DENIED: Final = "the user denied this tool call"
"""The result a tool call gets when an approval answers False."""


@dataclass(frozen=True, slots=True)
class Denied:
    """An approval's answer that denies a tool call and says why (falsy, as ``False`` is).

    The model reads ``reason`` as the call's result in place of :data:`DENIED`, so a
    call refused by a policy (nobody there to ask, a timeout, a read-only demo) is not
    reported to it as the user's choice.
    """

    reason: str
    """What the model reads: why the call was not run."""

    def __bool__(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class IterationEnd:
    """One model call and the tool calls it asked for are done (seed 003's ``iteration_end``)."""

    type: ClassVar[Literal["iteration_end"]] = "iteration_end"
    step: int
    """Which model call of the run (1, 2, ...)."""
    session_id: str
    """The session being driven."""


EndReason: TypeAlias = Literal[
    "done",
    "max_steps",
    "repeated_call",
    "length",
    "content_filter",
    "timeout",
    "cancelled",
    "error",
]
"""How a run ended: its model finished; it stopped at the step limit; it stopped a model
that made the same failing tool call again and again (``repeat_limit``); the last reply
hit the output limit (``max_tokens``) or the provider's content filter; it passed its
timeout; it was cancelled; it failed."""

DEFAULT_REPEAT_LIMIT: Final = 3
"""A run stops when the model makes the same tool call (name and arguments) that failed,
this many times in a row: a model that cannot read the failure would make it until the
step limit. A session's ``repeat_limit`` setting changes it."""


def _steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


@dataclass(frozen=True, slots=True)
class RunEnded:
    """How the run ended, said once it has: always the run's last event.

    A stream yields it before it raises the run's error (a timeout, a cancel, a
    failure), so whoever reads the events learns how the run ended from them alone.
    """

    type: ClassVar[Literal["ended"]] = "ended"
    reason: EndReason
    """How it ended (see :data:`EndReason`)."""
    steps: int
    """Model calls that answered."""
    denied: int = 0
    """Tool calls denied during the run (the model read that they were)."""
    timeout: float | None = None
    """The limit it passed, in seconds, when ``reason`` is ``timeout``."""
    error: str = ""
    """What failed, when ``reason`` is ``error``."""
    repeated: str = ""
    """The tool whose failing call the model kept making, when ``reason`` is
    ``repeated_call``."""
    repeats: int = 0
    """How many times in a row it made that call, when ``reason`` is ``repeated_call``."""
    complete: bool = field(init=False)
    """Whether the model finished its answer (``done``); False when it was cut short."""
    words: str = field(init=False)
    """The ending in words, as a person reads it."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "complete", self.reason == "done")
        object.__setattr__(self, "words", _ending_words(self))


def _ending_words(end: RunEnded) -> str:
    """``end`` in words: what happened, and the steps it took."""
    steps = _steps(end.steps)
    match end.reason:
        case "done":
            said = f"done in {steps}"
        case "max_steps":
            said = f"ended at the step limit ({steps}) before the model finished"
        case "repeated_call":
            said = (
                f"stopped after {steps}: the model made the same failing {end.repeated} call "
                f"{end.repeats} times in a row"
            )
        case "length":
            said = f"stopped after {steps}: the reply hit the output limit"
        case "content_filter":
            said = f"stopped after {steps}: the provider's content filter cut the reply off"
        case "timeout":
            limit = f" of {end.timeout:g} s" if end.timeout is not None else ""
            said = f"stopped after {steps}: the run passed its timeout{limit}"
        case "cancelled":
            said = f"stopped after {steps}: the run was cancelled"
        case _:
            said = f"failed after {steps}: {end.error}" if end.error else f"failed after {steps}"
    if end.denied:
        calls = "1 tool call was" if end.denied == 1 else f"{end.denied} tool calls were"
        said += f"; {calls} denied"
    return said


def end_reason(finish_reason: str) -> EndReason:
    """The :data:`EndReason` of a run that returned with ``finish_reason`` (its last reply's)."""
    if finish_reason in ("max_steps", "repeated_call", "length", "content_filter", "error"):
        return finish_reason  # type: ignore[return-value]
    return "done"  # "stop", or a provider's own word for a reply that asked for nothing


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
    | RunEnded
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
        out.update(
            call=event.call.to_json(), ok=event.ok, content=event.content, denied=event.denied
        )
    elif isinstance(event, RunEnded):
        out.update(
            reason=event.reason,
            complete=event.complete,
            steps=event.steps,
            denied=event.denied,
            words=event.words,
        )
        if event.timeout is not None:
            out["timeout"] = event.timeout
        if event.error:
            out["error"] = event.error
        if event.repeated:
            out.update(repeated=event.repeated, repeats=event.repeats)
    else:
        out.update(step=event.step, session_id=event.session_id)
    return out


Approval: TypeAlias = Callable[[ToolCall], "bool | Denied | Awaitable[bool | Denied]"]
"""Asked before each tool call runs; False (the model reads that the user denied it) or a
:class:`Denied` (the model reads its reason) denies it."""

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
    run_id: str | None
    """The run's id (:attr:`Run.id`); default: a new one. A server names its runs."""


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
    """Why the last reply ended; ``max_steps`` when the run stopped at the step limit,
    ``repeated_call`` when it stopped a model repeating a failing call."""
    events: tuple[RunEvent, ...] = ()
    """Every event of the run, when it was started with ``keep_events=True``."""
    repeated: str = ""
    """The tool whose failing call was repeated (``finish_reason`` ``repeated_call``)."""
    repeats: int = 0
    """How many times in a row (``finish_reason`` ``repeated_call``)."""


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
    repeat_limit: int = DEFAULT_REPEAT_LIMIT
    """Stop when the model makes the same failing tool call this many times in a row."""
