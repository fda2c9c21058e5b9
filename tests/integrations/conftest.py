"""Fixtures for the framework integrations: real transcript samples, stores by kind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import POSTGRES_SKIP, POSTGRES_URL, drop_schema, fresh_schema

# The samples live beside the repository: <repo>/../shared/fixtures/transcripts.
TRANSCRIPTS = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "transcripts"
CLAUDE_SAMPLES = TRANSCRIPTS / "claude-code"


@pytest.fixture
def claude_samples() -> Path:
    """The folder of real Claude Code transcripts (skips the test when it is missing)."""
    if not CLAUDE_SAMPLES.is_dir():
        pytest.skip(f"transcript fixtures not found at {CLAUDE_SAMPLES}")
    return CLAUDE_SAMPLES


def read_entries(path: Path) -> list[dict[str, Any]]:
    """A JSONL transcript's lines, decoded."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class Targets:
    """Fresh store targets of one kind; PostgreSQL schemas are dropped at the end."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind = kind
        self.tmp_path = tmp_path
        self.schemas: list[str] = []
        self.n = 0

    def new(self) -> str:
        """A target no other store of this test uses."""
        self.n += 1
        if self.kind == "sqlite":
            return str(self.tmp_path / f"plait-{self.n}.db")
        schema = fresh_schema()
        self.schemas.append(schema)
        return f"{POSTGRES_URL}?schema={schema}"


@pytest.fixture(params=["sqlite", "postgres"])
def targets(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Targets]:
    """Fresh store targets: SQLite files, or PostgreSQL schemas (skipped without a server)."""
    if request.param == "postgres" and POSTGRES_URL is None:
        pytest.skip(POSTGRES_SKIP)
    made = Targets(request.param, tmp_path)
    yield made
    for schema in made.schemas:
        drop_schema(schema)


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def graph_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store for a LangGraph saver as a user names it: a file, ``:memory:`` or a
    PostgreSQL schema of its own."""
    if request.param == "sqlite":
        yield str(tmp_path / "graph.db")
    elif request.param == "memory":
        yield ":memory:"
    else:
        if POSTGRES_URL is None:
            pytest.skip(POSTGRES_SKIP)
        schema = fresh_schema()
        yield f"{POSTGRES_URL}?schema={schema}"
        drop_schema(schema)
