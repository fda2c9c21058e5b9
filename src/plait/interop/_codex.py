"""OpenAI Codex CLI rollout JSONL (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Each line is ``{"timestamp", "type", "payload"}``. The conversation is the
``response_item`` lines: the Responses API items the model saw and wrote, so
the file is classified ``message_events``. The first ``session_meta`` gives
the session id, the provider, the base instructions (a system message) and,
for a sub-agent thread, its ``source`` and ``parent_thread_id``;
``turn_context`` gives the model. ``docs/importers.md`` has the full table.

* ``message`` items: ``user`` stays user (Codex's ``<environment_context>``
  and AGENTS.md messages included: the model saw them; they are marked
  ``added``, context Codex wrote, not the person's words), ``developer`` and
  ``system`` become system messages, ``assistant`` an assistant message.
* ``function_call``, ``custom_tool_call`` (freeform input, kept as
  ``{"input": ...}``), ``local_shell_call`` (its ``action``) and
  ``tool_search_call`` join the assistant message they follow (calls written
  in a row before their outputs are one response's parallel calls; a
  ``reasoning`` item starts a new response, even one whose text was removed); their
  ``*_output`` items become ``tool`` messages paired by ``call_id``. The
  output text is kept as the model saw it, and its success is read from every
  shape Codex writes: ``success`` on a structured output, JSON
  ``metadata.exit_code``, a leading ``Exit code: N``, or unified exec's
  ``Process exited with code N`` header line (``Process running with session
  ID N`` says nothing yet, and stays a success).
* ``reasoning`` items are not replayed: their summary text goes to the next
  assistant message's ``meta["thinking"]``; encrypted content is counted in
  ``meta["redacted_thinking"]``.
* ``event_msg`` ``token_count`` lines carry the usage of the model call they
  follow (``info.last_token_usage``; ``info`` is null before the first call). It
  goes on that call's assistant message as plait's ``meta["usage"]`` (D29:
  ``input_tokens`` with the cached part, ``output_tokens`` with the reasoning,
  ``cached_tokens``), so ``plait stats`` and the context report count Codex
  replies. Codex repeats a count (the same running total again at the next
  turn context), and older releases (0.47) wrote it *before* the call's items:
  a repeat is skipped, and a count with no assistant message waiting for it
  goes on the next assistant message (D280).
* ``compacted`` lines become a ``summary`` message folding everything before
  it: the ``message``, or else the text of its ``replacement_history``.
* ``event_msg`` lines are the UI's copy of the turn; they are kept verbatim as
  unmapped records, except a ``user_message`` whose text no ``user``
  ``response_item`` carries: that prompt is what the model was sent, and it
  becomes a user message where the event is.
* Hosted tools without an output item (``web_search_call``,
  ``image_generation_call``), ``ghost_snapshot``, inter-agent items, later
  ``session_meta`` lines (other threads) and ``turn_context`` lines are kept
  verbatim as unmapped records.

Rollouts from before ``session_meta`` start with a bare header ``{id,
timestamp, instructions, git}`` and hold the items bare, one per line, with
``{"record_type": "state"}`` lines between turns (kept verbatim); the items
are read by the same rules.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from plait.interop._parts import arguments, list_at, origin, parts_text, tool_output_text
from plait.interop._source import Item, Parsed, Source, as_dict, as_list, as_str
from plait.records import JSONValue

__all__ = ["ItemBuilder", "RESPONSE_ITEM_TYPES", "looks_like", "looks_like_legacy", "parse"]

_LINE_TYPES: Final = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted"}
)
_EXIT: Final = re.compile(r"^\s*Exit code:\s*(-?\d+)")
# Unified exec writes a header before the output: "Chunk ID: ...\nWall time: ...\n
# Process exited with code N\n..." (or "Process running with session ID N" while it runs).
_PROCESS_EXIT: Final = re.compile(r"^Process exited with code (-?\d+)\s*$", re.MULTILINE)
_HEADER_LINES: Final = 8
_CALLS: Final = {
    "function_call": "arguments",
    "custom_tool_call": "input",
    "local_shell_call": "action",
    "tool_search_call": "arguments",
}
_OUTPUTS: Final = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "tool_search_output",
    }
)


RESPONSE_ITEM_TYPES: Final = frozenset(
    {"message", "reasoning", "compaction", *_CALLS, *_OUTPUTS}
    | {"web_search_call", "file_search_call", "computer_call", "computer_call_output"}
    | {"image_generation_call", "code_interpreter_call", "mcp_call", "mcp_list_tools"}
)
"""Item ``type`` values of the Responses API (a line of bare items is one of these)."""


_CONTEXT: Final = (
    ("<environment_context>", "environment_context"),
    ("<user_instructions>", "user_instructions"),
    ("# AGENTS.md instructions", "agents_md"),
)
"""How the user messages Codex writes itself begin (the working folder and shell, the
AGENTS.md files it found), and the name each is kept as added context under."""


def codex_context(text: str) -> str | None:
    """The kind of context Codex put in a user message, or None for the person's words."""
    head = text.lstrip()
    return next((kind for start, kind in _CONTEXT if head.startswith(start)), None)


