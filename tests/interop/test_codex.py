"""Codex CLI rollouts, on the real samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plait import Client
from plait.errors import ImportFormatError
from plait.interop import seed_from_jsonl

from ._helpers import assert_paired, roles, seed


def test_pomodoro_session(mem: Client, transcripts: Path) -> None:
    result, messages = seed(mem, transcripts / "codex" / "aisessions_pomodoro_v0.47.0.jsonl")
    assert result.source is not None
    assert result.source["format"] == "codex"
    assert result.source_format == "message_events"
    assert result.source_records == 153
    assert result.model == "gpt-5-codex"
    assert result.provider is None  # 0.47 does not record model_provider
    assert result.source["session_id"] == "019a085e-04c1-7f81-a09e-9555f6a1fb40"
    skipped = result.source["skipped"]
    assert sum(n for k, n in skipped.items() if k.startswith("event_msg ")) == 68
    assert result.source["skipped"]["reasoning item"] == 20
    # 4 user / 3 assistant messages, 7 function calls and 11 apply_patch custom calls,
    # every one answered.
    users = [m for m in messages if m.role == "user"]
    assert len(users) == 4
    assert users[0].text.startswith("<environment_context>")
    assert users[1].text.startswith("Build a simple Pomodoro timer web app")
    calls = [c for m in messages for c in m.tool_calls]
    assert len(calls) == 18
    assert sum(1 for c in calls if c.name == "apply_patch") == 11
    patch = next(c for c in calls if c.name == "apply_patch")
    assert str(patch.arguments["input"]).startswith("*** Begin Patch")
    assert roles(messages)["tool"] == 18
    assert_paired(messages)
    assert all(m.ok for m in messages if m.role == "tool")
    # Reasoning summaries are kept out of the text, in meta.
    records = mem.open(result.session_id or "").transcript.records
    thinking = [r for r in records if r.kind == "assistant" and "thinking" in r.meta]
    assert thinking[0].meta["thinking"] == ["**Examining repository structure**"]
    assert all(r.meta.get("redacted_thinking", 0) >= 1 for r in thinking)


def test_failed_shell_call_is_not_ok(mem: Client, transcripts: Path) -> None:
    path = transcripts / "codex" / "synthetic_codemie_failed-shell-call.jsonl"
    result, messages = seed(mem, path)
    assert roles(messages) == {"assistant": 3, "tool": 3}
    assert result.turns_loaded == 0
    assert [m.ok for m in messages if m.role == "tool"] == [True, False, True]
    failed = next(m for m in messages if m.role == "tool" and not m.ok)
    assert "No such file or directory" in failed.text
    assert [c.arguments["command"] for m in messages for c in m.tool_calls] == [
        "ls -la",
        "cat nonexistent.txt",
        "pwd",
    ]
    assert_paired(messages)


def test_truncated_rollout_ends_on_a_tool_result(mem: Client, transcripts: Path) -> None:
    result, messages = seed(mem, transcripts / "codex" / "codemie_shell-calls_v0.77.0.jsonl")
    assert messages[-1].role == "tool"  # the run stopped mid-turn, no final reply
    assert roles(messages) == {"user": 3, "assistant": 3, "tool": 3}
    assert result.model == "gpt-5-1-codex-2025-11-13"
    assert result.source is not None
    assert result.source["skipped"]["ghost_snapshot item"] == 1
    records = mem.open(result.session_id or "").transcript.records
    assert records[0].kind == "system"  # the base instructions the model saw
    assert_paired(messages)


def test_compaction_becomes_a_summary(mem: Client, transcripts: Path) -> None:
    path = transcripts / "codex" / "synthetic_agenthistory_compaction.jsonl"
    result, messages = seed(mem, path)
    summary = [m for m in messages if m.role == "summary"]
    assert len(summary) == 1
    assert summary[0].text.startswith("**Progress + Plan Status**")
    history = mem.sessions.history_of(result.session_id or "", full=False)
    assert history[0].role == "summary"
    assert history[1].text == "Now add the authentication middleware"
    assert len(history) == 5
    assert len(messages) == 13
    assert result.model == "gpt-4.5-turbo"
    assert result.provider == "openai"


def test_redacted_exec_with_developer_message(mem: Client, transcripts: Path) -> None:
    path = transcripts / "codex" / "agenthistory_redacted-exec_v0.135.0.jsonl"
    result, messages = seed(mem, path)
    records = mem.open(result.session_id or "").transcript.records
    assert [r.kind for r in records] == ["system", "system", "user", "user", "assistant"]
    assert records[0].text == "[REDACTED_BASE_INSTRUCTIONS]"
    assert records[1].text == "[REDACTED_DEVELOPER_CONTEXT]"
    assert records[1].meta["source"]["role"] == "developer"
    assert messages[-2].text == "[REDACTED_PROMPT]"
    assert messages[-1].text == "[REDACTED_ASSISTANT_TEXT]"
    assert result.model == "gpt-5.5"
    assert result.tool_format == "none"


def test_two_turns(mem: Client, transcripts: Path) -> None:
    path = transcripts / "codex" / "synthetic_codemie_two-turns_v0.129.jsonl"
    result, messages = seed(mem, path)
    assert roles(messages) == {"user": 4, "assistant": 2}
    assert result.model == "o4-mini"


def test_schema_drift_file(mem: Client, transcripts: Path) -> None:
    path = transcripts / "codex" / "synthetic_agentsessions_schema-coverage.jsonl"
    # Its ids were trimmed to one placeholder, so a result answers a call made later.
    with pytest.raises(ImportFormatError) as err:
        seed_from_jsonl(mem, path)
    assert err.value.line == 28
    assert mem.sessions.list() == []
    result = seed_from_jsonl(mem, path, validate=False)
    assert result.ok and result.partial
    assert result.source is not None
    skipped = result.source["skipped"]
    assert skipped["session_meta line"] == 7  # the thread's own and 6 of other threads
    assert skipped["web_search_call item"] == 1
    messages = mem.sessions.history_of(result.session_id or "")
    assert sum(1 for m in messages if m.role == "summary") == 6  # six compacted lines
    assert messages[0].text == "List the files"
    assert messages[0].images == 1  # an input_image part
    orphan = [m for m in messages if m.text.startswith("[result of tool call")]
    assert len(orphan) == 1 and orphan[0].role == "user"


def test_a_review_sub_agent_thread_says_what_it_is(mem: Client, transcripts: Path) -> None:
    path = transcripts / "codex" / "entire-gitsync_review-subagent_v0.139.0.jsonl"
    result, messages = seed(mem, path)
    assert result.source is not None
    details = result.source["details"]
    assert details["source"] == {"subagent": "review"}
    assert details["thread_source"] == "subagent"
    assert details["originator"] == "codex_exec"
    assert isinstance(details["parent_thread_id"], str)
    failed = [m for m in messages if m.role == "tool" and m.ok is False]
    assert len(failed) == 1 and "Process exited with code 1" in failed[0].text
    assert json.loads(messages[-1].text)["findings"] is not None  # the JSON final answer
