"""A writer whose PostgreSQL lock was lost is refused, and only the new holder writes.

The writer lock on PostgreSQL is an advisory lock held on one connection per
process. When that connection is cut (an idle timeout, a proxy, a failover; here
``pg_terminate_backend``) nothing tells the holder, and another process can take
the lock. Process A (this one) holds the lock through a session handle, its lock
connection is cut, process B (a subprocess) takes the lock and appends: A's next
write raises WriterLockLostError and writes nothing, and a run of A stops with it.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import Client
from plait.errors import SessionLockedError, WriterLockLostError
from plait.providers import Reply, ScriptedProvider
from plait.records import ToolCall
from plait.store import Store
from plait.tools import tool
from tests.conftest import POSTGRES_URL, needs_postgres

pytestmark = [needs_postgres, pytest.mark.slow]

# Process B: takes the writer lock once it is free (asking again for a while) and
# appends three messages through the public API.
WRITER_B = textwrap.dedent(
    """
    import sys, time
    from plait import Client
    from plait.errors import SessionLockedError
    from plait.store.postgres import PostgresStore

    url, ws, sid = sys.argv[1:4]
    with Client(ws, store=PostgresStore(url)) as client:
        session = client.open(sid)
        deadline = time.monotonic() + 30
        while True:
            try:
                session.inject({"role": "user", "content": "b 0"})
                break
            except SessionLockedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        session.inject({"role": "user", "content": "b 1"})
        session.inject({"role": "user", "content": "b 2"})
    print("done", flush=True)
    """
)


@pytest.fixture
def named(pg_store_schema: str) -> Iterator[tuple[str, str, Store]]:
    """A store URL whose connections carry a name of their own, the name, and a store on it."""
    from plait.store.postgres import PostgresStore

    name = f"plait-fence-{uuid.uuid4().hex[:12]}"
    url = f"{POSTGRES_URL}?schema={pg_store_schema}&application_name={name}"
    store = PostgresStore(url)
    try:
        yield url, name, store
    finally:
        store.close()


def _cut(name: str) -> None:
    """Cut the connection named ``name`` from the server's side, as an idle timeout would."""
    import psycopg

    assert POSTGRES_URL is not None
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        cut = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (name,),
        ).fetchall()
    assert cut == [(True,)], f"one connection named {name!r} was expected, found {cut}"


def _writer_b(url: str, ws: Path, sid: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WRITER_B, url, str(ws), sid],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "done", done.stderr


def _texts(client: Client, sid: str) -> list[Any]:
    return [m.text for m in client.open(sid).history()]


def test_a_writer_that_lost_its_lock_is_refused_and_the_new_holder_writes_alone(
    named: tuple[str, str, Store], tmp_path: Path
) -> None:
    url, name, store = named
    with Client(tmp_path, store=store) as client:
        a = client.open("shared")
        a.inject({"role": "user", "content": "a 0"})
        assert a.live.holds_lock
        _cut(f"{name} locks")  # the lock connection has a name of its own
        _writer_b(url, tmp_path, "shared")
        with pytest.raises(WriterLockLostError) as refused:
            a.inject({"role": "user", "content": "a 1"})
        assert isinstance(refused.value, SessionLockedError)  # a 409 on the server
        assert refused.value.session_id == "shared"
        assert _texts(client, "shared") == ["a 0", "b 0", "b 1", "b 2"]
        # Told, A gave up the hold it had lost: its next write takes the lock again (B is
        # gone, so it is free) and lands after B's.
        assert not a.live.holds_lock
        a.inject({"role": "user", "content": "a 1"})
        assert _texts(client, "shared") == ["a 0", "b 0", "b 1", "b 2", "a 1"]


def test_a_run_whose_writer_lock_was_lost_stops_with_the_error_and_writes_nothing_more(
    named: tuple[str, str, Store], tmp_path: Path
) -> None:
    url, name, store = named

    @tool
    def hand_over() -> str:
        """Loses the lock while it runs: another process takes it and writes."""
        _cut(f"{name} locks")
        _writer_b(url, tmp_path, "shared")
        return "handed over"

    call = Reply(tool_calls=(ToolCall("h1", "hand_over", {}),), finish_reason="tool_calls")
    provider = ScriptedProvider([call, "never asked"])
    with Client(tmp_path, store=store) as client:
        a = client.open("shared")
        with pytest.raises(WriterLockLostError):
            asyncio.run(a.prompt("hand it over", provider=provider, tools=[hand_over]))
        records = client.open("shared").transcript.records
        # The run's prompt and the model's call, then B's messages: no tool result, no
        # "interrupted" answer, no event of A's after the cut.
        assert [(r.kind, getattr(r, "text", None)) for r in records][-3:] == [
            ("user", "b 0"),
            ("user", "b 1"),
            ("user", "b 2"),
        ]
        kinds = [r.kind for r in records]
        assert "tool" not in kinds
        assert kinds.count("assistant") == 1
        assert not a.live.running
