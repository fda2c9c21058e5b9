"""The argument checks every write path shares: JSON values, integers, names and titles.

Pure: no I/O. Each check answers a hostile value with a :mod:`plait.errors`
type before anything is written, instead of letting it surface later as a
``RecursionError`` from the JSON encoder, an ``OverflowError`` from the
database driver, or a stored title that no XML document can hold.

* :func:`check_json` encodes a value the one way plait writes JSON
  (:func:`plait.records.dumps` is it), with a nesting limit of
  :data:`MAX_JSON_DEPTH` containers and a size limit of :data:`MAX_JSON_CHARS`.
  Meta, metadata, settings, the scratchpad and event data all pass through it.
* :func:`check_int` takes an integer argument (a ``limit``, a count, a position)
  only when it is a real ``int`` inside the range a 64-bit database column holds.
* :func:`check_name` and :func:`clean_title` take short labels (a lineage
  operator, a title) only as text without control characters or lone surrogates.
* :func:`check_list` takes a list argument (messages, tool specs) as any iterable
  but a string, a bytes value or a mapping, whose items are then checked one by one.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Mapping
from typing import Any, Final

from plait.errors import InvalidArgumentError, InvalidMessageError, shown

__all__ = [
    "MAX_INT",
    "MAX_JSON_CHARS",
    "MAX_JSON_DEPTH",
    "check_int",
    "check_json",
    "check_list",
    "check_name",
    "clean_title",
    "flat_json",
]

MAX_JSON_DEPTH: Final = 64
"""The deepest nesting of objects and arrays a stored JSON value may have."""
MAX_JSON_CHARS: Final = 8 * 1024 * 1024
"""The longest a stored JSON value may be, encoded, in characters (8 Mi)."""
MAX_INT: Final = 2**63 - 1
"""The largest integer argument: what SQLite's INTEGER and PostgreSQL's bigint hold."""

# One encoder, built once: json.dumps with non-default options builds a new encoder per call.
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_ENCODE_STR = json.encoder.encode_basestring  # the C string encoder _ENCODE uses for strings
_FLAT_MAX: Final = 8
"""Entries in an object encoded by :func:`flat_json` (more: the C encoder is the faster)."""
_FLAT_CHARS: Final = 4096
"""Characters of a string in an object :func:`flat_json` encodes (so the text stays short)."""
_NONCHARACTERS: Final = frozenset("\ufffe\uffff")


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests objects and arrays more than ``limit`` deep (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        if depth > limit:
            return True
        for child in children:
            if isinstance(child, dict | list | tuple):
                stack.append((child, depth + 1))
    return False


def flat_json(value: dict[Any, Any]) -> str | None:
    """The JSON of a small object of short strings, bools, None and 64-bit ints, else None.

    Exactly what :func:`check_json` gives for it (a tool call's arguments, most meta and
    event data), without the JSON encoder's per-call set-up, which costs more than
    encoding a few strings; such an object is within every limit :func:`check_json`
    enforces. Anything else (a float, a nested value, a key that is not a string, a
    subclass of a type, more than a few entries) gives None: ask :func:`check_json`.
    """
    if len(value) > _FLAT_MAX:
        return None
    parts: list[str] = []
    for key, item in value.items():
        if type(key) is not str or len(key) > _FLAT_CHARS:
            return None
        kind = type(item)
        if kind is str:
            if len(item) > _FLAT_CHARS:
                return None
            encoded = _ENCODE_STR(item)
        elif kind is bool:
            encoded = "true" if item else "false"
        elif item is None:
            encoded = "null"
        elif kind is int and -MAX_INT <= item <= MAX_INT:
            encoded = int.__repr__(item)
        else:
            return None
        parts.append(_ENCODE_STR(key) + ":" + encoded)
    return "{" + ",".join(parts) + "}"


def check_json(
    value: Any,
    what: str = "value",
    *,
    max_depth: int = MAX_JSON_DEPTH,
    max_chars: int = MAX_JSON_CHARS,
) -> str:
    """Encode ``value`` as compact JSON, refusing what plait cannot keep and read back.

    Args:
        value: the value to store.
        what: what it is, for the error (``"metadata"``, ``"event data"``, ...).
        max_depth: the deepest nesting of objects and arrays allowed.
        max_chars: the longest encoded text allowed, in characters.

    Returns:
        The JSON text (no spaces, non-ASCII kept, no NaN).

    Raises:
        InvalidMessageError: not JSON-serializable, nested deeper than
            ``max_depth``, or longer than ``max_chars`` once encoded.
    """
    try:
        text = (type(value) is dict and flat_json(value)) or _ENCODE(value)
    except RecursionError:
        raise InvalidMessageError(
            f"{what} is nested more than {max_depth} objects or arrays deep"
        ) from None
    except (TypeError, ValueError) as exc:
        raise InvalidMessageError(f"{what} is not JSON-serializable: {exc}") from exc
    if len(text) > max_chars:
        raise InvalidMessageError(
            f"{what} is {len(text)} characters as JSON; the limit is {max_chars}"
        )
    # Each level of nesting opens a bracket, so a text with few brackets needs no walk.
    if text.count("[") + text.count("{") > max_depth and _deeper_than(value, max_depth):
        raise InvalidMessageError(f"{what} is nested more than {max_depth} objects or arrays deep")
    return text


def check_int(value: object, what: str, *, lo: int = 0, hi: int = MAX_INT) -> int:
    """Return ``value`` if it is an ``int`` (not a bool) with ``lo <= value <= hi``.

    Raises:
        InvalidArgumentError: another type, or out of range.
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgumentError(f"{what} must be an int, not {type(value).__name__}")
    if not lo <= value <= hi:
        raise InvalidArgumentError(f"{what} must be between {lo} and {hi}, got {shown(value)}")
    return value


