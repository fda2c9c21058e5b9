"""Store targets for the adapter tests: a SQLite file and a PostgreSQL schema.

An adapter is given a target string (as a user would write it), so it opens and
closes its own store, and another process can open the same conversation.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import POSTGRES_URL, needs_postgres

TARGETS = ["sqlite", pytest.param("postgres", marks=needs_postgres)]


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a test's conversations live: a SQLite file or a PostgreSQL schema of its own."""
    if request.param == "postgres":
        schema = request.getfixturevalue("pg_store_schema")
        return f"{POSTGRES_URL}?schema={schema}"
    return str(tmp_path / "chats.db")
