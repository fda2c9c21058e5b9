"""plait's own JSONL: one message dict per line, after an optional header line.

The format::

    {"plait": 1, "session_id": "...", "title": "...", "messages": 3, ...}   optional header
    {"role": "system", "content": "You are terse."}
    {"role": "user", "content": "How many files?", "meta": {...}}
    {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "name": "ls", ...}]}
    {"role": "tool", "content": "a b", "tool_call_id": "c1", "tool_name": "ls", "ok": true}
    {"role": "summary", "content": "...", "folds": [0, 3]}

Every message line is exactly what :func:`plait.records.record_from_message`
takes (so ``Session.inject`` accepts each line as it is). A summary's
``folds`` count message lines: ``[from, to)`` are positions in this file, not
``seq`` numbers of the session it came from. The header is informational: an
importer reads ``provider`` and ``model`` from it for the guardrails and keeps
the rest as provenance; a header with a ``plait`` version newer than this
plait's is refused. Events are not exported: they are not messages.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Final

from plait._time import from_micros, now_micros
from plait.errors import InvalidArgumentError, SessionNotFoundError
from plait.interop._source import Item, Parsed, Source, as_str
from plait.records import JSONValue, SummaryRecord, dumps
from plait.session import Session

__all__ = ["JSONL_VERSION", "parse", "to_jsonl"]

JSONL_VERSION: Final = 1
"""The version :func:`to_jsonl` writes in the header's ``plait`` key."""


def to_jsonl(session: Session, *, header: bool = True) -> str:
    """Export a session's messages as plait JSONL, which ``seed_from_jsonl`` reads back.

    Every record in view except events, oldest first, with its ``meta``;
    a summary's ``folds`` are rewritten to positions in the file.

    Args:
        session: a stored session.
        header: write the ``{"plait": 1, ...}`` header line first.

    Returns:
        The JSONL text, one line per message, ending with a newline.

    Raises:
        InvalidArgumentError: ``session`` is not a Session.
        SessionNotFoundError: the session is not stored.
    """
    if not isinstance(session, Session):
        raise InvalidArgumentError(f"to_jsonl takes a Session, not {type(session).__name__}")
    snap = session.transcript.snapshot()
    if snap is None:
        raise SessionNotFoundError(session.id, "not stored")
    records = [r for r in snap.records if r.kind != "event"]
    seqs = [r.seq for r in records]
    lines: list[str] = []
    if header:
        head: dict[str, JSONValue] = {
            "plait": JSONL_VERSION,
            "session_id": snap.id,
            "title": snap.title,
            "created_at": snap.created_at.isoformat(),
            "exported_at": from_micros(now_micros()).isoformat(),
            "lineage_operator": snap.lineage_operator,
            "parent_session_ids": list(snap.parent_session_ids),
            "messages": len(records),
        }
        seeded = snap.metadata.get("seeded_from_jsonl")
        if isinstance(seeded, dict):
            for key in ("provider", "model"):
                if isinstance(seeded.get(key), str):
                    head[key] = seeded[key]
        lines.append(dumps(head))
    for record in records:
        message: dict[str, JSONValue] = {"role": record.kind, **record.payload}
        if isinstance(record, SummaryRecord):
            message["folds"] = [
                bisect_left(seqs, record.folds_from),
                bisect_left(seqs, record.folds_to),
            ]
        if record.kind == "tool" and message.get("tool_name") is None:
            del message["tool_name"]
        if record.meta:
            message["meta"] = dict(record.meta)
        lines.append(dumps(message))
    return "\n".join(lines) + "\n" if lines else ""


def parse(src: Source) -> Parsed:
    """Read plait JSONL.

    Raises:
        ImportFormatError: a line that is not a JSON object, a header that is not on
            the first line, or one from a newer plait (strict mode for the first two).
    """
    out = Parsed("plait", "message_events")
    for number, value in src.objects():
        if "plait" in value and "role" not in value:
            if out.items or "header" in out.details:
                src.bad(number, "a plait header must be the first line")
                continue
            version = value.get("plait")
            if not isinstance(version, int) or isinstance(version, bool) or version < 1:
                src.fail(number, f"header: 'plait' must be a version number, got {version!r}")
            if version > JSONL_VERSION:
                src.fail(
                    number,
                    f"written by a newer plait (format {version}; this one reads "
                    f"{JSONL_VERSION}): upgrade plait",
                )
            out.details["header"] = value
            out.provider = as_str(value.get("provider"))
            out.model = as_str(value.get("model"))
            out.title = as_str(value.get("title"))
            out.session_id = as_str(value.get("session_id"))
            continue
        out.items.append(Item(value, number))
    return out
