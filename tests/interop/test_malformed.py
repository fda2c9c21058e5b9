"""Malformed input: a typed error naming the line, and never a half-imported session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plait import Client
from plait.errors import ImportFormatError, InvalidArgumentError, PlaitError
from plait.interop import seed_from_jsonl

GOOD = [
    {"role": "user", "content": "one"},
    {"role": "assistant", "content": "two"},
    {"role": "user", "content": "three"},
    {"role": "assistant", "content": "four"},
]


def _lines(values: list[object]) -> str:
    return "".join((v if isinstance(v, str) else json.dumps(v)) + "\n" for v in values)


def _fails_at(client: Client, path: Path, line: int | None, match: str, **kw: object) -> None:
    before = [s.id for s in client.sessions.list(100, all_workspaces=True)]
    with pytest.raises(ImportFormatError, match=match) as err:
        seed_from_jsonl(client, path, **kw)  # type: ignore[arg-type]
    assert err.value.line == line
    assert err.value.path == str(path)
    assert isinstance(err.value, InvalidArgumentError) and isinstance(err.value, ValueError)
    if line is not None:
        assert f"{path}:{line}: " in str(err.value)
    after = [s.id for s in client.sessions.list(100, all_workspaces=True)]
    assert after == before  # nothing was created


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "expected a JSON object, got an array"),
        ('"text"', "expected a JSON object, got a string"),
        ('{"role": "wizard", "content": "x"}', "unknown role 'wizard'"),
        ('{"content": "no role"}', "missing 'role'"),
        ('{"role": "user", "content": 5}', "content must be"),
        ('{"role": "assistant", "content": "", "tool_calls": "x"}', "'tool_calls' must be a list"),
        ('{"role": "user", "content": "x", "bogus": 1}', "unknown key"),
        ('{"role": "user", "content": NaN}', "not JSON"),
        ('{"role": "user", "content": 1e999}', "out of range"),
    ],
)
def test_a_bad_line_in_plait_jsonl_is_named(
    client: Client, tmp_path: Path, bad: str, match: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(_lines([GOOD[0], GOOD[1], bad, GOOD[2]]))
    _fails_at(client, path, 3, match, format="plait")


def test_cut_off_last_line(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl"
    path.write_text(_lines(GOOD[:3]) + '{"role": "assistant", "cont')
    _fails_at(client, path, 4, "last line is cut off")
    result = seed_from_jsonl(client, path, validate=False)
    assert result.ok and result.partial
    assert result.messages_loaded == 3
    assert result.source is not None
    assert result.source["problems"][0].startswith("line 4: the last line is cut off")


def test_bad_bytes_name_their_line(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(_lines(GOOD[:1]).encode() + b'{"role": "user", "content": "\xff"}\n')
    _fails_at(client, path, 2, "not UTF-8")
    path.write_bytes(_lines(GOOD[:1]).encode() + b'{"role": "user", "content": "\\ud800"}\n')
    _fails_at(client, path, 2, "lone UTF-16 surrogate")


def test_orphan_tool_result(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "orphan.jsonl"
    result_line = {"role": "tool", "content": "out", "tool_call_id": "gone", "tool_name": "ls"}
    path.write_text(_lines([GOOD[0], result_line, GOOD[1]]))
    _fails_at(client, path, 2, "no earlier message made")
    result = seed_from_jsonl(client, path, validate=False)
    assert result.ok and result.partial
    messages = client.sessions.history_of(result.session_id or "")
    assert messages[1].role == "user"
    assert messages[1].text == "[result of tool call gone]\nout"


def test_second_result_for_one_call(client: Client, tmp_path: Path) -> None:
    call = {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "name": "ls"}]}
    res = {"role": "tool", "content": "x", "tool_call_id": "c"}
    path = tmp_path / "twice.jsonl"
    path.write_text(_lines([GOOD[0], call, res, res]))
    _fails_at(client, path, 4, "second result")
    result = seed_from_jsonl(client, path, validate=False)
    assert result.ok and result.messages_loaded == 3


def test_claude_record_without_message(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "cc.jsonl"
    rec = {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s", "message": None}
    ok = {
        "type": "user",
        "uuid": "u0",
        "parentUuid": None,
        "sessionId": "s",
        "message": {"role": "user", "content": "hi"},
    }
    path.write_text(_lines([ok, rec]))
    _fails_at(client, path, 2, "needs a 'message' object")
    tool = {
        **ok,
        "type": "assistant",
        "uuid": "a1",
        "parentUuid": "u0",
        "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t"}]},
    }
    path.write_text(_lines([ok, tool]))
    _fails_at(client, path, 2, "tool_use block needs", format="claude-code")


def test_codex_line_without_payload(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "rollout.jsonl"
    meta = {"type": "session_meta", "payload": {"id": "x"}}
    user = {
        "type": "response_item",
        "payload": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hi"}],
        },
    }
    call = {
        "type": "response_item",
        "payload": {"type": "function_call", "name": "shell", "arguments": "{oops", "call_id": "c"},
    }
    path.write_text(_lines([meta, user, {"type": "response_item"}]))
    _fails_at(client, path, 3, "an object 'payload'")
    path.write_text(_lines([meta, user, call]))
    _fails_at(client, path, 3, "arguments are not a JSON object")
    result = seed_from_jsonl(client, path, validate=False)
    assert result.ok and result.partial
    calls = client.sessions.history_of(result.session_id or "")[-1].tool_calls
    assert calls[0].arguments == {"_raw": "{oops"}


def test_a_bad_message_in_a_pretty_printed_document_names_its_line(
    client: Client, tmp_path: Path
) -> None:
    doc = {
        "model": "gpt-4o",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "function": {}}]},
        ],
    }
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc, indent=2))
    text = path.read_text().splitlines()
    line = next(i for i, t in enumerate(text, 1) if '"role": "assistant"' in t) - 1
    _fails_at(client, path, line, "needs a function name")
    broken = json.dumps(doc, indent=2).replace('"hi"', '"hi",,')
    path.write_text(broken)
    line = next(i for i, t in enumerate(broken.splitlines(), 1) if '"hi",,' in t)
    _fails_at(client, path, line, "not JSON")


def test_unreadable_file(client: Client, tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    _fails_at(client, missing, None, "cannot read the file")
    _fails_at(client, tmp_path, None, "cannot import a folder")


def test_a_title_the_store_refuses_creates_nothing(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "ok.jsonl"
    path.write_text(_lines(GOOD))
    with pytest.raises(PlaitError):
        seed_from_jsonl(client, path, title="x" * 500)
    assert client.sessions.list() == []


def test_lenient_mode_skips_bad_lines_anywhere(client: Client, tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(_lines([GOOD[0], "garbage", GOOD[1], '{"role": "x"}', GOOD[2], GOOD[3]]))
    result = seed_from_jsonl(client, path, validate=False)
    assert result.ok and result.partial and result.messages_loaded == 4
    assert result.source is not None
    assert [p.split(":")[0] for p in result.source["problems"]] == ["line 2", "line 4"]
    assert result.source["skipped"] == {"invalid message": 1, "unreadable": 1}
