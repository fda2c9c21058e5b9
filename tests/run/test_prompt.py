"""The agent loop's first slice: prompt() on a stored session with the scripted provider."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from plait import Client, Session
from plait.errors import InvalidArgumentError
from plait.providers import Reply, ScriptedProvider, Usage
from plait.records import ToolCall
from plait.run import DENIED, Denied, ToolFinished, prompt


def _session(client: Client, tmp_path: Path) -> Session:
    s = client.sessions.create([{"role": "system", "content": "You are terse."}])
    (tmp_path / "box").mkdir()
    (tmp_path / "box" / "hello.txt").write_text("hi there")
    return s.to("local", spec=str(tmp_path / "box"))


def test_a_plain_reply(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    provider = ScriptedProvider(["Hello!"])
    result = asyncio.run(prompt(s, "greet me", provider=provider))
    assert result.text == "Hello!" and result.steps == 1
    assert [m.role for m in s.history()] == ["user", "assistant"]
    sent = provider.requests[0].messages
    assert [m.role for m in sent] == ["system", "user"] and sent[0].text == "You are terse."


def test_tool_calls_run_in_the_sandbox_and_are_recorded_in_pairs(
    client: Client, tmp_path: Path
) -> None:
    s = _session(client, tmp_path)
    provider = ScriptedProvider([
        Reply(tool_calls=(ToolCall("c1", "read_file", {"path": "hello.txt"}),
                          ToolCall("c2", "read_file", {"path": "../escape.txt"})),
              usage=Usage(10, 5, 2), finish_reason="tool_calls"),
        Reply(text="The file says hi there.", usage=Usage(20, 6, 0)),
    ])
    events: list[object] = []
    result = asyncio.run(prompt(s, "what does hello.txt say?", provider=provider,
                                on_event=events.append))
    assert result.text == "The file says hi there."
    assert result.usage == {"input_tokens": 30, "output_tokens": 11, "cached_tokens": 2}
    history = s.history()
    assert [m.role for m in history] == ["user", "assistant", "tool", "tool", "assistant"]
    assert (history[2].tool_call_id, history[2].ok, history[2].text) == ("c1", True, "hi there")
    assert history[3].ok is False and "outside the sandbox" in history[3].text
    # The second model call saw the tool results.
    assert [m.role for m in provider.requests[1].messages][-2:] == ["tool", "tool"]
    assert s.transcript.records[2].meta["usage"] == {"input_tokens": 10, "output_tokens": 5,
                                          "cached_tokens": 2}
    assert events  # the stream was forwarded
    stats = client.session_stats([s.id])[0]
    assert (stats.replies, stats.input_tokens) == (2, 30)


def test_denied_and_unknown_tools_are_failed_results(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    provider = ScriptedProvider([
        Reply(tool_calls=(ToolCall("a", "shell", {"command": "rm -rf /"}),
                          ToolCall("b", "teleport", {})), finish_reason="tool_calls"),
        "Understood.",
    ])
    asked: list[str] = []

    async def approve(call: ToolCall) -> bool:
        asked.append(call.name)
        return call.name != "shell"

    asyncio.run(prompt(s, "do it", provider=provider, on_approval=approve))
    tools = [m for m in s.history() if m.role == "tool"]
    assert asked == ["shell", "teleport"]
    assert [(m.tool_call_id, m.ok) for m in tools] == [("a", False), ("b", False)]
    assert "denied" in tools[0].text and "no tool named" in tools[1].text


def test_a_denial_with_a_reason_is_what_the_model_reads(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    provider = ScriptedProvider([
        Reply(tool_calls=(ToolCall("a", "shell", {"command": "ls"}),), finish_reason="tool_calls"),
        "Understood.",
    ])
    events: list[object] = []

    def approve(call: ToolCall) -> Denied:
        return Denied("nobody was there to approve it")

    asyncio.run(prompt(s, "do it", provider=provider, on_approval=approve, on_event=events.append))
    [tool] = [m for m in s.history() if m.role == "tool"]
    assert (tool.ok, tool.text) == (False, "nobody was there to approve it")
    assert DENIED not in tool.text  # not reported to the model as the user's choice
    [finished] = [e for e in events if isinstance(e, ToolFinished)]
    assert finished.denied and finished.content == "nobody was there to approve it"


def test_the_step_limit_leaves_a_valid_transcript(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    loop_forever = Reply(tool_calls=(ToolCall("x", "list_files", {}),), finish_reason="tool_calls")
    result = asyncio.run(prompt(s, "loop", provider=ScriptedProvider([loop_forever] * 3),
                                max_steps=3))
    assert result.finish_reason == "max_steps" and result.steps == 3
    roles = [m.role for m in s.history()]
    assert roles == ["user"] + ["assistant", "tool"] * 3
    with pytest.raises(InvalidArgumentError):
        asyncio.run(prompt(s, "  ", provider=ScriptedProvider(["x"])))
    with pytest.raises(InvalidArgumentError):
        asyncio.run(prompt(s, "x", provider=ScriptedProvider(["x"]), max_steps=0))


def test_run_session_joins_agent_and_user_and_shares_the_user_sandbox(tmp_path: Path) -> None:
    from plait import run_session

    (tmp_path / "box").mkdir()
    (tmp_path / "box" / "a.txt").write_text("A")
    agent = Session.from_agent_prompt("You are a concise assistant.")
    user = Session.from_user_message("List files in the sandbox.").to(
        "local", spec=str(tmp_path / "box"))
    provider = ScriptedProvider([
        Reply(tool_calls=(ToolCall("l", "list_files", {}),), finish_reason="tool_calls"),
        "There is a.txt.",
    ])
    with user:
        handle = user.require_sandbox()
        out, result = asyncio.run(run_session(agent, user, provider=provider))
        assert out.sandbox is handle and handle.refcount == 2  # shares the user's handle
    assert out.parent_session_ids == (agent.id, user.id)
    assert out.lineage_operator == "Session.run"
    assert [r.kind for r in out.chunk_table.rows] == [
        "system", "user", "assistant", "tool", "assistant"]
    assert out.chunk_table.rows[3].payload["content"] == "a.txt"
    assert result.text == "There is a.txt."
    assert agent.transcript.length == 1 and user.transcript.length == 1  # the inputs did not change
    out.close_sandbox()
    assert handle.closed
    with pytest.raises(InvalidArgumentError):
        asyncio.run(run_session(agent, agent, provider=ScriptedProvider(["x"])))


def test_prompt_once_persists_nothing(tmp_path: Path) -> None:
    from plait import prompt_once

    with Client(tmp_path, store=tmp_path / "s.db") as client:
        before = client.sessions.list(all_workspaces=True)
        provider = ScriptedProvider([
            Reply(tool_calls=(ToolCall("w", "write_file", {"path": "x.txt", "content": "1"}),),
                  finish_reason="tool_calls"),
            "done",
        ])
        result = asyncio.run(prompt_once("write x", provider=provider, system="sys"))
        assert result.text == "done" and [r.kind for r in result.records] == [
            "user", "assistant", "tool", "assistant"]
        assert client.sessions.list(all_workspaces=True) == before
    assert provider.requests[0].messages[0].text == "sys"
