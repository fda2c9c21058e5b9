"""Which importer reads a file: ``format="auto"``.

JSONL files are told apart by their first line that is a JSON object (a file
cut off or damaged at the top is still recognised), except that chat-message
lines followed by bare Responses API items are openai-agents items; JSON
documents by their shape. Shapes plait recognises but cannot import (a
SWE-agent trajectory without a ``history``, an unknown agent event stream) get
an :class:`~plait.errors.ImportFormatError` that says so, and a file in no
known shape one that lists the ``--format`` values there are.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from plait.errors import ImportFormatError
from plait.interop import (
    _claude_code,
    _codex,
    _gemini,
    _openai,
    _openai_agents,
    _openhands,
    _plait_jsonl,
    _pydantic_ai,
)
from plait.interop._source import Parsed, Source

__all__ = ["FORMATS", "PARSERS", "detect"]

PARSERS: Final[dict[str, Callable[[Source], Parsed]]] = {
    "plait": _plait_jsonl.parse,
    "openai": _openai.parse,
    "claude-code": _claude_code.parse,
    "codex": _codex.parse,
    "gemini-cli": _gemini.parse,
    "openhands": _openhands.parse,
    "swe-agent": _openai.parse_swe_agent,
    "openai-agents": _openai_agents.parse,
    "pydantic-ai": _pydantic_ai.parse,
}
FORMATS: Final = tuple(PARSERS)
"""The formats ``seed_from_jsonl`` reads (besides ``auto``)."""

_SCAN_LINES: Final = 50
_SUPPORTED: Final = (
    "plait JSONL, OpenAI chat messages, Claude Code, Codex, Gemini CLI, OpenHands, SWE-agent, "
    "openai-agents items, pydantic-ai messages"
)


def _unsupported(src: Source, what: str) -> ImportFormatError:
    return ImportFormatError(
        src.path, None, f"this looks like {what}, which plait cannot import yet ({_SUPPORTED})"
    )


def _line_format(value: dict[str, Any]) -> str | None:
    if "plait" in value and "role" not in value:
        return "plait"
    if _codex.looks_like_legacy(value) or "record_type" in value:
        return "codex"
    if _codex.looks_like(value):
        return "codex"
    if _pydantic_ai.looks_like(value):
        return "pydantic-ai"
    if _openai_agents.is_item(value):
        return "openai-agents"
    if _gemini.looks_like_header(value):
        return "gemini-cli"
    if _claude_code.looks_like(value):
        return "claude-code"
    if "role" in value and "messages" not in value:
        return "plait"
    if _openai.looks_like(value):
        return "openai"
    return None


def _document_format(src: Source, value: object) -> str | None:
    if _openhands.events_of(value) is not None:
        return "openhands"
    if _pydantic_ai.looks_like(value):
        return "pydantic-ai"
    if _openai_agents.looks_like(value):
        return "openai-agents"
    if isinstance(value, list):
        if not value or _openai.looks_like(value):
            return "openai"
        return None
    if not isinstance(value, dict):
        return None
    if _gemini.looks_like(value):
        return "gemini-cli"
    if _openai.looks_like_swe_agent(value):
        return "swe-agent"
    if _openai.looks_like(value):
        return "openai"
    if "trajectory" in value:
        raise _unsupported(src, "a SWE-agent trajectory without a 'history'")
    if isinstance(value.get("events"), list):
        raise _unsupported(src, "an agent event stream")
    return None


def _decoded(src: Source, lines: list[bytes]) -> list[Any]:
    out = []
    for raw in lines:
        try:
            out.append(src.decode(raw))
        except (ValueError, RecursionError, UnicodeError):
            continue
    return out


def detect(src: Source) -> str:
    """Tell which of :data:`FORMATS` a file is in.

    Raises:
        ImportFormatError: the file is empty, is in a format plait cannot import
            yet, or in none it knows.
    """
    body = src.data.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not body:
        raise ImportFormatError(src.path, None, "the file is empty")
    unknown = ImportFormatError(
        src.path,
        None,
        f"not a transcript format plait knows ({_SUPPORTED}); if it is one of them, "
        f"name it: format= (plait import --format) one of {', '.join(FORMATS)}",
    )
    if body[:1] == b"[":
        value, _ = src.document()
        found = _document_format(src, value)
        if found is None:
            raise unknown
        return found
    lines = [line for line in body.split(b"\n", _SCAN_LINES)[:_SCAN_LINES] if line.strip()]
    doc_error: ImportFormatError | None = None
    for number, raw in enumerate(lines):
        try:
            value = src.decode(raw)
        except (ValueError, RecursionError, UnicodeError):
            if number == 0 and body[:1] == b"{":
                # A pretty-printed JSON document, or a JSONL file whose first line is damaged.
                try:
                    document, _ = src.document()
                except ImportFormatError as exc:
                    doc_error = exc  # raised unless a later line shows it is JSONL
                    continue
                found = _document_format(src, document)
                if found is None:
                    raise unknown from None
                return found
            continue
        if not isinstance(value, dict):
            continue
        found = _line_format(value) or _document_format(src, value)
        # A chat message line: openai-agents sessions mix them with bare items.
        if (
            found == "plait"
            and "role" in value
            and any(_openai_agents.is_item(v) for v in _decoded(src, lines[number + 1 :]))
        ):
            return "openai-agents"
        if found is not None:
            return found
    raise doc_error or unknown
