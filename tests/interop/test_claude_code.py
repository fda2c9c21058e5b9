"""Claude Code session files, on the real samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plait import Client
from plait.errors import ImportFormatError
from plait.interop import seed_from_jsonl

from ._helpers import assert_paired, roles, seed

CC = "claude-code"


def test_push_to_github(mem: Client, transcripts: Path) -> None:
    result, messages = seed(mem, transcripts / CC / "sniffly_push-to-github_v1.0.17.jsonl")
    assert result.source is not None
    assert result.source["format"] == "claude-code"
    assert result.source_format == "message_events"
    assert result.source_records == 21
    # 10 user records (2 typed, 1 interruption, 7 tool results), 10 assistant lines that are
    # 4 API messages (split ids joined), 7 Bash calls each answered once.
    assert roles(messages) == {"user": 3, "assistant": 4, "tool": 7}
    assert messages[0].text == "push to github"
    assert messages[1].text.startswith("I'll help you push to GitHub.")
    assert [c.name for c in messages[1].tool_calls] == ["Bash", "Bash"]
    assert_paired(messages)
    assert sum(1 for m in messages if m.role == "tool" and m.ok is False) == 2
    assert result.provider == "anthropic"
    assert result.model == "claude-sonnet-4-20250514"
    assert result.turns_loaded == 3
    assert result.tool_format == "native"
    session = mem.open(result.session_id or "")
    assert session.title == "AI Music Generation: Diverse Embedding Mapping"  # the summary line
    assert session.lineage_operator == "Session.import"
    assert result.source["agent"] == "claude-code"
    assert result.source["session_id"] == "fed8ce56-bc79-401f-a83e-af084253362f"
    assert result.source["kind"] == "external_agent_session"
    first = session.transcript.records[0]
    assert first.meta["source"]["line"] == 2
    assert first.meta["source"]["id"] == "ed356c9b-5106-4a60-b082-60e90997ce2b"


def test_parallel_tool_results_hanging_off_the_path_are_kept(
    mem: Client, transcripts: Path
) -> None:
    # Each parallel tool_use line, and its result, hangs off the line before it: none of
    # them may be lost to the branch selection.
    path = transcripts / CC / "ccl_main-with-subagent_v2.1.17.subagent-a2271d1.jsonl"
    result, messages = seed(mem, path)
    assert roles(messages) == {"user": 1, "assistant": 10, "tool": 24}
    assert sum(len(m.tool_calls) for m in messages) == 24
    assert_paired(messages)
    assert result.model == "claude-haiku-4-5-20251001"
    assert result.source is not None
    assert result.source["details"]["sidechain"] is True  # a sub-agent file, imported whole
    assert result.source["details"]["agent_id"] == "a2271d1"
    assert messages[0].text.startswith("Give me a comprehensive overview")


def test_inline_sidechain_turns_are_left_out(mem: Client, transcripts: Path) -> None:
    path = transcripts / CC / "ccviewer_task-subagents-inline-sidechain_v1.0.108.jsonl"
    result, messages = seed(mem, path)
    assert result.source is not None
    assert "sidechain record" not in result.source["skipped"]  # placed, not left over
    # Each sub-agent's 22 inline records are its own conversation, stored on the result of
    # the Task call that started it (matched by the prompt): 7 and 15 records.
    records = mem.open(result.session_id or "").transcript.records
    placed = [(r.seq, r.meta["subagent"]) for r in records if "subagent" in r.meta]
    assert [sub["records"] for _, sub in placed] == [7, 15]
    for seq, sub in placed:
        call = next(
            c
            for r in records[:seq]
            for c in getattr(r, "tool_calls", ())
            if c.id == records[seq].tool_call_id
        )
        assert call.name == "Task"
        assert sub["messages"][0] == {**sub["messages"][0], "role": "user"}
        assert sub["messages"][0]["content"].strip() == call.arguments["prompt"].strip()
    assert roles(messages) == {"user": 2, "assistant": 10, "tool": 13}
    tasks = [c for m in messages for c in m.tool_calls if c.name == "Task"]
    assert len(tasks) == 3
    assert_paired(messages)  # each Task call gets its result in the main conversation
    assert messages[-1].text.startswith("CLAUDE.mdファイルを最新の状態にアップデートしました")


def test_rewind_keeps_the_active_branch_and_compaction_becomes_a_summary(
    mem: Client, transcripts: Path
) -> None:
    result, messages = seed(mem, transcripts / CC / "synthetic_ccl_rewind-then-compact.jsonl")
    texts = [(m.role, m.text) for m in messages]
    assert ("user", "First attempt") not in texts  # the abandoned branch
    assert texts[:6] == [
        ("user", "Start"),
        ("assistant", "Ready"),
        ("user", "Second attempt"),
        ("assistant", "Second answer"),
        ("user", "Keep going"),
        ("assistant", "Kept going"),
    ]
    assert texts[6][0] == "summary"
    assert "Summary: the user asked for a plan." in texts[6][1]
    assert texts[7:] == [("user", "After compaction"), ("assistant", "Final answer")]
    assert result.source is not None
    assert result.source["skipped"]["abandoned branch"] == 2
    # What the model works with starts at the summary; the full view keeps the past.
    history = mem.sessions.history_of(result.session_id or "", full=False)
    assert [m.role for m in history] == ["summary", "user", "assistant"]


def test_rewind_in_a_real_session(mem: Client, transcripts: Path) -> None:
    result, messages = seed(mem, transcripts / CC / "ccl_thinking-progress_v2.1.42.jsonl")
    assert result.source is not None
    assert result.source["skipped"]["abandoned branch"] == 10
    users = [m.text for m in messages if m.role == "user"]
    # The user rewound to before "I very much like this idea" and said the opposite.
    assert not any(u.startswith("I very much like this idea") for u in users)
    assert any(u.startswith("I actually don't like much this idea") for u in users)
    assert roles(messages) == {"user": 7, "assistant": 6, "tool": 2}
    assert_paired(messages)


def test_thinking_is_kept_in_meta_not_in_the_text(mem: Client, transcripts: Path) -> None:
    result, _ = seed(mem, transcripts / CC / "spotter_short_v2.1.38.jsonl")
    records = mem.open(result.session_id or "").transcript.records
    assistant = [r for r in records if r.kind == "assistant"]
    assert len(assistant) == 1  # five lines of one API message
    reply = assistant[0]
    assert reply.text.startswith("Let me check the project structure")
    assert "The user is having trouble" not in reply.text
    assert reply.meta["thinking"][0].startswith("The user is having trouble starting")
    assert [c.name for c in reply.tool_calls] == ["Bash", "Glob"]  # type: ignore[attr-defined]
    results = [r for r in records if r.kind == "tool"]
    assert [r.payload["ok"] for r in results] == [False, False]  # both rejected by the user
    assert records[-1].text == "[Request interrupted by user for tool use]"


def test_hooks_and_system_records_are_skipped(mem: Client, transcripts: Path) -> None:
    result, messages = seed(mem, transcripts / CC / "ccl_hooks-summaries_v1.0.51.jsonl")
    assert result.source is not None
    assert result.source["skipped"]["system record"] == 12
    assert roles(messages) == {"user": 4, "assistant": 15, "tool": 14}
    assert_paired(messages)
    assert sum(1 for m in messages if m.role == "tool" and not m.ok) == 2
    # An isMeta user record (the local-command caveat) is kept and marked.
    first = mem.open(result.session_id or "").transcript.records[0]
    assert first.text.startswith("Caveat: The messages below were generated by the user")
    assert first.meta["source"]["is_meta"] is True
    assert mem.open(result.session_id or "").title == (
        "Claude Code Log: Timestamp-Based Caching Implementation"
    )


def test_permission_denials_are_failed_results(mem: Client, transcripts: Path) -> None:
    _, messages = seed(mem, transcripts / CC / "ccl_tool-errors_v2.1.17.jsonl")
    failed = [m for m in messages if m.role == "tool" and not m.ok]
    assert len(failed) == 6
    assert all(m.tool_name for m in failed)
    assert_paired(messages)


def test_init_command(mem: Client, transcripts: Path) -> None:
    result, messages = seed(mem, transcripts / CC / "ccviewer_init-command_v1.0.98.jsonl")
    # What the person typed; Claude Code's markup of the command is kept beside it.
    assert messages[0].text == "/init"
    first = mem.open(result.session_id or "").transcript.records[0]
    assert str(first.meta["command_markup"]).startswith("<command-message>init is")
    assert sum(len(m.tool_calls) for m in messages) == 12
    failed = [m for m in messages if m.role == "tool" and not m.ok]
    assert [m.tool_name for m in failed] == ["Write"]


def test_summary_only_file_seeds_nothing(mem: Client, transcripts: Path) -> None:
    result = seed_from_jsonl(mem, transcripts / CC / "sniffly_summary-only_v1.0.17.jsonl")
    assert not result.ok
    assert result.session_id is None
    assert result.error is not None and "no prompt-visible messages" in result.error
    assert mem.sessions.list() == []


def test_schema_drift_file_with_images(mem: Client, transcripts: Path) -> None:
    path = transcripts / CC / "synthetic_agentsessions_schema-coverage.jsonl"
    result, messages = seed(mem, path)
    assert result.source is not None
    skipped = result.source["skipped"]
    # 38 attachment records, 1 of them a sub-agent's: the ones whose text the model saw
    # are user messages, the rest are kept verbatim and counted by attachment type.
    records = mem.open(result.session_id or "").transcript.records
    shown = sum(1 for r in records if r.meta.get("source", {}).get("attachment"))
    assert shown + sum(n for k, n in skipped.items() if k.startswith("attachment ")) == 37
    assert skipped["content block fallback"] == 1
    assert sum(m.images for m in messages if m.role == "user") == 1
    assert mem.open(result.session_id or "").title == "Stage0 small fixture"


def test_records_without_parent_links_are_read_in_file_order(
    mem: Client, transcripts: Path
) -> None:
    _, messages = seed(mem, transcripts / CC / "synthetic_simonw_sample_session.jsonl")
    assert [m.role for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "user",
        "assistant",
    ]
    assert messages[0].text == "Create a hello world function"
    assert_paired(messages)


def test_edge_cases_file_fails_strict_and_imports_leniently(mem: Client, transcripts: Path) -> None:
    path = transcripts / CC / "synthetic_ccl_edge-cases-malformed.jsonl"
    with pytest.raises(ImportFormatError) as err:
        seed_from_jsonl(mem, path)
    assert err.value.line == 10  # "content": null
    assert mem.sessions.list() == []
    result = seed_from_jsonl(mem, path, validate=False)
    assert result.ok and result.partial
    assert result.source is not None
    problems = result.source["problems"]
    assert [p.split(":")[0] for p in problems] == [
        "line 10",
        "line 11",
        "line 13",
        "line 14",
        "line 15",
        "line 16",
    ]
    messages = mem.sessions.history_of(result.session_id or "")
    assert any("Testing special characters: café, naïve, résumé" in m.text for m in messages)
    assert messages[-1].text == "wow error"


def test_images_redacted_thinking_and_list_results(mem: Client, tmp_path: Path) -> None:
    def rec(uuid: str, parent: str | None, kind: str, content: object, **extra: object) -> str:
        message: dict[str, object] = {"role": kind, "content": content}
        if kind == "assistant":
            message.update(id=f"msg_{uuid}", model="claude-opus-4-6")
        return json.dumps(
            {
                "type": kind,
                "uuid": uuid,
                "parentUuid": parent,
                "sessionId": "s1",
                "message": message,
                **extra,
            }
        )

    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}
    lines = [
        rec("u1", None, "user", [{"type": "text", "text": "What is this?"}, image]),
        rec(
            "a1",
            "u1",
            "assistant",
            [
                {"type": "redacted_thinking", "data": "opaque"},
                {"type": "server_tool_use", "id": "srv", "name": "web_search", "input": {}},
                {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "x.png"}},
            ],
        ),
        rec(
            "u2",
            "a1",
            "user",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [{"type": "text", "text": "an image:"}, image],
                },
                {"type": "text", "text": "[Request interrupted by user]"},
            ],
        ),
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result, messages = seed(mem, path)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "user"]
    assert messages[0].images == 1
    assert messages[2].images == 1 and messages[2].text == "an image:"
    assert messages[2].tool_name == "Read" and messages[2].ok
    assert messages[3].text == "[Request interrupted by user]"
    records = mem.open(result.session_id or "").transcript.records
    assert records[1].meta["redacted_thinking"] == 1
    assert result.source is not None
    assert result.source["skipped"]["content block server_tool_use"] == 1
    assert result.model == "claude-opus-4-6"


def test_a_sub_agent_file_beside_the_session_is_placed_on_its_task_result(
    mem: Client, transcripts: Path, tmp_path: Path
) -> None:
    # Claude Code 2.x keeps a sub-agent's turns in <session>/subagents/agent-<id>.jsonl
    # and names <id> in the Task result. Lay the pair out that way (copies, at test time).
    main = transcripts / CC / "ccl_main-with-subagent_v2.1.17.jsonl"
    sub = transcripts / CC / "ccl_main-with-subagent_v2.1.17.subagent-a2271d1.jsonl"
    session = tmp_path / "29ccd257.jsonl"
    session.write_bytes(main.read_bytes())
    (tmp_path / "29ccd257" / "subagents").mkdir(parents=True)
    (tmp_path / "29ccd257" / "subagents" / "agent-a2271d1.jsonl").write_bytes(sub.read_bytes())
    result, messages = seed(mem, session)
    records = mem.open(result.session_id or "").transcript.records
    task = next(r for r in records if r.kind == "tool" and "subagent" in r.meta)
    placed = task.meta["subagent"]
    assert placed["agent_id"] == "a2271d1"
    assert placed["file"] == "subagents/agent-a2271d1.jsonl"
    assert placed["records"] == 59
    roles = [m["role"] for m in placed["messages"]]
    assert roles.count("assistant") == 10 and roles.count("tool") == 24  # as imported alone
    assert placed["messages"][0]["content"].startswith("Give me a comprehensive overview")
    assert len(messages) == 4  # the main conversation is unchanged: the model saw the result
