"""Every reader on every file of its agent in ``../shared/fixtures/transcripts/``.

The folder is listed when the tests are collected, so a file added there is tested
without a change here. For each file a small reference parser below, written from
the agent's format and not from plait's readers, derives what the model saw: how
many prompts, API responses, tool calls and results, which results failed, the
first prompt and the last reply. The import must agree with it exactly.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from plait import Client
from plait._prefix import describe
from plait.interop import seed_from_jsonl
from plait.records import Record, UserRecord

from .conftest import TRANSCRIPTS


@dataclass
class Expected:
    """What a reference parser says the model saw in one file."""

    roles: Counter[str] = field(default_factory=Counter)
    calls: int = 0
    failed: int = 0
    first_prompt: str | None = None
    last_reply: str | None = None
    max_calls: int = 0  # the most calls one API response made
    texts: list[str] = field(default_factory=list)  # texts that must each be in some message
    responses: int = 0  # API responses that said something (Codex)
    added: int = 0  # user messages the agent wrote for the model, not the person
    person_first: str | None = None  # the first words the person typed


def _files(agent: str) -> list[Any]:
    folder = TRANSCRIPTS / agent
    if not folder.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"{folder} not found"))]
    return [pytest.param(p, id=p.name) for p in sorted(folder.iterdir()) if p.is_file()]


def _records(client: Client, session_id: str) -> list[Record]:
    return [r for r in client.open(session_id).transcript.records if r.kind != "event"]


def _check(client: Client, path: Path, expected: Expected, *, fmt: str, lenient: bool) -> None:
    result = seed_from_jsonl(client, path, validate=not lenient)
    if not sum(expected.roles.values()):
        assert not result.ok and "no prompt-visible messages" in (result.error or "")
        return
    assert result.ok, result.error
    assert result.source is not None and result.source["format"] == fmt
    records = _records(client, result.session_id or "")
    got = Counter(r.kind for r in records)
    assert got == expected.roles
    calls = [c for r in records for c in getattr(r, "tool_calls", ())]
    assert len(calls) == expected.calls
    assert sum(1 for r in records if r.kind == "tool" and not getattr(r, "ok", True)) == (
        expected.failed
    )
    assert max((len(getattr(r, "tool_calls", ())) for r in records), default=0) == (
        expected.max_calls
    )
    # Every result follows, and names, the call it answers.
    open_calls: dict[str, str] = {}
    for r in records:
        for c in getattr(r, "tool_calls", ()):
            open_calls[c.id] = c.name
        if r.kind == "tool":
            assert r.tool_call_id in open_calls
            assert r.tool_name == open_calls.pop(r.tool_call_id)
    prompts = [r for r in records if r.kind == "user"]
    if expected.first_prompt is not None:
        assert any(r.text == expected.first_prompt for r in prompts[:3])
    if expected.last_reply is not None:
        replies = [r.text for r in records if r.kind == "assistant" and r.text]
        assert replies and replies[-1] == expected.last_reply
    shown = [r.text for r in records]
    for text in expected.texts:
        assert any(text in s for s in shown), f"not imported: {text[:60]!r}"
    _check_person(client, result.session_id or "", records, expected)


def _one_line(text: str, limit: int = 120) -> str:
    words = " ".join(text.split())
    return words if len(words) <= limit else words[: limit - 1].rstrip() + "…"


def _check_person(client: Client, sid: str, records: list[Record], expected: Expected) -> None:
    """What the agent added is in the transcript and the request, not in what was said."""
    added = [r for r in records if isinstance(r, UserRecord) and r.added is not None]
    assert len(added) == expected.added
    said = client.sessions.history_of(sid, full=True)
    assert sum(1 for m in said if m.role == "user") == expected.roles["user"] - expected.added
    sent = client.open(sid).transcript.request_messages()
    assert {r.seq for r in added} <= {m.seq for m in sent if m.role == "user"} or any(
        r.kind == "summary" for r in records
    )
    listed = describe(client, [i for i in client.sessions.list(all_workspaces=True) if i.id == sid])
    if expected.person_first is not None:
        assert listed[0].first_prompt == _one_line(expected.person_first)


# -- Claude Code ---------------------------------------------------------------------------


def _jsonl(path: Path) -> Iterator[Any]:
    for raw in path.read_bytes().splitlines():
        try:
            yield json.loads(raw)
        except ValueError:
            continue


def _cc_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        b if isinstance(b, str) else b["text"]
        for b in content or ()
        if isinstance(b, str)
        or (isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))
    )


def _cc_typed(text: str) -> str:
    """What the person typed: ``/name args`` for a slash command's markup, else the text."""
    if re.sub(r"<(command-[a-z]+)>.*?</\1>", "", text, flags=re.DOTALL).strip():
        return text
    name = re.search(r"<command-name>(.*?)</command-name>", text, re.DOTALL)
    if name is None:
        return text
    args = re.search(r"<command-args>(.*?)</command-args>", text, re.DOTALL)
    typed = "/" + name.group(1).strip().lstrip("/")
    return f"{typed} {args.group(1).strip()}" if args and args.group(1).strip() else typed


