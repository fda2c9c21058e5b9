"""Reading one JSON object's top-level keys, building only the values that are kept.

``json.loads`` builds every value of a document, wanted or not: a bundle whose ignored
``trace`` is a list of empty lists costs some 26 times its size in Python objects before
anything looks at it. :func:`skim_object` walks the top level itself, decodes the values
of the keys it is asked to keep with the standard decoder, and skips the others without
building them: it finds where each ends by counting brackets outside strings, in C-speed
passes over fixed-size chunks (``bytes.translate`` and ``bytes.replace``), so skipping a
value costs no memory beyond one chunk, whatever its size.

A skipped value is checked for its shape only: its kind (array, object, string, other)
is reported, its brackets must balance and nest at most :data:`MAX_SKIPPED_DEPTH` levels;
its contents are not parsed, since nothing of them is kept.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any, Final, Literal

__all__ = ["MAX_SKIPPED_DEPTH", "SkimError", "Skimmed", "skim_object"]

MAX_SKIPPED_DEPTH: Final = 512
"""How deep the brackets of a skipped value may nest (plait writes at most 64 levels)."""

_CHUNK: Final = 1 << 16
_WS: Final = b" \t\r\n"
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")
_SCALAR_END: Final = re.compile(rb"[,}\]\s]")

Kind = Literal["array", "object", "string", "other"]


class SkimError(ValueError):
    """The text is not one JSON object as far as skimming can tell (says where)."""

    def __init__(self, reason: str, pos: int) -> None:
        self.pos = pos
        super().__init__(f"{reason} (at byte {pos})")


class Skimmed:
    """What :func:`skim_object` read: the kept values, and the kind of every key's value."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        """The kept keys' values, decoded."""
        self.kinds: dict[str, Kind] = {}
        """Every key's value kind, kept or skipped."""


def _ws(data: bytes, pos: int) -> int:
    n = len(data)
    while pos < n and data[pos] in _WS:
        pos += 1
    return pos


def _string_end(data: bytes, pos: int) -> int:
    """The position after the string that starts at ``pos`` (a ``"``)."""
    at = pos + 1
    while True:
        at = data.find(b'"', at)
        if at < 0:
            raise SkimError("a string is not closed", pos)
        back = at - 1
        while data[back] == 0x5C:  # a backslash: an odd run of them escapes the quote
            back -= 1
        if (at - 1 - back) % 2 == 0:
            return at + 1
        at += 1


def _reduce(brackets: bytes, pos: int) -> bytes:
    """``brackets`` with every balanced pair removed: closes, then opens, are left."""
    for _ in range(MAX_SKIPPED_DEPTH + 1):
        shorter = brackets.replace(b"[]", b"").replace(b"{}", b"")
        if shorter == brackets:
            return brackets
        brackets = shorter
    raise SkimError(f"brackets nest more than {MAX_SKIPPED_DEPTH} levels", pos)


def _segment_end(data: bytes, start: int, end: int, stack: list[int]) -> int | None:
    """Follow the brackets of ``data[start:end]`` (no strings in it) on ``stack``.

    Returns:
        The position just after the bracket that empties ``stack``, or None.
    """
    at = start
    while at < end:
        stop = min(at + _CHUNK, end)
        residue = _reduce(data[at:stop].translate(None, _NOT_BRACKETS), at)
        closes = len(residue) - len(residue.lstrip(b"]}"))
        if b"]" in residue[closes:] or b"}" in residue[closes:]:
            raise SkimError("brackets do not match", at)  # an open closed by the other kind
        if closes < len(stack):
            # The chunk leaves the value open: match its closes, push its opens.
            for close in residue[:closes]:
                if stack.pop() != close:
                    raise SkimError("brackets do not match", at)
            stack.extend(_CLOSER[b] for b in residue[closes:])
            if len(stack) > MAX_SKIPPED_DEPTH:
                raise SkimError(f"brackets nest more than {MAX_SKIPPED_DEPTH} levels", at)
            at = stop
            continue
        # The value ends in this chunk: find where, one byte at a time (once per value).
        for i in range(at, stop):
            b = data[i]
            if b in b"[{":
                stack.append(_CLOSER[b])
            elif b in b"]}":
                if stack.pop() != b:
                    raise SkimError("brackets do not match", i)
                if not stack:
                    return i + 1
        at = stop
    return None


_CLOSER: Final = {ord("["): ord("]"), ord("{"): ord("}")}


def _value_end(data: bytes, pos: int) -> tuple[int, Kind]:
    """Where the value that starts at ``pos`` ends, and its kind, without building it."""
    n = len(data)
    if pos >= n:
        raise SkimError("a value is missing", pos)
    first = data[pos]
    if first == 0x22:  # "
        return _string_end(data, pos), "string"
    if first not in b"[{":
        found = _SCALAR_END.search(data, pos)
        end = found.start() if found else n
        if end == pos:
            raise SkimError("a value is missing", pos)
        return end, "other"
    stack = [_CLOSER[first]]
    at = pos + 1
    while True:
        quote = data.find(b'"', at)
        stop = n if quote < 0 else quote
        done = _segment_end(data, at, stop, stack)
        if done is not None:
            return done, "array" if first == 0x5B else "object"
        if quote < 0:
            raise SkimError("a value is not closed", pos)
        at = _string_end(data, quote)


def skim_object(data: bytes, keep: Collection[str] | None) -> Skimmed:
    """Read the JSON object ``data`` holds, decoding only the values of ``keep``'s keys.

    Args:
        data: UTF-8 JSON text (a byte-order mark is allowed).
        keep: the keys whose values are decoded; None keeps every key.

    Returns:
        The kept values and every key's kind (a repeated key: the last one wins).

    Raises:
        SkimError: the text is not one JSON object (a skipped value badly bracketed or
            nested too deeply included).
        ValueError: a kept value or a key is not valid JSON (``json``'s own error).
    """
    out = Skimmed()
    pos = _ws(data, 3 if data.startswith(b"\xef\xbb\xbf") else 0)
    if pos >= len(data) or data[pos] != 0x7B:  # {
        raise SkimError("expected a JSON object", pos)
    pos = _ws(data, pos + 1)
    if pos < len(data) and data[pos] == 0x7D:
        pos += 1
    else:
        while True:
            if pos >= len(data) or data[pos] != 0x22:
                raise SkimError("expected a property name", pos)
            end = _string_end(data, pos)
            key = json.loads(data[pos:end])
            pos = _ws(data, end)
            if pos >= len(data) or data[pos] != 0x3A:  # :
                raise SkimError("expected ':'", pos)
            pos = _ws(data, pos + 1)
            end, kind = _value_end(data, pos)
            out.kinds[key] = kind
            if keep is None or key in keep:
                out.values[key] = json.loads(data[pos:end])
            else:
                out.values.pop(key, None)
            pos = _ws(data, end)
            if pos < len(data) and data[pos] == 0x2C:  # ,
                pos = _ws(data, pos + 1)
                continue
            if pos < len(data) and data[pos] == 0x7D:  # }
                pos += 1
                break
            raise SkimError("expected ',' or '}'", pos)
    if _ws(data, pos) != len(data):
        raise SkimError("extra data after the JSON object", pos)
    return out
