"""OpenAI Agents SDK session items (``openai-agents``: ``result.to_input_list()``, sessions).

The SDK keeps a conversation as Responses API input items, the same items a
Codex rollout wraps in ``response_item`` lines, so they are read by the same
rules (see :mod:`plait.interop._codex`): ``message`` items by role,
``function_call`` / ``function_call_output`` (and the custom, local-shell and
computer calls) paired by ``call_id``, ``reasoning`` summaries in the next
assistant message's ``meta["thinking"]``. An "easy input" message
(``{"role": "user", "content": "..."}`` without a ``type``) is a message item.
Hosted tool items with no output item (``web_search_call``,
``file_search_call``, ``mcp_list_tools`` ...) are kept verbatim as unmapped
records. Classified ``message_events``.

Shapes read: a JSON array of items, ``{"items": [...]}`` or
``{"input": [...]}``, or JSONL with one item per line (what a session store
dumps, one row per item).
"""

from __future__ import annotations

from typing import Any, Final

from plait.interop._codex import RESPONSE_ITEM_TYPES, ItemBuilder
from plait.interop._source import Parsed, Source, as_list

__all__ = ["is_item", "looks_like", "parse"]

_CONTAINERS: Final = ("items", "input")


def is_item(value: object) -> bool:
    """Whether a decoded value is a Responses API item (not a chat message or a rollout line)."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("type"), str)
        and value["type"] in RESPONSE_ITEM_TYPES
        and "payload" not in value
    )


def _items_of(value: object) -> list[Any] | None:
    if isinstance(value, dict):
        for key in _CONTAINERS:
            found = as_list(value.get(key))
            if found is not None:
                return found
        return None
    return value if isinstance(value, list) else None


def looks_like(value: object) -> bool:
    """Whether a decoded document is a list of Responses API items (one at least typed)."""
    items = _items_of(value) or []
    return any(is_item(v) for v in items[:50])


def _read(src: Source, out: Parsed, rows: list[tuple[int | None, Any]]) -> None:
    builder = ItemBuilder(src, out)
    for line, item in rows:
        if not isinstance(item, dict):
            src.bad(line, "an item must be a JSON object")
            continue
        if "type" not in item and "role" in item:
            item = {**item, "type": "message"}  # an easy input message
        if not isinstance(item.get("type"), str):
            src.bad(line, "an item needs a string 'type'")
            continue
        builder.item(line, None, item)


def parse(src: Source) -> Parsed:
    """Read openai-agents items: a JSON document or JSONL.

    Raises:
        ImportFormatError: not JSON, not a list of items, or an item that does
            not fit (names the line; strict mode).
    """
    out = Parsed("openai-agents", "message_events", provider="openai", agent="openai-agents")
    head = src.data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    one_document = head == b"[" or (head == b"{" and not _is_jsonl(src))
    if one_document:
        value, lines = src.document()
        items = _items_of(value)
        if items is None:
            src.fail(1, "expected a JSON array of Responses API items")
        src.records = len(items)
        _read(src, out, [(lines.get(id(v)), v) for v in items])
    else:
        _read(src, out, list(src.lines()))
    return out


def _is_jsonl(src: Source) -> bool:
    first = src.data.lstrip(b"\xef\xbb\xbf \t\r\n").split(b"\n", 1)[0]
    try:
        value = src.decode(first)
    except (ValueError, RecursionError, UnicodeError):
        return False
    return is_item(value) or (isinstance(value, dict) and "role" in value)
