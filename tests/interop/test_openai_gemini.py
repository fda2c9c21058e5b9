"""OpenAI chat transcripts (and SWE-agent's), Gemini CLI recordings, and refused formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plait import Client
from plait.errors import ImportFormatError
from plait.interop import seed_from_jsonl

from ._helpers import assert_paired, roles, seed

OA = "openai-chat"


def test_function_calling_messages(mem: Client, transcripts: Path) -> None:
    path = transcripts / OA / "openhands-sdk_fncall-messages_claude-sonnet-4.json"
    result, messages = seed(mem, path)
    assert result.source is not None
    assert result.source["format"] == "openai"
    assert result.source_format == "message_events"
    assert result.source_records == 14
    assert result.source["kind"] == "external_transcript"
    assert roles(messages) == {"user": 1, "assistant": 6, "tool": 6}
    records = mem.open(result.session_id or "").transcript.records
    assert records[0].kind == "system"
    assert messages[0].text.startswith("Hello! Can you create a new Python file named hello.py")
    calls = [c for m in messages for c in m.tool_calls]
    assert [c.name for c in calls].count("str_replace_editor") == 3
    assert calls[0].arguments["command"] == "create"  # arguments were a JSON string
    assert_paired(messages)
    assert "Ran into [Errno 2]" in messages[2].text
    assert records[2].meta["source"]["line"] > 1  # each message knows its line


def test_litellm_log_is_a_request_snapshot_with_its_response(
    mem: Client, transcripts: Path
) -> None:
    path = transcripts / OA / "openhands-sdk_litellm-completion-log.json"
    result, messages = seed(mem, path)
    assert result.source_format == "request_snapshots"
    assert result.source_records == 12
    # 12 request messages (content as text parts) plus the recorded response.
    assert roles(messages) == {"user": 1, "assistant": 6, "tool": 5}
    assert messages[-1].tool_calls[0].name == "finish"  # the response: a call not yet run
    assert messages[-1].text.startswith("Great! The `hello.py` file already exists")
    assert result.provider == "litellm_proxy"
    assert result.model == "claude-sonnet-4-20250514"
    assert_paired(messages)


def test_deepseek_and_mini_swe_agent(mem: Client, transcripts: Path) -> None:
    path = transcripts / OA / "openhands-sdk_nonfncall-messages_deepseek-chat.json"
    _, messages = seed(mem, path)
    assert roles(messages) == {"user": 1, "assistant": 4, "tool": 4}
    assert messages[1].tool_calls[0].id.startswith("call_00_")
    assert_paired(messages)
    path = transcripts / OA / "mini-swe-agent_github-issue_no-tools.json"
    result, messages = seed(mem, path)
    assert roles(messages) == {"user": 11, "assistant": 10}
    assert result.tool_format == "none"
    assert "<returncode>" in messages[2].text


def test_swe_agent_history(mem: Client, transcripts: Path) -> None:
    path = transcripts / "swe-agent" / "swe-agent_function_calling_simple.traj.json"
    _, messages = seed(mem, path)
    assert [c.name for m in messages for c in m.tool_calls] == [
        "find_file",
        "open",
        "edit",
        "bash",
        "submit",
    ]
    assert_paired(messages)  # tool messages use a tool_call_ids list
    path = transcripts / "swe-agent" / "swe-agent_marshmallow-1867_function_calling.traj.json"
    result, messages = seed(mem, path)
    # The replay reuses call ids once each call was answered: that is allowed.
    assert roles(messages) == {"user": 1, "assistant": 11, "tool": 11}
    assert not result.partial
    assert_paired(messages)


def test_jsonl_and_legacy_shapes(mem: Client, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    lines = [
        {"role": "developer", "content": "Be brief."},
        {
            "role": "user",
            "name": "ann",
            "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "function_call": {"name": "look", "arguments": "{}"},
        },
        {"role": "function", "name": "look", "content": "a cat"},
        {"role": "assistant", "content": "A cat.", "reasoning_content": "It is a cat."},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    result, messages = seed(mem, path, format="openai")
    records = mem.open(result.session_id or "").transcript.records
    assert records[0].kind == "system" and records[0].text == "Be brief."
    assert messages[0].text == "What is this?" and messages[0].images == 1
    assert records[1].meta["name"] == "ann"
    assert messages[1].tool_calls[0].id == "legacy_call_1"
    assert messages[2].role == "tool" and messages[2].tool_call_id == "legacy_call_1"
    assert records[4].meta["thinking"] == ["It is a cat."]


def test_responses_only_is_refused_unless_lenient(mem: Client, tmp_path: Path) -> None:
    path = tmp_path / "responses.jsonl"
    response = {
        "object": "chat.completion",
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi!"}}],
    }
    path.write_text(json.dumps(response) + "\n" + json.dumps(response) + "\n")
    result = seed_from_jsonl(mem, path)
    assert not result.ok
    assert result.source_format == "provider_responses_only"
    assert result.error is not None and "only provider responses" in result.error
    assert mem.sessions.list() == []
    result = seed_from_jsonl(mem, path, validate=False)
    assert result.ok and result.messages_loaded == 2
    assert result.model == "gpt-4o-2024-08-06"
    assert result.source_format == "provider_responses_only"


def test_request_snapshot_lines_take_the_newest(mem: Client, tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    first = {"model": "gpt-4o", "messages": [{"role": "user", "content": "one"}]}
    second = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "1"},
            {"role": "user", "content": "two"},
        ],
    }
    path.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    result, messages = seed(mem, path)
    assert result.source_format == "request_snapshots"
    assert [m.text for m in messages] == ["one", "1", "two"]
    assert result.model == "gpt-4o"


def test_gemini_recording(mem: Client, transcripts: Path) -> None:
    path = transcripts / "gemini-cli" / "aisessions_pomodoro_gemini-2.5-pro.json"
    result, messages = seed(mem, path)
    assert result.source is not None
    assert result.source["format"] == "gemini-cli"
    assert result.source["session_id"] == "0b23371a-ce2e-4b1c-81a0-44af5d94d9ce"
    assert result.provider == "google" and result.model == "gemini-2.5-pro"
    assert roles(messages) == {"user": 5, "assistant": 14, "tool": 11}
    assert messages[0].text.startswith("Build a simple Pomodoro timer web app")
    names = [c.name for m in messages for c in m.tool_calls]
    assert names.count("write_file") == 3 and names.count("replace") == 8
    assert sum(1 for m in messages if m.role == "tool" and not m.ok) == 1
    assert_paired(messages)
    records = mem.open(result.session_id or "").transcript.records
    assert records[1].meta["thinking"][0].startswith("Beginning the Build")


def test_gemini_jsonl_recording(mem: Client, transcripts: Path) -> None:
    path = transcripts / "gemini-cli" / "synthetic_agentsessions_jsonl-v0.40.jsonl"
    result, messages = seed(mem, path)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[0].text == "Say hello and list files."
    assert "README.md" in messages[2].text
    assert result.source is not None and result.source["skipped"] == {
        "$set line": 1,
        "header line": 1,
    }


def test_unknown_json_is_refused(mem: Client, tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"hello": "world"}')
    with pytest.raises(ImportFormatError, match="not a transcript format plait knows"):
        seed_from_jsonl(mem, path)
    path.write_text("")
    with pytest.raises(ImportFormatError, match="empty"):
        seed_from_jsonl(mem, path)
