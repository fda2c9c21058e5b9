"""ADK events and state as plait stores them (see :mod:`plait.integrations.google_adk`).

An event is kept verbatim (its pydantic JSON) on the first plait record built
from it: a user's text a user message, a model's text and function calls an
assistant message, each function response a tool message; any other event an
opaque item of format ``google-adk``. State values are kept as ADK's own JSON.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Final, cast

from google.adk.events.event import Event
from google.adk.sessions.state import State

from plait.errors import InvalidArgumentError
from plait.records import JSONValue, Record

__all__ = [
    "EVENT_FORMAT",
    "NS",
    "check_state",
    "event_of",
    "keyed_events",
    "messages",
    "split",
    "to_json",
]

EVENT_FORMAT: Final = "google-adk"
"""The ``format`` of the opaque items that hold events that are not messages."""
NS: Final = "google_adk"
"""The metadata and meta key of everything the service keeps."""
_log = logging.getLogger("plait.integrations.google_adk")


def split(state: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """App, user and session parts of a state or delta; ``temp:`` keys are dropped."""
    app: dict[str, Any] = {}
    user: dict[str, Any] = {}
    own: dict[str, Any] = {}
    for key, value in state.items():
        if key.startswith(State.APP_PREFIX):
            app[key.removeprefix(State.APP_PREFIX)] = value
        elif key.startswith(State.USER_PREFIX):
            user[key.removeprefix(State.USER_PREFIX)] = value
        elif not key.startswith(State.TEMP_PREFIX):
            own[key] = value
    return app, user, own


def to_json(value: Any) -> JSONValue:
    """A state value as stored: ADK's own JSON form (datetimes, models ... as JSON).

    A value with no JSON form (a callable, an object) is kept as its string, with a
    warning logged, as ADK's database services keep it.

    Raises:
        InvalidArgumentError: the value cannot be JSON at all (NaN, bytes not UTF-8).
    """
    from pydantic_core import to_jsonable_python

    lossy: list[str] = []

    def as_text(unknown: Any) -> str:
        lossy.append(type(unknown).__name__)
        return str(unknown)

    try:
        out = to_jsonable_python(value, fallback=as_text)
        json.dumps(out, allow_nan=False)
    except ValueError as exc:  # UnicodeDecodeError is one too
        raise InvalidArgumentError(f"an ADK state value has no JSON form: {exc}") from None
    if lossy:
        _log.warning("ADK state values of type %s are stored as their string", sorted(lossy))
    return cast(JSONValue, out)


def check_state(state: Mapping[str, Any] | None) -> None:
    """Refuse a state or delta that cannot be stored, before anything is written.

    Raises:
        InvalidArgumentError: a value cannot be JSON (see :func:`to_json`).
    """
    for part in split(state or {}):
        to_json(part)


def _event_json(event: Event) -> dict[str, JSONValue]:
    return cast(dict[str, JSONValue], json.loads(event.model_dump_json(exclude_none=True)))


def messages(event: Event, at: int) -> list[dict[str, JSONValue]]:
    """The plait records of an event: messages where it is one, else one opaque item.

    ``at`` (the session's version before the write) orders events across the
    session and its hidden heads.
    """
    verbatim = _event_json(event)
    head_meta: dict[str, JSONValue] = {NS: {"event": verbatim, "at": at}}
    content = event.content
    parts = list(content.parts or ()) if content is not None else []
    texts: list[str] = []
    calls: list[JSONValue] = []
    results: list[dict[str, JSONValue]] = []
    images = 0
    for part in parts:
        if part.thought:
            continue  # a model's thinking is not replayed; it stays in the verbatim event
        blob = part.inline_data or part.file_data
        if blob is not None and (blob.mime_type or "").startswith("image/"):
            images += 1  # counted in the context report; the image stays in the event
        if part.text is not None:
            texts.append(part.text)
        elif part.function_call is not None and part.function_call.id:
            call = part.function_call
            arguments = to_json(call.args or {})
            calls.append({"id": call.id, "name": call.name or "", "arguments": arguments})
        elif part.function_response is not None and part.function_response.id:
            answer = part.function_response
            results.append(
                {
                    "role": "tool",
                    "tool_call_id": answer.id,
                    "tool_name": answer.name or "",
                    "content": json.dumps(to_json(answer.response or {}), ensure_ascii=False),
                }
            )
    role = content.role if content is not None else None
    out: list[dict[str, JSONValue]] = []
    if results and not calls:
        out.extend(results)
    elif role == "model" and (texts or calls) and not results:
        message: dict[str, JSONValue] = {"role": "assistant", "content": "\n".join(texts)}
        if calls:
            message["tool_calls"] = calls
        out.append(message)
    elif role == "user" and texts and not calls and not results:
        out.append({"role": "user", "content": "\n".join(texts)})
    if images and out and out[0]["role"] in ("user", "assistant"):
        out[0]["images"] = images
    if not out:
        return [{"role": "opaque", "format": EVENT_FORMAT, "item": verbatim, "meta": head_meta}]
    out[0]["meta"] = head_meta
    for follower in out[1:]:
        follower["meta"] = {NS: {"part_of": event.id}}
    return out


def event_of(record: Record) -> Event | None:
    """The event a record carries (the first record of each event carries it)."""
    kept = record.meta.get(NS)
    if not isinstance(kept, Mapping) or "event" not in kept:
        return None
    return Event.model_validate(kept["event"])


def keyed_events(records: list[Record]) -> dict[int, Event]:
    """The events ``records`` carry, by the version they were written at."""
    found: dict[int, Event] = {}
    for record in records:
        kept = record.meta.get(NS)
        if isinstance(kept, Mapping) and "event" in kept and isinstance(kept.get("at"), int):
            found[cast(int, kept["at"])] = Event.model_validate(kept["event"])
    return found
