"""Claude Code transcript entries (already decoded) mapped to plait messages.

A host that receives Claude Code's transcript lines one batch at a time (the
Claude Agent SDK's session store does) maps them exactly as the importer maps
a file, and learns which entry each message was built from, so it can keep
every entry verbatim next to the message that carries it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from plait.errors import InvalidArgumentError
from plait.interop import _claude_code
from plait.interop._source import Source, as_dict, as_str
from plait.records import JSONValue

__all__ = ["ClaudeCodeMapping", "map_claude_code_entries"]


@dataclass(frozen=True, slots=True)
class ClaudeCodeMapping:
    """What :func:`map_claude_code_entries` made of a list of entries."""

    messages: tuple[dict[str, JSONValue], ...]
    """Plait message dicts, in the importer's order (``record_from_message`` takes them)."""
    carriers: tuple[int | None, ...]
    """For each entry, the index in :attr:`messages` of the message it is part of.

    None for an entry no message is built from (bookkeeping records, titles,
    an abandoned branch, an API error notice ...); a host keeps those verbatim
    on their own.
    """
    title: str | None
    """A title the entries give the session (custom title, then summary, then AI title)."""


def map_claude_code_entries(entries: Sequence[Mapping[str, JSONValue]]) -> ClaudeCodeMapping:
    """Map Claude Code transcript entries as the ``claude-code`` importer maps a file.

    The entries are read leniently: one the importer cannot read maps to no
    message (its carrier is None) instead of failing the others. Sub-agent
    files are not looked for (there is no file); a sub-agent's own entries
    (``isSidechain``) mapped on their own are its conversation.
    ``meta["source"]`` of each message keeps the entry's ``uuid`` and time,
    without the line number a file would give.

    Args:
        entries: decoded JSON objects, one per transcript line, in order.

    Raises:
        InvalidArgumentError: ``entries`` holds something that is not a JSON object
            (or holds a value JSON cannot write: NaN, a set ...).
    """
    lines: list[str] = []
    for n, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise InvalidArgumentError(f"entry {n} is not a JSON object")
        try:
            lines.append(json.dumps(entry, ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"entry {n} is not JSON: {exc}") from None
    src = Source("\n".join(lines).encode("utf-8"), strict=False)
    parsed = _claude_code.parse(src)
    carriers: list[int | None] = [None] * len(lines)
    for k, item in enumerate(parsed.items):
        if item.line is not None and carriers[item.line - 1] is None:
            carriers[item.line - 1] = k
        meta = item.message.get("meta")
        source = meta.get("source") if isinstance(meta, dict) else None
        if isinstance(source, dict):
            source.pop("line", None)
    # Claude Code writes one line per content block; the importer joins the lines of one
    # API response into the message its first line started.
    by_response: dict[str, int] = {}
    for i, entry in enumerate(entries):
        message = as_dict(entry.get("message")) if entry.get("type") == "assistant" else None
        response = as_str(message.get("id")) if message else None
        if response is None:
            continue
        carrier = carriers[i]
        if carrier is not None:
            by_response.setdefault(response, carrier)
        elif response in by_response:
            carriers[i] = by_response[response]
    return ClaudeCodeMapping(
        tuple(item.message for item in parsed.items), tuple(carriers), parsed.title
    )
