"""Claude Code session JSONL (``~/.claude/projects/<project>/<session>.jsonl``).

Each line is a record with a ``type``. ``user`` and ``assistant`` records carry
an Anthropic Messages API ``message``; ``attachment`` records carry context
Claude Code adds to the next request. The file is classified
``message_events``. ``docs/importers.md`` lists every record type and
attachment type and what becomes of it.

How the conversation is rebuilt:

* **Branches.** Records form a tree through ``parentUuid``; a rewind leaves an
  abandoned branch in the file. The conversation is the path from the newest
  record back to the root, following ``logicalParentUuid`` across a
  ``compact_boundary``. Lines of an API message on that path that hang off it
  (Claude Code chains a parallel call's line, and its result, off the line
  before) are kept, so are the results answering its calls and the
  attachments hanging off a kept record. A file whose records are not linked
  (no ``parentUuid``, duplicate or missing uuids) is read in file order.
* **One message per API response.** Claude Code writes one line per content
  block; from 2.1.x the lines of one response with parallel ``tool_use``
  blocks are interleaved with their ``tool_result`` lines. Every line with the
  ``message.id`` of the response being built joins its assistant message
  (text, thinking and calls), however many results came between; a prompt
  ends the response.
* **Sub-agents.** The main model sees only a ``Task`` call's result, so a
  sub-agent's conversation is placed there, in that ``tool`` message's
  ``meta["subagent"]`` (``messages`` as plait message dicts): records with
  ``isSidechain: true`` stored inline (1.x) are matched to the call whose
  ``prompt`` their first prompt is, and a 2.x sub-agent file
  ``<session>/subagents/agent-<id>.jsonl`` beside the session is read for the
  result whose ``toolUseResult.agentId`` names it. Inline records no call
  matches are kept verbatim. A file holding nothing but sidechain records (a
  ``subagents/agent-*.jsonl`` file imported on its own) is the sub-agent's own
  conversation and is imported whole.
* **Tool results** come back inside user records (``tool_result`` blocks) and
  become ``tool`` messages paired by ``tool_use_id``; ``is_error`` sets
  ``ok: false``. ``tool_reference`` parts (ToolSearch's answer, which the API
  expands into tool definitions) become ``tool_reference: <name>`` lines and
  ``meta["tool_references"]``. Any text in the same record follows as a user
  message.
* **Attachments** the model sees (hook additional context, skill, agent and
  deferred-tool listings, MCP instructions, queued prompts, edited-file
  snippets, nested memory, task reminders with items ...) become user
  messages (``meta["source"]["attachment"]`` names the type), placed after
  the results of the response they follow, as Claude Code sends them. Those
  whose wording Claude Code generates from flags the file does not spell out
  (``plan_mode``, ``auto_mode``, an empty ``task_reminder``), and bookkeeping
  (``hook_success``, ``hook_system_message``, ``command_permissions`` ...), are
  kept verbatim as unmapped records.
* **Compaction.** A user record with ``isCompactSummary: true`` becomes a
  ``summary`` message folding everything before it, so ``history()`` starts
  there and ``history(full=True)`` still shows what it folded.
* **API errors.** An assistant record with ``isApiErrorMessage: true`` is
  Claude Code's notice of a failed request (``model: "<synthetic>"``); no
  model wrote it and it is not sent back, so it is kept verbatim, not a message.
* **Thinking.** ``thinking`` blocks are not replayed (their signatures are tied to
  the original request); their text is kept in the message's
  ``meta["thinking"]``. ``redacted_thinking`` blocks are counted in
  ``meta["redacted_thinking"]``.
* **Images** are counted (plait records keep the count, not the bytes).
* **Titles.** ``summary`` lines (the session-list title Claude Code generates,
  not a compaction), ``custom-title`` and ``ai-title`` give the session a title.
* Every other record (``progress``, ``file-history-snapshot``,
  ``queue-operation``, ``system``, ``permission-mode``, ``last-prompt`` ...)
  is kept verbatim as an unmapped record; a ``system`` record with subtype
  ``plait_system_prompt`` (what plait's exporter writes) is a system message.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from plait.errors import ImportFormatError
from plait.interop._parts import origin
from plait.interop._read import read_source
from plait.interop._source import Item, Parsed, Source, as_dict, as_list, as_str
from plait.records import JSONValue

__all__ = ["looks_like", "parse"]

_MESSAGE_TYPES: Final = frozenset({"user", "assistant"})
_SYSTEM_PROMPT: Final = "plait_system_prompt"  # the subtype plait's exporter writes
_MAX_DEPTH: Final = 3  # sub-agents of sub-agents, but never a loop of files
RECORD_TYPES: Final = frozenset(
    {
        "user",
        "assistant",
        "summary",
        "system",
        "progress",
        "file-history-snapshot",
        "queue-operation",
        "attachment",
        "custom-title",
        "ai-title",
    }
)
"""Record types that only Claude Code writes (enough to recognise a file by one line)."""
_KNOWN_BLOCKS_SKIPPED: Final = frozenset(
    {"server_tool_use", "web_search_tool_result", "document", "fallback", "search_result"}
)


def looks_like(value: object) -> bool:
    """Whether a decoded line is a Claude Code record."""
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return False
    if "payload" in value or "role" in value:
        return False
    if value["type"] in RECORD_TYPES:
        return True
    return bool({"sessionId", "parentUuid", "leafUuid"} & value.keys())


def _blocks(message: dict[str, Any]) -> list[Any] | str | None:
    content = message.get("content")
    if isinstance(content, str | list):
        return content
    return None


def _content_blocks(
    src: Source, line: int, content: list[Any] | str | None
) -> Iterator[str | dict[str, Any]]:
    """A message's content as strings and block objects; anything else is reported as bad."""
    for block in [content] if isinstance(content, str) else content or ():
        if isinstance(block, str | dict):
            yield block
        else:
            src.bad(line, "a content block must be an object")


