"""The record kinds: one frozen dataclass per kind of transcript row.

Pure: no database, network or file access. ``seq`` is the record's position in
its transcript, counted from the first record the lineage ever wrote. A fork
shares its base's rows, so a shared record has the same ``seq`` in every branch
that holds it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar, Final, Literal, TypeAlias

from plait._checks import check_json
from plait._ids import new_id
from plait._time import from_micros, now_micros

__all__ = [
    "COMPACTION_UNDONE",
    "CUT_OFF",
    "KINDS",
    "MESSAGE_ROLES",
    "AssistantRecord",
    "EventRecord",
    "JSONLike",
    "JSONValue",
    "Kind",
    "OpaqueRecord",
    "Record",
    "SummaryRecord",
    "SystemRecord",
    "ToolCall",
    "ToolCallInfo",
    "ToolRecord",
    "UserRecord",
    "as_json",
    "dumps",
    "hidden_summaries",
    "is_cut_off",
    "newest_summary",
]

JSONValue: TypeAlias = bool | int | float | str | list["JSONValue"] | dict[str, "JSONValue"] | None
"""A value that survives ``json.dumps``/``json.loads`` unchanged: what plait keeps (D430)."""
JSONLike: TypeAlias = (
    bool | int | float | str | Sequence["JSONLike"] | Mapping[str, "JSONLike"] | None
)
"""A value encoded as JSON: what a parameter that only reads or encodes takes (D430).

Covariant, so a ``list[str]`` or a ``Mapping[str, int]`` is one; a tuple is one too and
reads back as a list, so a value kept as it was given is a :data:`JSONValue` instead.
"""

Kind = Literal["system", "user", "assistant", "tool", "summary", "opaque", "event"]
KINDS: Final = ("system", "user", "assistant", "tool", "summary", "opaque", "event")
MESSAGE_ROLES: Final = ("system", "user", "assistant", "tool", "summary", "opaque")
"""Roles :func:`record_from_message` accepts; events are written by plait's verbs."""


def dumps(value: JSONLike, what: str = "value") -> str:
    """Encode ``value`` as compact JSON, the one way plait writes JSON.

    Every write path (meta, metadata, settings, the scratchpad, event data,
    tool-call arguments) goes through it, so each gets the same limits:
    :data:`~plait._checks.MAX_JSON_DEPTH` levels of nesting and
    :data:`~plait._checks.MAX_JSON_CHARS` characters (:func:`plait._checks.check_json`).

    Raises:
        InvalidMessageError: if ``value`` is not JSON-serializable, is nested
            too deep, or is too large.
    """
    return check_json(value, what)


def as_json(value: JSONLike, what: str = "value") -> JSONValue:
    """``value`` checked as :func:`dumps` checks it, returned as plain JSON types.

    A deep copy: a tuple becomes a list, a mapping a dict, so what plait keeps of a
    caller's value is what a read gives back, and a later change to the caller's object
    changes nothing kept.

    Raises:
        InvalidMessageError: as :func:`dumps`.
    """
    loaded: JSONValue = json.loads(dumps(value, what))
    return loaded


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call an assistant asked for."""

    id: str
    """The provider's id for the call; a tool record answers it by this id."""
    name: str
    """The tool's name."""
    arguments: Mapping[str, JSONValue]
    """The decoded JSON arguments."""

    def __hash__(self) -> int:
        return hash((self.id, self.name))

    def to_json(self) -> dict[str, JSONValue]:
        """Return the call as a plain JSON object."""
        return {"id": self.id, "name": self.name, "arguments": dict(self.arguments)}


