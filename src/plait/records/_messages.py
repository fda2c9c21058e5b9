"""Message dicts in, the message view out.

:func:`record_from_message` validates a message dict (seed 003's ``inject`` shape,
OpenAI-style content parts accepted) and builds the record it stands for;
:class:`Message` is seed 001's view of a prompt-visible record.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from plait._checks import check_name, flat_json
from plait._ids import new_id, new_ids
from plait._time import now_micros
from plait.errors import InvalidArgumentError, InvalidMessageError
from plait.records._blanks import (
    assistant_record,
    system_record,
    tool_call,
    tool_record,
    user_record,
)
from plait.records._model import (
    MESSAGE_ROLES,
    AssistantRecord,
    JSONValue,
    OpaqueRecord,
    Record,
    SummaryRecord,
    SystemRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
    dumps,
)

__all__ = [
    "Message",
    "build_message",
    "messages_of",
    "record_from_message",
    "records_from_messages",
]

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
        "format",
        "item",
        "added",
    }
)
# The keys each role refuses (besides the opaque item's), checked with one set operation.
_NOT_ON: Final = {
    "system": frozenset(
        {"tool_calls", "tool_call_id", "tool_name", "name", "ok", "folds", "added"}
    ),
    "user": frozenset({"tool_calls", "tool_call_id", "tool_name", "name", "ok", "folds"}),
    "assistant": frozenset({"tool_call_id", "tool_name", "name", "ok", "folds", "added"}),
    "tool": frozenset({"tool_calls", "folds", "added"}),
    "summary": frozenset({"tool_calls", "tool_call_id", "tool_name", "name", "ok", "added"}),
}
_ORDER: Final = ("added", "tool_calls", "tool_call_id", "tool_name", "name", "ok", "folds")
"""The order the refused keys are named in, in an error."""


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


_TOOL_KEYS: Final = frozenset({"role", "content", "tool_call_id", "tool_name", "ok"})
"""The keys of a tool result built without the general checks."""


def _plain_calls(raw: object) -> tuple[ToolCall, ...] | None:
    """The calls of a list of ``{id, name, arguments}`` objects, or None.

    Built only when the general checks would pass them as they are (the arguments a
    small flat object: :func:`plait._checks.flat_json`); None for anything else, which
    :func:`_tool_call` then checks and names.
    """
    if type(raw) is not list or not raw:
        return None
    calls: list[ToolCall] = []
    for call in raw:
        if type(call) is not dict or "function" in call:
            return None
        call_id, name, args = call.get("id"), call.get("name"), call.get("arguments")
        if (
            type(call_id) is not str
            or not call_id
            or type(name) is not str
            or not name
            or type(args) is not dict
            or flat_json(args) is None
        ):
            return None
        calls.append(tool_call(call_id, name, dict(args)))
    return tuple(calls)


def _tool_call(raw: object, where: str) -> ToolCall:
    """Accept ``{id, name, arguments}`` or the OpenAI ``{id, function: {name, arguments}}``."""
    if type(raw) is not dict and not isinstance(raw, Mapping):
        raise InvalidMessageError(f"{where}: a tool call must be an object")
    fn = raw.get("function")
    source: Mapping[str, Any] = raw if fn is None or not isinstance(fn, Mapping) else fn
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
    if type(args) is not dict and not isinstance(args, Mapping):
        raise InvalidMessageError(f"{where}: tool call {call_id!r} arguments must be an object")
    dumps(args, f"{where}: tool call arguments")
    return tool_call(call_id, name, dict(args))


def record_from_message(
    message: Mapping[str, JSONValue], *, seq: int, default_folds_from: int = 0
) -> Record:
    """Build a record from a message dict ``{role, content, ...}``.

    Args:
        message: ``{role, content, tool_calls?, tool_call_id?, tool_name?, ok?, meta?}``;
            ``role`` is one of :data:`MESSAGE_ROLES`. ``content`` may be a string
            or a list of OpenAI-style parts (text parts are joined, image parts
            counted). A ``summary`` may give ``folds: [from, to]``. An ``opaque``
            item is ``{role: "opaque", format, item, meta?}``: ``item`` a JSON object
            kept verbatim, ``format`` a non-empty name of who wrote it.
        seq: the position the record will take.
        default_folds_from: where a summary without ``folds`` starts folding.

    Returns:
        The record, not yet stored.

    Raises:
        InvalidMessageError: no role, an unknown role or key, or a field of the wrong type.
    """
    return _record(message, seq, default_folds_from, new_id(), now_micros())


def records_from_messages(
    messages: Sequence[Mapping[str, JSONValue]], *, start: int, default_folds_from: int = 0
) -> list[Record]:
    """Build the records of several messages appended together, from position ``start``.

    Each record is what :func:`record_from_message` builds for its message; their ids
    are minted together (:func:`plait._ids.new_ids`), which is most of what a small
    record costs to make.

    Args:
        messages: message dicts, as :func:`record_from_message` takes each.
        start: the position the first record will take; the others follow it.
        default_folds_from: where a summary without ``folds`` starts folding.

    Raises:
        InvalidMessageError: the first message that is not a valid message dict.
    """
    clock = now_micros
    return [
        _record(m, start + i, default_folds_from, rid, clock())
        for i, (m, rid) in enumerate(zip(messages, new_ids(len(messages)), strict=True))
    ]


def _record(
    message: Mapping[str, JSONValue], seq: int, default_folds_from: int, rid: str, created: int
) -> Record:
    """:func:`record_from_message` for a record of id ``rid`` made at ``created`` (µs)."""
    # An agent's transcript is mostly three shapes of message: text alone, a reply that
    # calls tools, a tool's result. Each is built here when every key it holds is one the
    # general checks below would pass without a word; anything else takes those checks.
    # Records are built in blanks (records._blanks): no keyword handling, no frozen
    # setters, for fields already checked.
    if type(message) is dict:
        role, content = message.get("role"), message.get("content")
        if type(content) is str:
            size = len(message)
            if size == 2:
                if role == "user":
                    return user_record(seq, rid, created, {}, None, content)
                if role == "assistant":
                    return assistant_record(seq, rid, created, {}, None, content)
                if role == "system":
                    return system_record(seq, rid, created, {}, None, content)
            elif role == "assistant" and size == 3:
                calls = _plain_calls(message.get("tool_calls"))
                if calls is not None:
                    return assistant_record(seq, rid, created, {}, None, content, calls)
            elif role == "tool" and _TOOL_KEYS.issuperset(message):
                call_id, name = message.get("tool_call_id"), message.get("tool_name")
                ok = message.get("ok", True)
                if (
                    type(call_id) is str
                    and call_id
                    and (name is None or type(name) is str)
                    and type(ok) is bool
                ):
                    return tool_record(seq, rid, created, {}, None, content, call_id, name, ok, 0)
    where = f"message at position {seq}"
    # ``type(x) is dict`` first: a dict is what callers give, and the ABC check costs more.
    if type(message) is not dict and not isinstance(message, Mapping):
        raise InvalidMessageError(
            f"{where}: a message must be a dict, got {type(message).__name__}"
        )
    if not _MESSAGE_KEYS.issuperset(message):
        unknown = set(message) - _MESSAGE_KEYS
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
    if type(meta) is not dict and not isinstance(meta, Mapping):
        raise InvalidMessageError(f"{where}: 'meta' must be an object")
    if meta:
        dumps(meta, f"{where}: 'meta'")
    if role == "opaque":
        return _opaque(message, seq, dict(meta), where, rid, created)
    if "format" in message or "item" in message:
        raise InvalidMessageError(f"{where}: 'format' and 'item' belong to an opaque item")
    text, images = _content_text(message.get("content"), where)
    extra_images = message.get("images", 0)
    if not isinstance(extra_images, int) or isinstance(extra_images, bool) or extra_images < 0:
        raise InvalidMessageError(f"{where}: 'images' must be a non-negative int")
    images += extra_images
    own = dict(meta)
    refused = _NOT_ON[role]
    if not refused.isdisjoint(message):
        # "added" first, as it was always checked first, then the role's own list.
        present = [k for k in _ORDER if k in refused and k in message]
        if "added" in present and len(present) > 1:
            present = ["added"]
        raise InvalidMessageError(f"{where}: {present} not allowed on a {role} message")
    if role == "system":
        return system_record(seq, rid, created, own, None, text)
    if role == "user":
        added = message.get("added")
        if added is not None:
            try:
                added = check_name(added, "'added'", max_len=100)
            except InvalidArgumentError as exc:
                raise InvalidMessageError(f"{where}: {exc}") from None
        if added is None:
            return user_record(seq, rid, created, own, None, text, images)
        return UserRecord(
            seq=seq, id=rid, created_at_us=created, meta=own, content=text, images=images,
            added=added,
        )
    if role == "assistant":
        raw_calls = message.get("tool_calls") or []
        if not isinstance(raw_calls, list | tuple):
            raise InvalidMessageError(f"{where}: 'tool_calls' must be a list")
        calls = tuple([_tool_call(c, where) for c in raw_calls])
        return assistant_record(seq, rid, created, own, None, text, calls, images)
    if role == "tool":
        call_id = message.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidMessageError(f"{where}: a tool message needs a string 'tool_call_id'")
        tool_name = message.get("tool_name", message.get("name"))
        if tool_name is not None and not isinstance(tool_name, str):
            raise InvalidMessageError(f"{where}: 'tool_name' must be a string")
        ok = message.get("ok", True)
        if not isinstance(ok, bool):
            raise InvalidMessageError(f"{where}: 'ok' must be a bool")
        return tool_record(seq, rid, created, own, None, text, call_id, tool_name, ok, images)
    # summary
    folds = message.get("folds", [default_folds_from, seq])
    lo, hi = folds if isinstance(folds, list | tuple) and len(folds) == 2 else (None, None)
    if (
        not isinstance(lo, int)
        or not isinstance(hi, int)
        or isinstance(lo, bool)
        or isinstance(hi, bool)
        or not 0 <= lo <= hi <= seq
    ):
        raise InvalidMessageError(
            f"{where}: 'folds' must be [from, to] with 0 <= from <= to <= {seq}"
        )
    return SummaryRecord(
        seq=seq, id=rid, created_at_us=created, meta=own, content=text, folds_from=lo,
        folds_to=hi,
    )


def _opaque(
    message: Mapping[str, JSONValue],
    seq: int,
    meta: dict[str, JSONValue],
    where: str,
    rid: str,
    created: int,
) -> OpaqueRecord:
    """The opaque item of ``{role: "opaque", format, item, meta?}``."""
    extra = sorted(set(message) - {"role", "format", "item", "meta"})
    if extra:
        raise InvalidMessageError(f"{where}: {extra} not allowed on an opaque item")
    fmt, item = message.get("format"), message.get("item")
    if not isinstance(fmt, str) or not fmt.strip() or not fmt.isprintable() or len(fmt) > 200:
        raise InvalidMessageError(
            f"{where}: an opaque item needs a 'format': a printable name of at most 200 characters"
        )
    if not isinstance(item, Mapping):
        raise InvalidMessageError(f"{where}: an opaque item's 'item' must be a JSON object")
    dumps(item, f"{where}: 'item'")
    return OpaqueRecord(
        seq=seq, id=rid, created_at_us=created, meta=meta, format=fmt, item=dict(item)
    )


# -- the message view (seed 001) ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Message:
    """A prompt-visible record as a conversation message (seed 001's fields)."""

    role: Literal["system", "user", "assistant", "tool", "summary", "opaque"]
    """``user``, ``assistant`` or ``tool``; ``summary`` for a compaction's text; ``system``;
    ``opaque`` for a provider item sent only to a provider that reads its ``format``."""
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
    item: Mapping[str, JSONValue] | None = None
    """For an opaque item, the item as its writer gave it."""
    format: str | None = None
    """For an opaque item, who wrote it and how to read it."""
    added: str | None = None
    """For a user message the person did not type, what added it (its kind): context an
    agent gave the model. ``history()`` leaves such messages out; requests send them."""

    @classmethod
    def from_record(cls, record: Record) -> Message:
        """Return the message view of a prompt-visible record.

        Raises:
            InvalidArgumentError: for an event, which is not a message.
        """
        if cls is Message:
            view = _VIEWS.get(type(record))
            if view is not None:
                return view(record)
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
            return cls(
                "user", record.content, images=record.images, seq=record.seq, added=record.added
            )
        if isinstance(record, SummaryRecord):
            return cls("summary", record.content, seq=record.seq)
        if isinstance(record, SystemRecord):
            return cls("system", record.content, seq=record.seq)
        if isinstance(record, OpaqueRecord):
            raise InvalidMessageError(
                f"record seq={record.seq} is an opaque {record.format!r} item, which has no "
                "message view"
            )
        raise InvalidMessageError(f"record seq={record.seq} is an event, not a message")

    def to_dict(self) -> dict[str, JSONValue]:
        """Return the message as a dict that :func:`record_from_message` accepts."""
        if self.role == "opaque":
            return {"role": "opaque", "format": self.format, "item": dict(self.item or {})}
        out: dict[str, JSONValue] = {"role": self.role, "content": self.text}
        if self.tool_calls:
            out["tool_calls"] = [c.to_json() for c in self.tool_calls]
        if self.role == "tool":
            out["tool_call_id"] = self.tool_call_id
            out["tool_name"] = self.tool_name
            out["ok"] = self.ok
        if self.images:
            out["images"] = self.images
        if self.added is not None:
            out["added"] = self.added
        return out


class _Blank:
    """:class:`Message`'s slots, without its frozen ``__setattr__``: a bulk decoder's blank.

    A decoder sets every field of one (plain slot stores, the cheapest Python has),
    then assigns ``__class__ = Message``: the layouts are the same, so the object
    *is* that message from then on, frozen, equal to ``Message(...)`` of the same
    fields. Building tens of thousands of messages this way costs half what the
    slot descriptors' setters do and a third of the frozen constructor.
    """

    __slots__ = Message.__slots__
    role: str
    text: str
    tool_calls: tuple[ToolCall, ...]
    tool_call_id: str | None
    tool_name: str | None
    ok: bool | None
    images: int
    seq: int
    item: Mapping[str, JSONValue] | None
    format: str | None
    added: str | None


def _blank_message(
    role: str,
    text: str,
    calls: tuple[ToolCall, ...],
    call_id: str | None,
    name: str | None,
    ok: bool | None,
    images: int,
    seq: int,
) -> Message:
    """``Message(role, text, calls, call_id, name, ok, images, seq)``, built in a blank."""
    m = _new(_Blank)
    m.role = role
    m.text = text
    m.tool_calls = calls
    m.tool_call_id = call_id
    m.tool_name = name
    m.ok = ok
    m.images = images
    m.seq = seq
    m.item = None
    m.format = None
    m.added = None
    m.__class__ = Message  # type: ignore[assignment]  # the same slots: see _Blank
    return m  # type: ignore[return-value]


_new: Final = object.__new__


def _blank_works() -> bool:
    try:
        return _blank_message("user", "", (), None, None, None, 0, -1) == Message("user", "")
    except TypeError:  # pragma: no cover - a Python that refuses the class assignment
        return False


build_message: Final[Callable[..., Message]] = _blank_message if _blank_works() else Message
"""``build_message(role, text, tool_calls, tool_call_id, tool_name, ok, images, seq)``: the
:class:`Message` of those fields (``item`` and ``format`` None), built in a
:class:`_Blank` (or by the constructor, where a Python refuses that)."""
_VIEWS: Final[dict[type, Callable[[Any], Message]]] = {
    UserRecord: lambda r: (
        build_message("user", r.content, (), None, None, None, r.images, r.seq)
        if r.added is None
        else Message("user", r.content, images=r.images, seq=r.seq, added=r.added)
    ),
    AssistantRecord: lambda r: build_message(
        "assistant", r.content, r.tool_calls, None, None, None, r.images, r.seq
    ),
    ToolRecord: lambda r: build_message(
        "tool", r.content, (), r.tool_call_id, r.tool_name, r.ok, r.images, r.seq
    ),
    SummaryRecord: lambda r: build_message("summary", r.content, (), None, None, None, 0, r.seq),
    SystemRecord: lambda r: build_message("system", r.content, (), None, None, None, 0, r.seq),
}
"""The message view of each record kind that has one, built field by field."""


def messages_of(records: Iterable[Record]) -> list[Message]:
    """Return the message view of every record that has one, in order.

    Events and opaque items have none: they are left out.
    """
    return [Message.from_record(r) for r in records if r.kind not in _NO_VIEW]


_NO_VIEW: Final = frozenset({"event", "opaque"})
