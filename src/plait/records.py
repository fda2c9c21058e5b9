"""The record model: one immutable row of a transcript, and the message view of it.

Pure: no database, network or file access. A transcript is a sequence of
records, each with a ``kind`` discriminator. Every kind is a frozen dataclass;
one codec (:func:`encode_payload` / :func:`decode_record`) turns them into the
JSON a store keeps and back.

``seq`` is the record's position in its transcript, counted from the first
record the lineage ever wrote. A fork shares its base's rows, so a shared
record has the same ``seq`` in every branch that holds it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Final, Literal, TypeAlias

from plait._checks import check_json
from plait._ids import new_id
from plait._time import from_micros, now_micros
from plait.errors import InvalidMessageError, StoreCorruptError

__all__ = [
    "KINDS",
    "MESSAGE_ROLES",
    "AssistantRecord",
    "EventRecord",
    "JSONValue",
    "Kind",
    "Message",
    "Record",
    "SummaryRecord",
    "SystemRecord",
    "ToolCall",
    "ToolCallInfo",
    "ToolRecord",
    "UserRecord",
    "decode_record",
    "dumps",
    "COMPACTION_UNDONE",
    "encode_payload",
    "hidden_summaries",
    "messages_of",
    "newest_summary",
    "record_from_message",
]

JSONValue: TypeAlias = Any
"""A value that survives ``json.dumps``/``json.loads`` unchanged."""

Kind = Literal["system", "user", "assistant", "tool", "summary", "event"]
KINDS: Final = ("system", "user", "assistant", "tool", "summary", "event")
MESSAGE_ROLES: Final = ("system", "user", "assistant", "tool", "summary")
"""Roles :func:`record_from_message` accepts; events are written by plait's verbs."""


def dumps(value: JSONValue, what: str = "value") -> str:
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
        """True for everything but events: the rows ``length`` counts."""
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

    @property
    def payload(self) -> dict[str, JSONValue]:
        """``{"content": ...}``, plus ``images`` when there are any."""
        out: dict[str, JSONValue] = {"content": self.content}
        if self.images:
            out["images"] = self.images
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


# Frozen dataclasses generate a field-based __hash__, which fails on the dict fields
# (meta, arguments, data); records hash by identity (kind, id, seq) instead.
for _cls in (SystemRecord, UserRecord, AssistantRecord, ToolRecord, SummaryRecord, EventRecord):
    _cls.__hash__ = Record.__hash__  # type: ignore[method-assign]


_ENCODE_STR = json.encoder.encode_basestring  # the C string encoder, ensure_ascii=False
_PLAIN_KINDS = frozenset({"system", "user", "assistant"})
"""Kinds whose payload may be just ``{"content": ...}`` (the decoder's fast path)."""


def encode_payload(record: Record) -> str:
    """Encode a record's payload as the JSON a store keeps.

    Raises:
        InvalidMessageError: if the payload holds something JSON cannot carry.
    """
    # A text-only message is most of every transcript: build its JSON directly.
    if (
        (isinstance(record, UserRecord) and not record.images)
        or (isinstance(record, AssistantRecord) and not record.tool_calls and not record.images)
        or isinstance(record, SystemRecord)
    ):
        return '{"content":' + _ENCODE_STR(record.content) + "}"
    # A tool's output can be long; its size is bounded where it is made, not here.
    return check_json(record.payload, "the record", max_chars=sys.maxsize)


def _checked(record: Record) -> Record:
    """Check a decoded record's field types; a wrong one is a TypeError (the row is corrupt)."""
    text = getattr(record, "content", "")
    if not isinstance(text, str):
        raise TypeError("content is not a string")
    images = getattr(record, "images", 0)
    if not isinstance(images, int) or isinstance(images, bool) or images < 0:
        raise TypeError("images is not a count")
    if isinstance(record, AssistantRecord):
        for call in record.tool_calls:
            if not (isinstance(call.id, str) and isinstance(call.name, str)):
                raise TypeError("a tool call id or name is not a string")
            if not isinstance(call.arguments, Mapping):
                raise TypeError("tool call arguments are not an object")
    elif isinstance(record, ToolRecord):
        if not isinstance(record.tool_call_id, str):
            raise TypeError("tool_call_id is not a string")
        if record.tool_name is not None and not isinstance(record.tool_name, str):
            raise TypeError("tool_name is not a string")
    elif isinstance(record, SummaryRecord):
        lo, hi = record.folds_from, record.folds_to
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (lo, hi)):
            raise TypeError("folds are not positions")
        if not 0 <= lo <= hi <= record.seq:
            raise ValueError(f"folds [{lo}, {hi}) do not lie before position {record.seq}")
    elif isinstance(record, EventRecord) and (
        not isinstance(record.name, str) or not isinstance(record.data, Mapping)
    ):
        raise TypeError("an event needs a string name and object data")
    return record


