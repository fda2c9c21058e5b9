"""Reading a transcript file: lines or one JSON document, with the line of every problem.

Every importer reads through a :class:`Source`. It decodes the file, hands out
JSON values with the 1-based line they start on, and turns every problem into
an :class:`~plait.errors.ImportFormatError` naming that line. In lenient mode
(``validate=False``) :meth:`Source.bad` records the problem and the caller
skips what it could not read instead; the import is then reported as partial.

No importer creates anything: they return a :class:`Parsed` transcript, and
:func:`plait.interop.seed_from_jsonl` stores it in one transaction.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, NoReturn

from plait.errors import ImportFormatError
from plait.records import JSONValue

__all__ = [
    "UNMAPPED_MAX_BYTES",
    "Item",
    "Parsed",
    "ProgressCallback",
    "Source",
    "SourceFormat",
    "as_dict",
    "as_list",
    "as_str",
]

SourceFormat = Literal["message_events", "request_snapshots", "provider_responses_only"]
"""How a transcript records the conversation (seed 003's ``source_format``)."""

ProgressCallback = Callable[[int, int], None]
"""Called with (bytes read, total bytes) while a file is read."""

UNMAPPED_MAX_BYTES: Final = 16 << 20
"""How much of the unmapped source records a session keeps verbatim (as JSON text)."""

_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")  # an escaped UTF-16 surrogate in JSON text
_WS: Final = " \t\r\n"


def _no_constants(name: str) -> NoReturn:
    raise ValueError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


# NaN, Infinity and numbers too big for a float cannot be stored (plait writes strict JSON).
_DECODER = json.JSONDecoder(parse_constant=_no_constants, parse_float=_finite)


@dataclass(slots=True)
class Item:
    """One message an importer rebuilt, with where it came from."""

    message: dict[str, JSONValue]
    """A message dict as :func:`plait.records.record_from_message` takes it."""
    line: int | None
    """The 1-based line of the source it was read from (None if not known)."""


@dataclass(slots=True)
class Parsed:
    """What an importer read from a file, before anything is stored."""

    format: str
    """The importer: ``plait``, ``openai``, ``claude-code``, ``codex``, ``gemini-cli``."""
    source_format: SourceFormat
    """How the file records the conversation."""
    items: list[Item] = field(default_factory=list)
    """The prompt-visible messages, oldest first."""
    provider: str | None = None
    """The provider the transcript records (None when it records none)."""
    model: str | None = None
    """The model of the newest reply the transcript records (None when it records none)."""
    session_id: str | None = None
    """The id the source agent gave the session, if the file records one."""
    agent: str | None = None
    """The stable slug of the agent that wrote the file (``claude-code``, ``codex``, ...)."""
    title: str | None = None
    """A title the file records for the session."""
    details: dict[str, JSONValue] = field(default_factory=dict)
    """Non-secret facts about the source (its version, the header of a plait file ...)."""


def as_dict(value: object) -> dict[str, Any] | None:
    """``value`` if it is a JSON object, else None."""
    return value if isinstance(value, dict) else None


def as_list(value: object) -> list[Any] | None:
    """``value`` if it is a JSON array, else None."""
    return value if isinstance(value, list) else None


def as_str(value: object) -> str | None:
    """``value`` if it is a string, else None."""
    return value if isinstance(value, str) else None


class Source:
    """A transcript file being read.

    Args:
        data: the file's bytes.
        path: the file name for messages (None for text from no file).
        strict: raise on the first problem (``validate=True``), or skip and count it.
        progress: called with (bytes read, total) as lines are read.
    """

    def __init__(
        self,
        data: bytes,
        *,
        path: str | None = None,
        strict: bool = True,
        progress: ProgressCallback | None = None,
    ) -> None:
        self.data = data
        self.path = path
        self.strict = strict
        self.progress = progress
        self.records = 0
        """Records read: non-blank lines of a JSONL file, elements of a JSON document."""
        self.partial = False
        """Whether something was skipped because it could not be read (lenient mode only)."""
        self.skipped: Counter[str] = Counter()
        """What was left out and why (``sidechain``, ``thinking``, ``unreadable line`` ...)."""
        self.problems: list[str] = []
        """The first few problems lenient mode skipped, with their lines."""
        self.unmapped: list[dict[str, JSONValue]] = []
        """Records the importer read but did not map, verbatim: ``{line, kind, record}``, up
        to :data:`UNMAPPED_MAX_BYTES` of JSON (the rest are counted in :attr:`unmapped_over`,
        never held: what a file holds past the limit costs no memory)."""
        self.unmapped_over = 0
        """Unmapped records past the limit: counted, not kept."""
        self._unmapped_bytes = 0
        self._document: tuple[Any, Mapping[int, int]] | None = None

    # -- problems -----------------------------------------------------------------------

    def fail(self, line: int | None, reason: str) -> NoReturn:
        """Raise the typed error for a problem at ``line``.

        Raises:
            ImportFormatError: always.
        """
        raise ImportFormatError(self.path, line, reason)

    def bad(
        self,
        line: int | None,
        reason: str,
        *,
        kind: str = "unreadable",
        record: JSONValue | None = None,
    ) -> None:
        """A problem: raise it in strict mode; otherwise count it and mark the import partial.

        ``record`` (a line's text, a value that is not a record) is kept verbatim
        with the unmapped records, so what was skipped is not lost.

        Raises:
            ImportFormatError: in strict mode.
        """
        if self.strict:
            self.fail(line, reason)
        self.partial = True
        self.skipped[kind] += 1
        if record is not None:
            self._unmap({"line": line, "kind": kind, "record": record})
        if len(self.problems) < 20:
            self.problems.append(f"line {line}: {reason}" if line is not None else reason)

    def skip(self, kind: str, n: int = 1) -> None:
        """Count something deliberately left out (not a problem; the import stays whole)."""
        if n:
            self.skipped[kind] += n

    def keep(self, line: int | None, kind: str, record: JSONValue) -> None:
        """Count a record left unmapped and keep it verbatim for a later, better importer."""
        self.skipped[kind] += 1
        self._unmap({"line": line, "kind": kind, "record": record})

    def _unmap(self, entry: dict[str, JSONValue]) -> None:
        """Keep ``entry`` while the kept ones fit the limit; past it, count it only."""
        if not self.unmapped_over:
            size = len(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))
            if self._unmapped_bytes + size <= UNMAPPED_MAX_BYTES:
                self._unmapped_bytes += size
                self.unmapped.append(entry)
                return
        self.unmapped_over += 1

    # -- decoding -----------------------------------------------------------------------

    def decode(self, raw: bytes) -> Any:
        """Decode one JSON text; ValueError, UnicodeError or RecursionError if it is not."""
        text = raw.decode("utf-8")
        value = _DECODER.decode(text)
        if _SURROGATE.search(raw):
            # A lone surrogate decodes to a str that cannot be stored as UTF-8.
            try:
                json.dumps(value, ensure_ascii=False).encode("utf-8")
            except UnicodeError:
                raise ValueError("the text holds a lone UTF-16 surrogate") from None
        return value

    def text(self) -> str:
        """The whole file as text.

        Raises:
            ImportFormatError: the file is not UTF-8 (names the line of the first bad byte).
        """
        try:
            return self.data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            self.fail(self.data.count(b"\n", 0, exc.start) + 1, "not UTF-8 text")

    def lines(self) -> Iterator[tuple[int, Any]]:
        """Yield (line number, decoded JSON value) for every non-blank line.

        A line that is not JSON is :meth:`bad`: in lenient mode it is skipped
        (a file cut off mid-line ends that way).

        Raises:
            ImportFormatError: a line is not JSON (strict mode).
        """
        data = self.data
        if data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
        total = len(data)
        step = max(total // 200, 1 << 16)
        next_report = step
        start = 0
        number = 0
        while start < total:
            end = data.find(b"\n", start)
            if end < 0:
                end = total
            number += 1
            raw = data[start:end]
            start = end + 1
            if self.progress is not None and start >= next_report:
                self.progress(min(start, total), total)
                next_report = start + step
            if not raw.strip():
                continue
            self.records += 1
            try:
                value = self.decode(raw)
            except UnicodeDecodeError:
                self.bad(number, "not UTF-8 text", record=_text_of(raw))
                continue
            except RecursionError:
                self.bad(number, "JSON nested too deeply", record=_text_of(raw))
                continue
            except ValueError as exc:
                last = start >= total
                what = "the last line is cut off or not JSON" if last else "not JSON"
                self.bad(number, f"{what}: {exc}", record=_text_of(raw))
                continue
            yield number, value
        if self.progress is not None:
            self.progress(total, total)

    def objects(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """Yield (line number, object) for every non-blank line; other values are :meth:`bad`.

        Raises:
            ImportFormatError: a line is not a JSON object (strict mode).
        """
        for number, value in self.lines():
            if isinstance(value, dict):
                yield number, value
            else:
                self.bad(number, f"expected a JSON object, got {_kind(value)}", record=value)

    def document(self) -> tuple[Any, Mapping[int, int]]:
        """Decode the whole file as one JSON value.

        Returns:
            The value, and the line each element of its message array starts on,
            keyed by ``id()`` of the element (the top-level array, or the array
            under the top-level key ``messages`` or ``history``).

        Raises:
            ImportFormatError: the file is not one JSON value (names the line).
        """
        if self._document is not None:
            return self._document
        text = self.text()
        if self.progress is not None:
            self.progress(0, len(self.data))
        try:
            value, lines = _decode_located(text)
        except RecursionError:
            self.fail(None, "JSON nested too deeply")
        except json.JSONDecodeError as exc:
            self.fail(exc.lineno, f"not JSON: {exc.msg}")
        except ValueError as exc:
            self.fail(None, f"not JSON: {exc}")
        if _SURROGATE.search(self.data):
            try:
                json.dumps(value, ensure_ascii=False).encode("utf-8")
            except UnicodeError:
                self.fail(None, "the text holds a lone UTF-16 surrogate")
        if self.progress is not None:
            self.progress(len(self.data), len(self.data))
        self._document = (value, lines)
        return self._document


def _text_of(raw: bytes) -> str:
    """A line that is not JSON, as text that can be stored (bad bytes replaced)."""
    return raw.decode("utf-8", "replace")


def _kind(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


_ARRAY_KEYS: Final = ("messages", "history", "events", "items", "input")


def _skip_ws(text: str, pos: int) -> int:
    n = len(text)
    while pos < n and text[pos] in _WS:
        pos += 1
    return pos


def _decode_located(text: str) -> tuple[Any, dict[int, int]]:
    """Decode ``text``, noting the line of each element of its message array.

    The top level is walked by hand (one ``raw_decode`` per element) so an
    importer can name the line of a bad message; everything below is decoded
    by the standard decoder.
    """
    lines: dict[int, int] = {}
    pos = _skip_ws(text, 0)
    value: Any
    if pos < len(text) and text[pos] == "[":
        value, end = _located_array(text, pos, lines)
    elif pos < len(text) and text[pos] == "{":
        value, end = _located_object(text, pos, lines)
    else:
        value, end = _DECODER.raw_decode(text, pos)
    end = _skip_ws(text, end)
    if end != len(text):
        raise json.JSONDecodeError("extra data after the JSON value", text, end)
    return value, lines


def _located_array(text: str, pos: int, lines: dict[int, int]) -> tuple[list[Any], int]:
    out: list[Any] = []
    pos = _skip_ws(text, pos + 1)
    if pos < len(text) and text[pos] == "]":
        return out, pos + 1
    line, line_pos = 1, 0
    while True:
        pos = _skip_ws(text, pos)
        element, end = _DECODER.raw_decode(text, pos)
        line += text.count("\n", line_pos, pos)
        line_pos = pos
        if isinstance(element, dict | list):  # ids of shared singletons would collide
            lines[id(element)] = line
        out.append(element)
        pos = _skip_ws(text, end)
        if pos < len(text) and text[pos] == ",":
            pos += 1
            continue
        if pos < len(text) and text[pos] == "]":
            return out, pos + 1
        raise json.JSONDecodeError("expected ',' or ']'", text, pos)


def _located_object(text: str, pos: int, lines: dict[int, int]) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    pos = _skip_ws(text, pos + 1)
    if pos < len(text) and text[pos] == "}":
        return out, pos + 1
    while True:
        pos = _skip_ws(text, pos)
        if pos >= len(text) or text[pos] != '"':
            raise json.JSONDecodeError("expected a property name", text, pos)
        key, pos = _DECODER.raw_decode(text, pos)
        pos = _skip_ws(text, pos)
        if pos >= len(text) or text[pos] != ":":
            raise json.JSONDecodeError("expected ':'", text, pos)
        pos = _skip_ws(text, pos + 1)
        if key in _ARRAY_KEYS and pos < len(text) and text[pos] == "[":
            value, pos = _located_array(text, pos, lines)
        else:
            value, pos = _DECODER.raw_decode(text, pos)
        out[key] = value
        pos = _skip_ws(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos += 1
            continue
        if pos < len(text) and text[pos] == "}":
            return out, pos + 1
        raise json.JSONDecodeError("expected ',' or '}'", text, pos)
