"""Fixtures of the store tests: a PostgreSQL store on a schema of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import POSTGRES_URL


@pytest.fixture
def pg(pg_schema: str) -> Iterator[object]:
    """A PostgreSQL store on a new schema (migrated on open), closed after the test."""
    from plait.store.postgres import PostgresStore

    s = PostgresStore(POSTGRES_URL or "postgresql://unset", schema=pg_schema)
    yield s
    s.close()
