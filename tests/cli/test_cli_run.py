"""``plait run`` for scripts: no prompt without a terminal, JSON errors, stdin, no leftovers."""

from __future__ import annotations

import json

import pytest

from plait import Client
from plait.providers import Reply, ScriptedProvider
from plait.records import ToolCall

from ._helpers import Run, assert_clean_error, conversation
from .test_cli_chat import model  # noqa: F401  (the fixture)


def test_without_a_terminal_a_tool_call_is_denied_and_the_run_goes_on(
    run: Run, api: Client, model: ScriptedProvider  # noqa: F811
) -> None:
    s = conversation(api)
    model.add(
        Reply(tool_calls=(ToolCall("c9", "shell", {"command": "echo hi"}),),
              finish_reason="tool_calls"),
        "Not allowed, fine.",
    )
    # Standard input is not a terminal (and says "y"): nobody is asked, nothing waits.
    result = run("run", "run echo", "--session", s.id[:13], input="y\n")
    assert result.exit_code == 0, result.output
    assert "no terminal to ask at" in result.stderr and "[y/N]" not in result.output
    assert "-> shell" in result.stdout
    assert "failed: there was no terminal to ask the user at" in result.stdout
    assert "Not allowed, fine." in result.stdout and f"session {s.id}" in result.stdout
    tool = [r for r in api.open(s.id).transcript.records if r.kind == "tool"][-1]
    assert (tool.tool_call_id, tool.ok) == ("c9", False)
    assert "was not run" in tool.text and not tool.meta.get("interrupted")

    model.add(
        Reply(tool_calls=(ToolCall("c10", "shell", {"command": "echo hi"}),),
              finish_reason="tool_calls"),
        "Done.",
    )
    lines = run("run", "again", "--session", s.id, "--json").stdout.splitlines()
    ends = [json.loads(line) for line in lines if '"tool_end"' in line]
    assert ends and ends[0]["ok"] is False and json.loads(lines[-1])["text"] == "Done."


@pytest.mark.parametrize("args", [(), ("-",)])
def test_the_prompt_comes_from_standard_input(
    run: Run, api: Client, model: ScriptedProvider, args: tuple[str, ...]  # noqa: F811
) -> None:
    model.add("Read it.")
    result = run("run", *args, "-s", "Be brief.", "--json", input="summarise this\nplease\n")
    assert result.exit_code == 0, result.output
    session = api.open(json.loads(result.stdout.splitlines()[-1])["session_id"])
    assert [(r.kind, r.text) for r in session.transcript.records[:2]] == [
        ("system", "Be brief."),
        ("user", "summarise this\nplease"),
    ]


def test_system_only_for_a_new_session(
    run: Run, api: Client, model: ScriptedProvider  # noqa: F811
) -> None:
    s = conversation(api)
    result = run("run", "hi", "--session", s.id, "-s", "Other.")
    assert result.exit_code == 2 and "new session only" in result.output


def test_a_failing_model_exits_non_zero_leaves_no_session_and_says_it_in_json(
    run: Run, api: Client, model: ScriptedProvider  # noqa: F811
) -> None:
    # The script is empty: the model fails before it answers anything.
    result = run("run", "hello?", "--json")
    assert result.exit_code == 1
    line = json.loads(result.stdout.splitlines()[-1])
    assert line["type"] == "error" and line["error"]["code"] == "ScriptExhaustedError"
    assert line["session_id"] is None and "Traceback" not in result.output
    assert api.sessions.list() == []
    plain = run("run", "hello?")
    assert_clean_error(plain, "scripted")
    assert "no session was kept" in plain.stderr
    assert api.sessions.list() == []
    # A session that existed before the run is kept, with the request, for --resume.
    s = conversation(api)
    kept = run("run", "hello?", "--session", s.id, "--json")
    assert json.loads(kept.stdout.splitlines()[-1])["session_id"] == s.id
    assert api.open(s.id).history()[-1].text == "hello?"


def test_missing_credentials_name_the_variable(
    run: Run, api: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    result = run("run", "hi", env={"PLAIT_MODEL": "anthropic"})
    assert_clean_error(result, "set ANTHROPIC_API_KEY")
    assert api.sessions.list() == []
    as_json = run("run", "hi", "--json", env={"PLAIT_MODEL": "anthropic"})
    error = json.loads(as_json.stdout.splitlines()[-1])["error"]
    assert error["code"] == "MissingCredentialsError" and "ANTHROPIC_API_KEY" in error["message"]


def test_a_run_refused_before_it_starts_says_only_why(run: Run, api: Client) -> None:
    # Nothing was made, and no model was asked: no word of a session not kept.
    for args, why in (
        (["run", ""], "TEXT is blank"),
        (["run", "  "], "TEXT is blank"),
        (["run", "--resume"], "--resume picks up a stored session's request"),
        (["run", "hi", "--model", "nope"], "model spec 'nope'"),
    ):
        result = run(*args)
        assert_clean_error(result, why)
        assert "no session was kept" not in result.stderr
    # With --json the refusal of --resume is the JSON error line scripts read.
    as_json = run("run", "--resume", "--json")
    assert as_json.exit_code == 1
    error = json.loads(as_json.stdout.splitlines()[-1])["error"]
    assert error["code"] == "NothingToDoError" and "--session ID or -c" in error["message"]
    assert api.sessions.list() == []


def test_a_reply_cut_at_the_output_limit_says_how_to_continue(
    run: Run, api: Client, model: ScriptedProvider  # noqa: F811
) -> None:
    model.add(Reply("The first half of", finish_reason="length"), "the second half.")
    result = run("run", "write a long answer")
    assert result.exit_code == 3, result.output  # the answer is not complete
    assert "hit the output limit" in result.stderr
    assert "plait run --resume --session" in result.stderr
    session_id = result.stdout.strip().splitlines()[-1].split()[-1]
    resumed = run("run", "--resume", "--session", session_id, "--json")
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout.splitlines()[-1])["text"] == "the second half."


def test_reasoning_is_shown_apart_from_the_reply(
    run: Run, api: Client, model: ScriptedProvider  # noqa: F811
) -> None:
    """The model's reasoning streams to stderr, dim; stdout stays the reply alone."""
    from plait.providers import Finish, ReasoningDelta, TextDelta

    s = conversation(api)
    thought = [ReasoningDelta("Weighing "), ReasoningDelta("it up.")]
    model.add([*thought, TextDelta("42."), Finish("stop")])
    result = run("run", "the answer?", "--session", s.id)
    assert result.exit_code == 0, result.output
    assert "Weighing it up." in result.stderr and "Weighing" not in result.stdout
    assert result.stdout.splitlines()[0] == "42."
    assert api.open(s.id).history()[-1].text == "42."
