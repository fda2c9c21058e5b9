"""Gemini CLI chat recordings (``~/.gemini/tmp/<project>/chats/session-*.json``).

Two layouts: one JSON document ``{sessionId, startTime, messages: [...]}``,
and the newer JSONL with a header line, one message per line and
``{"$set": {...}}`` patch lines. The JSONL file is appended to: a message
written again with the same ``id`` is its newer state (it replaces the earlier
one in place), and a ``$set`` of ``messages`` replaces the whole list (a
rewind or a compression); ``$set`` lines and the header are kept verbatim as
unmapped records. Classified ``message_events``.

``user`` messages become user messages; ``gemini`` messages become assistant
messages whose ``toolCalls`` (each with its ``args`` and its ``result``, as
``functionResponse`` parts) become tool calls followed by one ``tool`` message
per call; a call whose ``status`` is ``error`` or ``cancelled`` is ``ok:
false``. ``thoughts`` go to ``meta["thinking"]``. ``info``, ``error`` and
``warning`` messages are the CLI talking to the user, not the model, and are
kept verbatim as unmapped records.
"""

from __future__ import annotations

import json
from typing import Any, Final

from plait.interop._parts import arguments, origin, parts_text
from plait.interop._source import Item, Parsed, Source, as_dict, as_list, as_str
from plait.records import JSONValue

__all__ = ["looks_like", "looks_like_header", "parse"]

_UI_TYPES: Final = frozenset({"info", "error", "warning"})


def looks_like(value: object) -> bool:
    """Whether a decoded JSON document is a Gemini CLI recording."""
    if not isinstance(value, dict) or "sessionId" not in value:
        return False
    messages = as_list(value.get("messages"))
    return messages is not None and all(
        isinstance(m, dict) and "type" in m and "role" not in m for m in messages[:3]
    )


def looks_like_header(value: object) -> bool:
    """Whether a decoded first JSONL line is a Gemini CLI recording header."""
    return isinstance(value, dict) and "sessionId" in value and "projectHash" in value


def _result_text(result: object, src: Source, line: int | None) -> str:
    """The text of a tool call's ``result``: functionResponse parts, or anything else as JSON."""
    if result is None:
        return ""
    texts: list[str] = []
    for part in as_list(result) or [result]:
        fr = as_dict(part.get("functionResponse")) if isinstance(part, dict) else None
        response = as_dict(fr.get("response")) if fr else None
        if response is not None:
            for key in ("output", "error", "content"):
                value = response.get(key)
                if isinstance(value, str):
                    texts.append(value)
                    break
            else:
                texts.append(json.dumps(response, ensure_ascii=False))
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part, str):
            texts.append(part)
        else:
            texts.append(json.dumps(part, ensure_ascii=False))
    return "\n".join(texts)


