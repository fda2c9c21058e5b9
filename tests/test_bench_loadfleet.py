"""The fleet load test's own counting, on made-up deliveries (no server, nothing timed)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path[:0] = [str(BENCH)]

from loadfleet import Load, Observer, Replica, kill_figures, report, tool_counts  # noqa: E402
from loadtest import EndlessModel  # noqa: E402


def _args(**more: Any) -> argparse.Namespace:
    return argparse.Namespace(
        **{"route": "rotate", "observers": 2, "writers": 1, "kill": False, **more}
    )


def _observer(sid: str, replica: int) -> Observer:
    return Observer(sid, replica, replica=replica, moves=[(0, replica)])


def _load(n: int = 2) -> Load:
    return Load([Replica(i, 8000 + i, None, Path(f"r{i}.log")) for i in range(n)])  # type: ignore[arg-type]


def test_records_split_by_the_replica_that_wrote_them() -> None:
    load = _load()
    load.owners["s"] = [(100, 0), (200, 1)]  # run 1 on r0 from 100, run 2 on r1 from 200
    here, there = _observer("s", 0), _observer("s", 1)
    here.seqs, there.seqs = {0, 1, 2}, {0, 1}
    load.deliveries = [
        ("s", 50, 9_000, 0),  # before any run: the session's own record
        ("s", 150, 1_000, 0),  # r0 wrote it, read on r0: same
        ("s", 150, 40_000, 1),  # read on r1: other
        ("s", 250, 2_000, 1),  # r1 wrote it, read on r1: same
    ]
    load.writer_events = [("s", 0, "run_start", 120), ("s", 1, "run_start", 220)]
    load.run_replica = {"a": 0, "b": 1}
    load.events = [("run_start", "s", 121, 0, "a"), ("run_start", "s", 221, 1, "b")]
    r = report(load, [here, there], [], {"s": 3}, 10.0, [], _args())
    assert (r["same_n"], r["other_n"], r["unattributed"]) == (2, 1, 1)
    assert r["other_p50_ms"] == 40.0
    assert r["lost"] == 1  # r1's observer never got seq 2
    assert r["kinds"]["run_start"] == {
        "same_got": 2,
        "same_expected": 2,
        "other_got": 0,
        "other_expected": 2,
    }


def test_a_taken_over_run_is_the_adopters_from_the_kill_on() -> None:
    load = _load(3)
    load.owners["s"] = [(100, 0)]
    load.kill_us, load.victim, load.orphans = 500, 0, ["a", "gone"]
    load.takeovers = [(6_000, {"run_id": "a", "from_replica": "r0", "to_replica": "r2"})]
    load.polled_takeovers = {"a": 6_100}
    obs = _observer("s", 0)
    obs.moves.append((5_000, 2))  # off the dead replica, onto the adopter, before the takeover
    obs.seqs = {0}
    load.deliveries = [("s", 700, 1_000, 2)]  # written after the kill: by the adopter, r2
    load.events = [("run_takeover", "s", 6_000, 2, "a")]
    rows = [("a", "s", "r2", "done", 2), ("gone", "t", "r0", "running", 1)]
    r = report(load, [obs], rows, {"s": 1}, 10.0, [], _args(kill=True))
    assert r["same_n"] == 1 and r["other_n"] == 0
    assert r["kinds"]["run_takeover"]["same_got"] == 1
    assert r["kinds"]["run_takeover"]["same_expected"] == 1
    assert r["taken_over"] == 1 and r["not_completed"] == 1
    assert r["takeover_event_first_ms"] == 5.5 and r["takeover_poll_first_ms"] == 5.6
    assert kill_figures(load, rows, [])["not_completed_states"] == {"running": 1}


def test_tool_calls_run_twice_are_counted(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    log.write_text("a\nb\na\nc\n")
    assert tool_counts(log) == (3, 1)
    assert tool_counts(tmp_path / "none.log") == (0, 0)


def test_the_model_calls_a_tool_then_answers_its_result(tmp_path: Path) -> None:
    model = EndlessModel(tool_log=str(tmp_path / "calls.log"))

    async def events(role: str) -> list[Any]:
        request = SimpleNamespace(messages=[SimpleNamespace(role=role)], tools=["shell"])
        return [e async for e in model.stream(request)]

    first = asyncio.run(events("user"))
    assert [e.type for e in first][-2:] == ["tool_call_delta", "finish"]
    assert first[-2].name == "shell" and "calls.log" in first[-2].arguments_delta
    assert first[-1].reason == "tool_calls"
    after = asyncio.run(events("tool"))
    assert [e.type for e in after] == ["text_delta", "usage", "finish"]
    assert after[-1].reason == "stop"
