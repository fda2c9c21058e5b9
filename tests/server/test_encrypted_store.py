"""The service over an encrypted store: a run's transcript and title read back through the
API and are found by search (SQLite and PostgreSQL), and none of their text is in the store's
file."""

from __future__ import annotations

from pathlib import Path

from starlette.testclient import TestClient

from plait.store import PostgresStore, SQLiteStore, new_encryption_key
from tests.conftest import POSTGRES_URL, needs_postgres

from .conftest import AUTH, REPLY, make_served, wait_idle


def test_a_run_on_an_encrypted_store_reads_back_and_leaves_no_text_in_the_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sealed.db"
    store = SQLiteStore(path, encryption_key=new_encryption_key())
    served = make_served(tmp_path, store=store)
    try:
        with TestClient(served.app, headers=AUTH, raise_server_exceptions=False) as api:
            sid = api.post("/sessions", json={"title": "zebra title"}).json()["id"]
            run = api.post(f"/sessions/{sid}/runs", json={"text": "zebra question"})
            assert run.status_code == 202, run.text
            wait_idle(api, sid)
            hist = api.get(f"/sessions/{sid}/history").json()["messages"]
            assert [(m["role"], m["text"]) for m in hist] == [
                ("user", "zebra question"),
                ("assistant", REPLY),
            ]
            assert [s["title"] for s in api.get("/sessions").json()["sessions"]] == ["zebra title"]
            # Search finds the message through hashed terms, its snippet made from it.
            found = api.get("/sessions", params={"q": "zebra"})
            assert found.status_code == 200, found.text
            hits = found.json()["hits"]
            assert [(h["session_id"], h["snippet"]) for h in hits] == [
                (sid, "\u00abzebra\u00bb question")
            ]
            # Only words and phrases: an operator is a bad query there, not an outage.
            bad = api.get("/sessions", params={"q": "zeb*"})
            assert bad.status_code == 422, bad.text
            assert bad.json()["error"]["code"] == "invalid_argument"
        raw = b"".join(
            p.read_bytes()
            for p in tmp_path.iterdir()
            if p.name.startswith("sealed.db") and p.is_file()
        )
        assert b"zebra" not in raw and REPLY.encode() not in raw
    finally:
        served.client.close()
        store.close()


@needs_postgres
def test_an_encrypted_postgres_store_answers_a_search_through_hashed_terms(
    tmp_path: Path, pg_store_schema: str
) -> None:
    store = PostgresStore(
        f"{POSTGRES_URL}?schema={pg_store_schema}", encryption_key=new_encryption_key()
    )
    served = make_served(tmp_path, store=store)
    try:
        with TestClient(served.app, headers=AUTH, raise_server_exceptions=False) as api:
            sid = api.post("/sessions", json={"title": "zebra title"}).json()["id"]
            run = api.post(f"/sessions/{sid}/runs", json={"text": "zebra question"})
            assert run.status_code == 202, run.text
            wait_idle(api, sid)
            found = api.get("/sessions", params={"q": "zebra"})
            assert found.status_code == 200, found.text
            assert [(h["session_id"], h["snippet"]) for h in found.json()["hits"]] == [
                (sid, "\u00abzebra\u00bb question")
            ]
            bad = api.get("/sessions", params={"q": "zeb*"})
            assert bad.status_code == 422, bad.text
    finally:
        served.client.close()
        store.close()
