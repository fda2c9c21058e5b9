"""``plait tools`` and ``plait run --mcp``: what a run offers, MCP servers from the command line."""

from __future__ import annotations

import json
import subprocess
import sys

from plait import Client
from plait.providers import Reply, ScriptedProvider
from plait.records import ToolCall
from plait.tools import BUILTIN_TOOLS
from tests.tools._mcp import STDIO, serve_http

from ._helpers import Run, assert_clean_error
from .test_cli_chat import model  # noqa: F401  (the fixture)

SERVER = " ".join(STDIO)


def test_tools_lists_the_built_ins_and_the_selection_run_uses(run: Run) -> None:
    listed = run("tools")
    assert listed.exit_code == 0, listed.output
    for t in BUILTIN_TOOLS:
        assert t.name in listed.stdout
    rows = json.loads(run("tools", "--json").stdout)
    assert [{k: r[k] for k in ("name", "description", "parameters")} for r in rows] == [
        t.spec() for t in BUILTIN_TOOLS
    ]
    assert {r["source"] for r in rows} == {"built-in"}
    chosen = json.loads(run("tools", "--tools", "read_file,list_files", "--json").stdout)
    assert [r["name"] for r in chosen] == ["read_file", "list_files"]
    assert json.loads(run("tools", "--no-tools", "--json").stdout) == []
    assert "no tools" in run("tools", "--no-tools").stdout
    bad = run("tools", "--tools", "rm")
    assert bad.exit_code == 2 and "rm" in bad.stderr


def test_tools_lists_an_mcp_server_s_tools_with_their_schemas(run: Run) -> None:
    rows = json.loads(run("tools", "--no-tools", "--mcp", SERVER, "--json").stdout)
    by_name = {r["name"]: r for r in rows}
    assert by_name["plait-test__add"]["parameters"]["required"] == ["a", "b"]
    assert by_name["plait-test__add"]["source"] == "mcp: plait-test"
    proc, url = serve_http()
    try:
        over_http = run("tools", "--mcp", url)
    finally:
        proc.kill()
        proc.wait()
    assert over_http.exit_code == 0, over_http.output
    assert "plait-test__total" in over_http.stdout and "read_file" in over_http.stdout


def test_run_mcp_offers_the_server_s_tools_for_that_run(
    run: Run, api: Client, model: ScriptedProvider  # noqa: F811
) -> None:
    model.add(
        Reply(tool_calls=(ToolCall("c1", "plait-test__add", {"a": 4, "b": 5}),),
              finish_reason="tool_calls"),
        "nine",
    )
    result = run("run", "add 4 and 5", "--yes", "--tools", "read_file", "--mcp", SERVER, "--json")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert lines[-1]["text"] == "nine"
    ended = [e for e in lines if e["type"] == "tool_end"]
    assert [(e["ok"], e["content"]) for e in ended] == [(True, "9")]
    names = [t.name for t in model.requests[0].tools]
    assert names[0] == "read_file" and "plait-test__add" in names
    stored = api.open(lines[-1]["session_id"])
    assert "mcp_servers" not in stored.settings  # --mcp is for the run, not kept


def test_tools_session_adds_the_servers_its_settings_name(run: Run, api: Client) -> None:
    s = api.sessions.new()
    s.inject({"role": "user", "content": "hi"})
    s.settings.set(mcp_servers=[{"command": STDIO, "name": "calc"}])
    rows = json.loads(run("tools", "--session", s.id, "--json").stdout)
    assert "calc__add" in [r["name"] for r in rows] and rows[0]["name"] == "shell"


def test_bad_mcp_options_are_clean_errors(run: Run, api: Client) -> None:
    for args in (["--mcp", ""], ["--mcp", "http:///x"]):
        result = run("tools", *args)
        assert result.exit_code == 2, result.output
        assert_clean_error(result)
    gone = run("tools", "--mcp", "/nonexistent/server-binary")
    assert_clean_error(gone, "MCP server")
    failed = run("run", "hi", "--mcp", "/nonexistent/server-binary")
    assert_clean_error(failed, "MCP server")
    assert api.sessions.list() == []  # the run never reached the model: nothing is kept


def test_the_real_command_with_no_standard_input() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "plait", "tools", "--json"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert [r["name"] for r in json.loads(done.stdout)] == [t.name for t in BUILTIN_TOOLS]


def test_chat_mcp_offers_the_server_s_tools_each_turn(
    run: Run, api: Client, model: ScriptedProvider  # noqa: F811
) -> None:
    model.add(
        Reply(tool_calls=(ToolCall("c1", "plait-test__add", {"a": 1, "b": 1}),),
              finish_reason="tool_calls"),
        "two",
        "still here",
    )
    result = run("chat", "--yes", "--no-tools", "--mcp", SERVER, input="add\nagain\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "two" in result.stdout and "still here" in result.stdout
    assert all("plait-test__add" in [t.name for t in r.tools] for r in model.requests)
    (info,) = api.sessions.list()
    results = [m for m in api.open(info.id).history() if m.role == "tool"]
    assert [(m.ok, m.text) for m in results] == [(True, "2")]