# The attachments whose text reaches the model, and where the text is.
_CC_SHOWN = {
    "hook_additional_context": lambda a: a.get("content"),
    "skill_listing": lambda a: a.get("content"),
    "deferred_tools_delta": lambda a: a.get("addedLines"),
    "agent_listing_delta": lambda a: a.get("addedLines"),
    "mcp_instructions_delta": lambda a: a.get("addedBlocks"),
    "queued_command": lambda a: a.get("prompt"),
    "edited_text_file": lambda a: a.get("snippet"),
    "nested_memory": lambda a: (a.get("content") or {}).get("content"),
    "file": lambda a: ((a.get("content") or {}).get("file") or {}).get("content"),
    "invoked_skills": lambda a: [k.get("content") for k in a.get("skills") or []],
    "total_tokens_reminder": lambda a: a.get("text"),
    "silent_turn_reminder": lambda a: a.get("text"),
    "batching_reminder_sent": lambda a: a.get("text"),
    "hook_blocking_error": lambda a: (a.get("blockingError") or {}).get("blockingError"),
}


def _cc_attachment_texts(a: dict[str, Any]) -> list[str]:
    get = _CC_SHOWN.get(a.get("type"))  # type: ignore[arg-type]
    if get is None:
        return []
    value = get(a)
    items = [value] if isinstance(value, str) else value or []
    return [v for v in items if isinstance(v, str) and v.strip()]


