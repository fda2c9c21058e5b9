"""Tools from MCP servers: a server the suite starts, over stdio and streamable HTTP, in real runs.

The server (``mcp_server.py``) is written with the ``mcp`` SDK's own server class;
the model is the scripted provider, so every call the model makes is known.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import Client
from plait.errors import InvalidArgumentError, MissingDependencyError, ToolServerError
from plait.providers import Reply, ScriptedProvider
from plait.records import ToolCall
from plait.session import Session
from plait.tools import MCPServer, read_file
from tests.sandbox.conftest import leftovers

from ._mcp import STDIO, serve_http


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    proc, url = serve_http()
    try:
        yield url
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    with Client(tmp_path, store=":memory:") as client:
        yield client.session


def call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> Reply:
    return Reply(tool_calls=(ToolCall(call_id, name, arguments),), finish_reason="tool_calls")


def tool_results(session: Session) -> list[tuple[bool, str]]:
    return [(bool(r.payload["ok"]), str(r.payload["content"])) for r in session.transcript.records
            if r.kind == "tool"]


def test_a_run_offers_and_calls_a_stdio_server_s_tools(session: Session) -> None:
    model = ScriptedProvider([call("plait-test__add", {"a": 2, "b": 3}), "2 + 3 = 5"])
    done = session.run("add 2 and 3", provider=model,
                       tools=[read_file, MCPServer(STDIO)], on_approval=lambda c: True)
    assert done.text == "2 + 3 = 5" and done.steps == 2
    assert tool_results(session) == [(True, "5")]
    offered = {t.name: t for t in model.requests[0].tools}
    assert set(offered) == {"read_file", "plait-test__add", "plait-test__total",
                            "plait-test__fail", "plait-test__sleep", "plait-test__pid",
                            "plait-test__die"}
    # The server's schema is passed through as it gave it.
    assert offered["plait-test__add"].parameters["properties"]["a"]["type"] == "integer"
    assert offered["plait-test__add"].parameters["required"] == ["a", "b"]
    assert offered["plait-test__add"].description == "Add two integers."


def test_streamable_http_structured_results_errors_and_denials(
    session: Session, http_url: str
) -> None:
    model = ScriptedProvider([
        call("plait-test__total", {"terms": [1, 2, 3]}, "c1"),
        call("plait-test__fail", {"reason": "asked"}, "c2"),
        call("plait-test__add", {"a": "two", "b": 3}, "c3"),  # the server checks its schema
        call("plait-test__add", {"a": 1, "b": 1}, "c4"),
        "done",
    ])
    asked: list[str] = []

    def approve(tool_call: ToolCall) -> bool:
        asked.append(tool_call.name)
        return tool_call.id != "c4"

    done = session.run("go", provider=model, tools=[MCPServer(http_url)], on_approval=approve)
    assert done.text == "done"
    results = tool_results(session)
    assert results[0][0] and json.loads(results[0][1]) == {"total": 6, "terms": [1, 2, 3]}
    assert not results[1][0] and "fail" in results[1][1]
    assert not results[2][0] and "a" in results[2][1]
    assert results[3] == (False, "the user denied this tool call")
    assert asked == ["plait-test__total", "plait-test__fail", "plait-test__add",
                     "plait-test__add"]  # the same approval path as any tool


def test_a_call_past_its_timeout_is_a_failed_result_and_the_run_goes_on(
    session: Session,
) -> None:
    model = ScriptedProvider([
        call("plait-test__sleep", {"seconds": 120}, "c1"),
        call("plait-test__add", {"a": 1, "b": 2}, "c2"),
        "the server was slow",
    ])
    done = session.run("go", provider=model, tools=[MCPServer(STDIO, timeout=1)])
    assert done.text == "the server was slow"
    (slow_ok, slow), (add_ok, added) = tool_results(session)
    assert not slow_ok and "did not answer within 1 s" in slow
    assert (add_ok, added) == (True, "3")  # the connection still serves


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_server_that_dies_mid_call_is_a_failed_result_not_a_crashed_run(
    session: Session, transport: str
) -> None:
    proc = None
    if transport == "http":
        proc, target = serve_http()
        server = MCPServer(target, timeout=30)
    else:
        server = MCPServer(STDIO, timeout=30)
    try:
        model = ScriptedProvider([
            call("plait-test__die", {}, "c1"),
            call("plait-test__add", {"a": 1, "b": 2}, "c2"),
            "the server is gone",
        ])
        done = session.run("go", provider=model, tools=[server])
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
    assert done.text == "the server is gone" and done.finish_reason == "stop"
    (died_ok, died), (after_ok, after) = tool_results(session)
    assert not died_ok and "plait-test" in died
    assert not after_ok and "plait-test" in after
    if transport == "stdio":  # its standard error is quoted: the model (and you) see why
        assert "ended during the call to die" in died and "dying now" in died


def test_a_connection_lives_for_a_run_unless_its_owner_holds_it_open(session: Session) -> None:
    def pids_of(runs: int, server: MCPServer) -> list[int]:
        async def main() -> list[str]:
            for _ in range(runs):
                model = ScriptedProvider([call("plait-test__pid", {}), "ok"])
                await session.prompt("pid?", provider=model, tools=[server])
            return [r for ok, r in tool_results(session)[-runs:]]

        async def held() -> list[str]:
            async with server:
                return await main()

        return [int(p) for p in asyncio.run(held() if held_open else main())]

    server = MCPServer(STDIO)
    held_open = False
    first, second = pids_of(2, server)
    assert first != second  # each run started the server and stopped it
    held_open = True
    first, second = pids_of(2, server)
    assert first == second  # both runs borrowed the owner's connection

    async def die_then_pid() -> list[tuple[bool, str]]:
        async with server:
            for script in (call("plait-test__die", {}), call("plait-test__pid", {})):
                await session.prompt("go", provider=ScriptedProvider([script, "ok"]),
                                     tools=[server])
            return tool_results(session)[-2:]

    (died_ok, _), (pid_ok, pid) = asyncio.run(die_then_pid())
    assert not died_ok and pid_ok and int(pid) != first  # the next run started it again


def test_the_session_s_mcp_servers_setting_is_part_of_the_default_offer(
    session: Session,
) -> None:
    session.inject({"role": "system", "content": "You add."})
    session.settings.set(mcp_servers=[{"command": STDIO, "name": "calc"}])
    model = ScriptedProvider([call("calc__add", {"a": 20, "b": 22}), "42"])
    assert session.run("add", provider=model, on_approval=lambda c: True).text == "42"
    names = [t.name for t in model.requests[0].tools]
    assert names[:4] == ["shell", "read_file", "write_file", "list_files"]
    assert "calc__add" in names
    assert tool_results(session) == [(True, "42")]
    given = ScriptedProvider(["no tools"])
    session.run("again", provider=given, tools=[])  # tools given: only those
    assert given.requests[0].tools == ()


def test_a_server_that_cannot_start_fails_the_run_before_anything_is_recorded(
    session: Session, tmp_path: Path
) -> None:
    session.inject({"role": "system", "content": "x"})
    model = ScriptedProvider(["never"])
    bad = tmp_path / "not_a_server.py"
    bad.write_text("import sys\nprint('no MCP here', file=sys.stderr)\nsys.exit(2)\n")
    mute = [sys.executable, "-c", "import time; time.sleep(317.25)"]  # never answers
    for server in (MCPServer([sys.executable, str(bad)]),
                   MCPServer([str(tmp_path / "missing-command")]),
                   MCPServer(mute, connect_timeout=1)):
        with pytest.raises(ToolServerError) as caught:
            session.run("go", provider=model, tools=[server])
        assert server.name in str(caught.value)
    assert [r.kind for r in session.transcript.records] == ["system"] and not model.requests
    assert leftovers("317.25") == []  # the mute server was stopped, not left behind


def test_server_specs_are_checked_and_a_missing_sdk_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for spec in ({}, {"command": "x", "url": "http://h/mcp"}, {"command": ""},
                 {"command": "x", "colour": 1}, {"url": "http:///nohost"},
                 {"command": "x", "env": {"A": 1}}, {"command": "x", "timeout": 0},
                 {"command": "x", "name": 3}, {"command": "x", "cwd": ["/"]},
                 {"command": ["x", 1]}, 5):
        with pytest.raises(InvalidArgumentError):
            MCPServer.from_json(spec)  # type: ignore[arg-type]
    assert MCPServer.from_json("http://127.0.0.1:9/mcp").url == "http://127.0.0.1:9/mcp"
    assert MCPServer.from_json({"command": "uvx some-server --flag"}).argv == (
        "uvx", "some-server", "--flag")
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if the extra were not installed
    with pytest.raises(MissingDependencyError) as caught:
        asyncio.run(MCPServer(STDIO).list_tools())
    assert "plait[mcp]" in str(caught.value)


def test_two_servers_need_two_names_and_tool_choice_may_name_a_server_s_tool(
    session: Session, http_url: str
) -> None:
    model = ScriptedProvider(["never"])
    with pytest.raises(InvalidArgumentError, match="unique"):
        session.run("go", provider=model, tools=[MCPServer(STDIO), MCPServer(http_url)])
    assert not session.transcript.stored and not model.requests  # nothing was written
    model = ScriptedProvider([call("local__add", {"a": 1, "b": 2}), "3"])
    servers = [MCPServer(STDIO, name="local"),
               MCPServer(http_url, name="remote", headers={"X-Plait-Test": "yes"})]
    done = session.run("go", provider=model, tools=servers,
                       model_settings={"tool_choice": "local__add"})
    assert done.text == "3"
    sent = model.requests[0]
    assert sent.tool_choice == "local__add"
    assert {"local__add", "remote__add"} <= {t.name for t in sent.tools}
