"""OpenHands event streams: V0 trajectories and V1 (software-agent-sdk) events.

Both are one JSON document, classified ``message_events``; the session is what
OpenHands' conversation memory turns the events into for the model.

**V0** (``OpenHands/OpenHands``): a JSON array of events, each an ``action``
or an ``observation`` with ``source`` (``user``, ``agent``, ``environment``),
``args`` / ``extras`` and, for tool calls, ``tool_call_metadata`` holding the
model's whole ``model_response``.

* a ``system`` action (newer streams start with one): the system prompt, a
  system message (``args.content``).
* ``message`` actions: from the user a user message, from the agent an
  assistant message (``args.content``; ``image_urls`` counted).
* actions with ``tool_call_metadata`` (``run``, ``read``, ``edit``, ``finish``,
  ...) become one assistant message per model response (grouped by the
  response's ``id``): the response's text and every tool call it made, with
  the arguments the model wrote. Without a ``model_response`` the call is
  rebuilt from the action (``function_name``, ``tool_call_id``, ``args``).
* observations with ``tool_call_metadata`` become ``tool`` messages paired by
  ``tool_call_id``; their ``content`` (between ``metadata.prefix`` and
  ``metadata.suffix``, as OpenHands shows a command's output) is what the model
  saw. ``ok`` is false for an ``error`` observation and for a ``run`` whose
  ``metadata.exit_code`` is not 0 (-1, still running, says nothing).
* an ``error`` observation without a call is shown to the model as a user
  message, and is kept as one.
* ``agent_state_changed``, ``change_agent_state``, ``null`` observations and
  every other event the model never saw are kept verbatim as unmapped records.

**V1** (``OpenHands/software-agent-sdk``): events with a ``kind``
discriminator, as a JSON array or under ``history`` / ``events`` (the
benchmarks harness writes ``{instance_id, history, num_events}``).

* ``SystemPromptEvent``: a system message (``system_prompt.text``).
* ``MessageEvent``: its ``llm_message`` (role and content parts), with the
  ``extended_content`` (activated skills' knowledge) the SDK appends to it when
  it sends it.
* ``ActionEvent``: one assistant message per ``llm_response_id`` (parallel
  calls share it): ``thought`` text, ``reasoning_content`` in
  ``meta["thinking"]``, and each ``tool_call`` (``id``, ``name``, ``arguments``).
* ``ObservationEvent``: a ``tool`` message for ``tool_call_id``. Its text is the
  observation's ``content`` parts, else ``output`` (with the ``metadata``
  ``prefix`` / ``suffix`` a bash observation is shown with), ``message`` or
  ``error``. ``ok`` is false when ``error`` is set or the exit code (top-level
  or ``metadata.exit_code``) is not 0.
* ``AgentErrorEvent`` / ``UserRejectObservation``: a failed ``tool`` message
  for its call.
* ``CondensationSummaryEvent``: a ``summary`` message.
* every other kind (state updates, pauses, condensation bookkeeping) is kept
  verbatim as an unmapped record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from plait.interop._parts import arguments, list_at, origin, parts_text
from plait.interop._source import Item, Parsed, Source, as_dict, as_list, as_str
from plait.records import JSONValue

__all__ = ["events_of", "is_v0_event", "is_v1_event", "parse"]

_V1_CONTAINERS: Final = ("history", "events")


def is_v0_event(value: object) -> bool:
    """Whether a decoded value is a V0 OpenHands event."""
    return (
        isinstance(value, dict)
        and "source" in value
        and ("action" in value or "observation" in value)
    )


def is_v1_event(value: object) -> bool:
    """Whether a decoded value is a V1 (software-agent-sdk) event."""
    if not isinstance(value, dict):
        return False
    kind = value.get("kind")
    return isinstance(kind, str) and kind.endswith("Event") and "source" in value


def events_of(value: object) -> list[Any] | None:
    """The event list of an OpenHands document, or None if it is not one."""
    events: list[Any] | None = None
    if isinstance(value, list):
        events = value
    elif isinstance(value, dict):
        for key in _V1_CONTAINERS:
            found = as_list(value.get(key))
            if found is not None:
                events = found
                break
    if not events:
        return None
    first = next((e for e in events if isinstance(e, dict)), None)
    if first is None or not (is_v0_event(first) or is_v1_event(first)):
        return None
    return events


def _exit_code(value: Mapping[str, Any]) -> int | None:
    code = value.get("exit_code")
    meta = as_dict(value.get("metadata"))
    if not isinstance(code, int) and meta is not None:
        code = meta.get("exit_code")
    if not isinstance(code, int) or isinstance(code, bool) or code == -1:
        return None  # -1: the command was still running when the observation was made
    return code


class _Builder:
    def __init__(self, src: Source, out: Parsed) -> None:
        self.src = src
        self.out = out
        self.response_id: str | None = None  # the model response the open message is
        self.open_msg: dict[str, JSONValue] | None = None
        self.names: dict[str, str] = {}

    def add(self, msg: dict[str, JSONValue], line: int | None) -> None:
        if msg["role"] != "assistant":
            self.response_id = None
            self.open_msg = None
        self.out.items.append(Item(msg, line))

    def call_message(
        self,
        response_id: str | None,
        text: str,
        calls: list[dict[str, JSONValue]],
        meta: dict[str, JSONValue],
        line: int | None,
    ) -> None:
        """The calls of one model response: joined to its message if it is open."""
        for call in calls:
            self.names[str(call["id"])] = str(call["name"])
        if response_id is not None and response_id == self.response_id and self.open_msg:
            held = self.open_msg.get("tool_calls")
            joined = held if isinstance(held, list) else []
            known = {c.get("id") for c in joined if isinstance(c, dict)}
            new = [c for c in calls if c["id"] not in known]
            if new:
                list_at(self.open_msg, "tool_calls").extend(new)
            return
        msg: dict[str, JSONValue] = {"role": "assistant", "content": text, "meta": meta}
        if calls:
            msg["tool_calls"] = list(calls)
        self.out.items.append(Item(msg, line))
        self.response_id = response_id
        self.open_msg = msg

    def result(
        self,
        call_id: str,
        text: str,
        ok: bool,
        meta: dict[str, JSONValue],
        line: int | None,
        name: str | None = None,
    ) -> None:
        msg: dict[str, JSONValue] = {
            "role": "tool",
            "content": text,
            "tool_call_id": call_id,
            "ok": ok,
            "meta": meta,
        }
        name = name or self.names.get(call_id)
        if name:
            msg["tool_name"] = name
        self.out.items.append(Item(msg, line))


def _v0_calls(src: Source, event: dict[str, Any], line: int | None) -> tuple[str, list[Any]]:
    """The text and tool calls of the model response behind a V0 action."""
    meta = event["tool_call_metadata"]
    response = as_dict(meta.get("model_response"))
    choices = as_list(response.get("choices")) if response else None
    choice = as_dict(choices[0]) if choices else None
    message = as_dict(choice.get("message")) if choice else None
    calls: list[dict[str, JSONValue]] = []
    if message is not None:
        text, _ = parts_text(message.get("content"), src, line)
        for k, raw in enumerate(as_list(message.get("tool_calls")) or ()):
            fn = as_dict(raw.get("function")) if isinstance(raw, dict) else None
            call_id = as_str(raw.get("id")) if isinstance(raw, dict) else None
            name = as_str(fn.get("name")) if fn else None
            if fn is None or not call_id or not name:
                src.bad(line, f"model_response tool call {k} needs an id and a function name")
                continue
            calls.append(
                {
                    "id": call_id,
                    "name": name,
                    "arguments": arguments(fn.get("arguments"), src, line, call_id),
                }
            )
        if calls:
            return text, calls
    call_id, name = as_str(meta.get("tool_call_id")), as_str(meta.get("function_name"))
    if not call_id or not name:
        src.bad(line, "tool_call_metadata needs 'tool_call_id' and 'function_name'")
        return "", []
    args = {k: v for k, v in (as_dict(event.get("args")) or {}).items() if k != "thought"}
    thought = as_str((as_dict(event.get("args")) or {}).get("thought")) or ""
    return thought, [{"id": call_id, "name": name, "arguments": args}]


def _parse_v0(src: Source, out: Parsed, events: list[Any], lines: Mapping[int, int]) -> None:
    b = _Builder(src, out)
    for event in events:
        line = lines.get(id(event))
        if not isinstance(event, dict):
            src.bad(line, "an event must be a JSON object")
            continue
        source = as_str(event.get("source"))
        action, observation = as_str(event.get("action")), as_str(event.get("observation"))
        args = as_dict(event.get("args")) or {}
        extras = as_dict(event.get("extras")) or {}
        tcm = as_dict(event.get("tool_call_metadata"))
        where = origin(line, id=event.get("id"), time=as_str(event.get("timestamp")))
        if action == "system" and tcm is None:
            # The system prompt (newer V0 streams start with it; its tools stay in args).
            text = as_str(args.get("content")) or ""
            b.add({"role": "system", "content": text, "meta": {"source": where}}, line)
        elif action == "message" and tcm is None:
            text = as_str(args.get("content")) or as_str(event.get("message")) or ""
            msg: dict[str, JSONValue] = {
                "role": "user" if source == "user" else "assistant",
                "content": text,
                "meta": {"source": where},
            }
            images = len(as_list(args.get("image_urls")) or ())
            if images:
                msg["images"] = images
            b.add(msg, line)
        elif action is not None and tcm is not None:
            response = as_dict(tcm.get("model_response"))
            model = as_str(response.get("model")) if response else None
            if model:
                out.model = model
            text, calls = _v0_calls(src, event, line)
            if calls:
                rid = as_str(response.get("id")) if response else None
                b.call_message(rid, text, calls, {"source": {**where, "model": model}}, line)
        elif observation is not None and tcm is not None:
            call_id = as_str(tcm.get("tool_call_id"))
            if not call_id:
                src.bad(line, "tool_call_metadata needs a 'tool_call_id'")
                continue
            text = as_str(event.get("content")) or ""
            shown = as_dict(extras.get("metadata")) or {}
            # A command's output reaches the model between its metadata prefix and suffix.
            text = f"{as_str(shown.get('prefix')) or ''}{text}{as_str(shown.get('suffix')) or ''}"
            code = _exit_code(extras)
            ok = observation != "error" and (code is None or code == 0)
            b.result(call_id, text, ok, {"source": where}, line, as_str(tcm.get("function_name")))
        elif observation == "error":
            text = as_str(event.get("content")) or as_str(event.get("message")) or ""
            b.add({"role": "user", "content": text, "meta": {"source": where}}, line)
        else:
            src.keep(
                line, f"{action or observation} {'action' if action else 'observation'}", event
            )


def _observation_text(src: Source, obs: Mapping[str, Any], line: int | None) -> str:
    error = obs.get("error")
    if isinstance(error, str) and error:
        return error
    content = obs.get("content")
    if isinstance(content, list | str) and content:
        text, _ = parts_text(content, src, line)
        return text
    for key in ("output", "message", "text"):
        value = as_str(obs.get(key))
        if value is not None:
            meta = as_dict(obs.get("metadata")) or {}
            prefix, suffix = as_str(meta.get("prefix")) or "", as_str(meta.get("suffix")) or ""
            return f"{prefix}{value}{suffix}" if key == "output" else value
    return json.dumps(obs, ensure_ascii=False)


def _parse_v1(src: Source, out: Parsed, events: list[Any], lines: Mapping[int, int]) -> None:
    b = _Builder(src, out)
    for event in events:
        line = lines.get(id(event))
        if not isinstance(event, dict):
            src.bad(line, "an event must be a JSON object")
            continue
        kind = as_str(event.get("kind")) or "?"
        where = origin(line, id=event.get("id"), time=as_str(event.get("timestamp")), kind=kind)
        if kind == "SystemPromptEvent":
            prompt = event.get("system_prompt")
            text, _ = parts_text(prompt, src, line)
            b.add({"role": "system", "content": text, "meta": {"source": where}}, line)
        elif kind == "MessageEvent":
            message = as_dict(event.get("llm_message"))
            role = as_str(message.get("role")) if message else None
            if message is None or role not in ("user", "assistant", "system"):
                src.bad(line, "a MessageEvent needs an 'llm_message' with a role")
                continue
            text, images = parts_text(message.get("content"), src, line)
            # Skill knowledge the SDK appends to the message when it sends it.
            extended, more = parts_text(event.get("extended_content"), src, line)
            text, images = "\n".join(t for t in (text, extended) if t), images + more
            skills = as_list(event.get("activated_skills"))
            if skills:
                where["activated_skills"] = skills
            msg: dict[str, JSONValue] = {"role": role, "content": text, "meta": {"source": where}}
            if images and role != "system":
                msg["images"] = images
            b.add(msg, line)
        elif kind == "ActionEvent":
            call = as_dict(event.get("tool_call"))
            call_id = as_str(event.get("tool_call_id")) or (
                as_str(call.get("id")) if call else None
            )
            name = as_str(event.get("tool_name")) or (as_str(call.get("name")) if call else None)
            if not call_id or not name:
                src.bad(line, "an ActionEvent needs 'tool_call_id' and 'tool_name'")
                continue
            raw_args = call.get("arguments") if call else None
            if raw_args is None:
                action = as_dict(event.get("action")) or {}
                raw_args = {k: v for k, v in action.items() if k != "kind"}
            args = arguments(raw_args, src, line, call_id)
            text, _ = parts_text(event.get("thought"), src, line)
            meta: dict[str, JSONValue] = {"source": where}
            thinking = as_str(event.get("reasoning_content"))
            if thinking:
                meta["thinking"] = [thinking]
            b.call_message(
                as_str(event.get("llm_response_id")),
                text,
                [{"id": call_id, "name": name, "arguments": args}],
                meta,
                line,
            )
        elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            call_id = as_str(event.get("tool_call_id"))
            if not call_id:
                src.bad(line, f"a {kind} needs a 'tool_call_id'")
                continue
            if kind == "ObservationEvent":
                obs = as_dict(event.get("observation")) or {}
                text = _observation_text(src, obs, line)
                code = _exit_code(obs)
                ok = not obs.get("error") and (code is None or code == 0)
            else:
                text = as_str(event.get("error")) or as_str(event.get("rejection_reason")) or ""
                ok = False
            b.result(call_id, text, ok, {"source": where}, line, as_str(event.get("tool_name")))
        elif kind == "CondensationSummaryEvent":
            text = as_str(event.get("summary")) or ""
            b.add({"role": "summary", "content": text, "meta": {"source": where}}, line)
        else:
            src.keep(line, f"{kind[:40]}", event)


def parse(src: Source) -> Parsed:
    """Read an OpenHands event stream (V0 or V1).

    Raises:
        ImportFormatError: not JSON, not an event stream, or an event that does
            not fit (names the line; strict mode).
    """
    value, lines = src.document()
    events = events_of(value)
    if events is None:
        src.fail(1, "expected an OpenHands event stream (a JSON array of events)")
    out = Parsed("openhands", "message_events", agent="openhands")
    src.records = len(events)
    first = next(e for e in events if isinstance(e, dict))
    if is_v1_event(first):
        out.details["events"] = "v1"
        if isinstance(value, dict):
            out.session_id = as_str(value.get("instance_id")) or as_str(value.get("id"))
            rest = {k: v for k, v in value.items() if k not in _V1_CONTAINERS}
            if rest:
                src.keep(None, "document fields", rest)
        _parse_v1(src, out, events, lines)
    else:
        out.details["events"] = "v0"
        _parse_v0(src, out, events, lines)
    return out
