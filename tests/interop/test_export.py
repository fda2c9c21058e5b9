"""Export to OpenAI chat messages and Claude Code JSONL, and read back to the same messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plait import Client
from plait.interop import seed_from_jsonl, to_claude_code_jsonl, to_openai_messages
from plait.records import Record

from ._helpers import seed
from .conftest import TRANSCRIPTS

# Real files of several agents (and a hand-built session below) are exported and read back.
REAL = [
    "claude-code/entire-gitsync_parallel-interleaved_v2.1.109.jsonl",
    "claude-code/entire-skills_9-way-parallel-truncated_v2.1.101.jsonl",
    "claude-code/synthetic_ccl_rewind-then-compact.jsonl",
    "codex/entire-gitsync_unified-exec-exit2_v0.128.0.jsonl",
    "codex/synthetic_agenthistory_compaction.jsonl",
    "gemini-cli/aisessions_pomodoro_gemini-2.5-pro.json",
    "openhands/openhands-sdk-v1_openagentsafety-qr-code_gpt-4o.json",
    "swe-agent/swe-agent_function_calling_simple.traj.json",
]


def _view(records: list[Record], *, with_ok: bool) -> list[tuple[object, ...]]:
    """What the model sees of each record (and, where the format carries it, ``ok``)."""
    out = []
    for r in records:
        calls = getattr(r, "tool_calls", ())
        out.append(
            (
                r.kind,
                r.text,
                tuple((c.id, c.name, json.dumps(dict(c.arguments), sort_keys=True)) for c in calls),
                getattr(r, "tool_call_id", None),
                getattr(r, "tool_name", None),
                getattr(r, "ok", None) if with_ok else None,
            )
        )
    return out


def _all(client: Client, session_id: str) -> list[Record]:
    """Every message record of a session, system messages included, oldest first."""
    return [r for r in client.open(session_id).transcript.records if r.kind != "event"]


@pytest.mark.parametrize("rel", REAL)
def test_real_sessions_round_trip_through_both_formats(
    mem: Client, tmp_path: Path, rel: str
) -> None:
    if not TRANSCRIPTS.is_dir():
        pytest.skip(f"transcript fixtures not found at {TRANSCRIPTS}")
    first, _ = seed(mem, TRANSCRIPTS / rel)
    session = mem.open(first.session_id or "")
    original = _all(mem, session.id)

    openai_file = tmp_path / "chat.json"
    openai_file.write_text(json.dumps(to_openai_messages(session)))
    again = seed_from_jsonl(mem, openai_file)
    assert again.ok, again.error
    assert again.source is not None and again.source["format"] == "openai"
    assert _view(_all(mem, again.session_id or ""), with_ok=False) == _view(original, with_ok=False)

    cc_file = tmp_path / "session.jsonl"
    cc_file.write_text(to_claude_code_jsonl(session))
    back = seed_from_jsonl(mem, cc_file)
    assert back.ok, back.error
    assert back.source is not None and back.source["format"] == "claude-code"
    assert _view(_all(mem, back.session_id or ""), with_ok=True) == _view(original, with_ok=True)


def test_openai_export_is_plain_chat_completions(mem: Client, tmp_path: Path) -> None:
    session = mem.sessions.create(
        [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "ls?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "name": "ls", "arguments": {"path": "."}}],
            },
            {"role": "tool", "content": "a b", "tool_call_id": "c1", "tool_name": "ls"},
            {"role": "assistant", "content": "a and b."},
        ]
    )
    messages = to_openai_messages(session)
    assert messages == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "ls?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "ls", "arguments": '{"path": "."}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a b"},
        {"role": "assistant", "content": "a and b."},
    ]


def test_claude_code_export_links_every_record_and_marks_failures(
    mem: Client, tmp_path: Path
) -> None:
    session = mem.sessions.create(
        [
            {"role": "user", "content": "run it"},
            {
                "role": "assistant",
                "content": "Running.",
                "tool_calls": [{"id": "t1", "name": "Bash", "arguments": {"command": "false"}}],
            },
            {"role": "tool", "content": "exit 1", "tool_call_id": "t1", "ok": False},
        ]
    )
    rows = [json.loads(line) for line in to_claude_code_jsonl(session).splitlines()]
    assert [r["type"] for r in rows] == ["user", "assistant", "user"]
    assert rows[0]["parentUuid"] is None
    assert [r["parentUuid"] for r in rows[1:]] == [r["uuid"] for r in rows[:-1]]
    assert rows[1]["message"]["content"] == [
        {"type": "text", "text": "Running."},
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "false"}},
    ]
    assert rows[2]["message"]["content"][0]["is_error"] is True
    assert to_claude_code_jsonl(session) == to_claude_code_jsonl(session)  # deterministic