def looks_like(value: object) -> bool:
    """Whether a decoded first line is a Codex rollout line."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("type"), str)
        and value["type"] in _LINE_TYPES
        and isinstance(value.get("payload"), dict)
    )


def _count(raw: dict[str, Any], key: str) -> int:
    value = raw.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _usage(raw: object) -> dict[str, JSONValue] | None:
    """One model call's usage (``last_token_usage``) in plait's shape, or None for none.

    The Responses API counts cached tokens inside ``input_tokens`` and reasoning
    inside ``output_tokens``, as plait does (D29), so the numbers carry over as they are.
    """
    if not isinstance(raw, dict):
        return None
    usage: dict[str, JSONValue] = {
        "input_tokens": _count(raw, "input_tokens"),
        "output_tokens": _count(raw, "output_tokens"),
        "cached_tokens": _count(raw, "cached_input_tokens"),
    }
    return usage if any(usage.values()) else None


def _exit_ok(text: str) -> bool | None:
    """Whether a shell-style output reports success, or None if it says nothing."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            value: Any = json.loads(stripped)
        except (ValueError, RecursionError):
            value = None
        meta = as_dict(value.get("metadata")) if isinstance(value, dict) else None
        code = meta.get("exit_code") if meta else None
        if isinstance(code, int) and not isinstance(code, bool):
            return code == 0
        return None
    match = _EXIT.match(text)
    if match:
        return int(match.group(1)) == 0
    head = "\n".join(text.split("\n", _HEADER_LINES)[:_HEADER_LINES])
    match = _PROCESS_EXIT.search(head)
    return int(match.group(1)) == 0 if match else None


