"""Every way a run ends is said in words, by ``plait run`` (no terminal) and ``plait chat`` (tmux).

The command runs in its own process, its model a stand-in installed by a small driver
script: what it answers depends on the request's words (``loop`` calls a tool for ever,
``long`` is cut at the output limit, ``hang`` waits until stopped, ``fail`` breaks,
``look`` calls one tool and then answers), so each run's ending is the one asked for.
``plait run`` also says it in its exit status: 0 done, 3 a limit, 124 past --timeout,
130 interrupted, 1 an error.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_cli_chat_tmux import SOURCE, Pane

DRIVER = textwrap.dedent(
    """
    import asyncio, os, sys
    from pathlib import Path
    import plait.session.runs as session_module
    from plait.records import ToolCall
    from plait.cli import main
    from plait.providers import Finish, ProviderError, TextDelta, ToolCallDelta

    class ByWords:
        name = "bywords"
        model = "bywords-1"

        async def stream(self, request):
            last_user = next(m for m in reversed(request.messages) if m.role == "user")
            asked, after_tool = last_user.text, request.messages[-1].role == "tool"
            if "hang" in asked:
                yield TextDelta("half an ans")
                Path(os.environ["HANG_MARK"]).write_text("hanging")
                await asyncio.Event().wait()
            if "fail" in asked:
                yield TextDelta("half")
                raise ProviderError("bywords", "connection reset")
            if "loop" in asked or ("look" in asked and not after_tool):
                n = len(request.messages)
                yield ToolCallDelta(0, f"c{n}", "list_files", '{"path": "."}')
                yield Finish("tool_calls")
                return
            if "long" in asked:
                yield TextDelta("The first half of")
                yield Finish("length")
                return
            yield TextDelta("All done.")
            yield Finish("stop")

    session_module.select_provider = lambda spec: ByWords()
    main(sys.argv[1:])
    """
)


@pytest.fixture
def plait_cmd(tmp_path: Path) -> list[str]:
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    ws, box = tmp_path / "ws", tmp_path / "box"
    ws.mkdir()
    box.mkdir()
    return [sys.executable, str(driver), "--store", str(tmp_path / "x.db"), "--workspace",
            str(ws)]


def _env(tmp_path: Path) -> dict[str, str]:
    path = os.pathsep.join(p for p in (SOURCE, os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "HANG_MARK": str(tmp_path / "hanging"),
            "COLUMNS": "300"}


def _run(cmd: list[str], tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``plait run ARGS`` with standard input from /dev/null: no terminal anywhere."""
    with open(os.devnull) as nothing:
        return subprocess.run([*cmd, "run", "--dir", str(tmp_path / "box"), *args],
                              stdin=nothing, capture_output=True, text=True, timeout=120,
                              env=_env(tmp_path))