def _is_result_only(record: dict[str, Any]) -> list[str] | None:
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


def _call_ids(record: dict[str, Any]) -> Iterable[str]:
    message = as_dict(record.get("message"))
    for block in as_list(message.get("content")) or () if message else ():
        if isinstance(block, dict) and block.get("type") == "tool_use":
            call = as_str(block.get("id"))
            if call:
                yield call


def _select(
    src: Source, messages: list[tuple[int, dict[str, Any]]], everything: list[dict[str, Any]]
) -> list[tuple[int, dict[str, Any]]]:
    """The records on the active branch (see the module docstring), in file order."""
    if not messages or any(
        "parentUuid" not in r for _, r in messages if r["type"] in _MESSAGE_TYPES
    ):
        return messages
    by_uuid: dict[str, dict[str, Any]] = {}
    for record in everything:
        uuid = record.get("uuid")
        if isinstance(uuid, str):
            if uuid in by_uuid:
                return messages  # duplicate uuids: the tree cannot be trusted
            by_uuid[uuid] = record
    chain: set[str] = set()
    current: dict[str, Any] | None = messages[-1][1]
    while current is not None:
        uuid = current.get("uuid")
        if not isinstance(uuid, str) or uuid in chain:
            return messages  # a record without a uuid, or a cycle
        chain.add(uuid)
        parent = current.get("parentUuid")
        if parent is None:
            parent = current.get("logicalParentUuid")
        current = by_uuid.get(parent) if isinstance(parent, str) else None
    # Claude Code writes each content block of one API message as its own line, and a
    # parallel call's line (with its result after it) can hang off the line before it
    # rather than sit on the path: keep every line of a message on the path, and the
    # results that answer its calls.
    on_path = {
        _message_id(r) for _, r in messages if _uuid(r) in chain and r["type"] == "assistant"
    }
    on_path.discard(None)
    kept_uuids = {
        _uuid(r)
        for _, r in messages
        if _uuid(r) in chain or (r["type"] == "assistant" and _message_id(r) in on_path)
    }
    calls: set[str] = set()
    answered: set[str] = set()
    for _, record in messages:
        if _uuid(record) in kept_uuids:
            calls.update(_call_ids(record))
            if _uuid(record) in chain:
                answered.update(_is_result_only(record) or ())
    kept: list[tuple[int, dict[str, Any]]] = []
    for line, record in messages:
        if _uuid(record) in kept_uuids:
            kept.append((line, record))
            continue
        if record["type"] == "attachment" and record.get("parentUuid") in kept_uuids:
            # Hooks chain their attachments off the record they ran after, off the path.
            kept_uuids.add(_uuid(record))
            kept.append((line, record))
            continue
        ids = _is_result_only(record)
        if ids and all(i in calls and i not in answered for i in ids):
            answered.update(ids)
            kept_uuids.add(_uuid(record))
            kept.append((line, record))  # the result of a call off the path
        else:
            src.keep(line, "abandoned branch", record)
    return kept


def _uuid(record: dict[str, Any]) -> str | None:
    return as_str(record.get("uuid"))


def _message_id(record: dict[str, Any]) -> str | None:
    message = as_dict(record.get("message"))
    return as_str(message.get("id")) if message else None


def _texts(value: object) -> list[str]:
    """The non-blank strings of a string or a list of strings."""
    items = [value] if isinstance(value, str) else as_list(value) or ()
    return [v for v in items if isinstance(v, str) and v.strip()]


