"""Decoded Claude Code entries map as the importer maps the file they came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plait import Client
from plait.errors import InvalidArgumentError
from plait.interop import map_claude_code_entries, seed_from_jsonl
from plait.records import record_from_message

CC = "claude-code"


@pytest.mark.parametrize(
    "name",
    [
        "sniffly_push-to-github_v1.0.17.jsonl",
        "ccl_main-with-subagent_v2.1.17.jsonl",
        "entire-gitsync_parallel-interleaved_v2.1.109.jsonl",
        "entire-graph_parallel-hooks-attachments_v2.1.210.jsonl",
        "synthetic_ccl_rewind-then-compact.jsonl",
        "ccl_thinking-progress_v2.1.42.jsonl",
    ],
)
def test_entries_map_as_the_file_imports(mem: Client, transcripts: Path, name: str) -> None:
    path = transcripts / CC / name
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    mapping = map_claude_code_entries(entries)
    result = seed_from_jsonl(mem, path)
    assert result.ok and result.session_id is not None
    imported = mem.open(result.session_id).transcript.records
    imported_messages = [r for r in imported if r.kind in ("user", "assistant", "tool", "summary")]
    mine = [record_from_message(m, seq=0) for m in mapping.messages]
    assert [(r.kind, r.content) for r in mine if r.kind != "system"] == [
        (r.kind, r.content) for r in imported_messages
    ]
    assert [getattr(r, "tool_calls", ()) for r in mine if r.kind != "system"] == [
        getattr(r, "tool_calls", ()) for r in imported_messages
    ]
    assert mapping.title == mem.open(result.session_id).title
    # Every message is carried by the entry that started it, at least.
    assert set(range(len(mapping.messages))) <= {c for c in mapping.carriers if c is not None}
    assert len(mapping.carriers) == len(entries)
    # No line number of a file that does not exist.
    assert all("line" not in m["meta"]["source"] for m in mapping.messages)  # type: ignore[index, operator]


def test_one_response_written_as_several_lines_is_one_message() -> None:
    def line(uuid: str, parent: str | None, block: dict[str, object]) -> dict[str, object]:
        return {
            "type": "assistant",
            "uuid": uuid,
            "parentUuid": parent,
            "message": {"id": "msg_1", "role": "assistant", "content": [block]},
        }

    entries: list[dict[str, object]] = [
        {
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "message": {"role": "user", "content": "list files"},
        },
        line("a1", "u1", {"type": "text", "text": "Looking."}),
        line("a2", "a1", {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"c": "ls"}}),
        {
            "type": "user",
            "uuid": "u2",
            "parentUuid": "a2",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"}],
            },
        },
        line("a3", "u2", {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"c": "pwd"}}),
        {"type": "file-history-snapshot", "messageId": "x", "snapshot": {}},
    ]
    mapping = map_claude_code_entries(entries)
    assert [m["role"] for m in mapping.messages] == ["user", "assistant", "tool"]
    # a3 joins the response a1 started; the snapshot is carried by no message.
    assert mapping.carriers == (0, 1, 1, 2, 1, None)
    calls = mapping.messages[1]["tool_calls"]
    assert [c["id"] for c in calls] == ["t1", "t2"]  # type: ignore[index, union-attr]


def test_an_entry_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(InvalidArgumentError):
        map_claude_code_entries([{"type": "user"}, ["not", "an", "object"]])  # type: ignore[list-item]


def test_an_unreadable_entry_maps_to_nothing() -> None:
    mapping = map_claude_code_entries([{"type": "user", "uuid": "u"}, {"no": "type"}])
    assert mapping.messages == ()
    assert mapping.carriers == (None, None)