class ItemBuilder:
    """Turns Responses API items (what Codex and openai-agents record) into plait messages."""

    def __init__(self, src: Source, out: Parsed) -> None:
        self.src = src
        self.out = out
        self.names: dict[str, str] = {}
        self.thinking: list[str] = []
        self.redacted = 0
        self.meta_seen = False
        self.boundary = False  # a reasoning item began a new model response
        # Usage of model calls (Codex's token_count events): the last assistant message
        # not yet given its call's usage, a count waiting for its call's message, and the
        # running total last seen (a count repeated with the same total is no new call).
        self.unpriced: dict[str, JSONValue] | None = None
        self.pending_usage: dict[str, JSONValue] | None = None
        self.last_total: object = None

    def _assistant_meta(self, line: int | None, time: str | None) -> dict[str, JSONValue]:
        meta: dict[str, JSONValue] = {"source": origin(line, time=time)}
        if self.pending_usage is not None:
            meta["usage"] = self.pending_usage
            self.pending_usage = None
        if self.thinking:
            meta["thinking"] = list(self.thinking)
            self.thinking = []
        if self.redacted:
            meta["redacted_thinking"] = self.redacted
            self.redacted = 0
        return meta

    def session_meta(self, line: int, payload: dict[str, Any]) -> None:
        if self.meta_seen:
            return  # a later session_meta describes another thread; kept verbatim
        self.meta_seen = True
        out = self.out
        out.session_id = as_str(payload.get("id")) or as_str(payload.get("session_id"))
        out.provider = as_str(payload.get("model_provider"))
        for key in ("cli_version", "originator"):
            value = as_str(payload.get(key))
            if value:
                out.details[key] = value
        for key in ("forked_from_id", "parent_thread_id", "thread_source"):
            value = as_str(payload.get(key))
            if value:
                out.details[key] = value
        source = payload.get("source")
        if isinstance(source, str | dict):
            out.details["source"] = source  # "cli", "exec", or {"subagent": "review"}
        base = as_dict(payload.get("base_instructions"))
        instructions = as_str(base.get("text")) if base else as_str(payload.get("instructions"))
        if instructions:
            out.items.append(
                Item(
                    {
                        "role": "system",
                        "content": instructions,
                        "meta": {"source": origin(line, kind="base_instructions")},
                    },
                    line,
                )
            )

    def item(self, line: int | None, time: str | None, payload: dict[str, Any]) -> None:
        src = self.src
        itype = payload.get("type")
        if itype == "message":
            self._message(line, time, payload)
        elif itype == "reasoning":
            for part in as_list(payload.get("summary")) or ():
                text = as_str(part.get("text")) if isinstance(part, dict) else None
                if text:
                    self.thinking.append(text)
            for part in as_list(payload.get("content")) or ():
                text = as_str(part.get("text")) if isinstance(part, dict) else None
                if text:
                    self.thinking.append(text)
            if payload.get("encrypted_content"):
                self.redacted += 1
            self.boundary = True  # a response's output starts with its reasoning
            src.skip("reasoning item")
        elif isinstance(itype, str) and itype in _CALLS:
            self._call(line, time, itype, payload)
        elif isinstance(itype, str) and itype in _OUTPUTS:
            self._output(line, time, itype, payload)
        else:
            src.keep(line, f"{str(itype)[:40]} item", payload)

    def _message(self, line: int | None, time: str | None, payload: dict[str, Any]) -> None:
        src = self.src
        role = payload.get("role")
        text, images = parts_text(payload.get("content"), src, line)
        if role == "assistant":
            self.boundary = False
            msg: dict[str, JSONValue] = {
                "role": "assistant",
                "content": text,
                "meta": self._assistant_meta(line, time),
            }
        elif role in ("user", "developer", "system"):
            kind = "user" if role == "user" else "system"
            source = origin(line, time=time)
            if role == "developer":
                source["role"] = "developer"
            msg = {"role": kind, "content": text, "meta": {"source": source}}
            added = codex_context(text) if role == "user" else None
            if added is not None:
                msg["added"] = added
        else:
            src.bad(line, f"a message item has unknown role {role!r}")
            return
        if images and role != "developer" and role != "system":
            msg["images"] = images
        if role == "assistant":
            self._priced(msg)
        self.out.items.append(Item(msg, line))

    def _call(
        self, line: int | None, time: str | None, itype: str, payload: dict[str, Any]
    ) -> None:
        src = self.src
        call_id = as_str(payload.get("call_id")) or as_str(payload.get("id"))
        name = as_str(payload.get("name"))
        if itype == "local_shell_call":
            name = name or "local_shell"
        elif itype == "tool_search_call":
            name = name or "tool_search"
        if not call_id or not name:
            src.bad(line, f"a {itype} needs a string 'call_id' and 'name'")
            return
        raw = payload.get(_CALLS[itype])
        if itype == "custom_tool_call":
            args: dict[str, JSONValue] = {"input": raw if isinstance(raw, str) else ""}
            if not isinstance(raw, str):
                src.bad(line, f"custom tool call {call_id!r}: 'input' must be a string")
        else:
            args = arguments(raw, src, line, call_id)
        self.names[call_id] = name
        call: dict[str, JSONValue] = {"id": call_id, "name": name, "arguments": args}
        items = self.out.items
        last = items[-1].message if items else None
        joins = last is not None and last.get("role") == "assistant" and not self.boundary
        self.boundary = False
        if joins and last is not None:
            list_at(last, "tool_calls").append(call)
            return
        msg: dict[str, JSONValue] = {
            "role": "assistant",
            "content": "",
            "tool_calls": [call],
            "meta": self._assistant_meta(line, time),
        }
        self._priced(msg)
        items.append(Item(msg, line))

    def _priced(self, msg: dict[str, JSONValue]) -> None:
        """Note a new assistant message: one without usage waits for its call's count."""
        meta = msg.get("meta")
        self.unpriced = None if isinstance(meta, dict) and "usage" in meta else msg

    def token_count(self, payload: dict[str, Any]) -> None:
        """Put a ``token_count`` event's usage on the assistant message of its model call.

        The message written since the last count gets it; with none waiting (older
        Codex wrote the count ahead of the call's items) the next assistant message
        does. A repeated count, a null ``info`` and a call that counted
        nothing are skipped, so each model call is counted once.
        """
        info = as_dict(payload.get("info"))
        if info is None:
            return
        total = info.get("total_token_usage")
        seen = total if isinstance(total, dict) else info
        if seen == self.last_total:
            return  # the same count again (Codex repeats it at the next turn context)
        self.last_total = seen
        usage = _usage(info.get("last_token_usage"))
        if usage is None:
            return
        target = self.unpriced
        if target is not None and isinstance(target.get("meta"), dict):
            meta = target["meta"]
            assert isinstance(meta, dict)
            meta["usage"] = usage
            self.unpriced = None
        else:
            # A count already waiting belonged to a call that wrote no message (a
            # compaction, a cut-off reply): it stays unmapped with its event line.
            self.pending_usage = usage

    def _output(
        self, line: int | None, time: str | None, itype: str, payload: dict[str, Any]
    ) -> None:
        src = self.src
        call_id = as_str(payload.get("call_id"))
        if not call_id:
            src.bad(line, f"a {itype} needs a string 'call_id'")
            return
        output = payload.get("output")
        ok: bool | None = None
        if itype == "tool_search_output" and output is None:
            output = payload.get("tools")
        if isinstance(output, dict) and isinstance(output.get("content"), str):
            if isinstance(output.get("success"), bool):
                ok = output["success"]
            output = output["content"]
        text, images = tool_output_text(output, src, line)
        if ok is None:
            ok = _exit_ok(text)
        msg: dict[str, JSONValue] = {
            "role": "tool",
            "content": text,
            "tool_call_id": call_id,
            "ok": ok is not False,
            "meta": {"source": origin(line, time=time)},
        }
        name = self.names.get(call_id)
        if name:
            msg["tool_name"] = name
        if images:
            msg["images"] = images
        self.out.items.append(Item(msg, line))

    def prompt_event(self, line: int | None, time: str | None, payload: dict[str, Any]) -> None:
        """A prompt recorded only as an ``event_msg`` ``user_message``."""
        msg: dict[str, JSONValue] = {
            "role": "user",
            "content": str(payload.get("message")),
            "meta": {"source": origin(line, time=time, kind="event_msg")},
        }
        images = as_list(payload.get("images"))
        if images:
            msg["images"] = len(images)
        self.out.items.append(Item(msg, line))

    def compacted(self, line: int | None, time: str | None, payload: dict[str, Any]) -> None:
        text = as_str(payload.get("message")) or ""
        history = as_list(payload.get("replacement_history"))
        if not text.strip() and history:
            texts = []
            for entry in history:
                if isinstance(entry, dict) and entry.get("type") == "message":
                    part, _ = parts_text(entry.get("content"), self.src, line)
                    if part.strip():
                        texts.append(part)
            text = "\n\n".join(texts)
        if not text.strip():
            self.src.skip("empty compaction")
            return
        meta: dict[str, JSONValue] = {"source": origin(line, time=time, kind="compacted")}
        if history is not None:
            meta["replacement_history_items"] = len(history)
        self.out.items.append(Item({"role": "summary", "content": text, "meta": meta}, line))


