"""Fixtures for the importer tests: the shared transcript samples and a fast client."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from plait import Client
from plait.store import MemoryStore

# The samples live beside the repository: <repo>/../shared/fixtures/transcripts.
TRANSCRIPTS = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures" / "transcripts"


@pytest.fixture
def transcripts() -> Path:
    """The folder of real transcript samples (skips the test when it is missing)."""
    if not TRANSCRIPTS.is_dir():
        pytest.skip(f"transcript fixtures not found at {TRANSCRIPTS}")
    return TRANSCRIPTS


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Client]:
    """A client on an in-memory store (the importers do not depend on the store)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=MemoryStore()) as c:
        yield c