def _attachment_text(attachment: dict[str, Any]) -> str | None:
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


class _Builder:
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
        text = _attachment_text(attachment)
        if text is None:
            self.src.keep(line, f"attachment {kind}", record)
            return
        meta: dict[str, JSONValue] = {"source": self._origin(line, record)}
        meta["source"]["attachment"] = kind
        item = Item({"role": "user", "content": text, "meta": meta}, line)
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
        content = _blocks(message)
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
        message_id = as_str(message.get("id"))
        last = self.open_msg
        if message_id is not None and message_id == self.open_id and last is not None:
            # Another line of the same API response, maybe after the results of its
            # earlier calls (parallel calls are written interleaved with their results):
            # join it to that response's message, which stays before those results.
            if texts:
                last["content"] = "\n".join(filter(None, [str(last.get("content", "")), *texts]))
            if calls:
                last.setdefault("tool_calls", [])
                last["tool_calls"].extend(calls)
            if images:
                last["images"] = int(last.get("images", 0)) + images
            joined = last["meta"]
            assert isinstance(joined, dict)
            if thinking:
                joined.setdefault("thinking", [])
                joined["thinking"].extend(thinking)
            if redacted:
                joined["redacted_thinking"] = int(joined.get("redacted_thinking", 0)) + redacted
            self.pending.update(c["id"] for c in calls if isinstance(c, dict))
            return
        self.flush()
        msg: dict[str, JSONValue] = {"role": "assistant", "content": "\n".join(texts)}
        if calls:
            msg["tool_calls"] = calls
        if images:
            msg["images"] = images
        meta: dict[str, JSONValue] = {"source": self._origin(line, record, model)}
        if thinking:
            meta["thinking"] = thinking
        if redacted:
            meta["redacted_thinking"] = redacted
        msg["meta"] = meta
        self.out.items.append(Item(msg, line))
        self.open_id = message_id
        self.open_msg = msg
        self.pending = {c["id"] for c in calls if isinstance(c, dict)}

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
        content = _blocks(message)
        prompt = _is_result_only(record) is None
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