ToolCallInfo = ToolCall
"""Seed 001's name for :class:`ToolCall`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Record:
    """One immutable row of a transcript. Use a subclass; ``kind`` tells which."""

    kind: ClassVar[Kind]
    seq: int
    """Position in the transcript (shared rows keep it across branches)."""
    id: str = field(default_factory=new_id)
    """A UUIDv7; sorts by creation time."""
    created_at_us: int = field(default_factory=now_micros)
    """When it was written, in microseconds since the epoch (UTC)."""
    meta: Mapping[str, JSONValue] = field(default_factory=dict)
    """Free-form metadata the model never sees (provenance, live-client ids, ...)."""
    tokens: int | None = None
    """Tokens counted once when written, or ``None`` if not counted."""

    def __hash__(self) -> int:
        return hash((self.kind, self.id, self.seq))

    @property
    def created_at(self) -> datetime:
        """When the record was written, timezone-aware UTC."""
        return from_micros(self.created_at_us)

    @property
    def payload(self) -> dict[str, JSONValue]:
        """The kind-specific content as a plain dict (``{"content": ...}`` and friends)."""
        return {}

    @property
    def text(self) -> str:
        """The record's text (empty for events)."""
        return ""

    @property
    def is_message(self) -> bool:
        """True for everything but events: the rows ``length`` counts (opaque items too)."""
        return self.kind != "event"


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemRecord(Record):
    """The agent's system prompt."""

    kind: ClassVar[Kind] = "system"
    content: str
    """The prompt text."""

    @property
    def payload(self) -> dict[str, JSONValue]:
        """``{"content": ...}``."""
        return {"content": self.content}

    @property
    def text(self) -> str:
        """The prompt text."""
        return self.content