class _Builder:
    def __init__(self, src: Source, out: Parsed) -> None:
        self.src = src
        self.out = out

    def message(self, raw: object, line: int | None) -> None:
        src = self.src
        if not isinstance(raw, dict):
            src.bad(line, "a message must be a JSON object")
            return
        mtype = raw.get("type")
        if isinstance(mtype, str) and mtype in _UI_TYPES:
            src.keep(line, f"{mtype} message", raw)
            return
        if mtype not in ("user", "gemini"):
            src.bad(line, f"unknown message type {mtype!r}")
            return
        text, images = parts_text(raw.get("content"), src, line)
        source = origin(line, id=as_str(raw.get("id")), time=as_str(raw.get("timestamp")))
        if mtype == "user":
            msg: dict[str, JSONValue] = {
                "role": "user",
                "content": text,
                "meta": {"source": source},
            }
            if images:
                msg["images"] = images
            self.out.items.append(Item(msg, line))
            return
        model = as_str(raw.get("model"))
        if model:
            self.out.model = model
        meta: dict[str, JSONValue] = {"source": source}
        thoughts: list[JSONValue] = []
        for thought in as_list(raw.get("thoughts")) or ():
            if isinstance(thought, dict):
                parts = [as_str(thought.get("subject")), as_str(thought.get("description"))]
                joined = ": ".join(p for p in parts if p)
                if joined:
                    thoughts.append(joined)
        if thoughts:
            meta["thinking"] = thoughts
        msg = {"role": "assistant", "content": text, "meta": meta}
        if images:
            msg["images"] = images
        results: list[Item] = []
        calls: list[JSONValue] = []
        raw_calls = raw.get("toolCalls")
        if raw_calls is not None and not isinstance(raw_calls, list):
            src.bad(line, "'toolCalls' must be a list")
            raw_calls = None
        for k, call in enumerate(raw_calls or ()):
            if not isinstance(call, dict):
                src.bad(line, f"tool call {k} must be an object")
                continue
            call_id, name = as_str(call.get("id")), as_str(call.get("name"))
            if not call_id or not name:
                src.bad(line, f"tool call {k} needs a string 'id' and 'name'")
                continue
            args = arguments(call.get("args"), src, line, call_id)
            calls.append({"id": call_id, "name": name, "arguments": args})
            if "result" in call or "status" in call:
                status = call.get("status")
                results.append(
                    Item(
                        {
                            "role": "tool",
                            "content": _result_text(call.get("result"), src, line),
                            "tool_call_id": call_id,
                            "tool_name": name,
                            "ok": status not in ("error", "cancelled"),
                            "meta": {"source": origin(line, status=as_str(status))},
                        },
                        line,
                    )
                )
        if calls:
            msg["tool_calls"] = calls
        self.out.items.append(Item(msg, line))
        self.out.items.extend(results)


def _start(out: Parsed, head: dict[str, Any]) -> None:
    out.session_id = as_str(head.get("sessionId"))
    kind = as_str(head.get("kind"))
    if kind:
        out.details["kind"] = kind


def parse(src: Source) -> Parsed:
    """Read a Gemini CLI recording (JSON document or JSONL).

    Raises:
        ImportFormatError: the file does not fit (names the line; strict mode).
    """
    out = Parsed("gemini-cli", "message_events", provider="google", agent="gemini-cli")
    builder = _Builder(src, out)
    head = src.data.lstrip(b"\xef\xbb\xbf \t\r\n").split(b"\n", 1)[0]
    try:
        first = src.decode(head)
    except (ValueError, RecursionError, UnicodeError):
        first = None
    if looks_like_header(first) and src.data.strip().count(b"\n") > 0:
        # The JSONL recording appends: a message written again (same id) is its newer
        # state, and {"$set": {"messages": [...]}} replaces the whole list (a rewind or
        # a compression); other $set keys update the session's own fields.
        messages: dict[object, tuple[int | None, Any]] = {}
        for line, value in src.objects():
            patch = value.get("$set")
            if isinstance(patch, dict):
                replaced = as_list(patch.get("messages"))
                if replaced is not None:
                    messages = {}
                    for k, raw in enumerate(replaced):
                        key = raw.get("id") if isinstance(raw, dict) else None
                        messages[key if isinstance(key, str) else (line, k)] = (line, raw)
                src.keep(line, "$set line", value)
            elif looks_like_header(value) and not messages and out.session_id is None:
                _start(out, value)
                src.keep(line, "header line", value)
            else:
                key = value.get("id")
                messages[key if isinstance(key, str) else (line, 0)] = (line, value)
        for at, raw in messages.values():
            builder.message(raw, at)
        return out
    value, lines = src.document()
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        src.fail(1, "expected an object with a 'messages' array")
    _start(out, value)
    rest = {k: v for k, v in value.items() if k != "messages"}
    if rest:
        src.keep(None, "document fields", rest)  # sessionId, projectHash, times, summary ...
    src.records = len(value["messages"])
    for raw in value["messages"]:
        builder.message(raw, lines.get(id(raw)))
    return out
