"""Google ADK's session services: DatabaseSessionService, SqliteSessionService, InMemory.

Items are ADK ``Event``s with ``google.genai`` content: the user's text, the model's
``function_call`` part, the ``function_response`` part and the model's answer. ADK has
no batch append: ``append_batch`` is ``append_event`` once per event (what a run does).

``append_event`` takes 10-40 ms per event on a SQLite file here (a commit, and a new
connection per call for SqliteSessionService) and grows with the session in memory (it
scans the events for a duplicate), so a 10k session would take minutes to build. The
transcripts are therefore built by writing the rows ``append_event`` writes, a thousand
per transaction, through each service's own schema; every timed verb is the public API.
"""

from __future__ import annotations

from typing import Any, ClassVar

from base import AsyncAdapter, Place
from transcript import TOOL, Step

__all__ = ["AdkDatabasePostgres", "AdkDatabaseSQLite", "AdkInMemory", "AdkSqlite"]

APP = "bench"
USER = "u"
GET_SESSION = "get_session()"


def adk_event(s: Step) -> Any:
    """Return item ``s`` as an ADK event."""
    from google.adk.events import Event
    from google.genai import types

    if s.kind == "user":
        author, content = "user", types.Content(role="user", parts=[types.Part(text=s.text)])
    elif s.kind == "call":
        call = types.FunctionCall(id=s.call_id, name=TOOL, args=s.arguments)
        content = types.Content(role="model", parts=[types.Part(function_call=call)])
        author = "agent"
    elif s.kind == "result":
        response = types.FunctionResponse(id=s.call_id, name=TOOL, response={"result": s.text})
        author = "agent"
        content = types.Content(role="user", parts=[types.Part(function_response=response)])
    else:
        author, content = "agent", types.Content(role="model", parts=[types.Part(text=s.text)])
    return Event(invocation_id=f"inv-{s.turn}", author=author, content=content)


class _Adk(AsyncAdapter):
    """The verbs of an ADK ``BaseSessionService`` over one session."""

    name: ClassVar[str] = "ADK"
    ops: ClassVar[frozenset[str]] = frozenset(
        {"append_one", "append_batch", "load", "tail", "list"}
    )
    load_names: ClassVar[tuple[str, ...]] = (GET_SESSION,)
    requires: ClassVar[tuple[str, ...]] = ("google.adk", "sqlalchemy", "aiosqlite")
    build_chunk: ClassVar[int] = 100
    notes: ClassVar[str] = (
        "append_event (batch = one call per event); get_session(); "
        "get_session(num_recent_events=20); list_sessions(app, user) (no page size: all)"
    )

    def __init__(self, place: Place) -> None:
        super().__init__(place)
        self.service = self._service()
        self.sid = f"s-{place.key}"
        self.session = self.run(
            self.service.create_session(app_name=APP, user_id=USER, session_id=self.sid)
        )

    def _service(self) -> Any:
        raise NotImplementedError

    def bulk(self, events: list[Any]) -> None:
        """Store ``events`` as ``append_event`` would, in one transaction (building only)."""
        raise NotImplementedError

    def build(self, size: int) -> None:
        while self.length < size:
            n = min(1000, size - self.length)
            self.bulk(self.items(self.length, n))
            self.length += n

    def native(self, s: Step) -> Any:
        return adk_event(s)

    def append_one(self, item: Any) -> None:
        self.run(self.service.append_event(self.session, item))

    def append_batch(self, items: list[Any]) -> None:
        async def each() -> None:
            for item in items:
                await self.service.append_event(self.session, item)

        self.run(each())

    def _get(self, config: Any = None) -> Any:
        return self.run(
            self.service.get_session(app_name=APP, user_id=USER, session_id=self.sid, config=config)
        )

    def load(self, variant: str) -> int:
        return len(self._get().events)

    def tail(self, n: int) -> int:
        from google.adk.sessions.base_session_service import GetSessionConfig

        return len(self._get(GetSessionConfig(num_recent_events=n)).events)

    def fill_sessions(self, count: int) -> None:
        # Sessions without events: ADK's list_sessions reads the sessions table only. The
        # instance's own session is the first; the rest are written as create_session
        # writes them, in one transaction (create_session commits each, 20-40 ms here).
        self.bulk_sessions([f"l{k:06d}" for k in range(count - 1)])

    def bulk_sessions(self, ids: list[str]) -> None:
        """Create sessions ``ids`` as ``create_session`` would (building only)."""
        for sid in ids:
            self.run(self.service.create_session(app_name=APP, user_id=USER, session_id=sid))

    def list_sessions(self, n: int) -> int:
        found = self.run(self.service.list_sessions(app_name=APP, user_id=USER))
        return len(found.sessions[-n:])

    def close(self) -> None:
        close = getattr(self.service, "close", None)
        if close is not None:
            self.run(close())
        super().close()


