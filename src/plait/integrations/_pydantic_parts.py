"""pydantic-ai messages to plait records and back, with no field lost.

Each ``ModelMessage`` is kept verbatim, as pydantic-ai's own
``ModelMessagesTypeAdapter`` writes it to JSON, in the ``meta`` of the first
plait record it maps to; its parts become the records a reader would expect:

* a request's ``instructions`` and ``system-prompt`` parts -> system;
* ``user-prompt`` -> user (its text and ``TextContent`` items joined, images counted);
* ``tool-return`` -> a tool result (any outcome but ``success``, such as a denied call: failed);
* ``retry-feedback`` (and the older ``retry-prompt`` without a tool) -> a user
  message; a ``retry-prompt`` for a tool call -> a failed tool result;
* a response's ``text`` and ``tool-call`` parts -> one assistant message;
* ``thinking`` and every part plait does not model (built-in tool calls and
  returns, files, compaction, ...) -> an opaque item of format ``pydantic-ai``.

Every record of a message carries ``meta["pydantic_ai"]["entry"]``, the id the
message is stored under, so the records read back as messages however plait's
own views fold them. Records plait wrote itself read back as the messages that
say the same thing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from plait.errors import InvalidArgumentError, MissingDependencyError
from plait.records import (
    AssistantRecord,
    JSONValue,
    OpaqueRecord,
    Record,
    SummaryRecord,
    SystemRecord,
    ToolRecord,
    UserRecord,
)

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelMessage

__all__ = ["FORMAT", "META_KEY", "Group", "dump", "groups", "load", "message_dicts"]

FORMAT: Final = "pydantic-ai"
"""The opaque-item format of the parts plait does not model."""
META_KEY: Final = "pydantic_ai"
"""Where a record keeps its message: ``meta["pydantic_ai"]``."""

_FAILED: Final = ("failed", "retried", "denied", "interrupted")  # every outcome but success


def _adapter() -> Any:
    try:
        from pydantic_ai.messages import ModelMessagesTypeAdapter
    except ImportError as exc:
        raise MissingDependencyError("plait's pydantic-ai integration", "pydantic-ai") from exc
    return ModelMessagesTypeAdapter


def dump(messages: Sequence[ModelMessage]) -> list[dict[str, JSONValue]]:
    """The messages as pydantic-ai's own JSON form (objects), one per message.

    Raises:
        InvalidArgumentError: a message holds a value pydantic-ai cannot write as JSON
            (a tool returned an object it has no form for); nothing is stored.
    """
    from pydantic_core import PydanticSerializationError

    try:
        return list(_adapter().dump_python(list(messages), mode="json"))
    except PydanticSerializationError as exc:
        raise InvalidArgumentError(f"a pydantic-ai message has no JSON form: {exc}") from exc


def load(raw: Sequence[Mapping[str, JSONValue]]) -> list[ModelMessage]:
    """Messages back from their JSON form (``ModelMessagesTypeAdapter``)."""
    return list(_adapter().validate_python(list(raw)))


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _prompt(content: object) -> tuple[str, int]:
    if isinstance(content, str):
        return content, 0
    texts: list[str] = []
    images = 0
    for item in content if isinstance(content, list) else ():
        if isinstance(item, str):
            texts.append(item)
        elif not isinstance(item, Mapping):
            continue
        elif item.get("kind") == "text-content" and isinstance(item.get("content"), str):
            texts.append(item["content"])  # TextContent (and StructuredContent, rendered)
        elif item.get("kind") == "image-url" or (
            item.get("kind") == "binary" and str(item.get("media_type", "")).startswith("image/")
        ):
            images += 1
    return "\n".join(texts), images


def _opaque(part: Mapping[str, JSONValue]) -> dict[str, JSONValue]:
    return {"role": "opaque", "format": FORMAT, "item": dict(part)}


def _request(raw: Mapping[str, Any]) -> list[dict[str, JSONValue]]:
    out: list[dict[str, JSONValue]] = []
    if isinstance(raw.get("instructions"), str) and raw["instructions"]:
        out.append({"role": "system", "content": raw["instructions"]})
    for part in raw.get("parts") or ():
        kind = part.get("part_kind")
        if kind == "system-prompt":
            out.append({"role": "system", "content": str(part.get("content", ""))})
        elif kind == "user-prompt":
            text, images = _prompt(part.get("content"))
            msg: dict[str, JSONValue] = {"role": "user", "content": text}
            if images:
                msg["images"] = images
            out.append(msg)
        elif kind == "retry-feedback":
            content = part.get("content")
            text = content if isinstance(content, str) else _compact(content)
            out.append({"role": "user", "content": text})
        elif kind in ("tool-return", "retry-prompt") and part.get("tool_call_id"):
            content = part.get("content")
            text = content if isinstance(content, str) else _compact(content)
            failed = kind == "retry-prompt" or part.get("outcome") in _FAILED
            if kind == "retry-prompt" and not part.get("tool_name"):
                out.append({"role": "user", "content": text})
                continue
            result: dict[str, JSONValue] = {
                "role": "tool",
                "content": text,
                "tool_call_id": str(part["tool_call_id"]),
                "ok": not failed,
            }
            if isinstance(part.get("tool_name"), str):
                result["tool_name"] = part["tool_name"]
            out.append(result)
        else:
            out.append(_opaque(part))
    return out


def _response(raw: Mapping[str, Any]) -> list[dict[str, JSONValue]]:
    out: list[dict[str, JSONValue]] = []
    texts: list[str] = []
    calls: list[JSONValue] = []
    reply_at: int | None = None
    for part in raw.get("parts") or ():
        kind = part.get("part_kind")
        if kind == "text" or (kind == "tool-call" and part.get("tool_call_id")):
            if reply_at is None:
                reply_at = len(out)
                out.append({})  # the assistant message, filled in below
            if kind == "text":
                texts.append(str(part.get("content", "")))
            else:
                args = part.get("args")
                if isinstance(args, str):
                    try:
                        args = json.loads(args) if args.strip() else {}
                    except ValueError:
                        args = {"value": args}
                if not isinstance(args, dict):
                    args = {} if args is None else {"value": args}
                calls.append(
                    {
                        "id": str(part["tool_call_id"]),
                        "name": str(part.get("tool_name") or "tool"),
                        "arguments": args,
                    }
                )
        else:
            out.append(_opaque(part))
    if reply_at is None:
        if out:
            return out
        reply_at = 0
        out.append({})
    reply: dict[str, JSONValue] = {"role": "assistant", "content": "\n".join(texts)}
    if calls:
        reply["tool_calls"] = calls
    if isinstance(raw.get("model_name"), str):
        reply["meta"] = {"model": raw["model_name"]}
    out[reply_at] = reply
    return out


def message_dicts(
    raw: Mapping[str, Any], entry: str, parent: str | None
) -> list[dict[str, JSONValue]]:
    """The plait message dicts of one message in its JSON form, stored under ``entry``."""
    mapped = _request(raw) if raw.get("kind") == "request" else _response(raw)
    if not mapped:  # a request with no parts: the message itself is the one record
        mapped = [{"role": "opaque", "format": FORMAT, "item": {"kind": raw.get("kind")}}]
    for n, msg in enumerate(mapped):
        mine: dict[str, JSONValue] = {"entry": entry}
        if n == 0:
            mine.update({"parent": parent, "message": dict(raw), "records": len(mapped)})
        meta = msg.get("meta")
        msg["meta"] = {**(meta if isinstance(meta, dict) else {}), META_KEY: mine}
    return mapped


class Group:
    """The records of one message: its entry id, the entry before it, its JSON form."""

    __slots__ = ("entry", "message", "parent", "records")

    def __init__(self, entry: str, parent: str | None, message: dict[str, Any]) -> None:
        self.entry = entry
        self.parent = parent
        self.message = message
        self.records: list[Record] = []


def _synthetic(record: Record) -> dict[str, Any] | None:
    """The message a record plait wrote itself reads back as (None: none)."""
    if isinstance(record, UserRecord):
        return {
            "kind": "request",
            "parts": [{"part_kind": "user-prompt", "content": record.content}],
        }
    if isinstance(record, SystemRecord | SummaryRecord):
        return {
            "kind": "request",
            "parts": [{"part_kind": "system-prompt", "content": record.text}],
        }
    if isinstance(record, ToolRecord):
        part_kind = "tool-return" if record.ok else "retry-prompt"
        part: dict[str, Any] = {
            "part_kind": part_kind,
            "content": record.content,
            "tool_call_id": record.tool_call_id,
        }
        if record.tool_name:
            part["tool_name"] = record.tool_name
        return {"kind": "request", "parts": [part]}
    if isinstance(record, AssistantRecord):
        parts: list[dict[str, Any]] = []
        if record.content:
            parts.append({"part_kind": "text", "content": record.content})
        parts.extend(
            {
                "part_kind": "tool-call",
                "tool_name": c.name,
                "args": dict(c.arguments),
                "tool_call_id": c.id,
            }
            for c in record.tool_calls
        )
        return {"kind": "response", "parts": parts}
    if isinstance(record, OpaqueRecord) and record.format == FORMAT:
        kind = (
            "response"
            if record.item.get("part_kind") in ("thinking", "builtin-tool-call")
            else "request"
        )
        return {"kind": kind, "parts": [dict(record.item)]}
    return None


def groups(records: Iterable[Record]) -> list[Group]:
    """The messages records hold, in order (a record plait wrote itself: one message)."""
    out: list[Group] = []
    previous: str | None = None
    for record in records:
        mine = record.meta.get(META_KEY)
        if isinstance(mine, Mapping) and isinstance(mine.get("entry"), str):
            entry = str(mine["entry"])
            message = mine.get("message")
            if isinstance(message, Mapping):
                parent = mine.get("parent")
                out.append(Group(entry, parent if isinstance(parent, str) else None, dict(message)))
            elif out and out[-1].entry == entry:
                pass  # another record of the same message
            else:
                continue  # its first record was folded away by a compaction
        else:
            synthetic = _synthetic(record)
            if synthetic is None:
                continue
            out.append(Group(f"plait:{record.id}", previous, synthetic))
        out[-1].records.append(record)
        previous = out[-1].entry
    return out
