"""Claude Code records to plait messages: content blocks, attachments and API responses.

``_claude_code`` chooses which records of a file make the conversation; this module
turns those records, in file order, into plait message dicts: one assistant message
per API response, however many lines and results it was written as, tool results
paired with their calls, and attachments placed after the results they follow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, Final

from plait.interop._parts import list_at, origin
from plait.interop._source import Item, Parsed, Source, as_dict, as_list, as_str
from plait.records import JSONValue

__all__ = [
    "LineBuilder",
    "attachment_text",
    "blocks_of",
    "conversation",
    "result_ids",
    "slash_command",
]

_COMMAND_PART: Final = re.compile(
    r"<command-(name|message|args|contents)>(.*?)</command-\1>", re.DOTALL
)
"""One element of the markup Claude Code records a slash command as."""


def slash_command(text: str) -> str | None:
    """What the person typed, when a prompt is Claude Code's record of a slash command.

    Claude Code writes ``/init`` as ``<command-message>init is analyzing your
    codebase…</command-message>`` and ``<command-name>/init</command-name>``, with
    ``<command-args>`` (what followed the name) and sometimes ``<command-contents>``.

    Returns:
        ``/name args`` (``/name`` without args), or None when the text is anything
        but those elements and the whitespace between them, or names no command.
    """
    parts: dict[str, str] = {}
    pos = 0
    for match in _COMMAND_PART.finditer(text):
        if text[pos : match.start()].strip():
            return None
        parts.setdefault(match.group(1), match.group(2))
        pos = match.end()
    name = parts.get("name", "").strip()
    if text[pos:].strip() or not name or any(c.isspace() for c in name):
        return None
    name = name if name.startswith("/") else "/" + name
    args = parts.get("args", "").strip()
    return f"{name} {args}" if args else name


def blocks_of(message: dict[str, Any]) -> list[Any] | str | None:
    content = message.get("content")
    if isinstance(content, str | list):
        return content
    return None


def result_ids(record: dict[str, Any]) -> list[str] | None:
    """The tool_use_ids of a user record made only of tool_result blocks, else None."""
    message = as_dict(record.get("message"))
    content = as_list(message.get("content")) if message else None
    if not content:
        return None
    ids: list[str] = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            return None
        call = as_str(block.get("tool_use_id"))
        if call is None:
            return None
        ids.append(call)
    return ids


def _content_blocks(
    src: Source, line: int, content: list[Any] | str | None
) -> Iterator[str | dict[str, Any]]:
    """A message's content as strings and block objects; anything else is reported as bad."""
    for block in [content] if isinstance(content, str) else content or ():
        if isinstance(block, str | dict):
            yield block
        else:
            src.bad(line, "a content block must be an object")


def _texts(value: object) -> list[str]:
    """The non-blank strings of a string or a list of strings."""
    items = [value] if isinstance(value, str) else as_list(value) or ()
    return [v for v in items if isinstance(v, str) and v.strip()]


def attachment_text(attachment: dict[str, Any]) -> str | None:
    """The text an attachment puts in front of the model, when the file records it.

    None for attachments that are bookkeeping (hook runs, permissions, UI
    messages) and for reminders whose wording Claude Code generates from flags
    the file does not spell out; those are kept verbatim as unmapped records.
    """
    kind = attachment.get("type")
    texts: list[str] = []
    if kind in ("hook_additional_context", "skill_listing"):
        texts = _texts(attachment.get("content"))
    elif kind in ("deferred_tools_delta", "agent_listing_delta"):
        texts = _texts(attachment.get("addedLines"))
    elif kind == "mcp_instructions_delta":
        texts = _texts(attachment.get("addedBlocks"))
    elif kind in ("task_reminder", "todo_reminder"):
        items = as_list(attachment.get("content"))
        if items:
            texts = [json.dumps(items, ensure_ascii=False)]
    elif kind == "queued_command":
        texts = _texts(attachment.get("prompt"))
    elif kind == "edited_text_file":
        snippet = as_str(attachment.get("snippet"))
        if snippet:
            texts = [f"{attachment.get('filename', '')}\n{snippet}".lstrip()]
    elif kind == "nested_memory":
        memory = as_dict(attachment.get("content"))
        texts = _texts(memory.get("content")) if memory else []
    elif kind == "file":
        content = as_dict(attachment.get("content"))
        file = as_dict(content.get("file")) if content else None
        texts = _texts(file.get("content")) if file else []
    elif kind == "invoked_skills":
        for skill in as_list(attachment.get("skills")) or ():
            if isinstance(skill, dict):
                texts.extend(_texts(skill.get("content")))
    elif kind in ("total_tokens_reminder", "silent_turn_reminder", "batching_reminder_sent"):
        texts = _texts(attachment.get("text"))
    elif kind == "hook_blocking_error":
        blocking = as_dict(attachment.get("blockingError"))
        texts = _texts(blocking.get("blockingError")) if blocking else []
    return "\n".join(texts) if texts else None


