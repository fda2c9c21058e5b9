"""``plait chat`` and ``plait run``: a scripted model behind the real commands."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import plait.session.runs as session_module
from plait import Client
from plait.providers import Reply, ScriptedProvider, Usage
from plait.records import ToolCall

from ._helpers import Run, assert_clean_error, conversation


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> ScriptedProvider:
    """The provider every command gets, whatever model it names (recorded in ``specs``)."""
    provider = ScriptedProvider([])
    specs: list[str | None] = []

    def select(spec: str | None) -> ScriptedProvider:
        specs.append(spec)
        return provider

    monkeypatch.setattr(session_module, "select_provider", select)
    provider.specs = specs  # type: ignore[attr-defined]
    return provider


def _script(provider: ScriptedProvider, *replies: str | Reply) -> None:
    provider.add(*replies)


def test_run_json_prints_the_result_and_stores_the_exchange(
    run: Run, api: Client, model: ScriptedProvider, tmp_path: Path
) -> None:
    box = tmp_path / "box"
    box.mkdir()
    (box / "notes.txt").write_text("buy milk")
    _script(
        model,
        Reply(tool_calls=(ToolCall("c1", "read_file", {"path": "notes.txt"}),),
              finish_reason="tool_calls"),
        Reply("You need to buy milk.", usage=Usage(9, 4)),
    )
    result = run("run", "what is in notes.txt?", "--json", "--yes", "--dir", str(box),
                 "--model", "scripted:x", "--system", "Be brief.")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    out = lines[-1]
    assert out["type"] == "result"
    assert out["text"] == "You need to buy milk." and out["steps"] == 2
    assert out["usage"]["input_tokens"] == 9
    types = [e["type"] for e in lines[:-1]]
    assert {"text_delta", "tool_call_delta", "usage", "finish", "tool_start", "tool_end",
            "iteration_end"} <= set(types)
    records = [e["record"] for e in lines if e["type"] == "record"]
    assert [r["kind"] for r in records] == ["user", "assistant", "tool", "assistant"]
    assert records[2]["payload"]["content"] == "buy milk"
    text = "".join(e["text"] for e in lines if e["type"] == "text_delta")
    assert text == "You need to buy milk."
    assert model.specs == ["scripted:x"]  # type: ignore[attr-defined]
    stored = api.open(out["session_id"])
    assert [m.role for m in stored.history()] == ["user", "assistant", "tool", "assistant"]
    assert stored.transcript.records[0].text == "Be brief."


def test_run_resume_and_usage_errors(run: Run, api: Client, model: ScriptedProvider) -> None:
    s = api.sessions.new()
    s.inject({"role": "user", "content": "unanswered"})
    _script(model, "Answered now.")
    result = run("run", "--resume", "--session", s.id, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout.splitlines()[-1])["text"] == "Answered now."
    assert_clean_error(run("run", "--resume", "--session", s.id), "not interrupted")
    bad = run("run")  # no TEXT and nothing on standard input
    assert bad.exit_code == 2 and "standard input held no prompt" in bad.output
    both = run("run", "text", "--resume")
    assert both.exit_code == 2 and "not both" in both.output


def test_chat_turns_and_commands(
    run: Run, api: Client, model: ScriptedProvider, tmp_path: Path
) -> None:
    _script(model, "Hello, Ada.", "Refactor titled", "Your name is Ada.", "On the branch.")
    export = tmp_path / "page.html"
    lines = [
        "hi, I am Ada",
        "/name",
        "/ask what is my name?",
        "/history",
        "/context",
        "/fork",
        "and on a branch?",
        f"/export {export}",
        "/rename  My chat ",
        "/bogus",
        "/quit",
    ]
    result = run("chat", "--yes", input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Hello, Ada." in out and "title: Refactor titled" in out
    assert "Your name is Ada." in out and "On the branch." in out
    assert "unknown command /bogus" in out and "renamed to 'My chat'" in out
    assert "User messages" in out and "Assistant messages" in out and "free" in out
    assert export.exists() and "Ada" in export.read_text()
    sessions = api.sessions.list()
    assert len(sessions) == 2
    branch = next(i for i in sessions if i.lineage_operator == "Session.fork")
    forked = api.open(branch.id)
    assert forked.title == "My chat"
    assert [m.text for m in forked.history()] == [
        "hi, I am Ada", "Hello, Ada.", "and on a branch?", "On the branch."
    ]
    # /ask added nothing to the first session.
    first = api.open(next(i.id for i in sessions if i.id != branch.id))
    assert len(first.history()) == 2


def test_chat_undo_takes_back_the_last_exchange_and_redo_brings_it_back(
    run: Run, api: Client, model: ScriptedProvider
) -> None:
    _script(model, "First answer.", "Wrong answer.", "Better answer.")
    lines = ["first", "second", "/undo", "/history", "second, better", "/undo", "/redo",
             "/quit"]
    result = run("chat", "--yes", input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    assert "took back the last exchange (2 messages left)" in result.stdout
    assert "brought it back (4 messages)" in result.stdout
    (info,) = api.sessions.list()
    s = api.open(info.id)
    assert [m.text for m in s.history()] == [
        "first", "First answer.", "second, better", "Better answer."]
    assert len(s.transcript.hidden_heads()) == 2  # the wrong answer is still there, hidden


def test_chat_resume_retry_and_compact(run: Run, api: Client, model: ScriptedProvider) -> None:
    s = conversation(api)
    s.inject({"role": "user", "content": "still waiting"})
    for i in range(14):
        s.inject({"role": "assistant" if i % 2 else "user", "content": f"filler {i}"})
    s.inject({"role": "user", "content": "last question"})
    _script(model, "Picked up.")
    lines = ["/resume", "/resume 1", "/retry", "/retry", "/compact", "/uncompact", "/quit"]
    result = run("chat", input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f" 1. {s.id[:8]}" in out and "Picked up." in out
    # /retry says what it does in words, not by the resume kind's name.
    assert "the request has no reply yet; the model is next" in out
    assert "call_model" not in out
    assert "How many files?" in out  # the picker names an untitled session by its first prompt
    assert "nothing was interrupted" in out
    assert "folded" in out and "the last compaction is undone" in out
    assert api.open(s.id).history()[-1].text == "Picked up."


def test_chat_ends_on_eof_and_commands_before_anything_is_stored(
    run: Run, api: Client, model: ScriptedProvider
) -> None:
    result = run("chat", input="/fork\n/export\n/context\n")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("nothing is stored yet") == 3
    assert api.sessions.list() == []


def test_a_chat_where_nothing_was_said_leaves_no_session(
    run: Run, api: Client, model: ScriptedProvider, tmp_path: Path
) -> None:
    # --dir stores the session's sandbox folder at once; with nothing said it is not kept.
    result = run("chat", "--dir", str(tmp_path), input="/quit\n")
    assert result.exit_code == 0, result.output
    assert api.sessions.list() == []


@pytest.mark.parametrize("command", ["chat", "run"])
def test_a_model_that_is_no_model_spec_is_refused_at_the_start(
    run: Run, api: Client, command: str
) -> None:
    args = [command, "hi"] if command == "run" else [command]
    result = run(*args, "--model", "gpt-4o", input="hello?\n")
    assert_clean_error(result, "model spec 'gpt-4o'", "openai, openai-responses, anthropic")
    assert "you>" not in result.stdout
    assert api.sessions.list() == []


def test_chat_redo_and_resume_n_say_what_they_mean(
    run: Run, api: Client, model: ScriptedProvider
) -> None:
    s = api.sessions.create([{"role": "user", "content": "hi"}])
    lines = ["/redo", "/resume 7", "/resume", "/resume 7", "/resume 1"]
    result = run("chat", s.id, input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "the last message:" in out and "the last 1 messages" not in out
    assert "nothing to redo: /redo brings back what /undo took" in out
    assert "has no rewind to undo" not in out
    assert "no session numbered 7 (listed: none yet); /resume lists the recent ones" in out
    assert "no session numbered 7 (listed: 1 to 1)" in out
    assert out.count(f"session {s.id}") == 2  # /resume 1 switched to it again


def test_chat_with_no_tools_says_so_in_its_first_line(run: Run, model: ScriptedProvider) -> None:
    first = run("chat", "--no-tools", input="/quit\n").stdout.splitlines()[0]
    assert " · no tools offered · " in first and "tools run in" not in first
    first = run("chat", input="/quit\n").stdout.splitlines()[0]
    assert " · tools run in a temporary folder (" in first


def test_a_failing_model_does_not_end_the_chat(
    run: Run, api: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    from plait.errors import ProviderError
    from plait.providers import Request, StreamEvent

    class Down:
        name, model = "down", "down-1"

        async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
            raise ProviderError("down", "503 service unavailable")
            yield  # an async generator

    monkeypatch.setattr(session_module, "select_provider", lambda spec: Down())
    result = run("chat", input="hello?\n/history\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "error: down: 503 service unavailable" in result.stdout
    assert "/retry picks the request up" in result.stdout
    assert "user: hello?" in result.stdout  # the request was kept; /history still ran


def test_a_reply_cut_at_the_output_limit_says_retry_continues_it(
    run: Run, api: Client, model: ScriptedProvider
) -> None:
    _script(model, Reply("The first half", finish_reason="length"), "and the rest.")
    result = run("chat", input="write it all\n/retry\n/quit\n")
    assert result.exit_code == 0, result.output
    assert "hit the output limit; /retry continues it" in result.stdout
    assert "the reply reached the output limit; the model is asked to continue" in result.stdout
    assert "and the rest." in result.stdout


def test_python_dash_m_plait_is_the_command() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "plait", "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.startswith("plait, version")


def test_chat_shows_reasoning_on_its_own_lines(
    run: Run, api: Client, model: ScriptedProvider
) -> None:
    from plait.providers import Finish, ReasoningDelta, TextDelta

    model.add([ReasoningDelta("Thinking about it"), TextDelta("Sure."), Finish("stop")])
    result = run("chat", "--yes", input="do it\n/quit\n")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "Thinking about it" in lines and "Sure." in lines  # each on its own line
    assert lines.index("Thinking about it") < lines.index("Sure.")
