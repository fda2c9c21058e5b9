"""A session's sandbox target carries its policy: stored, inherited, shown, and enforced."""

from __future__ import annotations

from pathlib import Path

import pytest

from plait import Client
from plait.errors import InvalidArgumentError, UnknownOptionError
from plait.sandbox import SandboxPolicy


def test_the_policy_is_stored_inherited_and_opened_with(client: Client, tmp_path: Path) -> None:
    box = tmp_path / "box"
    box.mkdir()
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    s.to("local", spec=str(box), policy={"network": True, "env": ["TERM"]})
    assert s.workspace.sandbox_policy == SandboxPolicy.from_json({"network": True, "env": ["TERM"]})
    assert s.workspace.list_roots()["policy"] == s.workspace.sandbox_policy.to_json()
    branch = s.fork()
    assert branch.workspace.sandbox_policy == s.workspace.sandbox_policy
    handle = s.require_sandbox()
    assert handle.policy == s.workspace.sandbox_policy
    ctx = s.workspace.tool_context()
    assert ctx.root == box.resolve()
    s.close_sandbox()


def test_no_policy_is_the_default_that_allows_nothing(client: Client, tmp_path: Path) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}]).to("local", spec=str(tmp_path))
    assert s.workspace.sandbox_policy == SandboxPolicy()
    assert "policy" not in s.workspace.list_roots()


def test_a_bad_policy_is_refused_and_nothing_changes(client: Client, tmp_path: Path) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}]).to("local", spec=str(tmp_path))
    before = s.settings
    with pytest.raises(UnknownOptionError):
        s.to("local", policy={"netwrk": True})
    with pytest.raises(InvalidArgumentError):
        s.to("local", policy={"env": "PATH"})
    assert s.settings == before


def test_a_managed_workspace_nobody_closed_goes_with_its_handle(
    client: Client, tmp_path: Path
) -> None:
    import asyncio
    import gc

    from plait.providers import Reply, ScriptedProvider
    from plait.records import ToolCall

    s = client.sessions.create([{"role": "user", "content": "hi"}])  # no sandbox target
    provider = ScriptedProvider([
        Reply(tool_calls=(ToolCall("c1", "write_file", {"path": "a.txt", "content": "x"}),),
              finish_reason="tool_calls"),
        Reply("done"),
    ])
    asyncio.run(s.prompt("write", provider=provider))
    handle = s.sandbox
    assert handle is not None and (handle.root / "a.txt").read_text() == "x"
    folder = handle.root
    client.sessions.new()  # the run made it the client's current session: no longer
    del s, handle
    gc.collect()
    assert not folder.exists()


def test_a_managed_workspace_is_deleted_when_the_process_ends(tmp_path: Path) -> None:
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(f"""
        import asyncio
        from plait import Client
        from plait.records import ToolCall
        from plait.providers import Reply, ScriptedProvider
        client = Client({str(tmp_path)!r}, store={str(tmp_path / "s.db")!r})
        s = client.sessions.create([{{"role": "user", "content": "hi"}}])
        call = ToolCall("c1", "write_file", {{"path": "a.txt", "content": "x"}})
        provider = ScriptedProvider([Reply(tool_calls=(call,), finish_reason="tool_calls"),
                                     Reply("done")])
        asyncio.run(s.prompt("write", provider=provider))
        print(s.sandbox.root, flush=True)
        KEEP = s  # alive until the interpreter exits
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=120)
    folder = Path(out.stdout.strip().splitlines()[-1])
    assert folder.name.startswith("plait-") and not folder.exists()


def test_the_snapshot_shows_the_policy_as_data(client: Client, tmp_path: Path) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    s.to("isolated", spec=str(tmp_path), policy={"network": True, "env": ["TERM"]})
    snap = client.snapshot(s.id)
    assert snap is not None
    shown = snap.metadata["settings"]["sandbox"]  # type: ignore[index, call-overload]
    assert shown["backend"] == "isolated"
    assert SandboxPolicy.from_json(shown["policy"]) == s.workspace.sandbox_policy
    assert shown["policy"]["network"] is True and shown["policy"]["env"] == ["TERM"]