class LineBuilder:
    """Builds plait messages from a conversation's selected records, one record at a time."""

    def __init__(self, src: Source, out: Parsed) -> None:
        self.src = src
        self.out = out
        self.names: dict[str, str] = {}  # tool_use id -> tool name
        self.open_id: str | None = None  # message.id of the API response being built
        self.open_msg: dict[str, JSONValue] | None = None  # ... and its assistant message
        self.pending: set[str] = set()  # calls of that response not answered yet
        self.deferred: list[Item] = []  # attachments held until the calls are answered

    def flush(self) -> None:
        """Place the attachments held back while calls were waiting for their results."""
        self.out.items.extend(self.deferred)
        self.deferred = []

    def system(self, line: int, record: dict[str, Any]) -> None:
        """A system prompt written by plait's Claude Code exporter."""
        self.flush()
        text = as_str(record.get("content"))
        if text is None:
            self.src.bad(line, "a plait_system_prompt record needs a string 'content'")
            return
        meta: dict[str, JSONValue] = {"source": self._origin(line, record)}
        self.out.items.append(Item({"role": "system", "content": text, "meta": meta}, line))

    def attachment(self, line: int, record: dict[str, Any]) -> None:
        attachment = record["attachment"]
        kind = str(attachment.get("type"))[:40]
        text = attachment_text(attachment)
        if text is None:
            self.src.keep(line, f"attachment {kind}", record)
            return
        source = self._origin(line, record)
        source["attachment"] = kind
        meta: dict[str, JSONValue] = {"source": source}
        # Sent to the model as a user turn, but Claude Code wrote it, not the person.
        item = Item({"role": "user", "content": text, "added": kind, "meta": meta}, line)
        # Claude Code sends an attachment after the tool results of the turn it joins;
        # placed before them it would split a call from its result.
        if self.pending:
            self.deferred.append(item)
        else:
            self.out.items.append(item)

    def assistant(self, line: int, record: dict[str, Any], message: dict[str, Any]) -> None:
        src = self.src
        if record.get("isApiErrorMessage") is True:
            # Claude Code's own notice of a failed request ("Login expired ..."), written as
            # a <synthetic> assistant line: no model wrote it, and it is not sent back.
            src.keep(line, "api error message", record)
            return
        content = blocks_of(message)
        texts: list[str] = []
        thinking: list[str] = []
        redacted = 0
        images = 0
        calls: list[JSONValue] = []
        for block in _content_blocks(src, line, content):
            if isinstance(block, str):
                texts.append(block)
                continue
            btype = block.get("type")
            if btype == "text":
                text = block.get("text")
                if not isinstance(text, str):
                    src.bad(line, "a text block needs a string 'text'")
                elif text.strip():
                    texts.append(text)
            elif btype == "thinking":
                thought = as_str(block.get("thinking"))
                if thought:
                    thinking.append(thought)
                src.skip("thinking block")
            elif btype == "redacted_thinking":
                redacted += 1
                src.skip("redacted thinking block")
            elif btype == "tool_use":
                call_id, name = as_str(block.get("id")), as_str(block.get("name"))
                args = block.get("input", {})
                if not call_id or not name:
                    src.bad(line, "a tool_use block needs a string 'id' and 'name'")
                    continue
                if not isinstance(args, dict):
                    src.bad(line, f"tool_use {call_id!r}: 'input' must be an object")
                    args = {"_raw": args}
                self.names[call_id] = name
                calls.append({"id": call_id, "name": name, "arguments": args})
            elif btype == "image":
                images += 1
            else:
                src.keep(line, f"content block {str(btype)[:40]}", block)
        model = as_str(message.get("model"))
        if model and model != "<synthetic>":
            self.out.model = model
        usage = _usage(message.get("usage"))
        message_id = as_str(message.get("id"))
        last = self.open_msg
        if message_id is not None and message_id == self.open_id and last is not None:
            # Another line of the same API response, maybe after the results of its
            # earlier calls (parallel calls are written interleaved with their results):
            # join it to that response's message, which stays before those results.
            if texts:
                last["content"] = "\n".join(filter(None, [str(last.get("content", "")), *texts]))
            if calls:
                list_at(last, "tool_calls").extend(calls)
            if images:
                last["images"] = _count(last.get("images")) + images
            joined = last["meta"]
            assert isinstance(joined, dict)
            if thinking:
                list_at(joined, "thinking").extend(thinking)
            if redacted:
                joined["redacted_thinking"] = _count(joined.get("redacted_thinking")) + redacted
            if usage is not None:
                joined["usage"] = usage  # each line repeats it; the last has the whole reply's
            self.pending.update(_call_ids(calls))
            return
        self.flush()
        msg: dict[str, JSONValue] = {"role": "assistant", "content": "\n".join(texts)}
        if calls:
            msg["tool_calls"] = calls
        if images:
            msg["images"] = images
        meta: dict[str, JSONValue] = {"source": self._origin(line, record, model)}
        if thinking:
            meta["thinking"] = list(thinking)
        if redacted:
            meta["redacted_thinking"] = redacted
        if usage is not None:
            meta["usage"] = usage
        msg["meta"] = meta
        self.out.items.append(Item(msg, line))
        self.open_id = message_id
        self.open_msg = msg
        self.pending = _call_ids(calls)

    def _origin(
        self, line: int, record: dict[str, Any], model: str | None = None
    ) -> dict[str, JSONValue]:
        return origin(
            line,
            id=as_str(record.get("uuid")),
            time=as_str(record.get("timestamp")),
            model=model,
            is_meta=True if record.get("isMeta") is True else None,
        )

    def user(self, line: int, record: dict[str, Any], message: dict[str, Any]) -> None:
        src = self.src
        content = blocks_of(message)
        prompt = result_ids(record) is None
        texts: list[str] = []
        images = 0
        for block in _content_blocks(src, line, content):
            if isinstance(block, str):
                texts.append(block)
                continue
            btype = block.get("type")
            if btype == "tool_result":
                self._result(line, record, block)
            elif btype == "text":
                text = block.get("text")
                if isinstance(text, str):
                    texts.append(text)
                else:
                    src.bad(line, "a text block needs a string 'text'")
            elif btype == "image":
                images += 1
            else:
                src.keep(line, f"content block {str(btype)[:40]}", block)
        if prompt:
            # A prompt (not only results) ends the API response being built; its results,
            # if the record has any, came first.
            self.open_id = self.open_msg = None
            self.pending = set()
            self.flush()
        text = "\n".join(texts)
        if not text and not images:
            if not isinstance(content, list) or not any(
                isinstance(b, dict) and b.get("type") == "tool_result" for b in content
            ):
                src.keep(line, "empty message", record)
            return
        meta: dict[str, JSONValue] = {"source": self._origin(line, record)}
        if record.get("isCompactSummary") is True:
            msg: dict[str, JSONValue] = {"role": "summary", "content": text, "meta": meta}
        else:
            msg = {"role": "user", "content": text, "meta": meta}
            if images:
                msg["images"] = images
            if record.get("isMeta") is True:
                # Claude Code's own text for the model (a command's expanded prompt, its
                # caveats), not what the person typed.
                msg["added"] = "meta"
            elif (typed := slash_command(text)) is not None:
                # A slash command: the person typed "/init ARGS"; Claude Code recorded
                # it wrapped in markup (its expanded prompt follows, marked isMeta).
                # History, lists and titles show what was typed; the markup is kept.
                msg["content"] = typed
                meta["command_markup"] = text
        self.out.items.append(Item(msg, line))

    def _result(self, line: int, record: dict[str, Any], block: dict[str, Any]) -> None:
        src = self.src
        call_id = as_str(block.get("tool_use_id"))
        if not call_id:
            src.bad(line, "a tool_result block needs a string 'tool_use_id'")
            return
        content = block.get("content")
        texts: list[str] = []
        images = 0
        references: list[JSONValue] = []
        for part in [content] if isinstance(content, str) else as_list(content) or ():
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and part.get("type") == "text":
                texts.append(str(part.get("text", "")))
            elif isinstance(part, dict) and part.get("type") == "image":
                images += 1
            elif isinstance(part, dict) and part.get("type") == "tool_reference":
                # ToolSearch answers with references the API expands into tool definitions.
                name = as_str(part.get("tool_name"))
                if name:
                    references.append(name)
                    texts.append(f"tool_reference: {name}")
                else:
                    src.keep(line, "tool result part tool_reference", part)
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                src.keep(line, f"tool result part {str(kind)[:40]}", part)
        if content is not None and not isinstance(content, str | list):
            src.bad(line, f"tool_result {call_id!r}: 'content' must be a string or a list")
        meta: dict[str, JSONValue] = {"source": self._origin(line, record)}
        if references:
            meta["tool_references"] = references
        used = as_dict(record.get("toolUseResult"))
        agent_id = as_str(used.get("agentId")) if used else None
        if agent_id:
            meta["subagent"] = {"agent_id": agent_id}
        msg: dict[str, JSONValue] = {
            "role": "tool",
            "content": "\n".join(texts),
            "tool_call_id": call_id,
            "ok": block.get("is_error") is not True,
            "meta": meta,
        }
        name = self.names.get(call_id)
        if name:
            msg["tool_name"] = name
        if images:
            msg["images"] = images
        self.out.items.append(Item(msg, line))
        self.pending.discard(call_id)
        if not self.pending:
            self.flush()