_scan_string = json.decoder.scanstring  # type: ignore[attr-defined]  # the C string scanner
_loads = json.loads
_CONTENT_ONLY = '{"content":"'


def _kind_fields(kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """The kind-specific constructor arguments of a decoded payload."""
    if kind in ("user", "system"):
        fields: dict[str, Any] = {"content": body["content"]}
        if kind == "user":
            fields["images"] = body.get("images", 0)
        return fields
    if kind == "assistant":
        calls = tuple(
            ToolCall(c["id"], c["name"], c.get("arguments") or {})
            for c in body.get("tool_calls") or ()
        )
        return {
            "content": body.get("content", ""),
            "tool_calls": calls,
            "images": body.get("images", 0),
        }
    if kind == "tool":
        return {
            "content": body["content"],
            "tool_call_id": body["tool_call_id"],
            "tool_name": body.get("tool_name"),
            "ok": bool(body.get("ok", True)),
            "images": body.get("images", 0),
        }
    if kind == "summary":
        lo, hi = body["folds"]
        return {"content": body["content"], "folds_from": lo, "folds_to": hi}
    return {"name": body["name"], "data": body.get("data") or {}}  # event


_CLASSES: dict[str, type[Record]] = {
    "system": SystemRecord,
    "user": UserRecord,
    "assistant": AssistantRecord,
    "tool": ToolRecord,
    "summary": SummaryRecord,
    "event": EventRecord,
}


def decode_record(
    kind: str,
    payload: str | Mapping[str, JSONValue],
    *,
    seq: int,
    id: str,
    created_at_us: int,
    meta: str | Mapping[str, JSONValue] | None = None,
    tokens: int | None = None,
) -> Record:
    """Rebuild a record from its stored columns (the inverse of :func:`encode_payload`).

    Raises:
        StoreCorruptError: if the kind is unknown or the payload does not fit it.
    """
    cls = _CLASSES.get(kind)
    if cls is None:
        raise StoreCorruptError(f"record seq={seq}: unknown kind {kind!r}")
    try:
        meta_map: Mapping[str, Any] = _loads(meta) if isinstance(meta, str) else (meta or {})
        if not isinstance(meta_map, Mapping):
            raise TypeError("meta is not a JSON object")
        # Most rows are text-only messages, '{"content":"..."}': scan the one string with the
        # C scanner (exactly what json.loads would do) instead of the general decoder.
        if (
            kind in _PLAIN_KINDS
            and isinstance(payload, str)
            and payload.startswith(_CONTENT_ONLY)
            and payload.endswith('"}')
        ):
            text, end = _scan_string(payload, 12)
            if end == len(payload) - 1:
                return cls(
                    seq=seq,
                    id=id,
                    created_at_us=created_at_us,
                    meta=meta_map,
                    tokens=tokens,
                    content=text,  # type: ignore[call-arg]
                )
        body: Mapping[str, Any] = _loads(payload) if isinstance(payload, str) else payload
        if not isinstance(body, Mapping):
            raise TypeError("the payload is not a JSON object")
        return _checked(
            cls(
                seq=seq,
                id=id,
                created_at_us=created_at_us,
                meta=meta_map,
                tokens=tokens,
                **_kind_fields(kind, body),
            )
        )
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        # RecursionError: JSON nested deeper than the decoder's stack (written by no plait)
        raise StoreCorruptError(f"record seq={seq} kind={kind!r}: {exc!r}") from exc


# -- building records from message dicts -------------------------------------------------

_MESSAGE_KEYS: Final = frozenset(
    {
        "role",
        "content",
        "tool_calls",
        "tool_call_id",
        "tool_name",
        "name",
        "ok",
        "meta",
        "images",
        "folds",
    }
)


def _content_text(content: object, where: str) -> tuple[str, int]:
    """Return (text, image count) for a string or a list of OpenAI-style content parts."""
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if isinstance(content, list):
        texts: list[str] = []
        images = 0
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping):
                ptype = part.get("type")
                if not isinstance(ptype, str):
                    raise InvalidMessageError(f"{where}: a content part needs a string 'type'")
                if ptype in {"text", "input_text", "output_text"}:
                    texts.append(str(part.get("text", "")))
                elif ptype in {"image", "image_url", "input_image"}:
                    images += 1
                else:
                    raise InvalidMessageError(f"{where}: unknown content part type {ptype!r}")
            else:
                raise InvalidMessageError(f"{where}: content parts must be strings or objects")
        return "\n".join(texts), images
    raise InvalidMessageError(f"{where}: content must be a string or a list of parts")


