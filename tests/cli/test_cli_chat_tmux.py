"""``plait chat`` in a real terminal (tmux): line editing, Ctrl-C at every prompt, always-allow.

The chat runs in its own process on a tmux pane; the test types into it with
``send-keys`` and reads the screen with ``capture-pane``. The model is the
scripted one, installed by a small driver script before the real command runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import plait
from plait import Client

# Without tmux these skip, saying so, unless PLAIT_REQUIRE_TMUX=1 says the machine must have it.
MISSING = shutil.which("tmux") is None and os.environ.get("PLAIT_REQUIRE_TMUX") != "1"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(MISSING, reason="tmux is not installed (`apt-get install -y tmux`)"),
]

SOURCE = str(Path(plait.__file__).resolve().parent.parent)
"""The folder the plait under test is imported from."""

DRIVER = textwrap.dedent(
    """
    import sys
    import plait.session.runs as session_module
    from plait.records import ToolCall
    from plait.cli import main
    from plait.providers import Reply, ScriptedProvider

    def call(n):
        return Reply(tool_calls=(ToolCall(f"c{n}", "shell", {"command": f"echo run{n}"}),),
                     finish_reason="tool_calls")

    provider = ScriptedProvider([
        call(1),                             # Ctrl-C at the question: denied, run stopped
                                             # before it asks the model again
        "Hello there.",                      # a plain turn: the chat is alive
        call(2), call(3), "Both ran.",       # 'a' for the first: the second runs unasked
        "Edited fine.",
    ])
    session_module.select_provider = lambda spec: provider
    main(sys.argv[1:])
    """
)


class Pane:
    """A tmux session running one command, read and typed into like a person would."""

    def __init__(self, name: str, command: list[str], cwd: Path) -> None:
        self.name = name
        # The pane's process imports the plait under test, wherever it runs from: a
        # relative PYTHONPATH (``src``) would not reach it from ``cwd``.
        path = os.pathsep.join(p for p in (SOURCE, os.environ.get("PYTHONPATH")) if p)
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", name, "-x", "160", "-y", "50", "-c", str(cwd),
             "-e", f"PYTHONPATH={path}", *command],
            check=True,
        )

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def type(self, text: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, "-l", text], check=True)

    def screen(self) -> str:
        done = subprocess.run(
            ["tmux", "capture-pane", "-p", "-J", "-S", "-200", "-t", self.name],
            capture_output=True, text=True,
        )
        return done.stdout

    def wait_for(self, text: str, count: int = 1, deadline: float = 60.0) -> str:
        """Wait until ``text`` is on the screen ``count`` times (a generous bound, not a timing)."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            screen = self.screen()
            if screen.count(text) >= count:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} x{count} never appeared; the screen:\n{self.screen()}")

    def alive(self) -> bool:
        return subprocess.run(["tmux", "has-session", "-t", self.name],
                              capture_output=True).returncode == 0

    def kill(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[tuple[Pane, Path, Path]]:
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    db, ws, box = tmp_path / "x.db", tmp_path / "ws", tmp_path / "box"
    ws.mkdir()
    box.mkdir()
    command = [sys.executable, str(driver), "--store", str(db), "--workspace", str(ws),
               "chat", "--dir", str(box)]
    pane = Pane(f"plait-chat-{os.getpid()}-{tmp_path.name}", command, tmp_path)
    try:
        yield pane, db, ws
    finally:
        pane.kill()


def test_chat_in_a_terminal_survives_ctrl_c_everywhere(chat: tuple[Pane, Path, Path]) -> None:
    pane, db, ws = chat
    screen = pane.wait_for("you> ")
    assert "plait chat · model" in screen and f"workspace {ws}" in screen
    assert "local backend" in screen

    # Ctrl-C at a tool-call question denies the call and stops the run, at once.
    pane.type("list the files")
    pane.keys("Enter")
    pane.wait_for("[a]lways for this session")
    pane.keys("C-c")
    screen = pane.wait_for("you> ", count=2)
    assert "denied; the run stops (Ctrl-C)" in screen and "interrupted" in screen

    # The chat goes on.
    pane.type("hello")
    pane.keys("Enter")
    pane.wait_for("Hello there.")
    pane.wait_for("you> ", count=3)

    # Ctrl-C at the input line drops the line.
    pane.type("half a thought")
    pane.keys("C-c")
    pane.wait_for("Ctrl-C drops the line")

    # 'a' allows the tool for the session: the next call of it runs unasked.
    pane.type("run both")
    pane.keys("Enter")
    pane.wait_for("[a]lways for this session")
    pane.type("a")
    pane.keys("Enter")
    screen = pane.wait_for("Both ran.")
    assert screen.count("[a]lways for this session") == 2  # one per question: asked once
    assert 'echo run2"}' in screen and 'echo run3"}' in screen
    assert screen.count("ok: exit code 0") == 2

    # The answer 'a' is not kept in the line history: the up arrow brings back the last
    # message, not the answer to a question.
    pane.wait_for("you> ", count=5)
    pane.keys("Up")
    pane.wait_for("you> run both", count=2)
    assert not pane.screen().rstrip().endswith("you> a")
    pane.keys("C-u")

    # Readline: arrow keys move in the line instead of printing ^[[D.
    pane.type("ac")
    pane.keys("Left")
    pane.type("b")
    pane.keys("Enter")
    screen = pane.wait_for("Edited fine.")
    assert "^[[D" not in screen
    pane.type("/quit")
    pane.keys("Enter")
    end = time.monotonic() + 30
    while pane.alive() and time.monotonic() < end:
        time.sleep(0.1)

    with Client(ws, store=db) as client:
        (info,) = client.sessions.list()
        records = client.open(info.id).transcript.records
    users = [r.text for r in records if r.kind == "user"]
    assert users == ["list the files", "hello", "run both", "abc"]
    first_tool = next(r for r in records if r.kind == "tool")
    assert first_tool.ok is False and "denied" in first_tool.text
    assert not first_tool.meta.get("interrupted")


def test_continuing_shows_the_last_turns(tmp_path: Path) -> None:
    db, ws = tmp_path / "x.db", tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=db) as client:
        s = client.sessions.new()
        s.transcript.inject_many([{"role": "user", "content": "what is plait?"},
                       {"role": "assistant", "content": "A session layer."}])
        s.rename("About plait")
    pane = Pane(f"plait-chat-c-{os.getpid()}-{tmp_path.name}",
                [sys.executable, "-m", "plait", "--store", str(db), "--workspace", str(ws),
                 "chat", "-c"], tmp_path)
    try:
        screen = pane.wait_for("you> ")
        assert "About plait" in screen and "the last 2 messages" in screen
        assert "user: what is plait?" in screen and "assistant: A session layer." in screen
        # The picker: the recent sessions by title (or first prompt); a number opens one.
        pane.type("/resume")
        pane.keys("Enter")
        screen = pane.wait_for("pick a number or an id")
        assert "1. " in screen and "About plait" in screen.split("/resume", 1)[1]
        pane.type("1")
        pane.keys("Enter")
        pane.wait_for("the last 2 messages", count=2)
        pane.keys("C-c")  # at the input line: the chat stays
        pane.wait_for("Ctrl-C drops the line")
        pane.keys("C-d")
        end = time.monotonic() + 30
        while pane.alive() and time.monotonic() < end:
            time.sleep(0.1)
        assert not pane.alive()
    finally:
        pane.kill()


def test_run_and_chat_with_stdin_from_dev_null(tmp_path: Path) -> None:
    """Without a terminal nothing waits: run denies the tool call and ends; chat ends at EOF."""
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    db, ws = tmp_path / "x.db", tmp_path / "ws"
    ws.mkdir()
    root = [sys.executable, str(driver), "--store", str(db), "--workspace", str(ws)]
    with open("/dev/null") as nothing:
        ran = subprocess.run([*root, "run", "--json", "list the files"], stdin=nothing,
                             capture_output=True, text=True, timeout=120)
        chatted = subprocess.run([*root, "chat"], stdin=nothing, capture_output=True,
                                 text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "Aborted" not in ran.stderr and "no terminal to ask at" in ran.stderr
    assert '"type": "result"' in ran.stdout.splitlines()[-1]
    assert chatted.returncode == 0, chatted.stderr
    assert "Traceback" not in chatted.stderr and "plait chat · model" in chatted.stdout