def _cc_reference(path: Path) -> tuple[Expected, bool]:
    rows = [r for r in _jsonl(path) if isinstance(r, dict) and isinstance(r.get("type"), str)]
    malformed = any(
        r.get("type") in ("user", "assistant")
        and not (
            isinstance(r.get("message"), dict)
            and isinstance(r["message"].get("content"), str | list)
        )
        for r in rows
    ) or len(rows) != sum(1 for line in path.read_bytes().splitlines() if line.strip())
    convo = [
        r
        for r in rows
        if (r["type"] == "attachment" and isinstance(r.get("attachment"), dict))
        or (
            r["type"] in ("user", "assistant")
            and isinstance(r.get("message"), dict)
            and isinstance(r["message"].get("content"), str | list)
        )
    ]
    main = [r for r in convo if r.get("isSidechain") is not True]
    if not any(r["type"] != "attachment" for r in main):
        main = convo  # a sub-agent's own file
    messages = [r for r in main if r["type"] != "attachment"]
    uuids = [r.get("uuid") for r in rows if "uuid" in r]
    linked = (
        messages
        and all("parentUuid" in r for r in messages)
        and len(uuids) == len(set(uuids))
        and all(isinstance(r.get("uuid"), str) for r in main)
    )
    kept = main
    if linked:
        by_uuid = {r["uuid"]: r for r in rows if isinstance(r.get("uuid"), str)}
        path_ids: set[str] = set()
        node: dict[str, Any] | None = main[-1]
        while node is not None and node["uuid"] not in path_ids:
            path_ids.add(node["uuid"])
            up = node.get("parentUuid") or node.get("logicalParentUuid")
            node = by_uuid.get(up) if isinstance(up, str) else None
        responses = {
            r["message"].get("id")
            for r in main
            if r["uuid"] in path_ids and r["type"] == "assistant"
        } - {None}
        keep = set(path_ids)
        for r in main:  # results and hook attachments hang off a kept record
            is_result = r["type"] == "user" and all(
                isinstance(b, dict) and b.get("type") == "tool_result"
                for b in (
                    r["message"].get("content")
                    if isinstance(r["message"].get("content"), list)
                    else [None]
                )
            )
            if (r["type"] == "assistant" and r["message"].get("id") in responses) or (
                (is_result or r["type"] == "attachment") and r.get("parentUuid") in keep
            ):
                keep.add(r["uuid"])
        kept = [r for r in main if r["uuid"] in keep]
    exp = Expected()
    ids: dict[Any, int] = {}
    last_id: Any = object()
    reply: list[str] = []
    call_ids: set[Any] = set()
    for r in kept:
        if r["type"] == "attachment":
            texts = _cc_attachment_texts(r.get("attachment") or {})
            if texts:
                exp.roles["user"] += 1
                exp.added += 1
                exp.texts.extend(texts)
            elif r["attachment"].get("type") in ("task_reminder", "todo_reminder") and r[
                "attachment"
            ].get("content"):
                exp.roles["user"] += 1
                exp.added += 1
            continue
        msg = r["message"]
        content = msg["content"]
        blocks = content if isinstance(content, list) else []
        if r["type"] == "assistant" and r.get("isApiErrorMessage") is True:
            continue  # Claude Code's notice of a failed request; the model never wrote it
        if r["type"] == "assistant":
            mid = msg.get("id")
            n = sum(1 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use")
            if isinstance(content, str):
                said = [content]
            else:
                said = [
                    b["text"]
                    for b in blocks
                    if isinstance(b, dict)
                    and b.get("type") == "text"
                    and str(b.get("text")).strip()
                ]
            if mid is None or mid != last_id:
                exp.roles["assistant"] += 1
                ids[len(ids)] = n
                last_id = mid
                reply = []
            else:
                ids[len(ids) - 1] += n
            reply.extend(said)
            if reply and "\n".join(reply):
                exp.last_reply = "\n".join(reply)
            exp.calls += n
            call_ids.update(
                b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"
            )
            continue
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if not results:
            last_id = object()  # a prompt ends the response
        for b in results:
            if b.get("tool_use_id") in call_ids:
                call_ids.discard(b.get("tool_use_id"))
                exp.roles["tool"] += 1
                exp.failed += b.get("is_error") is True
            else:  # an orphan result is kept (leniently) as a user message
                exp.roles["user"] += 1
        text = _cc_text(content)
        if r.get("isMeta") is not True:
            text = _cc_typed(text)
        images = any(isinstance(b, dict) and b.get("type") == "image" for b in blocks)
        if text or images:
            role = "summary" if r.get("isCompactSummary") is True else "user"
            exp.roles[role] += 1
            if role == "user" and exp.first_prompt is None and text:
                exp.first_prompt = text
            if role == "user" and r.get("isMeta") is True:
                exp.added += 1  # Claude Code's own text for the model
            elif role == "user" and exp.person_first is None and text:
                exp.person_first = text
    exp.max_calls = max(ids.values(), default=0)
    return exp, bool(malformed)


@pytest.mark.parametrize("path", _files("claude-code"))
def test_claude_code_file(mem: Client, path: Path) -> None:
    expected, malformed = _cc_reference(path)
    _check(mem, path, expected, fmt="claude-code", lenient=malformed)


def _cc_commands(path: Path | None) -> list[str]:
    """The slash commands the person typed in a file, by the reference parser."""
    if path is None:
        return []
    texts = [
        _cc_text(r["message"].get("content"))
        for r in _jsonl(path)
        if isinstance(r, dict)
        and r.get("type") == "user"
        and r.get("isMeta") is not True
        and isinstance(r.get("message"), dict)
    ]
    return [_cc_typed(t) for t in texts if "<command-name>" in t and _cc_typed(t) != t]


@pytest.mark.parametrize("path", [p for p in _files("claude-code") if _cc_commands(p.values[0])])
def test_a_slash_command_shows_as_typed(mem: Client, path: Path) -> None:
    commands = _cc_commands(path)
    result = seed_from_jsonl(mem, path, validate=False)
    sid = result.session_id or ""
    said = [m.text for m in mem.sessions.history_of(sid, full=True) if m.role == "user"]
    for command in commands:
        assert command in said
    assert not any("<command-" in text for text in said)
    listed = describe(mem, [i for i in mem.sessions.list(all_workspaces=True) if i.id == sid])
    if said[0] == commands[0]:
        assert listed[0].first_prompt == _one_line(commands[0])


def test_parallel_calls_are_one_message_per_api_response(mem: Client) -> None:
    # The file's 9-way parallel response: one assistant message with all nine calls,
    # its results after it (the lines interleave call, result, call, result ...).
    path = TRANSCRIPTS / "claude-code" / "entire-skills_9-way-parallel-truncated_v2.1.101.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    result = seed_from_jsonl(mem, path)
    records = _records(mem, result.session_id or "")
    big = next(r for r in records if len(getattr(r, "tool_calls", ())) == 9)
    after = records[records.index(big) + 1 : records.index(big) + 10]
    assert [r.kind for r in after] == ["tool"] * 9
    assert {r.tool_call_id for r in after} == {c.id for c in big.tool_calls}


# -- Codex ---------------------------------------------------------------------------------

_CODEX_EXIT = re.compile(r"(?:^Exit code: |^Process exited with code )(-?\d+)", re.MULTILINE)
_CODEX_CALLS = ("function_call", "custom_tool_call", "local_shell_call", "tool_search_call")
_CODEX_OUTPUTS = (
    "function_call_output",
    "custom_tool_call_output",
    "local_shell_call_output",
    "tool_search_output",
)


def _codex_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(
        p["text"] for p in content or () if isinstance(p, dict) and isinstance(p.get("text"), str)
    )


def _codex_failed(output: Any) -> bool:
    if isinstance(output, dict) and isinstance(output.get("success"), bool):
        return not output["success"]
    if isinstance(output, dict):
        output = output.get("content")
    if not isinstance(output, str):
        return False
    try:
        meta = json.loads(output).get("metadata", {})
        return meta.get("exit_code", 0) != 0
    except (ValueError, AttributeError):
        pass
    found = _CODEX_EXIT.search("\n".join(output.split("\n")[:8]))
    return bool(found) and found.group(1) != "0"


def _codex_reference(path: Path) -> tuple[Expected, bool]:
    rows = [r for r in _jsonl(path) if isinstance(r, dict)]
    legacy = bool(rows) and "payload" not in rows[0] and "type" not in rows[0]
    items = (
        [r for r in rows[1:] if "type" in r]
        if legacy
        else [r["payload"] for r in rows if r.get("type") == "response_item"]
    )
    exp = Expected()
    head = rows[0].get("payload", rows[0]) if rows else {}
    base = head.get("base_instructions")
    if (isinstance(base, dict) and base.get("text")) or head.get("instructions"):
        exp.roles["system"] += 1
    responses: list[list[str]] = []
    orphans = 0
    said = {
        _codex_text(i.get("content")).strip()
        for i in items
        if i.get("type") == "message" and i.get("role") == "user"
    }
    calls: set[str] = set()
    for r in rows if not legacy else []:
        p = r.get("payload") or {}
        if r.get("type") == "event_msg" and p.get("type") == "user_message":
            text = (p.get("message") or "").strip()
            if text and text not in said:
                exp.roles["user"] += 1
        if r.get("type") == "compacted":
            exp.roles["summary"] += 1
    # API responses: a run of reasoning, assistant messages and calls with no input
    # between, a new one at each reasoning item; one with no message or call (cut off
    # after its reasoning) says nothing.
    run: list[str] | None = None
    for i in items:
        t = i.get("type")
        side = t in ("reasoning", *_CODEX_CALLS) or (
            t == "message" and i.get("role") == "assistant"
        )
        if not side:
            run = None
        elif t == "reasoning" or run is None:
            run = []
            responses.append(run)
        if side and t != "reasoning" and run is not None:
            run.append(t)
    exp.responses = sum(1 for r in responses if r)
    for i in items:
        t = i.get("type")
        if t == "message":
            role = {"user": "user", "assistant": "assistant"}.get(i.get("role"), "system")
            exp.roles[role] += 1
            text = _codex_text(i.get("content"))
            if role == "user" and not text.startswith("<") and exp.first_prompt is None:
                exp.first_prompt = text
            codex_wrote = text.lstrip().startswith(
                ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")
            )
            if role == "user" and codex_wrote:
                exp.added += 1
            elif role == "user" and exp.person_first is None and text:
                exp.person_first = text
            if role == "assistant" and text:
                exp.last_reply = text
        elif t in _CODEX_CALLS:
            calls.add(i.get("call_id") or i.get("id"))
            exp.calls += 1
        elif t in _CODEX_OUTPUTS and i.get("call_id") not in calls:
            exp.roles["user"] += 1  # an orphan result is kept (leniently) as a user message
            orphans += 1
        elif t in _CODEX_OUTPUTS:
            exp.roles["tool"] += 1
            exp.failed += _codex_failed(i.get("output"))
    unreadable = len(rows) != sum(1 for line in path.read_bytes().splitlines() if line.strip())
    return exp, bool(orphans) or unreadable


@pytest.mark.parametrize("path", _files("codex"))
def test_codex_file(mem: Client, path: Path) -> None:
    expected, lenient = _codex_reference(path)
    result = seed_from_jsonl(mem, path, validate=not lenient)
    assert result.ok, result.error
    assert result.source is not None and result.source["format"] == "codex"  # detected
    records = _records(mem, result.session_id or "")
    got = Counter(r.kind for r in records)
    for role in ("system", "user", "tool", "summary"):
        assert got[role] == expected.roles[role], role
    assert sum(len(getattr(r, "tool_calls", ())) for r in records) == expected.calls
    assert sum(1 for r in records if r.kind == "tool" and not r.ok) == expected.failed
    texts = [r.text for r in records if r.kind == "assistant" and r.text]
    assert len(texts) == expected.roles["assistant"]  # each message item has its text
    assert got["assistant"] == expected.responses  # one assistant message per API response
    if expected.first_prompt is not None:
        assert expected.first_prompt in [r.text for r in records if r.kind == "user"]
    _check_person(mem, result.session_id or "", records, expected)


def test_codex_unified_exec_failures_are_read_from_the_process_line(mem: Client) -> None:
    path = TRANSCRIPTS / "codex" / "entire-gitsync_unified-exec-exit2_v0.128.0.jsonl"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    result = seed_from_jsonl(mem, path)
    failed = [r for r in _records(mem, result.session_id or "") if r.kind == "tool" and not r.ok]
    assert len(failed) == 1
    assert "Process exited with code 2" in failed[0].text
    assert "rg: pkg: No such file or directory" in failed[0].text


# -- Gemini CLI ----------------------------------------------------------------------------


def _gemini_reference(path: Path) -> Expected:
    if path.suffix == ".jsonl":
        newest: dict[Any, dict[str, Any]] = {}
        for k, r in enumerate(_jsonl(path)):
            if isinstance(r, dict) and r.get("type") in ("user", "gemini"):
                newest[r.get("id", k)] = r
        messages = list(newest.values())
    else:
        messages = json.loads(path.read_bytes())["messages"]
    exp = Expected()
    for m in messages:
        if m["type"] == "user":
            exp.roles["user"] += 1
            text = (
                m["content"]
                if isinstance(m["content"], str)
                else "\n".join(p["text"] for p in m["content"] if "text" in p)
            )
            exp.first_prompt = exp.first_prompt or text
        elif m["type"] == "gemini":
            exp.roles["assistant"] += 1
            calls = m.get("toolCalls") or []
            exp.calls += len(calls)
            exp.max_calls = max(exp.max_calls, len(calls))
            exp.roles["tool"] += sum(1 for c in calls if "result" in c or "status" in c)
            exp.failed += sum(1 for c in calls if c.get("status") in ("error", "cancelled"))
            if m.get("content"):
                exp.last_reply = m["content"]
    return exp


@pytest.mark.parametrize("path", _files("gemini-cli"))
def test_gemini_cli_file(mem: Client, path: Path) -> None:
    _check(mem, path, _gemini_reference(path), fmt="gemini-cli", lenient=False)


# -- OpenAI chat messages and SWE-agent -----------------------------------------------------


def _chat_reference(messages: list[dict[str, Any]], response: dict[str, Any] | None) -> Expected:
    if response is not None:
        messages = [*messages, response["choices"][0]["message"]]
    exp = Expected()
    for m in messages:
        role = {"developer": "system", "function": "tool"}.get(m["role"], m["role"])
        exp.roles[role] += 1
        content = m.get("content")
        text = (
            content
            if isinstance(content, str)
            else "\n".join(p["text"] for p in content or () if p.get("type") == "text")
        )
        n = len(m.get("tool_calls") or [])
        exp.calls += n
        exp.max_calls = max(exp.max_calls, n)
        if role == "user" and exp.first_prompt is None:
            exp.first_prompt = text
        if role == "assistant" and text:
            exp.last_reply = text
    return exp


@pytest.mark.parametrize("path", _files("openai-chat"))
def test_openai_chat_file(mem: Client, path: Path) -> None:
    value = json.loads(path.read_bytes())
    if isinstance(value, list):
        expected = _chat_reference(value, None)
    else:
        expected = _chat_reference(value["messages"], value.get("response"))
    _check(mem, path, expected, fmt="openai", lenient=False)


@pytest.mark.parametrize("path", _files("swe-agent"))
def test_swe_agent_file(mem: Client, path: Path) -> None:
    _check(
        mem,
        path,
        _chat_reference(json.loads(path.read_bytes())["history"], None),
        fmt="swe-agent",
        lenient=False,
    )


# -- OpenHands -----------------------------------------------------------------------------


def _openhands_reference(path: Path) -> Expected:
    value = json.loads(path.read_bytes())
    events = value if isinstance(value, list) else value["history"]
    exp = Expected()
    responses: Counter[Any] = Counter()
    for k, e in enumerate(events):
        if "kind" in e:  # V1
            kind = e["kind"]
            if kind == "MessageEvent":
                role = e["llm_message"]["role"]
                exp.roles[role] += 1
                if role == "user":
                    exp.first_prompt = exp.first_prompt or "\n".join(
                        p["text"] for p in e["llm_message"]["content"] if p.get("type") == "text"
                    )
            elif kind == "ActionEvent":
                responses[e.get("llm_response_id") or k] += 1
            elif kind == "ObservationEvent":
                exp.roles["tool"] += 1
                o = e["observation"]
                code = o.get("exit_code")
                if code is None:
                    code = (o.get("metadata") or {}).get("exit_code")
                exp.failed += bool(o.get("error")) or code not in (None, 0, -1)
            continue
        tcm = e.get("tool_call_metadata")
        if e.get("action") == "system" and not tcm:
            exp.roles["system"] += 1
        elif e.get("action") == "message" and not tcm:
            exp.roles["user" if e["source"] == "user" else "assistant"] += 1
            if e["source"] == "user":
                exp.first_prompt = exp.first_prompt or e["args"]["content"]
            else:
                exp.last_reply = e["args"]["content"]
        elif e.get("action") and tcm:
            responses[(tcm.get("model_response") or {}).get("id") or k] += 1
        elif e.get("observation") and tcm:
            exp.roles["tool"] += 1
            code = (e.get("extras", {}).get("metadata") or {}).get("exit_code")
            exp.failed += e["observation"] == "error" or code not in (None, 0, -1)
    exp.roles["assistant"] += len(responses)
    exp.calls = sum(responses.values())
    exp.max_calls = max(responses.values(), default=0)
    return exp


@pytest.mark.parametrize("path", _files("openhands"))
def test_openhands_file(mem: Client, path: Path) -> None:
    _check(mem, path, _openhands_reference(path), fmt="openhands", lenient=False)
