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
  messages marked ``added`` with their type (also ``meta["source"]["attachment"]``:
  sent to the model, not shown by ``history()`` as the person's), placed after
  the results of the response they follow, as Claude Code sends them. Those
  whose wording Claude Code generates from flags the file does not spell out
  (``plan_mode``, ``auto_mode``, an empty ``task_reminder``), and bookkeeping
  (``hook_success``, ``hook_system_message``, ``command_permissions`` ...), are
  kept verbatim as unmapped records.
* **Slash commands.** A prompt that is only Claude Code's markup of a command
  (``<command-name>/init</command-name>``, ``<command-args>`` ...) becomes a
  user message saying what the person typed, ``/init ARGS``; the markup is kept
  in ``meta["command_markup"]``. The command's expanded prompt that follows
  (``isMeta``) is a user message marked ``added`` (``"meta"``): not the person's words.
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

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from plait.errors import ImportFormatError
from plait.interop._claude_lines import blocks_of, conversation, result_ids
from plait.interop._parts import calls_in
from plait.interop._read import read_source
from plait.interop._source import Item, Parsed, Source, as_dict, as_list, as_str

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


def looks_like(value: object) -> bool:
    """Whether a decoded line is a Claude Code record."""
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return False
    if "payload" in value or "role" in value:
        return False
    if value["type"] in RECORD_TYPES:
        return True
    return bool({"sessionId", "parentUuid", "leafUuid"} & value.keys())


def _call_ids(record: dict[str, Any]) -> Iterable[str]:
    message = as_dict(record.get("message"))
    for block in as_list(message.get("content")) or () if message else ():
        if isinstance(block, dict) and block.get("type") == "tool_use":
            call = as_str(block.get("id"))
            if call:
                yield call


_LINKS: Final = ("uuid", "parentUuid", "logicalParentUuid")


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
                answered.update(result_ids(record) or ())
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
        ids = result_ids(record)
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


def _clean_title(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    return " ".join(value.split())[:200] or None


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
        for call in calls_in(item.message):
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
        conversation(src, sub, group)
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
        if isinstance(record.get("uuid"), str):
            # Only its links are kept for the branch walk: a record the import does not
            # keep (a progress line, say) costs its three ids, not its whole content.
            everything.append({k: record.get(k) for k in _LINKS})
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
            if blocks_of(message) is None:
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
    conversation(src, out, selected)
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
