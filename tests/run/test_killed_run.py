"""A run killed with SIGKILL while a tool runs: the transcript is resumable, the tool not re-run."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from plait import Client, ToolCall
from plait.providers import ScriptedProvider
from plait.run import INTERRUPTED
from plait.tools import tool

CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from plait import Client, ToolCall
    from plait.providers import Reply, ScriptedProvider
    from plait.tools import tool

    ws, db, marks, sid = sys.argv[1:5]

    @tool
    async def migrate() -> str:
        '''Migrates the database (slowly).'''
        with open(marks, "a") as f:
            f.write("ran\\n")
        await asyncio.sleep(60)
        return "migrated"

    client = Client(ws, store=db)
    session = client.sessions.get(sid)
    provider = ScriptedProvider(
        [Reply(tool_calls=(ToolCall("m1", "migrate", {}),), finish_reason="tool_calls"), "done"]
    )
    asyncio.run(session.prompt("migrate the schema", provider=provider, tools=[migrate]))
    """
)


def test_sigkill_during_a_tool_leaves_a_resumable_transcript(tmp_path: Path) -> None:
    ws, db, marks = tmp_path / "ws", tmp_path / "plait.db", tmp_path / "marks.txt"
    ws.mkdir()
    with Client(ws, store=db) as client:
        sid = client.sessions.create([{"role": "system", "content": "be careful"}]).id
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(ws), str(db), str(marks), sid],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        deadline = time.monotonic() + 60
        while not marks.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marks.exists(), "the child never started its tool"
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(30)
    assert child.returncode == -signal.SIGKILL

    ran: list[str] = []

    @tool
    def migrate() -> str:
        """Migrates the database."""
        ran.append("migrate")
        return "migrated"

    with Client(ws, store=db) as client:
        session = client.sessions.open(sid)  # the dead child's lock died with it
        assert [r.kind for r in session.records] == ["system", "user", "assistant"]
        info = session.resumable()
        assert info is not None and info.kind == "recover_tools"
        assert [c.id for c in info.missing] == ["m1"]
        provider = ScriptedProvider(["The migration may have run; I will check first."])
        result = asyncio.run(session.resume(provider=provider, tools=[migrate]))
        assert ran == []  # never run again on its own
        assert marks.read_text() == "ran\n"
        tool_result = next(m for m in session.history() if m.role == "tool")
        assert (tool_result.tool_call_id, tool_result.ok) == ("m1", False)
        assert tool_result.text == INTERRUPTED
        assert result.text.startswith("The migration may have run")
        assert session.resumable() is None
        assert ToolCall("m1", "migrate", {}) in session.history()[1].tool_calls
