"""A run killed with SIGKILL at each step: the transcript is resumable and no tool runs twice.

The child process runs a real ``Session.prompt`` on a SQLite file and is killed
(1) while the model streams its reply, (2) between a reply's tool call being
recorded and the tool starting, and (3) while the tool runs. The parent then
opens the same file, asks ``resumable()`` and resumes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from plait import Client
from plait.providers import ScriptedProvider
from plait.run import INTERRUPTED
from plait.tools import tool

pytestmark = pytest.mark.slow

CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from plait import Client
    from plait.records import ToolCall
    from plait.run import RecordAdded
    from plait.providers import Finish, Reply, ScriptedProvider, TextDelta
    from plait.tools import tool

    ws, db, marks, sid, phase = sys.argv[1:6]

    def mark(text):
        with open(marks, "a") as f:
            f.write(text + "\\n")

    @tool
    async def migrate() -> str:
        '''Migrates the database (slowly).'''
        mark("tool ran")
        if phase == "tool":
            await asyncio.sleep(60)
        return "migrated"

    class Streaming:
        name, model = "streaming", "s-1"

        async def stream(self, request):
            yield TextDelta("I will migr")
            mark("streaming")
            await asyncio.sleep(60)
            yield Finish("stop")

    def on_event(event):
        if (phase == "between" and isinstance(event, RecordAdded)
                and getattr(event.record, "tool_calls", ())):
            mark("call recorded")
            time.sleep(60)  # blocks the loop: killed before the tool starts

    call = Reply(tool_calls=(ToolCall("m1", "migrate", {}),), finish_reason="tool_calls")
    provider = Streaming() if phase == "stream" else ScriptedProvider([call, "done"])
    client = Client(ws, store=db)
    session = client.open(sid)
    asyncio.run(session.prompt("migrate the schema", provider=provider, tools=[migrate],
                               on_event=on_event))
    """
)

_WAIT_FOR = {"stream": "streaming", "between": "call recorded", "tool": "tool ran"}


def _kill_child_at(phase: str, ws: Path, db: Path, marks: Path, sid: str) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(ws), str(db), str(marks), sid, phase],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        deadline = time.monotonic() + 60
        while child.poll() is None and time.monotonic() < deadline:
            if marks.exists() and _WAIT_FOR[phase] in marks.read_text():
                break
            time.sleep(0.02)
        assert marks.exists() and _WAIT_FOR[phase] in marks.read_text(), "never got there"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(30)
    assert child.returncode == -signal.SIGKILL


@pytest.mark.parametrize("phase", ["stream", "between", "tool"])
def test_sigkill_mid_run_leaves_a_resumable_transcript(phase: str, tmp_path: Path) -> None:
    ws, db, marks = tmp_path / "ws", tmp_path / "plait.db", tmp_path / "marks.txt"
    ws.mkdir()
    with Client(ws, store=db) as client:
        sid = client.sessions.create([{"role": "system", "content": "be careful"}]).id
    _kill_child_at(phase, ws, db, marks, sid)

    ran: list[str] = []

    @tool
    def migrate() -> str:
        """Migrates the database."""
        ran.append("migrate")
        return "migrated"

    with Client(ws, store=db) as client:
        session = client.sessions.open(sid)  # the dead child's lock died with it
        info = session.resumable()
        assert info is not None
        provider = ScriptedProvider(["Picked up where it stopped."])
        if phase == "stream":
            # Nothing of the cut reply was committed: the request waits for the model.
            assert [r.kind for r in session.transcript.records] == ["system", "user"]
            assert info.kind == "call_model"
        else:
            assert [r.kind for r in session.transcript.records] == ["system", "user", "assistant"]
            assert info.kind == "recover_tools" and [c.id for c in info.missing] == ["m1"]
        result = asyncio.run(session.resume(provider=provider, tools=[migrate]))
        assert ran == []  # never run again on its own
        assert result.text == "Picked up where it stopped."
        assert session.resumable() is None
        tools = [m for m in session.history() if m.role == "tool"]
        if phase == "stream":
            assert tools == []
            assert [m.role for m in provider.requests[0].messages] == ["system", "user"]
        else:
            assert [(m.tool_call_id, m.ok, m.text) for m in tools] == [("m1", False, INTERRUPTED)]
            tool_ran = marks.read_text().count("tool ran")
            assert tool_ran == (1 if phase == "tool" else 0)
