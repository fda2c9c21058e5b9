"""The first read of a long LangGraph thread: its newest checkpoint from its tip.

A saver that reads a long thread cold for its newest checkpoint (every run's first
read) reads the records from that checkpoint's event on, and the messages before
them without their events; the tuple is the one a read of every record gives.
"""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.conformance.test_utils import generate_checkpoint
from langgraph.types import Command

from plait import Client
from plait.integrations.langgraph import PlaitSaver
from plait.store import Store
from tests.integrations.test_langgraph import _graph, _turn

T1 = {"configurable": {"thread_id": "t1"}}



def _same(a: Any, b: Any) -> None:
    assert a is not None and b is not None
    assert a.config == b.config and a.parent_config == b.parent_config
    assert a.metadata == b.metadata
    assert a.checkpoint == b.checkpoint
    assert a.pending_writes == b.pending_writes


def _counting(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many records each ``read`` of the store returns, from now on."""
    counts: list[int] = []
    real = store.read

    def read(row: Any, lo: int, hi: int) -> Any:
        found = real(row, lo, hi)
        counts.append(len(found))
        return found

    monkeypatch.setattr(store, "read", read)
    return counts


def test_a_long_threads_newest_checkpoint_is_read_from_its_tip(
    graph_target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Client(".", store=graph_target) as client:
        graph = _graph(PlaitSaver(client), approve=True)
        for n in range(40):
            graph.invoke(_turn(f"turn {n}"), T1)  # each stops at the approval question
            graph.invoke(Command(resume=f"yes {n}"), T1)
        graph.invoke(_turn("last"), T1)  # interrupted: the newest checkpoint has writes
        newest = next(iter(PlaitSaver(client).list(T1))).config  # a read of every record
        whole = PlaitSaver(client).get_tuple(newest)
        total = client.store.get("t1").layout.end_seq  # type: ignore[union-attr]
        assert total > 400

        counts = _counting(client.store, monkeypatch)
        cold = PlaitSaver(client)
        tip = cold.get_tuple(T1)
        _same(tip, whole)
        assert tip is not None and tip.pending_writes  # the interrupt's
        assert sum(counts) < total / 4  # the events before the tip are not read
        assert len(tip.checkpoint["channel_values"]["messages"]) == 40 * 3 + 2

        # A run that goes on from the tip reads no more of the thread either.
        out = _graph(cold, approve=True).invoke(Command(resume="at last"), T1)
        assert out["messages"][-1].content == "approved: at last"
        assert sum(counts) < total / 4
        assert [m.text for m in client.open("t1").history()][-1] == "approved: at last"

        # Every other read sees the whole thread.
        assert [c.config for c in cold.list(T1)] == [c.config for c in PlaitSaver(client).list(T1)]
        assert len(list(cold.list(T1))) == 41 * 4  # input, reply, question, answer


def test_a_write_stored_before_its_checkpoint_is_read_with_it(graph_target: str) -> None:
    """A background ``put`` may land after its step's writes: they are still its own.

    Here the writes come long before their checkpoint's event (past the records a
    read from the end looks at first).
    """
    with Client(".", store=graph_target) as client:
        saver = PlaitSaver(client)
        made = [
            generate_checkpoint(channel_values={"n": n}, channel_versions={"n": n + 1})
            for n in range(150)
        ]
        last = generate_checkpoint(channel_values={"n": 999}, channel_versions={"n": 999})
        early = {
            "configurable": {"thread_id": "t1", "checkpoint_ns": "", "checkpoint_id": last["id"]}
        }
        saver.put_writes(early, [("n", "early")], task_id="early-task")
        config: dict[str, Any] = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        for n, checkpoint in enumerate(made):
            config = saver.put(config, checkpoint, {"source": "loop", "step": n}, {"n": n + 1})
            saver.put_writes(config, [("n", n)], task_id=f"task-{n}")
        saver.put(config, last, {"source": "loop", "step": 150}, {"n": 999})
        saver.put_writes(early, [("n", "late")], task_id="late-task")

        tip = PlaitSaver(client).get_tuple(T1)
        assert tip is not None and tip.checkpoint["id"] == last["id"]
        assert sorted(w[2] for w in tip.pending_writes) == ["early", "late"]
        _same(tip, PlaitSaver(client).get_tuple(early))
