"""openai-agents' sessions: SQLiteSession, AdvancedSQLiteSession, SQLAlchemySession.

Items are Responses API input items, the shape the Runner stores: a user message, a
``function_call``, its ``function_call_output`` and an assistant ``message`` with one
``output_text`` part. One item is one row in every one of these stores.
"""

from __future__ import annotations

from typing import Any, ClassVar

from base import AsyncAdapter, Place
from transcript import CYCLE, TOOL, Step

__all__ = ["AdvancedSQLite", "SQLAlchemyPostgres", "SQLAlchemySQLite", "SQLiteSession"]

GET_ITEMS = "get_items()"


def agents_item(s: Step) -> dict[str, Any]:
    """Return item ``s`` as a Responses API input item."""
    if s.kind == "user":
        return {"role": "user", "content": s.text}
    if s.kind == "call":
        return {
            "type": "function_call",
            "id": f"fc_{s.i:08d}",
            "call_id": s.call_id,
            "name": TOOL,
            "arguments": s.arguments_json,
            "status": "completed",
        }
    if s.kind == "result":
        return {"type": "function_call_output", "call_id": s.call_id, "output": s.text}
    return {
        "type": "message",
        "id": f"msg_{s.i:08d}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": s.text, "annotations": []}],
    }


class _AgentsSession(AsyncAdapter):
    """The verbs every openai-agents ``Session`` has: add_items, get_items(limit)."""

    ops: ClassVar[frozenset[str]] = frozenset({"append_one", "append_batch", "load", "tail"})
    load_names: ClassVar[tuple[str, ...]] = (GET_ITEMS,)
    requires: ClassVar[tuple[str, ...]] = ("agents",)
    notes: ClassVar[str] = "add_items([item]) / add_items(batch); get_items(); get_items(limit=20)"
    session: Any

    def native(self, s: Step) -> dict[str, Any]:
        return agents_item(s)

    def append_one(self, item: Any) -> None:
        self.run(self.session.add_items([item]))

    def append_batch(self, items: list[Any]) -> None:
        self.run(self.session.add_items(items))

    def load(self, variant: str) -> int:
        return len(self.run(self.session.get_items()))

    def tail(self, n: int) -> int:
        return len(self.run(self.session.get_items(limit=n)))


class SQLiteSession(_AgentsSession):
    """``agents.SQLiteSession``: sqlite3 in a worker thread, one JSON row per item."""

    name: ClassVar[str] = "SQLiteSession"

    def __init__(self, place: Place) -> None:
        super().__init__(place)
        from agents import SQLiteSession as Session

        self.session = Session(f"s-{place.key}", place.dir / f"agents-{place.key}.db")

    def close(self) -> None:
        self.session.close()
        super().close()


class AdvancedSQLite(_AgentsSession):
    """``AdvancedSQLiteSession``: SQLiteSession plus turn structure, branches and usage."""

    name: ClassVar[str] = "AdvancedSQLiteSession"
    ops: ClassVar[frozenset[str]] = _AgentsSession.ops | {"fork"}
    notes: ClassVar[str] = (
        _AgentsSession.notes
        + "; fork = create_branch_from_turn(middle turn) + switch_to_branch('main')"
    )

    def __init__(self, place: Place) -> None:
        super().__init__(place)
        from agents.extensions.memory import AdvancedSQLiteSession

        self.session = AdvancedSQLiteSession(
            session_id=f"s-{place.key}",
            db_path=place.dir / f"advanced-{place.key}.db",
            create_tables=True,
        )
        self._branches = 0

    def fork(self) -> None:
        self._branches += 1
        turn = max(1, self.length // CYCLE // 2)  # branch turns count user messages from 1
        self.run(self.session.create_branch_from_turn(turn, f"b{self._branches}"))
        self.run(self.session.switch_to_branch("main"))

    def close(self) -> None:
        self.session.close()
        super().close()


class SQLAlchemySQLite(_AgentsSession):
    """``SQLAlchemySession`` on SQLite through aiosqlite."""

    name: ClassVar[str] = "SQLAlchemySession (aiosqlite)"
    requires: ClassVar[tuple[str, ...]] = ("agents", "sqlalchemy", "aiosqlite")

    def __init__(self, place: Place) -> None:
        super().__init__(place)
        from sqlalchemy.ext.asyncio import create_async_engine

        path = place.dir / f"sqlalchemy-{place.key}.db"
        self._open(create_async_engine(f"sqlite+aiosqlite:///{path}"))

    def _open(self, engine: Any) -> None:
        from agents.extensions.memory import SQLAlchemySession

        self.db_engine = engine
        self.session = SQLAlchemySession(f"s-{self.place.key}", engine=engine, create_tables=True)

    def close(self) -> None:
        self.run(self.db_engine.dispose())
        super().close()


class SQLAlchemyPostgres(SQLAlchemySQLite):
    """``SQLAlchemySession`` on PostgreSQL through asyncpg, in a fresh schema."""

    name: ClassVar[str] = "SQLAlchemySession (asyncpg)"
    engine: ClassVar[str] = "postgres"
    requires: ClassVar[tuple[str, ...]] = ("agents", "sqlalchemy", "asyncpg")

    def __init__(self, place: Place) -> None:
        AsyncAdapter.__init__(self, place)
        from sqlalchemy.ext.asyncio import create_async_engine

        assert place.pg_url is not None and place.schema is not None
        url = place.pg_url.replace("postgresql://", "postgresql+asyncpg://", 1)
        engine = create_async_engine(
            url, connect_args={"server_settings": {"search_path": place.schema}}
        )
        self._open(engine)
