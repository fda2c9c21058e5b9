"""Exporting a session to other agents' formats: OpenAI chat messages and Claude Code JSONL.

Both write what the model is sent, oldest first, and ``seed_from_jsonl``
reads each back to the same messages (role, text, tool calls with their ids
and arguments, which call each result answers, the tool's name) with these
limits, which neither format can carry:

* images: plait keeps how many a message had, not their bytes, so none are
  written;
* ``meta`` (provenance, thinking text without its signature) is not written;
* **OpenAI chat messages** have no field for a failed tool result: ``ok`` is
  not written and reads back as true. A ``summary`` is sent as a user message
  starting :data:`~plait.providers.base.SUMMARY_PREFIX` (as plait's OpenAI
  adapter sends it), and the reader maps such a message back to a summary.
* **Claude Code JSONL** has no record for the system prompt (Claude Code
  builds its own): a system message is written as a ``system`` record with
  ``subtype: "plait_system_prompt"``, which the reader maps back. A summary is
  a ``compact_boundary`` record followed by an ``isCompactSummary`` user
  record, as Claude Code writes a compaction. Each record links to the one
  before it through ``parentUuid`` (uuids derived from the session id and the
  record's position, so an export is the same every time).
"""

from __future__ import annotations

import json
import uuid
from typing import Final

from plait.errors import SessionNotFoundError
from plait.providers.base import SUMMARY_PREFIX
from plait.records import (
    AssistantRecord,
    JSONValue,
    Record,
    SummaryRecord,
    SystemRecord,
    ToolRecord,
    UserRecord,
    dumps,
)
from plait.session import Session

__all__ = ["CLAUDE_CODE_SYSTEM_SUBTYPE", "to_claude_code_jsonl", "to_openai_messages"]

CLAUDE_CODE_SYSTEM_SUBTYPE: Final = "plait_system_prompt"
"""The ``subtype`` of the ``system`` record a system message is exported as."""

_VERSION: Final = "plait-export"


def _records(session: Session) -> tuple[str, list[Record]]:
    snap = session.transcript.snapshot()
    if snap is None:
        raise SessionNotFoundError(session.id, "not stored")
    # Another agent's format has no place for an item plait does not model: left out.
    return snap.id, [r for r in snap.records if r.kind not in ("event", "opaque")]


def to_openai_messages(session: Session) -> list[dict[str, JSONValue]]:
    """A session as OpenAI chat-completions messages (see the module docstring for limits).

    Raises:
        SessionNotFoundError: the session is not stored.
    """
    _, records = _records(session)
    out: list[dict[str, JSONValue]] = []
    for record in records:
        if isinstance(record, SystemRecord):
            out.append({"role": "system", "content": record.content})
        elif isinstance(record, UserRecord):
            out.append({"role": "user", "content": record.content})
        elif isinstance(record, SummaryRecord):
            out.append({"role": "user", "content": SUMMARY_PREFIX + record.content})
        elif isinstance(record, AssistantRecord):
            msg: dict[str, JSONValue] = {"role": "assistant", "content": record.content or None}
            if record.tool_calls:
                msg["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {
                            "name": call.name,
                            "arguments": json.dumps(dict(call.arguments), ensure_ascii=False),
                        },
                    }
                    for call in record.tool_calls
                ]
            out.append(msg)
        elif isinstance(record, ToolRecord):
            out.append(
                {"role": "tool", "tool_call_id": record.tool_call_id, "content": record.content}
            )
    return out


def to_claude_code_jsonl(session: Session, *, model: str | None = None) -> str:
    """A session as a Claude Code session file (see the module docstring for limits).

    Args:
        session: a stored session.
        model: the model named on the assistant messages (default: the model the
            session was imported with, else ``<synthetic>``, Claude Code's name for
            a message no model wrote).

    Returns:
        The JSONL text, one record per line, ending with a newline.

    Raises:
        SessionNotFoundError: the session is not stored.
    """
    session_id, records = _records(session)
    if model is None:
        seeded = session.settings.metadata.get("seeded_from_jsonl")
        recorded = seeded.get("model") if isinstance(seeded, dict) else None
        model = recorded if isinstance(recorded, str) else "<synthetic>"
    space = uuid.uuid5(uuid.NAMESPACE_URL, f"plait:{session_id}")
    lines: list[str] = []
    parent: str | None = None

    def emit(record: Record, body: dict[str, JSONValue], *, suffix: str = "") -> None:
        nonlocal parent
        uid = str(uuid.uuid5(space, f"{record.seq}{suffix}"))
        line: dict[str, JSONValue] = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "sessionId": session_id,
            "version": _VERSION,
            **body,
            "uuid": uid,
            "timestamp": record.created_at.isoformat().replace("+00:00", "Z"),
        }
        lines.append(dumps(line))
        parent = uid

    for record in records:
        if isinstance(record, SystemRecord):
            emit(
                record,
                {
                    "type": "system",
                    "subtype": CLAUDE_CODE_SYSTEM_SUBTYPE,
                    "content": record.content,
                    "level": "info",
                },
            )
        elif isinstance(record, UserRecord):
            emit(record, {"type": "user", "message": {"role": "user", "content": record.content}})
        elif isinstance(record, SummaryRecord):
            boundary: dict[str, JSONValue] = {
                "type": "system",
                "subtype": "compact_boundary",
                "content": "Conversation compacted",
                "logicalParentUuid": parent,
                "compactMetadata": {"trigger": "manual"},
            }
            parent = None  # a compaction starts a new chain, linked logically
            emit(record, boundary, suffix="-boundary")
            emit(
                record,
                {
                    "type": "user",
                    "isCompactSummary": True,
                    "message": {"role": "user", "content": record.content},
                },
            )
        elif isinstance(record, AssistantRecord):
            blocks: list[JSONValue] = []
            if record.content:
                blocks.append({"type": "text", "text": record.content})
            for call in record.tool_calls:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": dict(call.arguments),
                    }
                )
            message: dict[str, JSONValue] = {
                "id": f"msg_plait_{session_id[:8]}_{record.seq}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": blocks,
                "stop_reason": "tool_use" if record.tool_calls else "end_turn",
            }
            emit(record, {"type": "assistant", "message": message})
        elif isinstance(record, ToolRecord):
            block: dict[str, JSONValue] = {
                "type": "tool_result",
                "tool_use_id": record.tool_call_id,
                "content": record.content,
            }
            if not record.ok:
                block["is_error"] = True
            emit(record, {"type": "user", "message": {"role": "user", "content": [block]}})
    return "\n".join(lines) + "\n" if lines else ""