def _clean_title(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    return " ".join(value.split())[:200] or None


def _conversation(src: Source, out: Parsed, records: list[tuple[int, dict[str, Any]]]) -> None:
    """Build the messages of ``records`` (already selected, in file order) into ``out``."""
    builder = _Builder(src, out)
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


def _prompt_of(record: dict[str, Any]) -> str:
    content = record["message"]["content"] if record["type"] == "user" else None
    if isinstance(content, str):
        return content.strip()
    texts = [
        b.get("text") for b in content or () if isinstance(b, dict) and b.get("type") == "text"
    ]
    return "\n".join(t for t in texts if isinstance(t, str)).strip()


def _subagent_calls(out: Parsed) -> dict[str, Item]:
    """The result of every call that started a sub-agent (a ``prompt`` argument), by call id."""
    prompts: dict[str, str] = {}
    for item in out.items:
        for call in item.message.get("tool_calls") or ():
            if isinstance(call, dict):
                args = call.get("arguments")
                prompt = args.get("prompt") if isinstance(args, dict) else None
                if isinstance(prompt, str):
                    prompts[str(call["id"])] = prompt.strip()
    return {
        prompts[str(item.message.get("tool_call_id"))]: item
        for item in out.items
        if item.message.get("role") == "tool" and str(item.message.get("tool_call_id")) in prompts
    }


def _place_inline(src: Source, out: Parsed, records: list[tuple[int, dict[str, Any]]]) -> None:
    """Put each inline sub-agent conversation on the result of the call that started it.

    A sub-agent's records hang off a root whose prompt is the ``Task`` call's
    ``prompt``. The conversation is stored in that result's ``meta["subagent"]``
    (the main model saw only the result); one no call matches is kept verbatim.
    """
    if not records:
        return
    parents = {_uuid(r): r.get("parentUuid") for _, r in records}
    groups: dict[str | None, list[tuple[int, dict[str, Any]]]] = {}
    for line, record in records:
        root = _uuid(record)
        seen: set[str | None] = set()
        while parents.get(root) in parents and root not in seen:
            seen.add(root)
            root = parents[root]
        groups.setdefault(root, []).append((line, record))
    results = _subagent_calls(out)
    for group in groups.values():
        first = next((r for _, r in group if r["type"] == "user"), None)
        target = results.pop(_prompt_of(first), None) if first is not None else None
        if target is None:
            for line, record in group:
                src.keep(line, "sidechain record", record)
            continue
        sub = Parsed("claude-code", "message_events")
        _conversation(src, sub, group)
        meta = target.message["meta"]
        assert isinstance(meta, dict)
        meta["subagent"] = {
            "inline": True,
            "records": len(group),
            "messages": [item.message for item in sub.items],
        }


def _place_files(src: Source, out: Parsed, depth: int) -> None:
    """Put each sub-agent's own file (``<session>/subagents/agent-<id>.jsonl``) on its result.

    Claude Code 2.x writes a sub-agent's conversation to its own file and names it
    in the ``Task`` result's ``toolUseResult.agentId``. When the file is beside the
    session, it is read (leniently: a cut-off sub-agent file does not fail the
    import) and its messages are stored in the result's ``meta["subagent"]``.
    """
    if src.path is None:
        return
    folder = Path(src.path).with_suffix("") / "subagents"
    if not folder.is_dir():
        return
    for item in out.items:
        meta = item.message.get("meta")
        sub = meta.get("subagent") if isinstance(meta, dict) else None
        agent_id = sub.get("agent_id") if isinstance(sub, dict) else None
        if not isinstance(sub, dict) or not isinstance(agent_id, str) or "messages" in sub:
            continue
        path = folder / f"agent-{agent_id}.jsonl"
        if not path.is_file():
            continue
        try:
            data = read_source(path)
        except ImportFormatError as exc:
            sub["problems"] = [exc.reason]  # the main conversation does not depend on it
            continue
        nested = Source(data, path=str(path), strict=False)
        parsed = parse(nested, depth=depth + 1)
        sub["file"] = f"subagents/{path.name}"
        sub["records"] = nested.records
        sub["messages"] = [i.message for i in parsed.items]
        if nested.problems:
            sub["problems"] = list(nested.problems)
        src.skip("sub-agent file read")


def parse(src: Source, *, depth: int = 0) -> Parsed:
    """Read a Claude Code session file.

    Raises:
        ImportFormatError: a line that is not a JSON object, a record without a
            ``type``, a user or assistant record without a ``message`` object,
            a malformed content block (strict mode).
    """
    out = Parsed("claude-code", "message_events", provider="anthropic", agent="claude-code")
    everything: list[dict[str, Any]] = []
    messages: list[tuple[int, dict[str, Any]]] = []
    titles: dict[str, str] = {}
    summaries: list[tuple[str | None, str]] = []
    for line, record in src.objects():
        rtype = record.get("type")
        if not isinstance(rtype, str):
            src.bad(line, "a record needs a string 'type'")
            continue
        everything.append(record)
        if out.session_id is None:
            out.session_id = as_str(record.get("sessionId"))
        if rtype == "attachment":
            if as_dict(record.get("attachment")) is None:
                src.bad(line, "an attachment record needs an 'attachment' object")
                continue
            messages.append((line, record))
        elif rtype in _MESSAGE_TYPES:
            message = as_dict(record.get("message"))
            if message is None:
                src.bad(line, f"a {rtype} record needs a 'message' object")
                continue
            if _blocks(message) is None:
                src.bad(line, f"a {rtype} message needs 'content' (a string or a list)")
                continue
            messages.append((line, record))
            version = as_str(record.get("version"))
            if version:
                out.details["version"] = version
        elif rtype == "system" and record.get("subtype") == _SYSTEM_PROMPT:
            messages.append((line, record))  # plait's export of a system message
        elif rtype == "summary":
            text = _clean_title(record.get("summary"))
            if text:
                summaries.append((as_str(record.get("leafUuid")), text))
        elif rtype == "custom-title":
            text = _clean_title(record.get("customTitle") or record.get("title"))
            if text:
                titles["custom"] = text
        elif rtype == "ai-title":
            text = _clean_title(record.get("aiTitle") or record.get("title"))
            if text:
                titles["ai"] = text
        else:
            src.keep(line, f"{rtype[:40]} record", record)
    main = [(n, r) for n, r in messages if r.get("isSidechain") is not True]
    sidechain: list[tuple[int, dict[str, Any]]] = []
    if any(r["type"] != "attachment" for _, r in main):
        sidechain = [(n, r) for n, r in messages if r.get("isSidechain") is True]
    else:
        main = messages
        if messages:
            out.details["sidechain"] = True
            agent_id = as_str(messages[0][1].get("agentId"))
            if agent_id:
                out.details["agent_id"] = agent_id
    selected = _select(src, main, everything)
    _conversation(src, out, selected)
    _place_inline(src, out, sidechain)
    if depth < _MAX_DEPTH:
        _place_files(src, out, depth)
    uuids = {_uuid(r) for _, r in selected}
    leaf_titles = [t for leaf, t in summaries if leaf in uuids]
    out.title = (
        titles.get("custom")
        or (leaf_titles[-1] if leaf_titles else None)
        or (summaries[-1][1] if summaries else None)
        or titles.get("ai")
    )
    return out
