"""pydantic-ai message dumps (``ModelMessagesTypeAdapter.dump_json(result.all_messages())``).

A JSON array (or JSONL, one message per line) of ``ModelRequest``
(``kind: "request"``) and ``ModelResponse`` (``kind: "response"``) messages,
each a list of ``parts`` told apart by ``part_kind``. Classified
``message_events``.

Request parts:

* ``system-prompt``: a system message; a request's ``instructions`` (sent as the
  system prompt of that request) become a system message when they change.
* ``user-prompt``: a user message (text items joined; ``image-url``,
  ``binary`` images counted; other files kept verbatim).
* ``tool-return``: a ``tool`` message for ``tool_call_id`` (non-string content as
  the compact JSON the model was sent). pydantic-ai 2.x marks a failed or
  retried return with ``outcome``: it is ``ok: false`` and its text is the
  ``{"error": ...}`` object pydantic-ai sends.
* ``retry-prompt``: with a ``tool_name``, a failed (``ok: false``) ``tool``
  message; without one, a user message. Its text is what pydantic-ai sends:
  the feedback (or the validation errors as JSON) then "Fix the errors and try
  again.".

Response parts: ``text`` and ``tool-call`` (``args`` as an object or a JSON
string) make one assistant message per response; ``thinking`` goes to
``meta["thinking"]``; ``model_name`` and ``provider_name`` are recorded, and
``usage`` is kept in ``meta["source"]["usage"]``.
Built-in tool parts and files are kept verbatim as unmapped records.
"""

from __future__ import annotations

import json
from typing import Any, Final

from plait.interop._parts import arguments, origin
from plait.interop._source import Item, Parsed, Source, as_dict, as_list, as_str
from plait.records import JSONValue

__all__ = ["looks_like", "parse"]

_KINDS: Final = frozenset({"request", "response"})
_IMAGES: Final = frozenset({"image-url", "binary"})
_RETRY: Final = "Fix the errors and try again."
_ERROR_OUTCOMES: Final = ("failed", "retried")  # pydantic-ai 2.x tool-return outcomes