def looks_like_legacy(value: object) -> bool:
    """Whether a decoded first line is the header of a rollout from before ``session_meta``.

    Those files start ``{"id", "timestamp", "instructions", "git"}`` and hold the
    Responses API items bare, one per line, with ``{"record_type": "state"}`` lines.
    """
    return (
        isinstance(value, dict)
        and isinstance(value.get("id"), str)
        and isinstance(value.get("timestamp"), str)
        and not {"type", "role", "payload", "plait", "messages"} & value.keys()
        and bool({"instructions", "git"} & value.keys())
    )


def _prompt_text(payload: dict[str, Any]) -> str:
    message = payload.get("message")
    return message.strip() if isinstance(message, str) else ""


def parse(src: Source) -> Parsed:
    """Read a Codex rollout file (current, or from before ``session_meta``).

    Raises:
        ImportFormatError: a line that is not a JSON object, without a string
            ``type`` or an object ``payload``, or an item that does not fit (strict mode).
    """
    out = Parsed("codex", "message_events", agent="codex")
    builder = ItemBuilder(src, out)
    rows = list(src.objects())
    if rows and looks_like_legacy(rows[0][1]):
        return _parse_legacy(src, out, builder, rows)
    # Prompts Codex recorded only as an event (no user response_item says them) are what
    # the model was sent all the same: they are placed where the event is.
    said = {
        text.strip()
        for _, record in rows
        if record.get("type") == "response_item"
        and isinstance(record.get("payload"), dict)
        and record["payload"].get("type") == "message"
        and record["payload"].get("role") == "user"
        for text in [
            parts_text(record["payload"].get("content"), Source(b"", strict=False), None)[0]
        ]
    }
    for line, record in rows:
        ltype = record.get("type")
        payload = record.get("payload")
        if not isinstance(ltype, str) or not isinstance(payload, dict):
            src.bad(line, "a rollout line needs a string 'type' and an object 'payload'")
            continue
        time = as_str(record.get("timestamp"))
        if ltype == "response_item":
            builder.item(line, time, payload)
        elif ltype == "session_meta":
            builder.session_meta(line, payload)
            src.keep(line, "session_meta line", record)
        elif ltype == "turn_context":
            model = as_str(payload.get("model"))
            if model:
                out.model = model
            src.keep(line, "turn_context line", record)
        elif ltype == "compacted":
            builder.compacted(line, time, payload)
        elif ltype == "event_msg" and payload.get("type") == "user_message":
            text = _prompt_text(payload)
            if text and text not in said:
                builder.prompt_event(line, time, payload)
            else:
                src.keep(line, "event_msg user_message", record)
        elif ltype == "event_msg":
            if payload.get("type") == "token_count":
                builder.token_count(payload)
            if payload.get("type") == "thread_name_updated":
                name = as_str(payload.get("thread_name"))
                if name and name.strip():
                    out.title = " ".join(name.split())[:200]
            src.keep(line, f"event_msg {str(payload.get('type'))[:40]}", record)
        else:
            src.keep(line, f"{ltype[:40]} line", record)
    return out


def _parse_legacy(
    src: Source, out: Parsed, builder: ItemBuilder, rows: list[tuple[int, dict[str, Any]]]
) -> Parsed:
    line, head = rows[0]
    out.details["layout"] = "before session_meta"
    builder.session_meta(line, head)
    src.keep(line, "header line", head)
    for line, record in rows[1:]:
        if "record_type" in record:
            src.keep(line, f"record_type {str(record['record_type'])[:40]}", record)
        elif isinstance(record.get("type"), str):
            builder.item(line, as_str(record.get("timestamp")), record)
        else:
            src.bad(line, "a rollout line needs a string 'type'")
    return out
