"""plait itself under the peers' verbs: on a SQLite file, in memory and on PostgreSQL."""

from __future__ import annotations

import os
from typing import Any, ClassVar

from base import Adapter, Place
from transcript import TOOL, Step

import plait
import plait.store

__all__ = ["PlaitMemory", "PlaitPostgres", "PlaitSQLite", "PlaitSQLiteFull", "plait_item"]

HISTORY_FULL = "history(full=True)"
HISTORY = "history()"
RECORDS = "records"


def plait_item(s: Step) -> dict[str, Any]:
    """Return item ``s`` as the message dict plait's ``inject`` takes."""
    if s.kind == "user":
        return {"role": "user", "content": s.text}
    if s.kind == "call":
        return {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": s.call_id, "name": TOOL, "arguments": s.arguments}],
        }
    if s.kind == "result":
        return {
            "role": "tool",
            "tool_call_id": s.call_id,
            "tool_name": TOOL,
            "content": s.text,
            "ok": True,
        }
    return {"role": "assistant", "content": s.text}


class PlaitSQLite(Adapter):
    """plait's default store: one SQLite file (WAL, synchronous=NORMAL)."""

    name: ClassVar[str] = "plait"
    engine: ClassVar[str] = "sqlite"
    ops: ClassVar[frozenset[str]] = frozenset(
        {"append_one", "append_batch", "load", "tail", "fork", "list"}
    )
    load_names: ClassVar[tuple[str, ...]] = (HISTORY_FULL, HISTORY, RECORDS)
    requires: ClassVar[tuple[str, ...]] = ("plait",)
    notes: ClassVar[str] = (
        "inject / inject_many; history(full=True), history(), records; tail(20); "
        "fork_at(length // 2); sessions.list(20)"
    )

    def __init__(self, place: Place) -> None:
        super().__init__(place)
        self.store = self._store()
        self.client = plait.Client(place.dir, store=self.store)
        self.session = self.client.session

    def _store(self) -> Any:
        return self.place.dir / f"plait-{self.place.key}.db"

    def native(self, s: Step) -> dict[str, Any]:
        return plait_item(s)

    def append_one(self, item: Any) -> None:
        self.session.inject(item)

    def append_batch(self, items: list[Any]) -> None:
        self.session.transcript.inject_many(items)

    def load(self, variant: str) -> int:
        if variant == HISTORY_FULL:
            return len(self.session.history(full=True))
        if variant == HISTORY:
            return len(self.session.history())
        if variant == RECORDS:
            return len(self.session.transcript.records)
        raise ValueError(variant)

    def tail(self, n: int) -> int:
        return len(self.session.transcript.tail(n))

    def fork(self) -> None:
        self.session.fork_at(self.session.transcript.length // 2)

    def fill_sessions(self, count: int) -> None:
        turn = self.items(0, 4)
        for _ in range(count):
            self.client.sessions.create().transcript.inject_many(turn)

    def list_sessions(self, n: int) -> int:
        return len(self.client.sessions.list(n))

    def close(self) -> None:
        self.client.close()
        # A Client closes only a store it opened itself.
        if not isinstance(self.store, str | os.PathLike):
            self.store.close()


class PlaitSQLiteFull(PlaitSQLite):
    """plait's SQLite store with ``durability="full"``: every commit fsynced, as the peers'.

    Only the appends differ from :class:`PlaitSQLite`, so only they are timed; it shows
    what plait's append costs at the durability the SQLite peers run with by default.
    """

    name: ClassVar[str] = "plait durability=full"
    ops: ClassVar[frozenset[str]] = frozenset({"append_one", "append_batch"})
    notes: ClassVar[str] = "inject / inject_many on SQLiteStore(path, durability='full')"

    def _store(self) -> Any:
        path = self.place.dir / f"plait-{self.place.key}.db"
        return plait.store.SQLiteStore(path, durability="full")


class PlaitMemory(PlaitSQLite):
    """plait's in-memory SQLite store (ephemeral sessions)."""

    name: ClassVar[str] = "plait :memory:"
    engine: ClassVar[str] = "memory"

    def _store(self) -> Any:
        return ":memory:"


class PlaitPostgres(PlaitSQLite):
    """plait's PostgreSQL store (psycopg 3), in a fresh schema."""

    name: ClassVar[str] = "plait PG"
    engine: ClassVar[str] = "postgres"
    requires: ClassVar[tuple[str, ...]] = ("plait", "psycopg")

    def _store(self) -> Any:
        from plait.store.postgres import PostgresStore

        assert self.place.pg_url is not None
        return PostgresStore(self.place.pg_url, schema=self.place.schema, connect_timeout=3)
