"""Checkpoints in the store's own space: a PostgreSQL session's files restored elsewhere."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from plait import Client, Session
from plait.providers import Reply, ScriptedProvider
from plait.records import ToolCall
from plait.store import ObjectStore, PostgresStore
from tests.conftest import POSTGRES_URL, needs_postgres


def _write(cid: str, path: str, content: str) -> Reply:
    call = ToolCall(cid, "write_file", {"path": path, "content": content})
    return Reply(tool_calls=(call,), finish_reason="tool_calls")


def _work(client: Client, box: Path) -> Session:
    box.mkdir()
    (box / "keep.txt").write_text("original\n")
    (box / "big.bin").write_bytes(os.urandom(3 * (1 << 20) + 17))  # several parts
    s = client.sessions.create([{"role": "system", "content": "s"}], session_id="pg-files")
    s.to("local", spec=str(box))
    script = ScriptedProvider([_write("c1", "a.txt", "first\n"), _write("c2", "a.txt", "two\n"),
                               Reply("done")])
    asyncio.run(s.prompt("write", provider=script))
    return s


# Another machine: its own $PLAIT_HOME (so no stat cache or folder of objects to share),
# the same database, and nothing else.
_ELSEWHERE = textwrap.dedent(
    """
    import sys
    from plait import Client
    from plait.store import PostgresStore
    url, schema, workspace, target = sys.argv[1:5]
    with Client(workspace, store=PostgresStore(url, schema=schema)) as client:
        session = client.open("pg-files")
        print(session.workspace.restore(4, folder=target))
    """
)


@needs_postgres
def test_a_postgres_session_checkpoints_into_the_database_and_restores_elsewhere(
    pg_store_schema: str, tmp_path: Path
) -> None:
    assert POSTGRES_URL is not None
    store = PostgresStore(POSTGRES_URL, schema=pg_store_schema)
    ws = tmp_path / "ws"
    ws.mkdir()
    try:
        assert isinstance(store, ObjectStore)
        with Client(ws, store=store) as client:
            box = tmp_path / "box"
            _work(client, box)
            big = (box / "big.bin").read_bytes()
            assert store.object_digests(), "the objects are in the database"
            home = Path(os.environ["PLAIT_HOME"])
            assert not list(home.glob("checkpoints/*/objects")), "no object is a local file"
            other_home = tmp_path / "other-home"
            target = tmp_path / "restored"
            env = {**os.environ, "PLAIT_HOME": str(other_home), "HOME": str(tmp_path)}
            done = subprocess.run(
                [sys.executable, "-c", _ELSEWHERE, POSTGRES_URL, pg_store_schema,
                 str(tmp_path / "ws2"), str(target)],
                env=env, capture_output=True, text=True, timeout=120, check=False,
            )
            assert done.returncode == 0, done.stderr
            assert (target / "a.txt").read_text() == "first\n"
            assert (target / "keep.txt").read_text() == "original\n"
            assert (target / "big.bin").read_bytes() == big
    finally:
        store.close()
