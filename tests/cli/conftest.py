"""Fixtures for the CLI tests: a store file, a workspace, and a runner bound to both."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from plait import Client
from plait.cli import cli

from ._helpers import Run


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "x.db"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def run(db_path: Path, workspace: Path) -> Run:
    """Invoke ``plait --store <db> --workspace <ws> ARGS...``; a wide terminal, no real tty."""
    runner = CliRunner()

    def invoke(
        *args: str, input: str | None = None, env: Mapping[str, str] | None = None
    ) -> Result:
        return runner.invoke(
            cli,
            ["--store", str(db_path), "--workspace", str(workspace), *args],
            input=input,
            env={"COLUMNS": "200", **(env or {})},
        )

    return invoke


@pytest.fixture
def api(db_path: Path, workspace: Path) -> Iterator[Client]:
    """A client on the same store and workspace the CLI uses."""
    with Client(workspace, store=db_path) as c:
        yield c
