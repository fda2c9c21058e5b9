"""Helpers the importers share: content parts, tool-call arguments, per-message provenance."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from plait.interop._source import Source
from plait.records import JSONValue

__all__ = [
    "TEXT_PARTS",
    "arguments",
    "calls_in",
    "list_at",
    "origin",
    "parts_text",
    "tool_output_text",
]

TEXT_PARTS: Final = frozenset({"text", "input_text", "output_text", "summary_text"})
_IMAGE_PARTS: Final = frozenset({"image", "image_url", "input_image", "output_image"})


def origin(line: int | None, **facts: JSONValue) -> dict[str, JSONValue]:
    """The ``meta["source"]`` of an imported message: its line and the facts that are set."""
    out: dict[str, JSONValue] = {"line": line}
    out.update({k: v for k, v in facts.items() if v is not None})
    return out


def calls_in(msg: Mapping[str, JSONValue]) -> list[JSONValue]:
    """The ``tool_calls`` of a message dict (none, or not a list: empty)."""
    calls = msg.get("tool_calls")
    return calls if isinstance(calls, list) else []


def list_at(obj: dict[str, JSONValue], key: str) -> list[JSONValue]:
    """The list ``obj[key]`` of a message being built, set to a new one if it has none.

    Returns:
        The list ``obj`` holds, to extend in place.
    """
    found = obj.get(key)
    if not isinstance(found, list):
        found = obj[key] = []
    return found


def parts_text(content: object, src: Source, line: int | None) -> tuple[str, int]:
    """Text and image count of a string or a list of content parts (OpenAI, Codex, Gemini).

    Text parts are joined with newlines, image parts counted; a ``refusal``
    part counts as text. Other part types (audio, files, encrypted blobs) are
    left out and counted in ``src.skipped``.

    Returns:
        (text, images). ``None`` content is ``("", 0)``.

    Raises:
        ImportFormatError: content that is neither a string, null, nor a list (strict mode).
    """
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        src.bad(line, "content must be a string or a list of parts")
        return "", 0
    texts: list[str] = []
    images = 0
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            src.bad(line, "a content part must be a string or an object")
            continue
        ptype = part.get("type")
        if not isinstance(ptype, str | None):
            src.bad(line, "a content part's 'type' must be a string")
            continue
        text = part.get("text")
        if ptype in TEXT_PARTS or (ptype is None and isinstance(text, str)):
            if isinstance(text, str):
                texts.append(text)
            else:
                src.bad(line, f"a {ptype or 'text'} part needs a string 'text'")
        elif ptype == "refusal" and isinstance(part.get("refusal"), str):
            texts.append(part["refusal"])
        elif ptype in _IMAGE_PARTS or "inlineData" in part or "inline_data" in part:
            images += 1
        else:
            src.skip(f"content part {str(ptype)[:40]!s}")
    return "\n".join(texts), images


def arguments(raw: object, src: Source, line: int | None, call: str) -> dict[str, JSONValue]:
    """Tool-call arguments as an object: a JSON object, or a string holding one.

    Arguments a model wrote that are not a JSON object (cut off, or a bare
    value) are a problem in strict mode; leniently they are kept verbatim
    under ``{"_raw": ...}``.

    Raises:
        ImportFormatError: arguments that are not a JSON object (strict mode).
    """
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        if not raw.strip():
            return {}
        try:
            value: Any = json.loads(raw)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value
    src.bad(line, f"tool call {call!r}: arguments are not a JSON object", kind="bad arguments")
    return {"_raw": raw if isinstance(raw, str) else json.dumps(raw)}


def tool_output_text(output: object, src: Source, line: int | None) -> tuple[str, int]:
    """Text and image count of a tool's output: a string, a part, a list of parts, or JSON."""
    if isinstance(output, str | list) or output is None:
        return parts_text(output, src, line)
    if isinstance(output, dict) and ("type" in output or "text" in output):
        return parts_text([output], src, line)
    return json.dumps(output, ensure_ascii=False), 0
