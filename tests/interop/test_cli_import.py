"""``plait import``: the command, its output, its errors."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from plait import Client
from plait.cli import cli

Run = Callable[..., Result]


@pytest.fixture
def run(tmp_path: Path) -> Run:
    """Invoke ``plait --store <db> --workspace <ws> ARGS...``."""
    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "x.db"

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(cli, ["--store", str(db), "--workspace", str(ws), *args])

    invoke.db = db  # type: ignore[attr-defined]
    invoke.ws = ws  # type: ignore[attr-defined]
    return invoke


def _client(run: Run) -> Client:
    return Client(run.ws, store=run.db)  # type: ignore[attr-defined]


def test_import_prints_what_was_imported(run: Run, transcripts: Path) -> None:
    path = transcripts / "claude-code" / "sniffly_push-to-github_v1.0.17.jsonl"
    result = run("import", str(path), "--id", "pushed")
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    assert first.startswith("imported pushed")
    assert "14 messages (3 turns) from claude-code message_events" in first
    assert "anthropic/claude-sonnet-4-20250514" in result.stdout
    with _client(run) as c:
        s = c.open("pushed")
        assert s.title == "AI Music Generation: Diverse Embedding Mapping"
        assert s.lineage_operator == "Session.import"


def test_an_imported_session_is_listed_with_the_agent_it_came_from(
    run: Run, transcripts: Path
) -> None:
    files = {
        "claude": transcripts / "claude-code" / "sniffly_push-to-github_v1.0.17.jsonl",
        "codex": transcripts / "codex" / "aisessions_pomodoro_v0.47.0.jsonl",
        "gemini": transcripts / "gemini-cli" / "codemie_session-2025-12-01.json",
    }
    for name, path in files.items():
        assert run("import", str(path), "--id", name).exit_code == 0
    listed = run("sessions", "list", "--json")
    sources = {"claude": "claude-code", "codex": "codex", "gemini": "gemini-cli"}
    assert {i["id"]: i["source"] for i in json.loads(listed.stdout)} == sources
    table = run("sessions", "list").stdout.splitlines()[1:]
    for row in table:
        name = row.split()[0]
        assert f"  {sources[name]}  " in row, row


def test_import_json(run: Run, transcripts: Path) -> None:
    path = transcripts / "codex" / "aisessions_pomodoro_v0.47.0.jsonl"
    result = run("import", str(path), "--json", "--title", "Pomodoro", "--last", "10")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is True
    assert data["messages_loaded"] <= 10 and data["truncated"] is True
    assert data["source"]["schema"] == "plait.session_seed_source.v1"
    assert data["source"]["format"] == "codex"
    with _client(run) as c:
        assert c.open(data["session_id"]).title == "Pomodoro"


def test_import_with_format_and_drop_tool_calls(run: Run, transcripts: Path) -> None:
    path = transcripts / "openai-chat" / "openhands-sdk_fncall-messages_claude-sonnet-4.json"
    result = run("import", str(path), "--format", "openai", "--drop-tool-calls", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["tool_format"] == "none"


def test_malformed_file_is_one_clean_error(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n{"role": "assistant", "cont')
    result = run("import", str(path))
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert result.stderr.strip().splitlines()[-1].startswith(f"Error: {path}:2: ")
    with _client(run) as c:
        assert c.sessions.list() == []
    result = run("import", str(path), "--lenient")
    assert result.exit_code == 0, result.output
    assert "PARTIAL" in result.stdout
    assert "skipped line 2" in result.stdout


def test_refusals_exit_1(run: Run, transcripts: Path, tmp_path: Path) -> None:
    path = transcripts / "claude-code" / "sniffly_summary-only_v1.0.17.jsonl"
    result = run("import", str(path))
    assert result.exit_code == 1
    assert "nothing imported: no prompt-visible messages" in result.stderr
    result = run("import", str(path), "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["ok"] is False
    result = run("import", str(tmp_path / "missing.jsonl"))
    assert result.exit_code == 1 and "cannot read the file" in result.stderr
    taken = transcripts / "claude-code" / "synthetic_simonw_sample_session.jsonl"
    assert run("import", str(taken), "--id", "x").exit_code == 0
    result = run("import", str(taken), "--id", "x")
    assert result.exit_code == 1 and "already exists" in result.stderr


def test_a_wrong_format_or_a_bad_id_is_named_and_nothing_is_made(
    run: Run, transcripts: Path
) -> None:
    codex = transcripts / "codex" / "aisessions_pomodoro_v0.47.0.jsonl"
    result = run("import", str(codex), "--format", "claude-code")
    assert result.exit_code == 1
    assert result.stderr.strip().endswith(
        "nothing imported: no prompt-visible messages to seed: none read as claude-code"
    )
    for bad in ("", " x", ".."):
        result = run("import", str(codex), "--id", bad)
        assert result.exit_code == 2 and "Traceback" not in result.output
        last = result.stderr.strip().splitlines()[-1]
        assert last.startswith(f"Error: Invalid value for '--id': {bad!r} is not a session id")
        assert "rename_session" not in result.stderr
    with _client(run) as c:
        assert c.sessions.list() == []


def test_a_one_message_import_says_message(run: Run, tmp_path: Path) -> None:
    path = tmp_path / "one.json"
    path.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    result = run("import", str(path))
    assert result.exit_code == 0, result.output
    first, second = result.stdout.splitlines()[:2]
    assert first.endswith("  1 message (1 turn) from openai message_events")
    assert second == "1 source record"


def test_help(run: Run) -> None:
    result = run("import", "-h")
    assert result.exit_code == 0
    for option in ("--format", "--id", "--title", "--json", "claude-code", "codex"):
        assert option in result.stdout
