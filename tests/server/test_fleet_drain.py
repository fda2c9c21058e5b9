"""A replica stopped with SIGTERM while it runs: what the others show during its drain.

docs/deploy.md: the replica stops listening, ends its own event streams, lets its runs
go on for ``--drain-grace``. A run that ends within the grace ends on that replica,
and a page watching another replica sees it end there: its words, its records and its
``run_end``, with no takeover.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import POSTGRES_URL, needs_postgres
from tests.server.fleet import FakeModel, Fleet, Observer, Replica, run_ended

pytestmark = [needs_postgres, pytest.mark.slow]


@contextlib.contextmanager
def _pair(schema: str, tmp_path: Path, model: FakeModel, grace: float) -> Iterator[Fleet]:
    from plait.store.postgres import PostgresStore

    assert POSTGRES_URL is not None
    PostgresStore(POSTGRES_URL, schema=schema).close()
    store = f"{POSTGRES_URL}?schema={schema}"
    fleet = Fleet(
        [Replica(name, store, model.url, tmp_path, drain_grace=grace) for name in ("a", "b")]
    )
    try:
        for replica in fleet:
            replica.start()
        for replica in fleet:
            replica.wait_ready()
        fleet.wait_peers()
        yield fleet
    finally:
        fleet.stop()


@pytest.fixture
def pair(pg_schema: str, tmp_path: Path, model: FakeModel) -> Iterator[Fleet]:
    """Two replicas whose drain grace outlasts the runs of a test."""
    with _pair(pg_schema, tmp_path, model, 30.0) as fleet:
        yield fleet


@pytest.fixture
def hasty_pair(pg_schema: str, tmp_path: Path, model: FakeModel) -> Iterator[Fleet]:
    """Two replicas that hand their runs over one second after a SIGTERM."""
    with _pair(pg_schema, tmp_path, model, 1.0) as fleet:
        yield fleet


def test_a_run_that_ends_within_the_drain_grace_is_seen_ending_elsewhere(
    pair: Fleet, model: FakeModel, tmp_path: Path
) -> None:
    a, b = pair.replicas
    model.commands["drain"] = f"echo drain >> {tmp_path / 'ran.log'}"
    with a.api() as api_a, b.api() as api_b:
        sid = api_a.post("/sessions", json={}).json()["id"]
        watching = Observer(b, sid)
        run_id = api_a.post(f"/sessions/{sid}/runs", json={"text": "job drain hold"}).json()[
            "run_id"
        ]
        assert model.started("drain").wait(30)
        a.kill(signal.SIGTERM)
        # It stops listening at once; its run goes on.
        for _ in range(100):
            try:
                httpx.get(f"{a.url}/sessions", timeout=0.5)
            except httpx.HTTPError:
                break
        else:
            raise AssertionError("the stopping replica still answers")
        assert a.proc is not None and a.proc.poll() is None  # draining, not gone
        model.gate("drain").set()
        watching.wait_for(run_ended(run_id), timeout=25)  # well within the 30 s grace
        assert a.wait_exit(30) in (0, -signal.SIGTERM)
        [end] = watching.named("run_end")
        assert end.data["ok"] is True, end.data
        assert watching.named("run_takeover") == []
        words = "".join(e.data["text"] for e in watching.named("text_delta"))
        assert "finished drain" in words  # the reply it wrote while draining, as it streamed
        assert (tmp_path / "ran.log").read_text().splitlines() == ["drain"]
        history = api_b.get(f"/sessions/{sid}/history").json()["messages"]
        assert history[-1]["text"] == "finished drain"
        state = api_b.get(f"/sessions/{sid}/runs/current").json()
        assert state["running"] is False


def test_a_run_handed_over_shows_every_record_on_the_replica_that_took_it(
    hasty_pair: Fleet, model: FakeModel
) -> None:
    """The reply cut off by the handover, then the taker's own: a page on the taker shows
    them all as they are written (it relayed the stopping replica until the takeover)."""
    a, b = hasty_pair.replicas
    with a.api() as api_a, b.api() as api_b:
        sid = api_a.post("/sessions", json={}).json()["id"]
        watching = Observer(b, sid)
        run_id = api_a.post(f"/sessions/{sid}/runs", json={"text": "job handed hold"}).json()[
            "run_id"
        ]
        assert model.started("handed").wait(30)
        watching.wait_for(lambda events: any(e.event == "text_delta" for e in events))
        a.kill(signal.SIGTERM)
        watching.wait_for(lambda events: any(e.event == "run_takeover" for e in events))
        model.gate("handed").set()
        watching.wait_for(run_ended(run_id), timeout=30)
        [takeover] = watching.named("run_takeover")
        assert takeover.data["from_replica"] == "a" and takeover.data["to_replica"] == "b"
        history = api_b.get(f"/sessions/{sid}/history").json()["messages"]
        shown = [e.data["record"]["seq"] for e in watching.named("record")]
        assert shown == [m["seq"] for m in history], (shown, history)
        texts = [m["text"] for m in history if m["role"] == "assistant"]
        # The reply cut off mid-stream is kept; the model was asked again.
        assert texts == ["working on handed", "working on handed", "finished handed"]
