"""The store-call budget of a served run: every store call is a hop to the store worker.

A hop hands the call to another thread and wakes the loop again when it is done, so on a
busy server each one is a wait for a turn on a core, and on PostgreSQL a round trip too.
The budget is counted, not timed: the hops one streamed run makes, from its request to its
``run_end``, once the session and its channel exist.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from tests.server.conftest import AUTH, make_served

BUDGET = 6


def test_a_streamed_run_makes_no_more_store_calls_than_its_budget(tmp_path: Path) -> None:
    served = make_served(tmp_path)
    worker = served.client.host.store_calls
    hops: list[str] = []
    through = worker.run_through

    async def counted(fn: Callable[[], Any]) -> Any:
        inner = getattr(fn, "func", fn)  # a partial names what it calls
        hops.append(getattr(inner, "__qualname__", type(inner).__name__))
        return await through(fn)

    try:
        with TestClient(served.app, headers=AUTH) as api:
            sid = api.post("/sessions", json={}).json()["id"]
            watcher = api.stream("GET", f"/sessions/{sid}/events")
            with watcher as events:
                assert events.status_code == 200
                first = api.post(f"/sessions/{sid}/runs", json={"text": "hi", "stream": True})
                assert "event: run_end" in first.text
                worker.run_through = counted  # type: ignore[method-assign]
                r = api.post(f"/sessions/{sid}/runs", json={"text": "again", "stream": True})
                worker.run_through = through  # type: ignore[method-assign]
            names = [line for line in r.text.splitlines() if line.startswith("event: ")]
            assert names[0] == "event: run_start" and names[-1] == "event: run_end"
            assert names.count("event: record") == 2  # the prompt and the reply, both out
            assert 0 < len(hops) <= BUDGET, hops
            records = api.get(f"/sessions/{sid}/records").json()["records"]
            assert [r["payload"]["content"] for r in records if r["kind"] == "user"] == [
                "hi",
                "again",
            ]
    finally:
        served.client.close()
