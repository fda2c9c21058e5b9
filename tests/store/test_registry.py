"""The fleet's registry: replicas, runs, one run per session, leases and takeovers."""

from __future__ import annotations

import time

import pytest

from plait.errors import SessionBusyError
from plait.store import RunRegistry, Store


def registry(store: Store) -> RunRegistry:
    assert isinstance(store, RunRegistry)
    return store


def test_a_run_is_registered_with_its_replica(store: Store) -> None:
    reg = registry(store)
    reg.replica_seen("a", "http://127.0.0.1:1", "serving")
    row = reg.run_begin("r1", "s1", "a", {"max_steps": 5})
    assert (row.run_id, row.session_id, row.replica_id, row.state, row.epoch) == (
        "r1", "s1", "a", "running", 1,
    )  # fmt: skip
    assert row.options == {"max_steps": 5}
    found = reg.run_of("s1")
    assert found is not None and found.run_id == "r1"
    assert found.replica_url == "http://127.0.0.1:1" and found.replica_state == "serving"
    assert found.replica_age_us is not None and found.replica_age_us < 60_000_000
    assert reg.run_of("s2") is None


def test_one_run_per_session_in_the_whole_fleet(store: Store) -> None:
    reg = registry(store)
    reg.run_begin("r1", "s1", "a", {})
    with pytest.raises(SessionBusyError):
        reg.run_begin("r2", "s1", "b", {})
    reg.run_begin("r3", "s2", "b", {})  # another session is free
    assert reg.run_end("r1", "a", 1, "done")
    reg.run_begin("r2", "s1", "b", {})  # free again once the run ended
    ended = reg.run_get("r1")
    assert ended is not None and ended.state == "done"


def test_only_the_replica_at_its_epoch_ends_a_run(store: Store) -> None:
    reg = registry(store)
    reg.run_begin("r1", "s1", "a", {})
    assert not reg.run_end("r1", "b", 1, "done")  # not its run
    assert not reg.run_end("r1", "a", 2, "done")  # not its epoch
    assert reg.run_end("r1", "a", 1, "failed")
    assert not reg.run_end("r1", "a", 1, "done")  # already ended


def test_runs_of_a_silent_or_gone_replica_are_orphaned_and_claimed_once(store: Store) -> None:
    reg = registry(store)
    reg.replica_seen("a", None, "serving")
    reg.replica_seen("b", None, "serving")
    reg.run_begin("r1", "s1", "a", {})
    reg.run_begin("r2", "s2", "b", {})
    reg.run_begin("r3", "s3", "nobody", {})  # a replica with no row at all
    assert {r.run_id for r in reg.runs_orphaned(60_000_000)} == {"r3"}
    time.sleep(0.05)
    reg.replica_seen("b", None, "serving")  # b beats, a does not
    assert {r.run_id for r in reg.runs_orphaned(30_000)} == {"r1", "r3"}
    reg.replica_seen("b", None, "gone")  # b said it stopped: its runs go at once
    assert {r.run_id for r in reg.runs_orphaned(60_000_000)} == {"r2", "r3"}

    claimed = reg.run_claim("r1", 1, "b")
    assert claimed is not None and (claimed.replica_id, claimed.epoch) == ("b", 2)
    assert reg.run_claim("r1", 1, "c") is None  # a second claimer of the same epoch loses
    assert not reg.run_end("r1", "a", 1, "done")  # the old replica can no longer end it
    assert reg.run_end("r1", "b", 2, "done")


def test_replicas_are_listed_newest_heartbeat_first(store: Store) -> None:
    reg = registry(store)
    reg.replica_seen("a", "http://a", "serving")
    time.sleep(0.01)
    reg.replica_seen("b", None, "draining")
    rows = reg.replicas()
    assert [r.replica_id for r in rows] == ["b", "a"]
    assert rows[0].state == "draining" and rows[1].url == "http://a"
    reg.replica_seen("a", "http://a2", "serving")  # a heartbeat updates the row in place
    assert [r.replica_id for r in reg.replicas()] == ["a", "b"]
    assert reg.replicas()[0].url == "http://a2"
    first = reg.replicas()[0].started_at_us
    time.sleep(0.01)
    reg.replica_seen("a", "http://a2", "serving")
    assert reg.replicas()[0].started_at_us == first  # a heartbeat keeps the start time
    reg.replica_seen("a", "http://a2", "serving", started=True)  # started again, same id
    assert reg.replicas()[0].started_at_us > first
