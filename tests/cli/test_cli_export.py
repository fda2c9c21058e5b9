"""``plait export ID`` and ``plait stats [IDS...]``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from plait import Client

from ._helpers import Run, assert_clean_error, conversation


def test_export_writes_html_in_the_working_directory_under_a_name_that_never_collides(
    run: Run, api: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    # Made within a second: their ids share the first 8 characters, their exports do not.
    first, second = conversation(api), conversation(api, "Which files?")
    second.rename("Fix the Parser, fast!")
    paths = []
    # A prefix works where an id is taken: the shortest one the store finds unique.
    prefix = next(first.id[:n] for n in range(8, 37)
                  if not second.id.startswith(first.id[:n]))
    for s in (first, second):
        result = run("export", prefix if s is first else s.id)
        assert result.exit_code == 0, result.output
        paths.append(Path(result.stdout.strip()))
    assert paths == [
        here / f"plait-{first.id}.html",
        here / f"plait-fix-the-parser-fast-{second.id}.html",
    ]
    assert "How many files?" in paths[0].read_text(encoding="utf-8")
    assert "Which files?" in paths[1].read_text(encoding="utf-8")
    assert "<!DOCTYPE html>" in paths[0].read_text(encoding="utf-8")
    md = run("export", first.id, "--md").stdout.strip()
    assert md == str(here / f"plait-{first.id}.md")


def test_export_md_and_a_path_relative_to_the_working_directory(
    run: Run, api: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = conversation(api)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    result = run("export", s.id, "--md", "-o", "out/s.md")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(tmp_path / "out" / "s.md")
    assert "## Next request" in (tmp_path / "out" / "s.md").read_text(encoding="utf-8")
    result = run("export", s.id, "--html", "--output", "s.html")
    assert result.stdout.strip() == os.path.join(tmp_path, "s.html")


def test_export_errors_are_one_line(run: Run, api: Client) -> None:
    assert_clean_error(run("export", "nope"), "nope")
    empty = api.open("empty-one")
    assert_clean_error(run("export", empty.id), "nothing to export")
    assert run("export", "-h").exit_code == 0


def test_stats_table_and_json(run: Run, api: Client) -> None:
    s = conversation(api)
    s.inject(
        {
            "role": "assistant",
            "content": "Done.",
            "meta": {"usage": {"input_tokens": 1200, "output_tokens": 30, "cached_tokens": 300}},
        }
    )
    other = conversation(api, "Other?")
    result = run("stats", s.id, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [
        {
            "id": s.id,
            "entries": 6,
            "replies": 1,
            "input_tokens": 1200,
            "output_tokens": 30,
            "cached_tokens": 300,
            "cache_share": 0.25,
        }
    ]
    table = run("stats").stdout  # without IDS: the workspace's recent sessions
    lines = table.splitlines()
    assert lines[0].split() == ["id", "entries", "replies", "input", "output", "cached", "cache"]
    row = next(line for line in lines if line.startswith(s.id))
    assert row.split()[1:] == ["6", "1", "1,200", "30", "300", "25%"]
    assert any(line.startswith(other.id) for line in lines)
    assert [i["id"] for i in json.loads(run("stats", "--json", "-n", "1").stdout)] == [other.id]


def test_stats_errors_and_empty(run: Run, api: Client) -> None:
    assert_clean_error(run("stats", "nope"), "nope")
    result = run("stats")
    assert result.exit_code == 0 and "no sessions" in result.stdout
    assert json.loads(run("stats", "--json").stdout) == []


def test_a_bundle_is_named_by_its_id_only_so_its_name_leaks_no_redacted_title(
    run: Run, api: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    s = conversation(api)
    s.rename("debug AKIAIOSFODNN7EXAMPLE")
    result = run("export", s.id, "--bundle", "sanitized")
    assert result.exit_code == 0, result.output
    assert Path(result.stdout.strip()) == tmp_path / f"plait-{s.id}.bundle.json"


@pytest.mark.parametrize(("fmt", "reader"), [("openai", "openai"), ("claude-code", "claude-code")])
def test_export_as_another_agents_format_reads_back(
    run: Run, api: Client, tmp_path: Path, fmt: str, reader: str
) -> None:
    s = api.sessions.create([
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "What is in notes.md?"},
        {"role": "assistant", "content": "Let me look.",
         "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.md"}}]},
        {"role": "tool", "tool_call_id": "c1", "tool_name": "read_file", "content": "TODO"},
        {"role": "assistant", "content": "It says TODO."},
    ])
    out = tmp_path / f"out.{fmt}"
    written = run("export", s.id[:13], "--as", fmt, "-o", str(out))
    assert written.exit_code == 0, written.output
    assert written.stdout.strip() == str(out)
    imported = run("import", str(out), "--format", reader)
    assert imported.exit_code == 0, imported.output
    back = api.sessions.list(limit=1)[0]
    again = [(m.role, m.text) for m in api.open(back.id).history()]
    assert again == [(m.role, m.text) for m in s.history()]
