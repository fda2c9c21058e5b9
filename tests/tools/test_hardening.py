"""What a red-team pass found in the tools, kept fixed: paths, loops, FIFOs, the environment."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from plait.errors import InvalidArgumentError
from plait.sandbox import SandboxPolicy, backend_named, tool_environment
from plait.tools import ToolContext, ToolOutcome, read_file, shell, tool, write_file
from plait.tools.base import Root
from tests.sandbox.conftest import leftovers


def run(coro: object) -> ToolOutcome:
    # A guard, not a measurement: a tool that blocks would otherwise hang the suite.
    return asyncio.run(asyncio.wait_for(coro, 60))  # type: ignore[arg-type]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "data").mkdir(parents=True)
    (ws / "data" / "keep.txt").write_text("original")
    return ws


def test_dotdot_is_folded_before_the_root_is_chosen(ws: Path) -> None:
    ctx = ToolContext(ws, roots=(Root(ws / "data", "data", read_only=True),))
    for path in ("data/keep.txt", "x/../data/keep.txt", "./x/y/../../data/keep.txt"):
        out = run(write_file.call(ctx, {"path": path, "content": "changed"}))
        assert not out.ok and "read-only" in out.content, path
    assert (ws / "data" / "keep.txt").read_text() == "original"
    # A read through the same spelling lands on the root too.
    assert run(read_file.call(ctx, {"path": "x/../data/keep.txt"})).content == "original"


def test_a_read_only_root_cannot_be_written_through_another_name(ws: Path) -> None:
    os.symlink(ws / "data", ws / "alias")
    ctx = ToolContext(ws, roots=(Root(ws / "data", "ro", read_only=True),))
    for path in ("data/keep.txt", "alias/keep.txt", "ro/keep.txt"):
        out = run(write_file.call(ctx, {"path": path, "content": "changed"}))
        assert not out.ok and "read-only" in out.content, path
    assert (ws / "data" / "keep.txt").read_text() == "original"


def test_a_symlink_loop_is_a_result_the_model_reads(ws: Path) -> None:
    os.symlink(ws / "b", ws / "a")
    os.symlink(ws / "a", ws / "b")
    ctx = ToolContext(ws)
    for tool_, args in (
        (read_file, {"path": "a/x.txt"}),
        (write_file, {"path": "a/x.txt", "content": "x"}),
        (read_file, {"path": "a"}),
    ):
        out = run(tool_.call(ctx, args))
        assert not out.ok, args


def test_any_failure_of_a_tool_is_a_failed_result() -> None:
    @tool
    def broken(n: int) -> str:
        """Fails in a way no one planned for."""
        raise RuntimeError(f"broken at {n}")

    @tool
    def lookup(key: str) -> str:
        """Fails with a KeyError."""
        return {"a": "1"}[key]

    ctx = ToolContext(Path("."))
    out = run(broken.call(ctx, {"n": 3}))
    assert out == ToolOutcome(False, "broken: RuntimeError: broken at 3")
    assert not run(lookup.call(ctx, {"key": "b"})).ok


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_write_file_refuses_a_fifo_or_a_device_and_never_blocks(ws: Path, kind: str) -> None:
    target = ws / "special"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        os.symlink("/dev/null", ws / "null")  # outside: refused before it is opened
        target = ws / "null"
    ctx = ToolContext(ws)
    out = run(write_file.call(ctx, {"path": target.name, "content": "x"}))
    assert not out.ok
    assert not run(read_file.call(ctx, {"path": target.name})).ok


def test_a_device_inside_the_workspace_is_refused(ws: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    os.mknod(ws / "null", 0o666 | 0o020000, os.makedev(1, 3))
    ctx = ToolContext(ws)
    out = run(write_file.call(ctx, {"path": "null", "content": "x"}))
    assert not out.ok and "not a regular file" in out.content


@pytest.mark.parametrize("backend", ["none", "local"])
def test_the_shell_never_sees_the_servers_environment(
    ws: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLAIT_API_KEYS", "server-key-123")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-provider-456")
    monkeypatch.setenv("SOME_SETTING", "visible-789")
    handle = None if backend == "none" else backend_named("local").open(str(ws))
    ctx = ToolContext(ws, sandbox=handle)
    try:
        out = run(shell.call(ctx, {"command": "env"}))
    finally:
        if handle is not None:
            handle.release()
    assert out.ok
    assert "server-key-123" not in out.content and "sk-provider-456" not in out.content
    assert "visible-789" not in out.content
    names = sorted(line.split("=", 1)[0] for line in out.content.splitlines()[1:] if "=" in line)
    assert set(names) <= {"HOME", "LANG", "PATH", "PWD", "TMPDIR", "SHLVL", "OLDPWD"}


def test_a_policy_passes_only_the_names_it_lists_and_never_a_credential(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SOME_SETTING", "visible-789")
    monkeypatch.setenv("OTHER", "hidden")
    env = tool_environment(SandboxPolicy(env=("SOME_SETTING", "UNSET_ONE")), home="/tmp")
    assert env["SOME_SETTING"] == "visible-789" and "OTHER" not in env and "UNSET_ONE" not in env
    for name in ("PLAIT_API_KEYS", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "PATH"):
        with pytest.raises(InvalidArgumentError):
            SandboxPolicy(env=(name,))


def test_a_setsid_child_does_not_survive_the_local_timeout(ws: Path) -> None:
    ctx = ToolContext(ws)
    out = run(shell.call(ctx, {"command": "setsid sleep 317.5 & sleep 317.6", "timeout": 1}))
    assert not out.ok and out.content.startswith("timed out")
    # Exact markers: another test on another worker may run a process whose line holds "317."
    assert leftovers("317.5") + leftovers("317.6") == []
