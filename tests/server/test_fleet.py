"""A fleet: three `plait serve` replicas on one PostgreSQL store, driven through one,
observed and controlled through the others, killed mid-run (SIGKILL, SIGTERM).

Every run completes on a survivor, every observer sees the run's end, and no tool
runs twice.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import POSTGRES_URL, needs_postgres
from tests.server.fleet import FakeModel, Fleet, Observer, Replica, run_ended, wait_until

pytestmark = [needs_postgres, pytest.mark.slow]


@pytest.fixture
def fleet(pg_schema: str, tmp_path: Path, model: FakeModel) -> Iterator[Fleet]:
    from plait.store.postgres import PostgresStore

    assert POSTGRES_URL is not None
    PostgresStore(POSTGRES_URL, schema=pg_schema).close()  # the schema, set up once
    store = f"{POSTGRES_URL}?schema={pg_schema}"
    replicas = [Replica(name, store, model.url, tmp_path) for name in ("a", "b", "c")]
    fleet = Fleet(replicas)
    try:
        for replica in replicas:
            replica.start()
        for replica in replicas:
            replica.wait_ready()
        fleet.wait_peers()
        yield fleet
    finally:
        fleet.stop()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_run_is_seen_and_controlled_from_every_replica(fleet: Fleet, model: FakeModel) -> None:
    a, b, c = fleet.replicas
    with a.api() as api_a, b.api() as api_b, c.api() as api_c:
        sid = api_a.post("/sessions", json={}).json()["id"]
        watching = [Observer(r, sid) for r in (b, c)]
        run_id = api_a.post(f"/sessions/{sid}/runs", json={"text": "job one hold"}).json()[
            "run_id"
        ]
        assert model.started("one").wait(30)
        # Every replica says where the run is.
        for api in (api_a, api_b, api_c):
            state = api.get(f"/sessions/{sid}/runs/current").json()
            assert state["running"] is True and state["run_id"] == run_id
            assert state["replica_id"] == "a" and state["started_at"]
        # Control through the others: a steer and a live client's attach are A's to write.
        r = api_b.post(f"/sessions/{sid}/runs/current/steer", json={"message": "also this"})
        assert r.status_code == 200, r.text
        r = api_c.post(f"/sessions/{sid}/clients", json={"client_id": "tui"})
        assert r.status_code == 200, r.text
        # A second run from anywhere is refused while this one runs.
        r = api_c.post(f"/sessions/{sid}/runs", json={"text": "job two"})
        assert r.status_code == 409, r.text
        model.gate("one").set()
        for observer in watching:
            observer.wait_for(run_ended(run_id))
        history = api_c.get(f"/sessions/{sid}/history").json()["messages"]
        assert "also this" in [m["text"] for m in history]  # the steer reached the model
        for observer in watching:
            assert [e.data["run_id"] for e in observer.named("run_end")] == [run_id]
            assert observer.named("run_end")[0].data["ok"] is True
        # Both other replicas showed the run alike: the same events, ids and order, deltas
        # and all, as the run's own replica sequenced them.
        seen = [[(e.event, e.id) for e in observer.events] for observer in watching]
        # From the run's start: what a replica read of the store on its own just before
        # the relay began may stand on either side of it.
        seen = [kinds[[k for k, _ in kinds].index("run_start") :] for kinds in seen]
        assert seen[0] == seen[1]
        kinds = {kind for kind, _ in seen[0]}
        assert {"run_start", "text_delta", "record", "run_end"} <= kinds, kinds
        # Cancelled from another replica.
        run_id = api_a.post(f"/sessions/{sid}/runs", json={"text": "job three hold"}).json()[
            "run_id"
        ]
        assert model.started("three").wait(30)
        r = api_b.delete(f"/sessions/{sid}/runs/current")
        assert r.status_code == 200, r.text
        for observer in watching:
            observer.wait_for(run_ended(run_id))
        assert api_c.get(f"/sessions/{sid}/runs/current").json()["running"] is False


def test_runs_outlive_a_killed_and_a_stopped_replica(
    fleet: Fleet, model: FakeModel, tmp_path: Path
) -> None:
    a, b, c = fleet.replicas
    ran = tmp_path / "ran.log"
    # SIGKILL while its tool call runs: the survivor records the call as interrupted and
    # never runs it again.
    model.commands["kill"] = f"echo kill >> {ran}; sleep 3"
    with a.api() as api_a, c.api() as api_c:
        first = api_a.post("/sessions", json={}).json()["id"]
        watching = Observer(c, first)
        run_id = api_a.post(f"/sessions/{first}/runs", json={"text": "job kill"}).json()["run_id"]
        wait_until(lambda: _lines(ran) == ["kill"], what="the tool call")
        a.kill(signal.SIGKILL)
        watching.wait_for(run_ended(run_id), timeout=60)
        [takeover] = watching.named("run_takeover")
        assert takeover.data["run_id"] == run_id and takeover.data["from_replica"] == "a"
        assert takeover.data["to_replica"] in ("b", "c")
        [end] = watching.named("run_end")
        assert end.data["ok"] is True, end.data
        assert _lines(ran) == ["kill"]  # not run twice
        history = api_c.get(f"/sessions/{first}/history").json()["messages"]
        tool = [m for m in history if m["role"] == "tool"]
        assert len(tool) == 1 and "interrupted" in tool[0]["text"]
        assert history[-1]["role"] == "assistant" and history[-1]["text"] == "finished kill"

    # SIGTERM while the model streams: the stopping replica hands the run over.
    survivor, other = (b, c) if takeover.data["to_replica"] == "b" else (c, b)
    model.commands["term"] = f"echo term >> {ran}"
    with survivor.api() as api_s, other.api() as api_o:
        second = api_s.post("/sessions", json={}).json()["id"]
        watching = Observer(other, second)
        run_id = api_s.post(f"/sessions/{second}/runs", json={"text": "job term hold"}).json()[
            "run_id"
        ]
        assert model.started("term").wait(30)
        survivor.kill(signal.SIGTERM)
        # uvicorn raises the signal again once it has stopped
        assert survivor.wait_exit(60) in (0, -signal.SIGTERM)
        model.gate("term").set()
        watching.wait_for(run_ended(run_id), timeout=60)
        [takeover] = watching.named("run_takeover")
        assert takeover.data["from_replica"] == survivor.name
        assert takeover.data["to_replica"] == other.name
        [end] = watching.named("run_end")
        assert end.data["ok"] is True, end.data
        assert _lines(ran) == ["kill", "term"]  # each tool ran once
        history = api_o.get(f"/sessions/{second}/history").json()["messages"]
        assert history[-1]["text"] == "finished term"
        state = api_o.get(f"/sessions/{second}/runs/current").json()
        assert state["running"] is False and state["resumable"] is None


def test_a_tool_in_an_isolated_sandbox_dies_with_its_replica(
    fleet: Fleet, model: FakeModel, tmp_path: Path, pg_schema: str
) -> None:
    """bubblewrap's --die-with-parent: a replica killed mid-call leaves no tool process."""
    import shutil
    import subprocess
    import uuid

    from plait import Client
    from plait.store.postgres import PostgresStore

    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed (Debian's bubblewrap; .ci/run installs it)")
    a, _, c = fleet.replicas
    marker = f"sleep 300.{uuid.uuid4().int % 10**9:09d}"  # a command line no other process has
    model.commands["iso"] = f"echo started > started.txt; {marker}"
    ws = tmp_path / "iso"
    ws.mkdir()
    assert POSTGRES_URL is not None
    store = PostgresStore(POSTGRES_URL, schema=pg_schema)
    with Client(ws, store=store) as client:
        session = client.sessions.create([], title="isolated")
        session.to("isolated", str(ws))
        sid = session.id
    store.close()  # and its writer lock with it

    def running() -> bool:
        found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        return bool(found.stdout.strip())

    with c.api() as api_c:
        watching = Observer(c, sid)
        with a.api() as api_a:
            started = api_a.post(f"/sessions/{sid}/runs", json={"text": "job iso"})
            assert started.status_code == 202, started.text
            run_id = started.json()["run_id"]
        wait_until(lambda: (ws / "started.txt").exists() and running(), what="the tool call")
        a.kill(signal.SIGKILL)
        wait_until(lambda: not running(), timeout=30, what="the tool process ending")
        watching.wait_for(run_ended(run_id), timeout=60)  # and the run goes on elsewhere
        [end] = watching.named("run_end")
        assert end.data["ok"] is True, end.data
        tool = [m for m in api_c.get(f"/sessions/{sid}/history").json()["messages"]
                if m["role"] == "tool"]  # fmt: skip
        assert len(tool) == 1 and "interrupted" in tool[0]["text"]


def test_a_frozen_replica_is_fenced_off_and_its_run_continues_once(
    fleet: Fleet, model: FakeModel, tmp_path: Path
) -> None:
    """SIGSTOP: the replica's heartbeat stops but its connection (and lock) live on. A
    survivor ends that connection, takes the run over and finishes it; woken up, the frozen
    replica's writes are refused, so it neither runs the tool again nor ends the run twice."""
    a, _, c = fleet.replicas
    ran = tmp_path / "ran.log"
    model.commands["frozen"] = f"echo frozen >> {ran}"
    with a.api() as api_a, c.api() as api_c:
        sid = api_a.post("/sessions", json={}).json()["id"]
        watching = Observer(c, sid)
        run_id = api_a.post(f"/sessions/{sid}/runs", json={"text": "job frozen hold"}).json()[
            "run_id"
        ]
        assert model.started("frozen").wait(30)
        a.kill(signal.SIGSTOP)
        try:
            watching.wait_for(lambda events: any(e.event == "run_takeover" for e in events))
            model.gate("frozen").set()  # the survivor's model call, and the frozen one's
            watching.wait_for(run_ended(run_id), timeout=60)
        finally:
            a.kill(signal.SIGCONT)
        [takeover] = watching.named("run_takeover")
        assert takeover.data["from_replica"] == "a" and takeover.data["to_replica"] != "a"
        time.sleep(2.0)  # the woken replica reads its model's answer and tries to write it
        assert _lines(ran) == ["frozen"]
        assert [e.data["run_id"] for e in watching.named("run_end")] == [run_id]
        assert watching.named("run_end")[0].data["ok"] is True
        history = api_c.get(f"/sessions/{sid}/history").json()["messages"]
        assert len([m for m in history if m["role"] == "tool"]) == 1
        assert history[-1]["text"] == "finished frozen"