def _compact(value: object) -> str:
    """JSON the way pydantic serialises a tool's return: no spaces, UTF-8 kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _is_message(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("kind"), str)
        and value["kind"] in _KINDS
        and isinstance(value.get("parts"), list)
    )


def looks_like(value: object) -> bool:
    """Whether a decoded document (or first JSONL line) is a pydantic-ai message dump."""
    if isinstance(value, list):
        return bool(value) and _is_message(value[0])
    return _is_message(value)


class _Builder:
    def __init__(self, src: Source, out: Parsed) -> None:
        self.src = src
        self.out = out
        self.instructions: str | None = None
        self.names: dict[str, str] = {}

    def add(self, msg: dict[str, JSONValue], line: int | None) -> None:
        self.out.items.append(Item(msg, line))

    def message(self, raw: object, line: int | None) -> None:
        src = self.src
        if not _is_message(raw):
            src.bad(line, "a message needs 'kind' (request or response) and a 'parts' list")
            return
        assert isinstance(raw, dict)
        if raw["kind"] == "request":
            self.request(raw, line)
        else:
            self.response(raw, line)

    def request(self, raw: dict[str, Any], line: int | None) -> None:
        src = self.src
        instructions = as_str(raw.get("instructions"))
        if instructions and instructions != self.instructions:
            where = origin(line, kind="instructions")
            self.add({"role": "system", "content": instructions, "meta": {"source": where}}, line)
        self.instructions = instructions or self.instructions
        for part in raw["parts"]:
            if not isinstance(part, dict):
                src.bad(line, "a part must be a JSON object")
                continue
            kind = part.get("part_kind")
            where = origin(line, kind=as_str(kind), time=as_str(part.get("timestamp")))
            if kind == "system-prompt":
                self.add(
                    {
                        "role": "system",
                        "content": str(part.get("content", "")),
                        "meta": {"source": where},
                    },
                    line,
                )
            elif kind == "user-prompt":
                text, images = self._prompt(part.get("content"), line)
                msg: dict[str, JSONValue] = {
                    "role": "user",
                    "content": text,
                    "meta": {"source": where},
                }
                if images:
                    msg["images"] = images
                self.add(msg, line)
            elif kind in ("tool-return", "retry-prompt"):
                self._result(part, kind == "tool-return", where, line)
            else:
                src.keep(line, f"request part {str(kind)[:40]}", part)

    def _prompt(self, content: object, line: int | None) -> tuple[str, int]:
        if isinstance(content, str):
            return content, 0
        texts: list[str] = []
        images = 0
        for item in as_list(content) or ():
            if isinstance(item, str):
                texts.append(item)
            elif isinstance(item, dict) and str(item.get("kind")) in _IMAGES:
                images += 1
            else:
                self.src.keep(line, "user-prompt item", item)
        if content is not None and not isinstance(content, list):
            self.src.bad(line, "a user-prompt's 'content' must be a string or a list")
        return "\n".join(texts), images

    def _result(
        self, part: dict[str, Any], returned: bool, where: dict[str, JSONValue], line: int | None
    ) -> None:
        content = part.get("content")
        call_id, name = as_str(part.get("tool_call_id")), as_str(part.get("tool_name"))
        outcome = part.get("outcome")
        if returned:
            # As pydantic-ai sends it: a string as is, other values as compact JSON, and a
            # failed or retried return (pydantic-ai 2.x) wrapped as {"error": ...}.
            text = (
                ""
                if content is None
                else content
                if isinstance(content, str)
                else _compact(content)
            )
            if outcome in _ERROR_OUTCOMES:
                failed = (
                    content
                    if outcome == "retried" and not isinstance(content, str | None)
                    else text
                )
                text = _compact({"error": failed})
                returned = False
        else:
            if isinstance(content, str):
                text = content if name else f"Validation feedback:\n{content}"
            else:
                errors = as_list(content) or []
                text = f"{len(errors)} validation errors: {json.dumps(content, indent=2)}"
            text = f"{text}\n\n{_RETRY}"
        if not name and part.get("part_kind") == "retry-prompt":
            self.add({"role": "user", "content": text, "meta": {"source": where}}, line)
            return
        if not call_id:
            self.src.bad(line, f"a {part.get('part_kind')} part needs a 'tool_call_id'")
            return
        msg: dict[str, JSONValue] = {
            "role": "tool",
            "content": text,
            "tool_call_id": call_id,
            "ok": returned,
            "meta": {"source": where},
        }
        if name:
            msg["tool_name"] = name
        self.add(msg, line)

    def response(self, raw: dict[str, Any], line: int | None) -> None:
        src = self.src
        model = as_str(raw.get("model_name"))
        if model:
            self.out.model = model
        provider = as_str(raw.get("provider_name"))
        if provider:
            self.out.provider = provider
        texts: list[str] = []
        thinking: list[JSONValue] = []
        calls: list[JSONValue] = []
        for part in raw["parts"]:
            if not isinstance(part, dict):
                src.bad(line, "a part must be a JSON object")
                continue
            kind = part.get("part_kind")
            if kind == "text":
                texts.append(str(part.get("content", "")))
            elif kind == "thinking":
                thought = as_str(part.get("content"))
                if thought:
                    thinking.append(thought)
            elif kind == "tool-call":
                call_id, name = as_str(part.get("tool_call_id")), as_str(part.get("tool_name"))
                if not call_id or not name:
                    src.bad(line, "a tool-call part needs 'tool_call_id' and 'tool_name'")
                    continue
                args = arguments(part.get("args"), src, line, call_id)
                calls.append({"id": call_id, "name": name, "arguments": args})
            else:
                src.keep(line, f"response part {str(kind)[:40]}", part)
        where = origin(
            line,
            time=as_str(raw.get("timestamp")),
            model=model,
            id=as_str(raw.get("provider_response_id")),
        )
        usage = as_dict(raw.get("usage"))
        if usage:
            # Not meta["usage"]: plait's context report reads that as its own provider's count.
            where["usage"] = usage
        meta: dict[str, JSONValue] = {"source": where}
        if thinking:
            meta["thinking"] = thinking
        msg: dict[str, JSONValue] = {"role": "assistant", "content": "\n".join(texts), "meta": meta}
        if calls:
            msg["tool_calls"] = calls
        self.add(msg, line)


def parse(src: Source) -> Parsed:
    """Read a pydantic-ai message dump (JSON array or JSONL).

    Raises:
        ImportFormatError: not JSON, or a message or part that does not fit
            (names the line; strict mode).
    """
    out = Parsed("pydantic-ai", "message_events", agent="pydantic-ai")
    builder = _Builder(src, out)
    head = src.data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if head == b"[":
        value, lines = src.document()
        if not isinstance(value, list):
            src.fail(1, "expected a JSON array of pydantic-ai messages")
        src.records = len(value)
        for raw in value:
            builder.message(raw, lines.get(id(raw)))
    else:
        for line, raw in src.lines():
            builder.message(raw, line)
    return out