class AdkDatabaseSQLite(_Adk):
    """``DatabaseSessionService`` (SQLAlchemy ORM) on SQLite through aiosqlite."""

    name: ClassVar[str] = "ADK DatabaseSessionService (aiosqlite)"

    def _service(self) -> Any:
        from google.adk.sessions import DatabaseSessionService

        path = self.place.dir / f"adk-db-{self.place.key}.db"
        return DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{path}")

    def bulk(self, events: list[Any]) -> None:
        service, session = self.service, self.session

        async def write() -> None:
            schema = service._get_schema_classes()
            async with service.database_session_factory() as sql:
                sql.add_all([schema.StorageEvent.from_event(session, e) for e in events])
                await sql.commit()

        self.run(write())

    def bulk_sessions(self, ids: list[str]) -> None:
        from datetime import UTC, datetime

        service = self.service
        now = datetime.now(UTC)
        if service._uses_naive_datetime():
            now = now.replace(tzinfo=None)

        async def write() -> None:
            schema = service._get_schema_classes()
            async with service.database_session_factory() as sql:
                sql.add_all(
                    [
                        schema.StorageSession(
                            app_name=APP, user_id=USER, id=sid, state={},
                            create_time=now, update_time=now,
                        )
                        for sid in ids
                    ]
                )
                await sql.commit()

        self.run(write())


class AdkDatabasePostgres(AdkDatabaseSQLite):
    """``DatabaseSessionService`` on PostgreSQL through asyncpg, in a fresh schema."""

    name: ClassVar[str] = "ADK DatabaseSessionService (asyncpg)"
    engine: ClassVar[str] = "postgres"
    requires: ClassVar[tuple[str, ...]] = ("google.adk", "sqlalchemy", "asyncpg")

    def _service(self) -> Any:
        from google.adk.sessions import DatabaseSessionService
        from sqlalchemy.ext.asyncio import create_async_engine

        assert self.place.pg_url is not None and self.place.schema is not None
        url = self.place.pg_url.replace("postgresql://", "postgresql+asyncpg://", 1)
        engine = create_async_engine(
            url, connect_args={"server_settings": {"search_path": self.place.schema}}
        )
        self._engine = engine
        return DatabaseSessionService(db_engine=engine)

    def close(self) -> None:
        # The service does not dispose an engine it was given; the engine lives on this loop.
        self.run(self._engine.dispose())
        super().close()


class AdkSqlite(_Adk):
    """``SqliteSessionService``: ADK's own aiosqlite store, events as JSON."""

    name: ClassVar[str] = "ADK SqliteSessionService"

    def _service(self) -> Any:
        from google.adk.sessions.sqlite_session_service import SqliteSessionService

        return SqliteSessionService(str(self.place.dir / f"adk-sqlite-{self.place.key}.db"))

    def bulk(self, events: list[Any]) -> None:
        s = self.session
        rows = [
            (e.id, s.app_name, s.user_id, s.id, e.invocation_id, e.timestamp,
             e.model_dump_json(exclude_none=True))
            for e in events
        ]
        self._write(
            "INSERT INTO events (id, app_name, user_id, session_id, invocation_id,"
            " timestamp, event_data) VALUES (?, ?, ?, ?, ?, ?, ?)",
            rows,
        )

    def bulk_sessions(self, ids: list[str]) -> None:
        import time

        now = time.time()
        self._write(
            "INSERT INTO sessions (app_name, user_id, id, state, create_time, update_time)"
            " VALUES (?, ?, ?, '{}', ?, ?)",
            [(APP, USER, sid, now, now) for sid in ids],
        )

    def _write(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        import sqlite3

        db = sqlite3.connect(self.place.dir / f"adk-sqlite-{self.place.key}.db")
        try:
            with db:
                db.executemany(sql, rows)
        finally:
            db.close()


class AdkInMemory(_Adk):
    """``InMemorySessionService``: nothing stored, the events kept in the process."""

    name: ClassVar[str] = "ADK InMemorySessionService"
    engine: ClassVar[str] = "memory"

    def _service(self) -> Any:
        from google.adk.sessions import InMemorySessionService

        return InMemorySessionService()

    def bulk(self, events: list[Any]) -> None:
        s = self.session
        self.service.sessions[s.app_name][s.user_id][s.id].events.extend(events)
