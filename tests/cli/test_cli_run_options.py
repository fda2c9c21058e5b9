"""``plait run`` / ``chat`` options: model settings (``-o``), the tools offered, file history."""

from __future__ import annotations

import json
from pathlib import Path

from plait import Client
from plait.providers import ModelSettings, Reply, ScriptedProvider
from plait.records import ToolCall

from ._helpers import Run, assert_clean_error, conversation
from .test_cli_chat import model  # noqa: F401  (the fixture)


def test_dash_o_sets_model_settings_and_the_session_keeps_them(
    run: Run, api: Client, model: ScriptedProvider  # noqa: F811
) -> None:
    s = conversation(api)
    model.add("short")
    result = run("run", "hi", "--session", s.id, "-o", "max_tokens", "20",
                 "-o", "temperature", "0", "-o", "stop", '["END"]', "--no-tools")
    assert result.exit_code == 0, result.output
    sent = model.requests[-1]
    assert (sent.max_tokens, sent.temperature, sent.stop) == (20, 0.0, ("END",))
    assert sent.tools == ()  # --no-tools
    assert api.open(s.id).settings.model_settings == ModelSettings(
        max_tokens=20, temperature=0.0, stop=("END",)
    )


def test_dash_o_sets_the_sdks_timeout_retries_and_prompt_cache(
    run: Run, api: Client, model: ScriptedProvider  # noqa: F811
) -> None:
    s = conversation(api)
    model.add("short")
    result = run("run", "hi", "--session", s.id, "-o", "timeout", "30", "-o", "max_retries",
                 "0", "-o", "prompt_cache", "false", "--no-tools")
    assert result.exit_code == 0, result.output
    sent = model.requests[-1]
    assert (sent.timeout, sent.max_retries, sent.prompt_cache) == (30.0, 0, False)


def test_tools_chooses_the_built_ins_offered(
    run: Run, api: Client, model: ScriptedProvider  # noqa: F811
) -> None:
    s = conversation(api)
    model.add("ok")
    assert run("run", "hi", "--session", s.id, "--tools", "read_file,list_files").exit_code == 0
    assert [t.name for t in model.requests[-1].tools] == ["read_file", "list_files"]


def test_bad_options_refuse_before_anything_is_made(
    run: Run, api: Client, model: ScriptedProvider  # noqa: F811
) -> None:
    before = len(api.sessions.list(limit=100))
    for args in (
        ["-o", "max_tokns", "5"],
        ["-o", "temperature", "9"],
        ["-o", "timeout", "0"],
        ["-o", "max_retries", "-1"],
        ["-o", "prompt_cache", "yes"],
        ["--tools", "rm"],
    ):
        result = run("run", "hi", *args)
        assert result.exit_code == 2, result.output
        assert_clean_error(result)
    assert len(api.sessions.list(limit=100)) == before and not model.requests


def test_diff_files_and_fork_with_a_workspace(
    run: Run, api: Client, model: ScriptedProvider, tmp_path: Path  # noqa: F811
) -> None:
    box = tmp_path / "box"
    box.mkdir()
    s = api.sessions.create([{"role": "user", "content": "hi"}]).to("local", spec=str(box))
    model.add(
        Reply(tool_calls=(ToolCall("c1", "write_file", {"path": "n.txt", "content": "x"}),),
              finish_reason="tool_calls"),
        "written",
    )
    assert run("run", "write", "--session", s.id, "--yes").exit_code == 0
    out = run("sessions", "diff-files", s.id, "1", "5")
    assert out.exit_code == 0, out.output
    assert out.stdout.splitlines() == ["+ n.txt"]
    rows = json.loads(run("sessions", "diff-files", s.id[:13], "1", "5", "--json").stdout)
    assert rows == [{"path": "n.txt", "change": "added", "kind": "file"}]
    copy = tmp_path / "copy"
    made = run("sessions", "fork", s.id, "--at", "2", "--workspace", str(copy))
    assert made.exit_code == 0, made.output
    assert sorted(p.name for p in copy.iterdir()) == []  # before the write
    assert (box / "n.txt").exists()