def test_run_says_done_and_the_tool_calls_it_denied(plait_cmd: list[str], tmp_path: Path) -> None:
    done = _run(plait_cmd, tmp_path, "hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("All done.") and "done in 1 step" in done.stderr
    # No terminal and no --yes: the call is denied, the model answers, and the end says so.
    denied = _run(plait_cmd, tmp_path, "look around")
    assert denied.returncode == 0, denied.stderr
    assert "done in 2 steps; 1 tool call was denied" in denied.stderr


def test_run_says_the_step_limit_and_exits_incomplete(
    plait_cmd: list[str], tmp_path: Path
) -> None:
    ran = _run(plait_cmd, tmp_path, "loop over files", "--max-steps", "2", "--yes")
    assert ran.returncode == 3, ran.stderr
    assert "ended at the step limit (2 steps) before the model finished" in ran.stderr
    session_id = ran.stdout.strip().splitlines()[-1].split()[-1]
    assert f"plait run --resume --session {session_id} goes on" in ran.stderr
    # As JSON lines: the ending is an event, the result says the answer is not complete.
    as_json = _run(plait_cmd, tmp_path, "loop again", "--max-steps", "2", "--yes", "--json")
    assert as_json.returncode == 3, as_json.stderr
    *_, ended, result = (json.loads(line) for line in as_json.stdout.splitlines())
    assert ended["type"] == "ended" and ended["reason"] == "max_steps"
    assert ended["words"] == "ended at the step limit (2 steps) before the model finished"
    assert result["finish_reason"] == "max_steps" and result["complete"] is False


def test_run_says_the_output_limit_and_exits_incomplete(
    plait_cmd: list[str], tmp_path: Path
) -> None:
    ran = _run(plait_cmd, tmp_path, "a long one")
    assert ran.returncode == 3, ran.stderr
    assert "stopped after 1 step: the reply hit the output limit" in ran.stderr
    assert "plait run --resume --session" in ran.stderr


def test_run_says_a_timeout_and_exits_124(plait_cmd: list[str], tmp_path: Path) -> None:
    ran = _run(plait_cmd, tmp_path, "hang on", "--timeout", "1")
    assert ran.returncode == 124, ran.stderr
    assert "stopped after 0 steps: the run passed its timeout of 1 s" in ran.stderr
    assert "plait run --resume --session" in ran.stderr and "Traceback" not in ran.stderr
    as_json = _run(plait_cmd, tmp_path, "hang on", "--timeout", "1", "--json")
    assert as_json.returncode == 124, as_json.stderr
    *_, ended, error = (json.loads(line) for line in as_json.stdout.splitlines())
    assert (ended["type"], ended["reason"], ended["timeout"]) == ("ended", "timeout", 1.0)
    assert error["error"]["code"] == "RunTimeoutError"


def test_run_says_an_interrupt_and_exits_130(plait_cmd: list[str], tmp_path: Path) -> None:
    with open(os.devnull) as nothing:
        proc = subprocess.Popen([*plait_cmd, "run", "hang on"], stdin=nothing,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=_env(tmp_path))
        try:
            mark = tmp_path / "hanging"
            end = time.monotonic() + 60
            while not mark.exists() and time.monotonic() < end and proc.poll() is None:
                time.sleep(0.05)
            assert mark.exists(), proc.communicate(timeout=10)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted: plait run --resume --session" in out + err


def test_run_says_an_error_and_exits_1(plait_cmd: list[str], tmp_path: Path) -> None:
    ran = _run(plait_cmd, tmp_path, "fail please")
    assert ran.returncode == 1
    assert "connection reset" in ran.stderr.strip().splitlines()[-1]
    assert "Traceback" not in ran.stderr


MISSING = shutil.which("tmux") is None and os.environ.get("PLAIT_REQUIRE_TMUX") != "1"


@pytest.fixture
def chat(plait_cmd: list[str], tmp_path: Path) -> Iterator[Pane]:
    command = ["env", f"HANG_MARK={tmp_path / 'hanging'}", *plait_cmd, "chat", "--dir",
               str(tmp_path / "box")]
    pane = Pane(f"plait-end-{os.getpid()}-{tmp_path.name}", command, tmp_path)
    try:
        yield pane
    finally:
        pane.kill()


@pytest.mark.slow
@pytest.mark.skipif(MISSING, reason="tmux is not installed (`apt-get install -y tmux`)")
def test_chat_says_every_ending_in_a_terminal(chat: Pane) -> None:
    pane = chat
    pane.wait_for("you> ")
    prompts = 1

    def say(text: str) -> None:
        pane.type(text)
        pane.keys("Enter")

    def next_prompt() -> str:
        nonlocal prompts
        prompts += 1
        return pane.wait_for("you> ", count=prompts)

    say("hello")
    assert "done in 1 step" in next_prompt()

    # Denied at the question: the run goes on, and its end counts the denied call.
    say("look around")
    pane.wait_for("[a]lways for this session")
    say("n")
    assert "done in 2 steps; 1 tool call was denied" in next_prompt()

    say("a long one")
    assert "stopped after 1 step: the reply hit the output limit; /retry continues it" in (
        next_prompt()
    )

    # 'a' allows the tool: the model calls it until the step limit (20) stops the run.
    say("loop over files")
    pane.wait_for("[a]lways for this session")
    say("a")
    screen = next_prompt()
    assert "ended at the step limit (20 steps) before the model finished; /retry goes on" in (
        screen
    )

    say("fail please")
    assert "error: " in next_prompt() and "connection reset" in pane.screen()

    # Ctrl-C while the model answers: the run stops, and says how to pick it up.
    say("hang on")
    pane.wait_for("half an ans")
    pane.keys("C-c")
    assert "interrupted: /retry picks the request up" in next_prompt()
    say("/quit")