def check_list(value: object, what: str) -> list[Any]:
    """Return the items of ``value``, a list (or another iterable) of things.

    A string, a bytes value or a mapping is refused rather than iterated: each
    would give its characters, its bytes or its keys, never what was meant.

    Raises:
        InvalidArgumentError: not an iterable, or a string, bytes or a mapping.
    """
    if isinstance(value, str | bytes | bytearray | Mapping) or not isinstance(value, Iterable):
        raise InvalidArgumentError(f"{what} must be a list, not {type(value).__name__}")
    return list(value)


def _refuse_controls(text: str, what: str) -> None:
    for ch in text:
        category = unicodedata.category(ch)
        if category in ("Cc", "Cs") or ch in _NONCHARACTERS:
            raise InvalidArgumentError(
                f"{what} may not hold control characters or lone surrogates (U+{ord(ch):04X} found)"
            )


def check_name(value: object, what: str, *, max_len: int = 200) -> str:
    """Return ``value`` if it is a short, non-blank label a terminal and XML can show.

    For names the library stores and draws (a lineage operator, a tool name):
    text without surrounding white space, control characters or lone surrogates.

    Raises:
        InvalidArgumentError: not a string, blank, padded, too long, or holding
            a control character or a lone surrogate.
    """
    if not isinstance(value, str):
        raise InvalidArgumentError(f"{what} must be a string, not {type(value).__name__}")
    if not value.strip() or value != value.strip():
        raise InvalidArgumentError(f"{what} must be non-blank text without surrounding spaces")
    if len(value) > max_len:
        raise InvalidArgumentError(f"{what} is at most {max_len} characters ({len(value)})")
    _refuse_controls(value, what)
    return value


def clean_title(value: object, max_len: int) -> str:
    """Return a title with its white space collapsed to single spaces and trimmed.

    Tabs and line breaks become spaces; any other control character (NUL, ESC,
    DEL, ...) or a lone surrogate is refused, since a title is drawn in a
    terminal, an HTML page and an SVG that cannot hold them.

    Raises:
        InvalidArgumentError: not a string, blank, longer than ``max_len`` after
            collapsing, or holding a control character or a lone surrogate.
    """
    if not isinstance(value, str):
        raise InvalidArgumentError(f"a title must be a string, not {type(value).__name__}")
    clean = " ".join(value.split())
    if not clean:
        raise InvalidArgumentError("a title cannot be blank")
    if len(clean) > max_len:
        raise InvalidArgumentError(f"a title is at most {max_len} characters ({len(clean)})")
    _refuse_controls(clean, "a title")
    return clean
