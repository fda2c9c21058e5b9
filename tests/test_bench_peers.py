"""The peers benchmark's own parts, with plait alone (no peer installed, nothing timed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

PEERS = Path(__file__).resolve().parents[1] / "benchmarks" / "peers"
sys.path[:0] = [str(PEERS), str(PEERS.parent)]

import checkpointers  # noqa: E402
import memory  # noqa: E402
import report  # noqa: E402
from measure import Settings  # noqa: E402
from peer_plait import PlaitMemory, PlaitSQLite, plait_item  # noqa: E402
from transcript import CYCLE, step  # noqa: E402

import run  # noqa: E402

TINY = run.Plan(
    sizes={"40": 40, "80": 80},
    append_sizes=("40",),
    list_sessions=5,
    memory_size=0,
    memory_rounds=0,
    settings=Settings(rounds=3, round_seconds=0.0, max_calls=1, build_budget=60, load_budget=60),
    rounds_at={"80": 1},
)


def test_transcript_is_an_agent_loop_with_tool_calls() -> None:
    kinds = [step(i).kind for i in range(2 * CYCLE)]
    assert kinds == ["user", "call", "result", "answer"] * 2
    call, result = plait_item(step(1)), plait_item(step(2))
    assert call["tool_calls"][0]["id"] == result["tool_call_id"]
    assert len(plait_item(step(0))["content"]) == 200


def test_plait_adapter_has_every_verb(tmp_path: Path) -> None:
    a = PlaitSQLite(run.Place(tmp_path, "t"))
    try:
        a.build(CYCLE * 10)
        assert a.load("history(full=True)") == 40
        assert a.load("history()") == 40
        assert a.load("records") == 40
        assert a.tail(20) == 20
        a.fork()
        a.append_one(plait_item(step(40)))
        a.append_batch(a.items(41, 3))
        assert a.session.transcript.length == 44
        a.fill_sessions(3)
        assert a.list_sessions(20) == 5  # the transcript, its fork and the three
    finally:
        a.close()


def test_run_and_tables_with_plait_alone(tmp_path: Path) -> None:
    measurements, skipped = run.run_timed([PlaitSQLite, PlaitMemory], TINY, tmp_path, None)
    ops = {(m["op"], m["size"]) for m in measurements}
    assert ("load", "80") in ops and ("append_one", "40") in ops and ("list", "5") in ops
    assert ("append_one", "80") not in ops
    rounds = {m["size"]: {len(s) for s in m["samples"].values()} for m in measurements}
    assert rounds == {"40": {3}, "80": {1}, "5": {3}}
    assert skipped == {"40": {}, "80": {}}
    doc = {
        "adapters": {
            c.name: {"engine": c.engine, "ops": sorted(c.ops), "loads": list(c.load_names)}
            for c in (PlaitSQLite, PlaitMemory)
        },
        "skipped": skipped,
        "measurements": measurements,
        "memory": {},
    }
    table = report.markdown(doc)
    assert "| operation | plait | plait :memory: |" in table
    assert "full load 80: plait history(full=True) (ms)" in table
    assert "PostgreSQL" not in table  # no PostgreSQL adapter ran


def test_ratio_is_per_round_peer_over_plait() -> None:
    r = report.ratio([10.0, 30.0, 20.0], [5.0, 10.0, 20.0])
    assert r == {"median": 2.0, "low": 1.0, "high": 3.0}
    assert report.cell_ratio(r) == "2.00x (1.00-3.00)"


def test_peak_memory_child_reports_for_plait(tmp_path: Path) -> None:
    stores = memory.build_stores(tmp_path, 40, with_agents=False)
    runs = memory.measure_memory(stores, 1, lambda _line: None)
    (first,) = runs["plait history(full=True)"]
    assert first["count"] == 40
    assert first["peak_mb"] >= first["baseline_mb"] > 0
    doc = {"adapters": {}, "measurements": [], "memory": {
        "size": 40, "method": memory.METHOD, "runs": runs}}
    assert "| plait history(full=True) |" in report.markdown(doc)


def test_plait_checkpointer_under_a_real_graph(tmp_path: Path) -> None:
    pytest.importorskip("langgraph.graph")
    counter = iter(range(100))

    def place(cls: type[checkpointers.Saver], key: str) -> checkpointers.Where:
        folder = tmp_path / f"{key}-{next(counter)}"
        folder.mkdir()
        return checkpointers.Where(folder)

    found = checkpointers.grow(checkpointers.PlaitSQLite, place(checkpointers.PlaitSQLite, "g"),
                               (1, 3), lambda _line: None)
    assert 0 < found["bytes"]["1"] < found["bytes"]["3"]
    assert found["put_us"]["3"] > 0 and found["get_tuple_us"]["3"] > 0
    copies = checkpointers.copies(checkpointers.PlaitSQLite, place(checkpointers.PlaitSQLite, "c"),
                                  (2,), lambda _line: None)
    assert copies["2"] > 0
    # The thread holds the conversation, four messages a turn, readable through plait.
    saver = checkpointers.PlaitSQLite(place(checkpointers.PlaitSQLite, "r"))
    try:
        from agent_graph import build_graph, turn

        turn(build_graph(saver.saver), "t", 0)
        kinds = [m.role for m in saver.saver.client.open("t").history()]
        assert kinds == ["user", "assistant", "tool", "assistant"]
    finally:
        saver.close()
    result = {"marks": [1, 3], "copy_at": [2], "savers": {
        "plait PlaitSaver": {**found, "copy_thread_us": copies},
        "LangGraph SqliteSaver": {**found, "copy_thread_us": {"missing": "not implemented"}},
    }}
    table = checkpointers.checkpointer_tables(result)
    assert "| copy_thread at 2 turns |" in table and "n/a (not implemented)" in table
    assert "| growth 1 → 3 turns (3x the turns) |" in table
