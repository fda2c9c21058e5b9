"""``plait sessions search`` and ``plait db reindex``, with no terminal (a script, a pipe)."""

from __future__ import annotations

import json
from pathlib import Path

from plait import Client

from ._helpers import Run, assert_clean_error, conversation


def test_search_lists_each_session_that_shows_the_message(run: Run, api: Client) -> None:
    a = conversation(api, "Where is the quokka?")
    b = a.fork()  # shares the question with a
    b.inject({"role": "user", "content": "and the wombat?"})
    conversation(api, "Nothing to find here")
    result = run("sessions", "search", "quokka")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert sorted(line.split()[0] for line in lines) == sorted([a.id, b.id])
    assert all("#1 user" in line and "Where is the quokka?" in line for line in lines)
    assert "«" not in result.stdout  # the marks become bold on a terminal, and go away here
    only = run("sessions", "search", "wombat", "--json")
    assert only.exit_code == 0, only.output
    hits = json.loads(only.stdout)
    assert [(h["session_id"], h["position"], h["role"]) for h in hits] == [(b.id, 5, "user")]
    assert hits[0]["snippet"] == "and the «wombat»?" and hits[0]["title"] is None
    assert hits[0]["message"] == 5  # as `plait sessions show` numbers it


def test_search_finds_nothing_in_a_deleted_session(run: Run, api: Client) -> None:
    s = conversation(api, "Where is the platypus?")
    api.sessions.delete(s.id)
    result = run("sessions", "search", "platypus", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []
    said = run("sessions", "search", "platypus")
    assert "no message in the workspace" in said.stdout


def test_search_keeps_to_the_workspace_unless_all(run: Run, api: Client, tmp_path) -> None:
    conversation(api, "numbat here")
    other = tmp_path / "elsewhere"
    other.mkdir()
    with Client(other, store=api.store) as there:
        conversation(there, "numbat there")
    here = json.loads(run("sessions", "search", "numbat", "--json").stdout)
    every = json.loads(run("sessions", "search", "numbat", "--json", "--all").stdout)
    assert len(here) == 1 and len(every) == 2


def test_a_bad_query_is_a_clean_error(run: Run, api: Client) -> None:
    conversation(api)
    assert_clean_error(run("sessions", "search", '"unclosed'), "bad search query")


def test_db_reindex_rebuilds_what_search_finds(run: Run, api: Client) -> None:
    conversation(api, "the echidna question")
    before = json.loads(run("sessions", "search", "echidna", "--json").stdout)
    result = run("db", "reindex")
    assert result.exit_code == 0, result.output
    assert "rebuilt the full-text index" in result.stdout
    assert json.loads(run("sessions", "search", "echidna", "--json").stdout) == before


def test_an_imported_transcript_is_searched_like_any_other(run: Run, api: Client, tmp_path) -> None:
    """The index is the engine's: whatever writes records (an import here) is indexed."""
    lines = [
        {"role": "user", "content": "what does the kookaburra eat?"},
        {"role": "assistant", "content": "Mostly insects and small reptiles."},
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in lines))
    done = run("import", str(path), "--format", "openai")
    assert done.exit_code == 0, done.output
    hits = json.loads(run("sessions", "search", "kookaburra", "--json").stdout)
    assert [(h["position"], h["role"]) for h in hits] == [(0, "user")]


def test_search_and_reindex_on_an_encrypted_store(run: Run, db_path: Path, workspace: Path) -> None:
    key = run("db", "keygen").stdout.strip()
    env = {"PLAIT_ENCRYPTION_KEY": key}
    with Client(workspace, store=db_path, encryption_key=key) as client:
        s = client.sessions.new()
        s.inject({"role": "user", "content": "Where is the sealed quokka?"})
    found = run("sessions", "search", '"sealed quokka"', "--json", env=env)
    assert found.exit_code == 0, found.output
    hits = json.loads(found.stdout)
    assert [(h["session_id"], h["snippet"]) for h in hits] == [
        (s.id, "Where is the «sealed» «quokka»?")
    ]
    assert run("db", "reindex", env=env).exit_code == 0
    again = run("sessions", "search", "quokka", "--json", env=env)
    assert [h["session_id"] for h in json.loads(again.stdout)] == [s.id]
    # Only words and phrases there: a prefix is a clean error that says so.
    assert_clean_error(run("sessions", "search", "quok*", env=env), "quoted phrases")
