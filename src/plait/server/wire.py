"""The wire format of the event streams: events as JSON, their ids, one encoded event.

An event id says where the event stands among the session's records (see
``plait.server.sse``): ``"<seq>~<head>"`` for a record, ``"<seq>.<n>~<head>"`` for
any other event, the ``n``-th after the record ``seq``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from plait.errors import InvalidArgumentError
from plait.records import JSONValue, Record, ToolCall
from plait.store.base import SessionRow

__all__ = ["SseEvent", "event_json", "head_mark", "parse_event_mark", "record_json"]


def record_json(record: Record) -> dict[str, JSONValue]:
    """Return a record as JSON: ``seq``, ``id``, ``kind``, ``created_at``, ``payload`` ..."""
    return {
        "seq": record.seq,
        "id": record.id,
        "kind": record.kind,
        "created_at": record.created_at.isoformat(),
        "created_at_us": record.created_at_us,
        "payload": record.payload,
        "meta": dict(record.meta),
        "tokens": record.tokens,
    }


def _value(value: object) -> JSONValue:
    if isinstance(value, ToolCall):
        return value.to_json()
    if isinstance(value, Record):
        return record_json(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _value(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple | list):
        return [_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _value(v) for k, v in value.items()}
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def event_json(event: object) -> dict[str, JSONValue]:
    """Return a run event as JSON: its ``type`` and its fields."""
    out: dict[str, JSONValue] = {"type": str(getattr(event, "type", "event"))}
    if dataclasses.is_dataclass(event) and not isinstance(event, type):
        for f in dataclasses.fields(event):
            out[f.name] = _value(getattr(event, f.name))
    return out


def parse_event_mark(value: str | None) -> tuple[int | None, str | None]:
    """Return the record seq an event id stands after and the head it names, if any.

    ``"12"`` and ``"12.3"`` (ids without a head) give ``(12, None)``; ``"12.3~h"``
    gives ``(12, "h")``.

    Raises:
        InvalidArgumentError: the id is not one this service sent.
    """
    if value is None or not value.strip():
        return None, None
    text, _, head = value.strip().partition("~")
    try:
        seq = int(text.split(".", 1)[0])
    except ValueError:
        raise InvalidArgumentError(f"not an event id of this service: {value!r}") from None
    if seq < -1 or (_ and not head):
        raise InvalidArgumentError(f"not an event id of this service: {value!r}")
    return seq, head or None


def head_mark(row: SessionRow) -> str:
    """The token event ids carry for a head: its stored row's key, in hexadecimal."""
    return f"{row.pk:x}"


@dataclass(frozen=True)
class SseEvent:
    """One Server-Sent Event (encoded once, however many observers it goes to)."""

    id: str
    """The event id (see the module docstring)."""
    event: str
    """The event name: ``record``, ``text_delta``, ``run_end`` ..."""
    data: dict[str, JSONValue]
    """The JSON payload."""
    wire: bytes = field(init=False, repr=False, compare=False)
    """The event in the ``text/event-stream`` wire format."""
    body: str = field(init=False, repr=False, compare=False)
    """The payload as JSON text."""

    def __post_init__(self) -> None:
        body = json.dumps(self.data, ensure_ascii=False, separators=(",", ":"))
        wire = f"id: {self.id}\nevent: {self.event}\ndata: {body}\n\n".encode()
        object.__setattr__(self, "wire", wire)
        object.__setattr__(self, "body", body)

    def encode(self) -> bytes:
        """Return the event in the ``text/event-stream`` wire format."""
        return self.wire
