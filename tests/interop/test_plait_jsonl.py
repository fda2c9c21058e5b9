"""plait's own JSONL: the exporter, the importer, and the round trip (every store)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from plait import Client, Session
from plait.errors import ImportFormatError, SessionNotFoundError
from plait.interop import JSONL_VERSION, seed_from_jsonl, to_jsonl


def _rich_session(client: Client) -> Session:
    s = client.sessions.new()
    s.transcript.inject_many(
        [
            {"role": "system", "content": "You are terse."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is in this picture?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                ],
                "meta": {"client": "tui"},
            },
            {
                "role": "assistant",
                "content": "Let me look.",
                "tool_calls": [
                    {"id": "c1", "name": "zoom", "arguments": {"factor": 2}},
                    {"id": "c2", "name": "ocr", "arguments": {}},
                ],
            },
            {"role": "tool", "content": "a cat", "tool_call_id": "c1", "tool_name": "zoom"},
            {"role": "tool", "content": "boom", "tool_call_id": "c2", "ok": False},
        ]
    )
    s.transcript.log_event("note", {"x": 1})  # events are not messages: not exported
    s.inject({"role": "summary", "content": "User asked about a cat picture.", "folds": [1, 5]})
    s.inject({"role": "user", "content": "Thanks — ünïcödé ✓"})
    s.inject({"role": "assistant", "content": "You're welcome."})
    s.rename("Cat picture")
    return s


def _meta_free(records: list[Any]) -> list[dict[str, Any]]:
    return [{"kind": r.kind, **r.payload} for r in records if r.kind != "event"]


def test_round_trip_gives_the_same_messages(client: Client, tmp_path: Path) -> None:
    original = _rich_session(client)
    text = to_jsonl(original)
    lines = [json.loads(line) for line in text.splitlines()]
    header = lines[0]
    assert header["plait"] == JSONL_VERSION
    assert header["session_id"] == original.id
    assert header["title"] == "Cat picture"
    assert header["messages"] == 8
    assert lines[1] == {"role": "system", "content": "You are terse."}
    assert lines[2]["images"] == 1 and lines[2]["meta"] == {"client": "tui"}
    assert lines[6]["folds"] == [1, 5]  # positions in the file; the event took no line
    path = tmp_path / "s.jsonl"
    path.write_text(text, encoding="utf-8")

    result = seed_from_jsonl(client, path)
    assert result.ok and result.source is not None
    assert result.source["format"] == "plait"
    assert result.source["kind"] == "plait_jsonl"
    assert result.source_records == 9
    assert result.messages_loaded == 8
    copy = client.open(result.session_id or "")
    assert copy.title == "Cat picture"  # from the header
    assert copy.lineage_operator == "Session.import"
    assert _meta_free(copy.transcript.records) == _meta_free(original.transcript.records)
    assert [r.meta for r in copy.transcript.records] == [
        r.meta for r in original.transcript.records if r.kind != "event"
    ]
    assert [m.to_dict() for m in copy.history(full=True)] == [
        m.to_dict() for m in original.history(full=True)
    ]
    assert [m.to_dict() for m in copy.history()] == [m.to_dict() for m in original.history()]
    # Export of the copy is the export of the original, but for the header.
    assert to_jsonl(copy).splitlines()[1:] == text.splitlines()[1:]


def test_export_of_a_trimmed_view_clamps_folds(client: Client) -> None:
    s = client.sessions.new()
    s.transcript.inject_many([{"role": "user", "content": f"m{i}"} for i in range(4)])
    s.inject({"role": "summary", "content": "sum", "folds": [0, 4]})
    s.inject({"role": "user", "content": "after"})
    s.trim(3)  # the view starts at m3
    lines = [json.loads(x) for x in to_jsonl(s, header=False).splitlines()]
    assert [x["content"] for x in lines] == ["m3", "sum", "after"]
    assert lines[1]["folds"] == [0, 1]


def test_headerless_file_and_round_trip_options(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    path.write_text(
        '{"role": "user", "content": "hi"}\n\n{"role": "assistant", "content": "hello"}\n'
    )
    result = seed_from_jsonl(client, path)
    assert result.ok and result.source is not None
    assert result.source["format"] == "plait"
    assert result.source_records == 2  # blank lines are not records
    assert [m.text for m in client.sessions.history_of(result.session_id or "")] == [
        "hi",
        "hello",
    ]


def test_newer_version_and_misplaced_header_are_refused(mem: Client, tmp_path: Path) -> None:
    path = tmp_path / "new.jsonl"
    path.write_text('{"plait": 99}\n{"role": "user", "content": "hi"}\n')
    with pytest.raises(ImportFormatError, match="newer plait") as err:
        seed_from_jsonl(mem, path)
    assert err.value.line == 1
    path.write_text('{"role": "user", "content": "hi"}\n{"plait": 1}\n')
    with pytest.raises(ImportFormatError, match="first line") as err:
        seed_from_jsonl(mem, path, format="plait")
    assert err.value.line == 2
    assert mem.sessions.list() == []


def test_export_of_an_unstored_session_fails(mem: Client) -> None:
    with pytest.raises(SessionNotFoundError):
        to_jsonl(mem.sessions.new())
