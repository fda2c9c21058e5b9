"""``plait demo`` and what every command shares: -h, --version, main()."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from plait.cli import cli, main

from ._helpers import Run


def test_demo_runs_offline_and_its_sessions_are_listed(workspace: Path) -> None:
    runner = CliRunner()
    args = ["--workspace", str(workspace)]  # the default store: $PLAIT_HOME/plait.db
    started = time.perf_counter()
    result = runner.invoke(cli, [*args, "demo"], env={"COLUMNS": "200"})
    elapsed = time.perf_counter() - started
    assert result.exit_code == 0, result.output
    assert elapsed < 2.0
    out = result.stdout
    for word in ("recorded", "renamed", "fork", "fork_at", "detach", "merge", "lineage"):
        assert word in out
    listed = json.loads(runner.invoke(cli, [*args, "sessions", "list", "--json"]).stdout)
    assert len(listed) == 5
    operators = {item["lineage_operator"] for item in listed}
    assert operators == {None, "Session.fork", "Session.fork_at", "Session.detach", "Session.merge"}
    root = next(item for item in listed if item["lineage_operator"] is None)
    assert root["title"] == "Count the Python files"
    assert root["length"] == 5
    merged = next(item for item in listed if item["lineage_operator"] == "Session.merge")
    assert len(merged["parent_session_ids"]) == 2
    # The tree it printed marks the merge; the commands it suggests work.
    assert any(line.endswith(" *") and merged["id"] in line for line in out.splitlines())
    assert f"plait sessions tree {merged['id']}" in out
    tree = runner.invoke(cli, [*args, "sessions", "tree", merged["id"]])
    assert tree.exit_code == 0 and root["id"] in tree.stdout
    assert runner.invoke(cli, ["db", "check"]).stdout == "ok\n"


def test_demo_suggests_the_store_it_used(run: Run, db_path: Path) -> None:
    result = run("demo")
    assert result.exit_code == 0, result.output
    assert f"plait --store {db_path} --workspace" in result.stdout
    assert f"plait --store {db_path} sessions tree" in result.stdout


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
    with pytest.raises(SystemExit) as stopped:
        main(["--store", str(tmp_path / "x.db"), "sessions", "show", "nope"])
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert err == "Error: session 'nope': no such session\n"
