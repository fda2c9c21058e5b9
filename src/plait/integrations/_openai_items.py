"""openai-agents session items to plait messages and back (one item, one message).

An item is a Responses API input item as the SDK stores it: a JSON object.
Each becomes the plait message a reader would expect, with the item itself kept
verbatim in ``meta["openai_agents"]["item"]``, so reading it back returns the
same object whatever plait made of it:

* a ``message`` (or an "easy input" ``{"role", "content"}``) by its role:
  ``user`` -> user, ``assistant`` -> assistant text (refusals as their text),
  ``system`` / ``developer`` -> system;
* ``function_call`` -> an assistant message with one tool call;
* ``function_call_output`` -> a tool result;
* anything else (reasoning, web search, file search, computer, MCP, custom
  tool calls, compaction items, ...) -> an opaque item of format
  ``openai-agents``: stored verbatim, counted in the context report, left out
  of ``history()``, exports and the web page.

Records plait wrote itself (a conversation continued with ``plait chat``, a
compaction's summary) are read back as the items that say the same thing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from plait.errors import InvalidArgumentError
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

__all__ = ["FORMAT", "META_KEY", "item_message", "name_results", "record_items", "unnamed_calls"]

FORMAT: Final = "openai-agents"
"""The opaque-item format of the items plait does not model."""
META_KEY: Final = "openai_agents"
"""Where a mapped record keeps its item: ``meta["openai_agents"]["item"]``."""

_ROLES: Final = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "system",
}
_TEXT_PARTS: Final = frozenset({"input_text", "output_text", "text"})
_IMAGE_PARTS: Final = frozenset({"input_image", "image", "image_url"})


def _content(content: object) -> tuple[str, int]:
    """The text (parts joined by newlines) and image count of an item's content."""
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    texts: list[str] = []
    images = 0
    if isinstance(content, list):
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, Mapping):
                kind = part.get("type")
                if kind in _TEXT_PARTS:
                    texts.append(str(part.get("text", "")))
                elif kind == "refusal":
                    texts.append(str(part.get("refusal", "")))
                elif kind in _IMAGE_PARTS:
                    images += 1
    return "\n".join(texts), images


def _arguments(raw: JSONValue) -> dict[str, JSONValue]:
    """A call's arguments as plait's object; what is not a JSON object is kept under ``value``."""
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return {"value": raw}
    if isinstance(raw, dict):
        return raw
    return {"value": raw}


def item_message(item: object) -> dict[str, JSONValue]:
    """The plait message dict (``Session.inject`` takes it) for one openai-agents item.

    Raises:
        InvalidArgumentError: the item is not a JSON object.
    """
    if not isinstance(item, Mapping):
        raise InvalidArgumentError(
            f"an openai-agents item is a JSON object, not {type(item).__name__}"
        )
    verbatim: dict[str, JSONValue] = dict(item)
    kind, role = item.get("type"), item.get("role")
    meta: dict[str, JSONValue] = {META_KEY: {"item": verbatim}}
    if kind in (None, "message") and isinstance(role, str) and role in _ROLES:
        text, images = _content(item.get("content"))
        msg: dict[str, JSONValue] = {"role": _ROLES[role], "content": text, "meta": meta}
        if images and role != "system":
            msg["images"] = images
        return msg
    call_id = item.get("call_id")
    if kind == "function_call" and isinstance(call_id, str) and call_id:
        name = item.get("name")
        call: dict[str, JSONValue] = {
            "id": call_id,
            "name": name if isinstance(name, str) and name else "function",
            "arguments": _arguments(item.get("arguments")),
        }
        return {"role": "assistant", "content": "", "tool_calls": [call], "meta": meta}
    if kind == "function_call_output" and isinstance(call_id, str) and call_id:
        output = item.get("output")
        if isinstance(output, list):
            text, images = _content(output)
        else:
            text, images = (output if isinstance(output, str) else json.dumps(output)), 0
        out: dict[str, JSONValue] = {
            "role": "tool",
            "content": text,
            "tool_call_id": call_id,
            "meta": meta,
        }
        if images:
            out["images"] = images
        return out
    return {"role": "opaque", "format": FORMAT, "item": verbatim}


def name_results(messages: list[dict[str, JSONValue]], names: Mapping[str, str]) -> None:
    """Name each tool result by its call (an output item carries only the call's id).

    ``names`` maps call ids to tool names found before ``messages``; the calls among
    ``messages`` are looked up too. A result whose call is in neither stays unnamed.
    """
    known = dict(names)
    for msg in messages:
        for call in _calls(msg):
            if isinstance(call, dict):
                known[str(call["id"])] = str(call["name"])
        if msg.get("role") == "tool" and "tool_name" not in msg:
            name = known.get(str(msg.get("tool_call_id")))
            if name is not None:
                msg["tool_name"] = name


def unnamed_calls(messages: list[dict[str, JSONValue]]) -> set[str]:
    """The call ids of the tool results among ``messages`` whose call is not among them."""
    calls = {str(call["id"]) for msg in messages for call in _calls(msg) if isinstance(call, dict)}
    return {
        str(msg.get("tool_call_id"))
        for msg in messages
        if msg.get("role") == "tool" and str(msg.get("tool_call_id")) not in calls
    }


def _calls(msg: Mapping[str, JSONValue]) -> list[JSONValue]:
    calls = msg.get("tool_calls")
    return calls if isinstance(calls, list) else []


def _text_item(role: str, text: str) -> dict[str, Any]:
    if role == "assistant":
        return {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }
    return {"role": role, "content": text}


def record_items(record: Record) -> list[dict[str, Any]]:
    """The items one record reads back as (events and foreign opaque items: none)."""
    kept = record.meta.get(META_KEY)
    item = kept.get("item") if isinstance(kept, Mapping) else None
    if isinstance(item, Mapping):
        return [dict(item)]
    if isinstance(record, OpaqueRecord):
        return [dict(record.item)] if record.format == FORMAT else []
    if isinstance(record, UserRecord):
        return [_text_item("user", record.content)]
    if isinstance(record, SystemRecord):
        return [_text_item("system", record.content)]
    if isinstance(record, SummaryRecord):
        return [_text_item("system", f"Summary of the earlier conversation:\n{record.content}")]
    if isinstance(record, ToolRecord):
        return [
            {
                "type": "function_call_output",
                "call_id": record.tool_call_id,
                "output": record.content,
            }
        ]
    if isinstance(record, AssistantRecord):
        items = [_text_item("assistant", record.content)] if record.content else []
        items.extend(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": json.dumps(dict(call.arguments)),
            }
            for call in record.tool_calls
        )
        return items
    return []