def _tool_call(raw: object, where: str) -> ToolCall:
    """Accept ``{id, name, arguments}`` or the OpenAI ``{id, function: {name, arguments}}``."""
    if not isinstance(raw, Mapping):
        raise InvalidMessageError(f"{where}: a tool call must be an object")
    fn = raw.get("function")
    source: Mapping[str, Any] = fn if isinstance(fn, Mapping) else raw
    call_id, name = raw.get("id"), source.get("name")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidMessageError(f"{where}: a tool call needs a string 'id'")
    if not isinstance(name, str) or not name:
        raise InvalidMessageError(f"{where}: tool call {call_id!r} needs a string 'name'")
    args = source.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except (ValueError, RecursionError) as exc:
            raise InvalidMessageError(
                f"{where}: tool call {call_id!r} arguments are not JSON: {exc}"
            ) from exc
    if not isinstance(args, Mapping):
        raise InvalidMessageError(f"{where}: tool call {call_id!r} arguments must be an object")
    dumps(args, f"{where}: tool call arguments")
    return ToolCall(call_id, name, dict(args))


def record_from_message(
    message: Mapping[str, JSONValue], *, seq: int, default_folds_from: int = 0
) -> Record:
    """Build a record from a message dict ``{role, content, ...}``.

    Args:
        message: ``{role, content, tool_calls?, tool_call_id?, tool_name?, ok?, meta?}``;
            ``role`` is one of :data:`MESSAGE_ROLES`. ``content`` may be a string
            or a list of OpenAI-style parts (text parts are joined, image parts
            counted). A ``summary`` may give ``folds: [from, to]``.
        seq: the position the record will take.
        default_folds_from: where a summary without ``folds`` starts folding.

    Returns:
        The record, not yet stored.

    Raises:
        InvalidMessageError: no role, an unknown role or key, or a field of the wrong type.
    """
    # The common case, a plain text message with nothing else, skips the general checks.
    if type(message) is dict and len(message) == 2:
        role, content = message.get("role"), message.get("content")
        if type(content) is str:
            if role == "user":
                return UserRecord(seq=seq, content=content)
            if role == "assistant":
                return AssistantRecord(seq=seq, content=content)
            if role == "system":
                return SystemRecord(seq=seq, content=content)
    where = f"message at position {seq}"
    if not isinstance(message, Mapping):
        raise InvalidMessageError(
            f"{where}: a message must be a dict, got {type(message).__name__}"
        )
    unknown = set(message) - _MESSAGE_KEYS
    if unknown:
        raise InvalidMessageError(
            f"{where}: unknown key(s) {sorted(unknown)}; allowed: {sorted(_MESSAGE_KEYS)}"
        )
    if "role" not in message:
        raise InvalidMessageError(f"{where}: missing 'role'")
    role = message["role"]
    if role not in MESSAGE_ROLES:
        raise InvalidMessageError(
            f"{where}: unknown role {role!r}; expected one of {', '.join(MESSAGE_ROLES)}"
        )
    meta = message.get("meta") or {}
    if not isinstance(meta, Mapping):
        raise InvalidMessageError(f"{where}: 'meta' must be an object")
    if meta:
        dumps(meta, f"{where}: 'meta'")
    text, images = _content_text(message.get("content"), where)
    extra_images = message.get("images", 0)
    if not isinstance(extra_images, int) or isinstance(extra_images, bool) or extra_images < 0:
        raise InvalidMessageError(f"{where}: 'images' must be a non-negative int")
    images += extra_images
    common: dict[str, Any] = {"seq": seq, "meta": dict(meta)}

    def forbid(*keys: str) -> None:
        present = [k for k in keys if k in message]
        if present:
            raise InvalidMessageError(f"{where}: {present} not allowed on a {role} message")

    if role == "system":
        forbid("tool_calls", "tool_call_id", "tool_name", "name", "ok", "folds")
        return SystemRecord(content=text, **common)
    if role == "user":
        forbid("tool_calls", "tool_call_id", "tool_name", "name", "ok", "folds")
        return UserRecord(content=text, images=images, **common)
    if role == "assistant":
        forbid("tool_call_id", "tool_name", "name", "ok", "folds")
        raw_calls = message.get("tool_calls") or []
        if not isinstance(raw_calls, list | tuple):
            raise InvalidMessageError(f"{where}: 'tool_calls' must be a list")
        calls = tuple(_tool_call(c, where) for c in raw_calls)
        return AssistantRecord(content=text, tool_calls=calls, images=images, **common)
    if role == "tool":
        forbid("tool_calls", "folds")
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessageError(f"{where}: a tool message needs a string 'tool_call_id'")
        tool_name = message.get("tool_name", message.get("name"))
        if tool_name is not None and not isinstance(tool_name, str):
            raise InvalidMessageError(f"{where}: 'tool_name' must be a string")
        ok = message.get("ok", True)
        if not isinstance(ok, bool):
            raise InvalidMessageError(f"{where}: 'ok' must be a bool")
        return ToolRecord(
            content=text,
            tool_call_id=call_id,
            tool_name=tool_name,
            ok=ok,
            images=images,
            **common,
        )
    # summary
    forbid("tool_calls", "tool_call_id", "tool_name", "name", "ok")
    folds = message.get("folds", [default_folds_from, seq])
    if (
        not isinstance(folds, list | tuple)
        or len(folds) != 2
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in folds)
        or not 0 <= folds[0] <= folds[1] <= seq
    ):
        raise InvalidMessageError(
            f"{where}: 'folds' must be [from, to] with 0 <= from <= to <= {seq}"
        )
    return SummaryRecord(content=text, folds_from=folds[0], folds_to=folds[1], **common)


