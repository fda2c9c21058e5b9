"""Opening the isolated backend: a typed error that says how to fix it, never a quiet fallback."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from plait import Client
from plait.errors import InvalidArgumentError, SandboxUnavailableError, UnknownOptionError
from plait.providers import Reply, ScriptedProvider
from plait.records import ToolCall
from plait.sandbox import IsolatedBackend, Limits, SandboxPolicy, backend_named, isolated
from plait.tools import ToolContext, shell
from tests.sandbox.conftest import call, open_isolated


def test_a_missing_bubblewrap_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(isolated, "_find", lambda program: None)
    with pytest.raises(SandboxUnavailableError, match="apt-get install bubblewrap"):
        IsolatedBackend().open(None)


def test_a_refusing_kernel_is_an_error_at_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    real = isolated._find
    monkeypatch.setattr(isolated, "_find", lambda p: str(fake) if p == "bwrap" else real(p))
    monkeypatch.setattr(isolated, "_pids_parent", lambda: tmp_path)  # past the root check
    with pytest.raises(SandboxUnavailableError, match="user namespaces") as caught:
        IsolatedBackend().open(str(tmp_path))
    assert "No permissions to create new namespace" in str(caught.value)


def test_losing_bubblewrap_after_opening_ends_the_call_not_in_a_plain_shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle = open_isolated(tmp_path)
    try:
        monkeypatch.setattr(isolated, "_find", lambda program: None)
        with pytest.raises(SandboxUnavailableError):
            call(shell, ToolContext(tmp_path, sandbox=handle), command="touch ran")
    finally:
        handle.release()
    assert not (tmp_path / "ran").exists()


def test_the_policy_is_data_that_round_trips() -> None:
    policy = SandboxPolicy(
        network=True, writable_roots=("/var/cache/x",), env=("LC_ALL",), limits=Limits(processes=9)
    )
    data = policy.to_json()
    assert data["network"] is True and data["limits"]["processes"] == 9
    assert SandboxPolicy.from_json(data) == policy
    assert SandboxPolicy.from_json(None) == SandboxPolicy()
    assert SandboxPolicy().to_json()["env"] == [] and SandboxPolicy().network is False
    with pytest.raises(UnknownOptionError):
        SandboxPolicy.from_json({"netwrk": True})
    with pytest.raises(UnknownOptionError):
        SandboxPolicy.from_json({"limits": {"cpu": 1}})
    for bad in (
        {"network": "yes"},
        {"writable_roots": ["relative/path"]},
        {"writable_roots": ["/"]},
        {"env": ["PLAIT_API_KEYS"]},
        {"limits": {"processes": 0}},
        {"limits": {"memory_bytes": True}},
    ):
        with pytest.raises(InvalidArgumentError):
            SandboxPolicy.from_json(bad)


def test_backends_say_whether_they_isolate() -> None:
    assert backend_named("isolated").isolates is True
    assert backend_named("local").isolates is False
    assert "does not isolate" in (type(backend_named("local")).__doc__ or "")


def test_a_session_targeting_isolated_runs_its_tools_confined(tmp_path: Path) -> None:
    box = tmp_path / "box"
    box.mkdir()
    open_isolated(box).release()  # skips, saying why, where the backend cannot run
    (tmp_path / "beside.txt").write_text("TOPSECRET")
    with Client(tmp_path, store=tmp_path / "s.db") as client:
        s = client.sessions.create().to("isolated", spec=str(box))
        command = f"cat {tmp_path}/beside.txt; echo made > here.txt; echo x > ../there.txt"
        provider = ScriptedProvider(
            [
                Reply(tool_calls=(ToolCall("c1", "shell", {"command": command}),)),
                "Done.",
            ]
        )
        with s:
            asyncio.run(s.prompt("go", provider=provider))
        result = next(m for m in s.history() if m.role == "tool")
    assert "TOPSECRET" not in result.text and "No such file" in result.text
    assert (box / "here.txt").read_text() == "made\n"
    assert not (tmp_path / "there.txt").exists()


@pytest.mark.parametrize("folder", ["/", "/usr", "/etc"])
def test_a_system_folder_cannot_be_the_isolated_workspace(folder: str) -> None:
    open_isolated().release()  # skips, saying why, where the backend cannot run
    with pytest.raises(InvalidArgumentError, match="system folders"):
        backend_named("isolated").open(folder)