@dataclass(frozen=True, slots=True, kw_only=True)
class UserRecord(Record):
    """What a person (or a controller on their behalf) said."""

    kind: ClassVar[Kind] = "user"
    content: str
    """What was typed."""
    images: int = 0
    """How many images the message carries."""
    added: str | None = None
    """What added it when the person did not type it: context an agent put in the
    conversation for the model (a hook's notice, a skill list, the environment), named
    by its kind. The model is sent it; ``history()`` does not show it as said."""

    @property
    def payload(self) -> dict[str, JSONValue]:
        """``{"content": ...}``, plus ``images`` and ``added`` when there are any."""
        out: dict[str, JSONValue] = {"content": self.content}
        if self.images:
            out["images"] = self.images
        if self.added is not None:
            out["added"] = self.added
        return out

    @property
    def text(self) -> str:
        """What was typed."""
        return self.content


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantRecord(Record):
    """A model reply: text and the tool calls it asked for."""

    kind: ClassVar[Kind] = "assistant"
    content: str = ""
    """The reply text (may be empty when the reply is only tool calls)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tool calls, in the order the model gave them."""
    images: int = 0
    """How many images the reply carries."""

    @property
    def payload(self) -> dict[str, JSONValue]:
        """``{"content": ...}``, plus ``tool_calls`` and ``images`` when present."""
        out: dict[str, JSONValue] = {"content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [call.to_json() for call in self.tool_calls]
        if self.images:
            out["images"] = self.images
        return out

    @property
    def text(self) -> str:
        """The reply text."""
        return self.content


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolRecord(Record):
    """The result of one tool call."""

    kind: ClassVar[Kind] = "tool"
    content: str
    """The tool's output as the model will see it."""
    tool_call_id: str
    """The id of the call this answers."""
    tool_name: str | None = None
    """The tool that ran."""
    ok: bool = True
    """Whether the tool succeeded."""
    images: int = 0
    """How many images the result carries."""

    @property
    def payload(self) -> dict[str, JSONValue]:
        """``{"content", "tool_call_id", "tool_name", "ok"}``, plus ``images``."""
        out: dict[str, JSONValue] = {
            "content": self.content,
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "ok": self.ok,
        }
        if self.images:
            out["images"] = self.images
        return out

    @property
    def text(self) -> str:
        """The tool's output."""
        return self.content


@dataclass(frozen=True, slots=True, kw_only=True)
class SummaryRecord(Record):
    """Text that stands for the records ``[folds_from, folds_to)`` it summarizes.

    A summary is appended where the compaction happened; nothing it folds is
    deleted, so a view can always show the folded records again.
    """

    kind: ClassVar[Kind] = "summary"
    content: str
    """The summary text, which nobody typed."""
    folds_from: int
    """``seq`` of the first record the summary stands for."""
    folds_to: int
    """``seq`` one past the last record it stands for; later records are kept as they are."""

    @property
    def payload(self) -> dict[str, JSONValue]:
        """``{"content", "folds": [from, to]}``."""
        return {"content": self.content, "folds": [self.folds_from, self.folds_to]}

    @property
    def text(self) -> str:
        """The summary text."""
        return self.content


@dataclass(frozen=True, slots=True, kw_only=True)
class EventRecord(Record):
    """Something that happened to the session that the model never sees."""

    kind: ClassVar[Kind] = "event"
    name: str
    """What happened: ``agent_session_closed``, ``session_trimmed``, ..."""
    data: Mapping[str, JSONValue] = field(default_factory=dict)
    """Details of the event."""

    @property
    def payload(self) -> dict[str, JSONValue]:
        """``{"name", "data"}``."""
        return {"name": self.name, "data": dict(self.data)}


@dataclass(frozen=True, slots=True, kw_only=True)
class OpaqueRecord(Record):
    """A provider item plait does not model (a reasoning item, a web search call, ...).

    It is kept and returned verbatim, counts as one message (``length``, ``fork_at``
    and ``rewind`` count it, so one provider item is one position a framework can
    pop), and is counted in the context report as "Provider items". The history
    views, exports and the web page leave it out (it has no text to show), and a
    request carries it only to a provider that declares it reads its ``format``.
    """

    kind: ClassVar[Kind] = "opaque"
    format: str
    """Who wrote the item and how to read it: ``openai-agents``, ``openai.responses``, ..."""
    item: Mapping[str, JSONValue]
    """The item exactly as its writer gave it (a JSON object)."""

    @property
    def payload(self) -> dict[str, JSONValue]:
        """``{"format", "item"}``."""
        return {"format": self.format, "item": dict(self.item)}


# Frozen dataclasses generate a field-based __hash__, which fails on the dict fields
# (meta, arguments, data); records hash by identity (kind, id, seq) instead.
for _cls in (
    SystemRecord,
    UserRecord,
    AssistantRecord,
    ToolRecord,
    SummaryRecord,
    OpaqueRecord,
    EventRecord,
):
    _cls.__hash__ = Record.__hash__  # type: ignore[method-assign]


COMPACTION_UNDONE: Final = "compaction_undone"
"""The event ``transcript.uncompact()`` appends: ``data["summary_seq"]`` names what it hides."""

CUT_OFF: Final = frozenset({"interrupted", "error"})
"""The ``finish_reason`` of an assistant reply that was cut off (by a cancel, a timeout or a
failure): it is kept in the transcript, but never sent to the model again."""


def is_cut_off(record: object) -> bool:
    """Whether ``record`` is an assistant reply that was cut off (:data:`CUT_OFF`)."""
    return isinstance(record, AssistantRecord) and record.meta.get("finish_reason") in CUT_OFF


def _holds(records: Iterable[object], kind: type) -> bool:
    """False when ``records`` is a list or tuple with nothing of type ``kind`` in it.

    The types are gathered by C loops (``map``, ``set``) instead of an ``isinstance`` a
    record: a full load asks this of tens of thousands of messages and records.
    """
    if not isinstance(records, list | tuple):
        return True
    return any(issubclass(t, kind) for t in set(map(type, records)))


def hidden_summaries(records: Iterable[object]) -> set[int]:
    """Return the positions of the summaries an ``uncompact`` has hidden.

    ``records`` may hold other things beside records (a view read's messages): only
    its events are looked at.
    """
    hidden: set[int] = set()
    if not _holds(records, EventRecord):
        return hidden
    for record in records:
        if isinstance(record, EventRecord) and record.name == COMPACTION_UNDONE:
            seq = record.data.get("summary_seq")
            if isinstance(seq, int) and not isinstance(seq, bool):
                hidden.add(seq)
    return hidden


def newest_summary(records: Sequence[object]) -> SummaryRecord | None:
    """Return the newest compaction summary that no ``uncompact`` has hidden, or None.

    ``records`` may hold other things beside records (a view read's messages): only
    its summaries and events are looked at.

    This is the one place that decides which summary a view starts with: the
    history views, compaction planning and the renderers all ask it.
    """
    if not _holds(records, SummaryRecord):
        return None
    hidden = hidden_summaries(records)
    for record in reversed(records):
        if isinstance(record, SummaryRecord) and record.seq not in hidden:
            return record
    return None
