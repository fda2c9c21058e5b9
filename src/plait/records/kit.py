"""The codec's pieces a store's own bulk decoder builds records from, in place.

A store that keeps records in columns of its own shape (SQLite's packed columns) decodes
them in its own loop, where a call per row would cost more than the read: it builds each
record of a written shape in its blank, and sends every other row to
:func:`decode_fields`, which checks it and names what is wrong. These names are that
loop's whole view of the record model; the shapes are the codec's (``records._codec``).
"""

from __future__ import annotations

from typing import Final

from plait.records._blanks import (
    BLANKS_WORK,
    AssistantBlank,
    CallBlank,
    SystemBlank,
    ToolBlank,
    UserBlank,
)
from plait.records._bulk import _HEAD, _MISFIT, _call_row, _scan_string, _scan_value, _tool_row
from plait.records._codec import decode_one

__all__ = [
    "BLANKS_WORK",
    "MISFIT",
    "TEXT_HEAD",
    "AssistantBlank",
    "CallBlank",
    "SystemBlank",
    "ToolBlank",
    "UserBlank",
    "call_row",
    "decode_fields",
    "scan_string",
    "scan_value",
    "tool_row",
]

TEXT_HEAD: Final = _HEAD
"""Every message payload the codec writes starts so; its text's string starts at 12."""
MISFIT: Final = _MISFIT
"""What reading a row that is not in a written shape may raise (the general path reads it)."""
scan_string: Final = _scan_string
"""``json``'s C string scanner: ``(text, end)`` of the string at an index."""
scan_value: Final = _scan_value
"""``json``'s C value scanner: ``(value, end)`` of the JSON value at an index."""
tool_row: Final = _tool_row
"""``(payload, i, text, seq, id, created_at_us, tokens)``: a tool result built in place, or None."""
call_row: Final = _call_row
"""``(payload, i, text, seq, id, created_at_us, tokens)``: a tool call built in place, or None."""
decode_fields: Final = decode_one
"""``(kind, payload, seq, id, created_at_us, meta, tokens)``: any row, checked (the general path).

Raises:
    StoreCorruptError: a row that does not fit its kind.
"""
