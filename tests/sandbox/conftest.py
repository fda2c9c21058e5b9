"""The isolated backend's fixtures: a handle on a workspace, or a skip that says why."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait.errors import SandboxUnavailableError
from plait.sandbox import Sandbox, SandboxPolicy, backend_named
from plait.tools import Tool, ToolContext, ToolOutcome


def open_isolated(folder: Path | None = None, policy: SandboxPolicy | None = None) -> Sandbox:
    """Open an isolated sandbox, or skip (fail where ``PLAIT_REQUIRE_SANDBOX`` is set)."""
    try:
        return backend_named("isolated").open(
            None if folder is None else str(folder), policy
        )
    except SandboxUnavailableError as exc:
        if os.environ.get("PLAIT_REQUIRE_SANDBOX"):
            raise
        pytest.skip(f"the isolated backend cannot run here: {exc}")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A workspace folder, with a secret beside it that nothing inside may read or change."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "secret.txt").write_text("TOPSECRET")
    return ws


@pytest.fixture
def isolated(workspace: Path) -> Iterator[Sandbox]:
    """An isolated sandbox on :func:`workspace` (a folder plait did not create)."""
    handle = open_isolated(workspace)
    yield handle
    handle.release()


def call(tool: Tool, ctx: ToolContext, **arguments: Any) -> ToolOutcome:
    """Call a tool as a run does and return what the model would read."""
    return asyncio.run(asyncio.wait_for(tool.call(ctx, arguments), 120))


def leftovers(marker: str) -> list[int]:
    """Processes on this machine whose command line holds ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry))
    return found
