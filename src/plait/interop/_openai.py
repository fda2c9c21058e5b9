"""OpenAI chat-completions transcripts: message lists, request logs, response logs.

Shapes read, and how each is classified (``source_format``):

* a JSON array of messages, ``{"messages": [...]}`` without request fields,
  SWE-agent's ``{"history": [...]}``, or JSONL with one message per line:
  ``message_events``;
* a request log holding the full message array, ``{"messages": [...], "model"
  | "tools" | "kwargs" | "response": ...}`` (LiteLLM's call log), or JSONL with
  one such request per line: ``request_snapshots``. The newest snapshot is the
  conversation; the recorded response, if any, is its last assistant message;
* only responses, ``{"object": "chat.completion", "choices": [...]}`` alone,
  in an array or one per line: ``provider_responses_only`` (the user and tool
  turns cannot be rebuilt from them; refused when ``validate=True``).

Messages: ``system`` and ``developer`` become system messages; ``tool_calls``
(``{id, function: {name, arguments}}``, arguments as a JSON string) become tool
calls; ``role: "tool"`` answers one by ``tool_call_id`` (SWE-agent's
``tool_call_ids`` list too); the legacy ``function_call`` / ``role: "function"``
pair is given ids ``legacy_call_<n>``. Text parts are joined, image parts
counted. ``name`` on a non-tool message, ``reasoning_content`` and
``thinking`` go to ``meta``; other keys (``annotations``, SWE-agent's
``thought`` / ``action``, ...) are not prompt-visible and are kept verbatim in
``meta["source"]["fields"]``. The fields of a request log beside its messages
(``tools``, ``kwargs``, ``cost`` ...) are kept verbatim as an unmapped record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from plait.interop._parts import arguments, origin, parts_text
from plait.interop._source import Item, Parsed, Source, SourceFormat, as_dict, as_list, as_str
from plait.providers.base import SUMMARY_PREFIX
from plait.records import JSONValue

__all__ = [
    "looks_like",
    "looks_like_swe_agent",
    "parse",
    "parse_document",
    "parse_lines",
    "parse_swe_agent",
]

_REQUEST_KEYS: Final = frozenset({"model", "tools", "kwargs", "response", "temperature"})
_ROLES: Final = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "function": "tool",
}


def _is_response(value: object) -> bool:
    return isinstance(value, dict) and (
        value.get("object") == "chat.completion" or isinstance(value.get("choices"), list)
    )


def looks_like(value: object) -> bool:
    """Whether a decoded JSON value (or first JSONL line) is an OpenAI chat transcript."""
    if isinstance(value, list):
        return (
            bool(value)
            and isinstance(value[0], dict)
            and ("role" in value[0] or "messages" in value[0] or _is_response(value[0]))
        )
    if not isinstance(value, dict):
        return False
    if isinstance(value.get("messages"), list) or isinstance(value.get("history"), list):
        return True
    return _is_response(value) or ("role" in value and "content" in value)


class _Builder:
    """Turns OpenAI message objects into plait message dicts."""

    def __init__(self, src: Source, out: Parsed) -> None:
        self.src = src
        self.out = out
        self.legacy = 0
        self.legacy_open: list[tuple[str, str]] = []  # (id, name) of unanswered function_calls
        self.response_model: str | None = None

    def message(self, raw: object, line: int | None) -> None:
        src = self.src
        if not isinstance(raw, dict):
            src.bad(line, "a message must be a JSON object")
            return
        role = _ROLES.get(str(raw.get("role")))
        if role is None:
            src.bad(line, f"unknown role {raw.get('role')!r}")
            return
        text, images = parts_text(raw.get("content"), src, line)
        source = origin(line)
        meta: dict[str, JSONValue] = {"source": source}
        if role == "user" and text.startswith(SUMMARY_PREFIX):
            # How plait sends a summary (the API has no summary role): read it back as one.
            role, text = "summary", text[len(SUMMARY_PREFIX) :]
        msg: dict[str, JSONValue] = {"role": role, "content": text}
        if images:
            msg["images"] = images
        if role == "tool":
            self._tool(raw, msg, line)
        else:
            name = as_str(raw.get("name"))
            if name:
                meta["name"] = name
        if role == "assistant":
            refusal = as_str(raw.get("refusal"))
            if refusal and not text:
                msg["content"] = refusal
            for key in ("reasoning_content", "thinking", "reasoning"):
                thought = as_str(raw.get(key))
                if thought:
                    meta["thinking"] = [thought]
            calls = self._calls(raw, line)
            if calls:
                msg["tool_calls"] = calls
        extra = {k: v for k, v in raw.items() if k not in _MAPPED_KEYS}
        if extra:
            # SWE-agent's thought / action / agent, annotations, a recorder's own fields.
            source["fields"] = extra
        msg["meta"] = meta
        self.out.items.append(Item(msg, line))

    def _calls(self, raw: Mapping[str, Any], line: int | None) -> list[JSONValue]:
        src = self.src
        calls: list[JSONValue] = []
        raw_calls = raw.get("tool_calls")
        if raw_calls is not None and not isinstance(raw_calls, list):
            src.bad(line, "'tool_calls' must be a list")
            raw_calls = None
        for k, call in enumerate(raw_calls or ()):
            fn = as_dict(call.get("function")) if isinstance(call, dict) else None
            source = fn if fn is not None else as_dict(call)
            call_id = as_str(call.get("id")) if isinstance(call, dict) else None
            name = as_str(source.get("name")) if source is not None else None
            if source is None or not name:
                src.bad(line, f"tool call {k} needs a function name")
                continue
            if not call_id:
                src.bad(line, f"tool call {name!r} has no id")
                call_id = f"call_{line}_{k}"
            args = arguments(source.get("arguments"), src, line, call_id)
            calls.append({"id": call_id, "name": name, "arguments": args})
        legacy = as_dict(raw.get("function_call"))
        if legacy is not None:
            name = as_str(legacy.get("name"))
            if not name:
                src.bad(line, "'function_call' needs a name")
            else:
                self.legacy += 1
                call_id = f"legacy_call_{self.legacy}"
                args = arguments(legacy.get("arguments"), src, line, call_id)
                calls.append({"id": call_id, "name": name, "arguments": args})
                self.legacy_open.append((call_id, name))
        return calls

    def _tool(self, raw: Mapping[str, Any], msg: dict[str, JSONValue], line: int | None) -> None:
        call_id = as_str(raw.get("tool_call_id"))
        ids = as_list(raw.get("tool_call_ids"))
        if not call_id and ids and isinstance(ids[0], str):
            call_id = ids[0]
        name = as_str(raw.get("name")) or as_str(raw.get("tool_name"))
        if not call_id and raw.get("role") == "function":
            # The legacy pair has no ids: answer the oldest open call of that name.
            for k, (open_id, open_name) in enumerate(self.legacy_open):
                if open_name == name or name is None:
                    call_id = open_id
                    del self.legacy_open[k]
                    break
        if not call_id:
            self.src.bad(line, "a tool message needs a 'tool_call_id'")
            call_id = f"unknown_call_{line}"
        msg["tool_call_id"] = call_id
        if name:
            msg["tool_name"] = name
        if isinstance(raw.get("ok"), bool):
            msg["ok"] = raw["ok"]

    def response(self, raw: Mapping[str, Any], line: int | None) -> None:
        model = as_str(raw.get("model"))
        if model:
            self.response_model = model
        choices = as_list(raw.get("choices"))
        first = as_dict(choices[0]) if choices else None
        message = as_dict(first.get("message")) if first else None
        if message is None:
            self.src.bad(line, "a response needs choices[0].message")
            return
        if "role" not in message:
            message = {**message, "role": "assistant"}
        self.message(message, line)


def _model_of(request: Mapping[str, Any]) -> str | None:
    model = as_str(request.get("model"))
    kwargs = as_dict(request.get("kwargs"))
    if not model and kwargs is not None:
        model = as_str(kwargs.get("model"))
    return model


def _set_model(out: Parsed, model: str | None) -> None:
    if not model:
        return
    # LiteLLM names models "<provider>/<model>"; the prefix is the route it took.
    if "/" in model:
        prefix, _, rest = model.partition("/")
        out.provider = out.provider or prefix
        out.model = rest.rsplit("/", 1)[-1]
    else:
        out.model = model


def _classify(value: Mapping[str, Any]) -> SourceFormat:
    if isinstance(value.get("messages"), list):
        return "request_snapshots" if _REQUEST_KEYS & value.keys() else "message_events"
    if isinstance(value.get("history"), list):
        return "message_events"
    if _is_response(value):
        return "provider_responses_only"
    return "message_events"


def parse_document(src: Source, *, keep_rest: bool = True) -> Parsed:
    """Read a JSON document (array or object).

    The fields of an object beside its message array (a request log's ``tools``,
    ``kwargs``, ``response``, ``cost`` ...) are kept verbatim unless ``keep_rest``
    is false (a caller that keeps them its own way).

    Raises:
        ImportFormatError: not JSON, or not a chat transcript (names the line).
    """
    value, lines = src.document()
    if isinstance(value, dict):
        kind = _classify(value)
        elements = as_list(value.get("messages"))
        if elements is None:
            elements = as_list(value.get("history"))
        if elements is None and (kind == "provider_responses_only" or "role" in value):
            elements = [value]
        if elements is None:
            src.fail(1, "expected a JSON array of messages or an object with 'messages'")
        request: Mapping[str, Any] = value
    elif isinstance(value, list):
        elements = value
        request = {}
        first = as_dict(value[0]) if value else None
        if first is not None and _is_response(first):
            kind = "provider_responses_only"
        elif first is not None and isinstance(first.get("messages"), list):
            kind = "request_snapshots"
        else:
            kind = "message_events"
    else:
        src.fail(1, "expected a JSON array of messages or an object with 'messages'")
    out = Parsed("openai", kind)
    builder = _Builder(src, out)
    src.records = len(elements)
    if kind == "request_snapshots" and isinstance(value, list):
        # An array of request snapshots: the newest one is the conversation.
        for element in elements:
            if not isinstance(element, dict) or not isinstance(element.get("messages"), list):
                src.bad(lines.get(id(element)), "a request snapshot needs a 'messages' array")
                continue
            request = element
        elements = request.get("messages", [])
        line = lines.get(id(request))
        for raw in elements:
            builder.message(raw, line)
    else:
        for raw in elements:
            line = lines.get(id(raw))
            if kind == "provider_responses_only":
                if not isinstance(raw, dict):
                    src.bad(line, "a response must be a JSON object")
                    continue
                builder.response(raw, line)
            else:
                builder.message(raw, line)
    response = as_dict(request.get("response"))
    if response is not None and _is_response(response):
        builder.response(response, None)
    _set_model(out, _model_of(request) or builder.response_model)
    wraps = isinstance(value, dict) and any(isinstance(value.get(k), list) for k in _ARRAYS)
    if keep_rest and wraps:
        rest = {k: v for k, v in value.items() if k not in _ARRAYS}
        if rest:
            src.keep(None, "document fields", rest)  # tools, kwargs, the response, cost ...
    return out


def parse_lines(src: Source) -> Parsed:
    """Read JSONL: one message, one request snapshot, or one response per line.

    Raises:
        ImportFormatError: a line that is not a JSON object or does not fit (strict mode).
    """
    rows = list(src.objects())
    kind: SourceFormat = _classify(rows[0][1]) if rows else "message_events"
    out = Parsed("openai", kind)
    builder = _Builder(src, out)
    if kind == "request_snapshots":
        last: tuple[int, dict[str, Any]] | None = None
        for number, row in rows:
            if isinstance(row.get("messages"), list):
                last = (number, row)
            else:
                src.bad(number, "a request snapshot needs a 'messages' array")
        if last is not None:
            number, row = last
            for raw in row["messages"]:
                builder.message(raw, number)
            response = as_dict(row.get("response"))
            if response is not None and _is_response(response):
                builder.response(response, number)
            _set_model(out, _model_of(row) or builder.response_model)
        return out
    for number, row in rows:
        if kind == "provider_responses_only":
            builder.response(row, number)
        else:
            builder.message(row, number)
    _set_model(out, builder.response_model)
    return out


_ARRAYS: Final = ("messages", "history")
_MAPPED_KEYS: Final = frozenset(
    {"role", "content", "tool_calls", "tool_call_id", "tool_call_ids", "name", "tool_name"}
    | {"function_call", "refusal", "reasoning_content", "thinking", "reasoning", "ok"}
)
_SWE_AGENT_KEYS: Final = frozenset({"trajectory", "info", "environment", "replay_config"})


def looks_like_swe_agent(value: object) -> bool:
    """Whether a decoded document is a SWE-agent ``.traj`` (a ``history`` of chat messages)."""
    if not isinstance(value, dict):
        return False
    history = as_list(value.get("history"))
    if history is None:
        return False
    if _SWE_AGENT_KEYS & value.keys():
        return True
    return any(isinstance(m, dict) and ("agent" in m or "message_type" in m) for m in history[:5])


def parse_swe_agent(src: Source) -> Parsed:
    """Read a SWE-agent trajectory: its ``history`` is the chat the model saw.

    The other top-level sections (``trajectory`` steps, ``info`` with the
    submission and model stats, ``environment``, ``replay_config``) are not
    messages; they are kept verbatim as unmapped records.

    Raises:
        ImportFormatError: not JSON, no ``history``, or a message that does not fit.
    """
    value, _ = src.document()
    if not isinstance(value, dict) or not isinstance(value.get("history"), list):
        src.fail(1, "expected a SWE-agent trajectory: an object with a 'history' array")
    out = parse_document(src, keep_rest=False)
    out.format = "swe-agent"
    out.agent = "swe-agent"
    for key, section in value.items():
        if key != "history":
            src.keep(None, f"{key[:40]} section", section)
    info = as_dict(value.get("info"))
    status = as_str(info.get("exit_status")) if info else None
    if status:
        out.details["exit_status"] = status
    return out


def parse(src: Source) -> Parsed:
    """Read an OpenAI chat transcript, as a JSON document or as JSONL.

    Raises:
        ImportFormatError: the file does not fit (names the line).
    """
    head = src.data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if head == b"[":
        return parse_document(src)
    if head == b"{":
        first = src.data.lstrip(b"\xef\xbb\xbf \t\r\n").split(b"\n", 1)[0]
        try:
            src.decode(first)
        except (ValueError, RecursionError, UnicodeError):
            return parse_document(src)  # a pretty-printed object
        if src.data.strip().count(b"\n") == 0:
            return parse_document(src)  # one line: a minified document
        return parse_lines(src)
    return parse_lines(src)