# -- the message view (seed 001) ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Message:
    """A prompt-visible record as a conversation message (seed 001's fields)."""

    role: Literal["system", "user", "assistant", "tool", "summary"]
    """``user``, ``assistant`` or ``tool``; ``summary`` for a compaction's text; ``system``."""
    text: str
    """What was said."""
    tool_calls: tuple[ToolCall, ...] = ()
    """For an assistant message, the tool calls it made."""
    tool_call_id: str | None = None
    """For a tool message, the call it answers."""
    tool_name: str | None = None
    """For a tool message, the tool."""
    ok: bool | None = None
    """For a tool message, whether it succeeded."""
    images: int = 0
    """How many images the message carries."""
    seq: int = -1
    """The record's position in the transcript."""

    @classmethod
    def from_record(cls, record: Record) -> Message:
        """Return the message view of a prompt-visible record.

        Raises:
            InvalidArgumentError: for an event, which is not a message.
        """
        if isinstance(record, AssistantRecord):
            return cls(
                "assistant", record.content, record.tool_calls, images=record.images, seq=record.seq
            )
        if isinstance(record, ToolRecord):
            return cls(
                "tool",
                record.content,
                (),
                record.tool_call_id,
                record.tool_name,
                record.ok,
                record.images,
                record.seq,
            )
        if isinstance(record, UserRecord):
            return cls("user", record.content, images=record.images, seq=record.seq)
        if isinstance(record, SummaryRecord):
            return cls("summary", record.content, seq=record.seq)
        if isinstance(record, SystemRecord):
            return cls("system", record.content, seq=record.seq)
        raise InvalidMessageError(f"record seq={record.seq} is an event, not a message")

    def to_dict(self) -> dict[str, JSONValue]:
        """Return the message as a dict that :func:`record_from_message` accepts."""
        out: dict[str, JSONValue] = {"role": self.role, "content": self.text}
        if self.tool_calls:
            out["tool_calls"] = [c.to_json() for c in self.tool_calls]
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id
            out["tool_name"] = self.tool_name
            out["ok"] = self.ok
        if self.images:
            out["images"] = self.images
        return out


COMPACTION_UNDONE: Final = "compaction_undone"
"""The event ``Session.uncompact`` appends: ``data["summary_seq"]`` names the summary it hides."""


def hidden_summaries(records: Iterable[Record]) -> set[int]:
    """Return the positions of the summaries an ``uncompact`` has hidden."""
    hidden: set[int] = set()
    for record in records:
        if isinstance(record, EventRecord) and record.name == COMPACTION_UNDONE:
            seq = record.data.get("summary_seq")
            if isinstance(seq, int) and not isinstance(seq, bool):
                hidden.add(seq)
    return hidden


def newest_summary(records: Sequence[Record]) -> SummaryRecord | None:
    """Return the newest compaction summary that no ``uncompact`` has hidden, or None.

    This is the one place that decides which summary a view starts with: the
    history views, compaction planning and the renderers all ask it.
    """
    hidden = hidden_summaries(records)
    for record in reversed(records):
        if isinstance(record, SummaryRecord) and record.seq not in hidden:
            return record
    return None


def messages_of(records: Iterable[Record]) -> list[Message]:
    """Return the message view of every non-event record, in order."""
    return [Message.from_record(r) for r in records if r.kind != "event"]
