"""Which survivor takes over a dead replica's runs: each its first choice, then anyone."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from plait.errors import InvalidArgumentError
from plait.server.fleet import Fleet, first_choice
from plait.store import RunRegistry, SQLiteStore

RUNS = [f"run-{n:03d}" for n in range(300)]


def test_the_runs_spread_over_the_replicas_and_a_departure_moves_only_its_own() -> None:
    three = Counter(first_choice(run, ["a", "b", "c"]) for run in RUNS)
    assert set(three) == {"a", "b", "c"}
    assert all(60 <= n <= 140 for n in three.values()), three  # about a third each
    # The choice does not depend on the order the replicas are listed in.
    assert all(first_choice(r, ["c", "a", "b"]) == first_choice(r, ["a", "b", "c"]) for r in RUNS)
    # "a" leaves: its runs go to b or c, and no run of b's or c's moves.
    for run in RUNS:
        before = first_choice(run, ["a", "b", "c"])
        after = first_choice(run, ["b", "c"])
        assert after == before or before == "a"
    with pytest.raises(InvalidArgumentError):
        first_choice("run-1", [])


def test_two_survivors_share_a_dead_replicas_runs_then_either_takes_what_is_left(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(tmp_path / "plait.db")
    try:
        assert isinstance(store, RunRegistry)
        lease = 1.0
        dead = Fleet(store, replica_id="a", lease=lease)
        dead.heartbeat()
        runs = [f"run-{n}" for n in range(12)]
        for n, run in enumerate(runs):
            dead.begin(run, f"session-{n}", {})
        b = Fleet(store, replica_id="b", lease=lease)
        c = Fleet(store, replica_id="c", lease=lease)
        b.heartbeat()
        c.heartbeat()
        time.sleep(lease * 1.5)  # "a" is silent past its lease; b and c go on beating
        c.heartbeat()
        for_b = {r.run_id for r in b.heartbeat()}
        for_c = {r.run_id for r in c.heartbeat()}
        expected_b = {r for r in runs if first_choice(r, ["b", "c"]) == "b"}
        assert for_b == expected_b and for_c == set(runs) - expected_b
        assert for_b and for_c  # both survivors get a share (fixed ids: b gets some, c too)
        # b claims its share; c claims nothing (as if it were stuck): after a further lease
        # b is offered c's share too, and claims it.
        for row in b.heartbeat():
            assert b.claim(row) is not None
        assert {r.run_id for r in c.heartbeat()} == for_c
        time.sleep(lease * 1.2)
        c.heartbeat()  # c still beats, so it stays in b's list of serving peers
        late = b.heartbeat()
        assert {r.run_id for r in late} == for_c
        assert all(b.claim(row) is not None for row in late)
        assert set(b.epochs) == set(runs) and c.heartbeat() == []
    finally:
        store.close()


def test_a_draining_peer_is_given_no_share(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "plait.db")
    try:
        lease = 1.0
        dead = Fleet(store, replica_id="a", lease=lease)
        dead.heartbeat()
        runs = [f"run-{n}" for n in range(12)]
        for n, run in enumerate(runs):
            dead.begin(run, f"session-{n}", {})
        b = Fleet(store, replica_id="b", lease=lease)
        c = Fleet(store, replica_id="c", lease=lease)
        c.mode = "draining"
        c.heartbeat()
        time.sleep(lease * 1.5)
        c.heartbeat()
        assert "c" in {r.replica_id for r in store.replicas() if r.state == "draining"}
        assert {r.run_id for r in b.heartbeat()} == set(runs)  # b is the only one serving
        assert c.heartbeat() == []
    finally:
        store.close()