def conversation(src: Source, out: Parsed, records: list[tuple[int, dict[str, Any]]]) -> None:
    """Build the messages of ``records`` (already selected, in file order) into ``out``."""
    builder = LineBuilder(src, out)
    for line, record in records:
        if record["type"] == "attachment":
            builder.attachment(line, record)
        elif record["type"] == "system":
            builder.system(line, record)
        elif record["type"] == "assistant":
            builder.assistant(line, record, record["message"])
        else:
            builder.user(line, record, record["message"])
    builder.flush()


def _usage(raw: object) -> dict[str, JSONValue] | None:
    """A response's token usage as plait keeps it (``input_tokens`` with the cached part).

    The Messages API counts the prompt in three parts: ``input_tokens`` (not cached),
    ``cache_read_input_tokens`` and ``cache_creation_input_tokens``. plait's
    ``input_tokens`` is the whole prompt and ``cached_tokens`` the part read from the
    cache (D29), so ``plait stats`` and the context report count an imported reply as
    they count one plait made.
    """
    if not isinstance(raw, dict):
        return None
    parts = [
        raw.get(k)
        for k in (
            "input_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
            "output_tokens",
        )
    ]
    fresh, read, made, out = (
        p if isinstance(p, int) and not isinstance(p, bool) and p >= 0 else 0 for p in parts
    )
    if not isinstance(raw.get("output_tokens"), int):
        return None
    return {"input_tokens": fresh + read + made, "output_tokens": out, "cached_tokens": read}


def _call_ids(calls: list[JSONValue]) -> set[str]:
    """The ids of the tool calls this builder made (each an object with a string ``id``)."""
    return {c["id"] for c in calls if isinstance(c, dict) and isinstance(c["id"], str)}


def _count(value: JSONValue) -> int:
    """A count this builder kept on a message being joined (none yet: 0)."""
    return value if isinstance(value, int) else 0
