"""PlaitSaver's time travel as plait branches, and what its deletes free.

Time travel (``update_state`` on an older checkpoint, invoking from one) moves the
thread's session to a new head that shares the records up to that checkpoint; the
abandoned branch stays as a hidden head that LangGraph still lists. Deletes and
prunes rewrite the session and free the channel values no live record holds,
counted here in the store's object space. A process killed between a prune's swap
and its erase leaves a thread that reads as pruned, cleaned by the next write.
"""

from __future__ import annotations

import hashlib
import operator
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

from plait import Client
from plait.integrations.langgraph import PlaitSaver


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turns: Annotated[int, operator.add]
    mood: str


def _reply(state: State) -> dict[str, Any]:
    last = state["messages"][-1].content
    return {"messages": [AIMessage(f"echo: {last}")], "turns": 1, "mood": f"after {last}"}


def _graph(saver: PlaitSaver) -> Any:
    builder = StateGraph(State)
    builder.add_node("reply", _reply)
    builder.add_edge(START, "reply")
    return builder.compile(checkpointer=saver)


def _turn(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)], "turns": 0}


def _config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


T1 = _config("t1")


def _texts(values: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in values["messages"]]


def _history(client: Client, session_id: str) -> list[str]:
    return [m.text for m in client.open(session_id).history()]


def test_a_fork_never_replays_the_abandoned_siblings_writes(graph_target: str) -> None:
    """Invoking from an older checkpoint is a branch: LangGraph and plait read it alone."""
    with Client(".", store=graph_target) as client:
        graph = _graph(PlaitSaver(client))
        graph.invoke(_turn("a"), T1)
        after_a = graph.get_state(T1).config
        graph.invoke(_turn("b"), T1)
        abandoned = graph.get_state(T1).config

        out = graph.invoke(_turn("x"), after_a)
        assert _texts(out) == ["a", "echo: a", "x", "echo: x"]
        assert out["turns"] == 2
        # The thread goes on from the branch; the abandoned tip still reads as it was.
        assert _texts(graph.get_state(T1).values) == ["a", "echo: a", "x", "echo: x"]
        assert _texts(graph.get_state(abandoned).values) == ["a", "echo: a", "b", "echo: b"]
        listed = {c.config["configurable"]["checkpoint_id"] for c in graph.get_state_history(T1)}
        assert abandoned["configurable"]["checkpoint_id"] in listed

        # plait's API: the thread's session is the branch; the abandoned one a hidden head.
        assert _history(client, "t1") == ["a", "echo: a", "x", "echo: x"]
        (hidden,) = client.open("t1").transcript.hidden_heads()
        assert _history(client, hidden) == ["a", "echo: a", "b", "echo: b"]

        graph.invoke(_turn("y"), T1)
        assert _history(client, "t1") == ["a", "echo: a", "x", "echo: x", "y", "echo: y"]
        assert graph.get_state(T1).values["turns"] == 3
        # A delete that removes none of its checkpoints leaves the branches as they are.
        PlaitSaver(client).delete_for_runs(["no-such-run"])
        assert client.open("t1").transcript.hidden_heads() == [hidden]


def test_a_copy_after_time_travel_holds_every_branch(graph_target: str) -> None:
    with Client(".", store=graph_target) as client:
        saver = PlaitSaver(client)
        graph = _graph(saver)
        graph.invoke(_turn("a"), T1)
        after_a = graph.get_state(T1).config
        graph.invoke(_turn("b"), T1)
        abandoned = graph.get_state(T1).config["configurable"]["checkpoint_id"]
        graph.invoke(_turn("x"), after_a)
        source = {c.config["configurable"]["checkpoint_id"] for c in saver.list(T1)}

        saver.copy_thread("t1", "t2")
        saver.delete_thread("t1")
        t2 = _config("t2")
        assert {c.config["configurable"]["checkpoint_id"] for c in saver.list(t2)} == source
        old = graph.get_state({"configurable": {"thread_id": "t2", "checkpoint_id": abandoned}})
        assert _texts(old.values) == ["a", "echo: a", "b", "echo: b"]
        assert _history(client, "t2") == ["a", "echo: a", "x", "echo: x"]
        (hidden,) = client.open("t2").transcript.hidden_heads()
        assert _history(client, hidden) == ["a", "echo: a", "b", "echo: b"]
        assert _texts(graph.invoke(_turn("y"), t2))[-2:] == ["y", "echo: y"]


def test_update_state_on_an_older_checkpoint_never_writes_into_the_branch_it_left(
    graph_target: str,
) -> None:
    with Client(".", store=graph_target) as client:
        graph = _graph(PlaitSaver(client))
        graph.invoke(_turn("a"), T1)
        after_a = graph.get_state(T1).config
        graph.invoke(_turn("b"), T1)
        main = graph.get_state(T1)

        updated = graph.update_state(after_a, {"messages": [HumanMessage("u")]})
        assert _texts(graph.get_state(updated).values) == ["a", "echo: a", "u"]
        # The branch it forked from is untouched: its tip, its values, its messages.
        again = graph.get_state(main.config)
        assert _texts(again.values) == ["a", "echo: a", "b", "echo: b"]
        assert again.values["turns"] == 2 and again.values["mood"] == "after b"
        assert _history(client, "t1") == ["a", "echo: a", "u"]
        (hidden,) = client.open("t1").transcript.hidden_heads()
        assert _history(client, hidden) == ["a", "echo: a", "b", "echo: b"]

        # Continuing the thread continues the update's branch.
        out = graph.invoke(_turn("c"), T1)
        assert _texts(out) == ["a", "echo: a", "u", "c", "echo: c"]
        assert _texts(graph.get_state(main.config).values) == ["a", "echo: a", "b", "echo: b"]
        # Going back to the abandoned tip and on from there is a branch again.
        resumed = graph.invoke(_turn("d"), main.config)
        assert _texts(resumed)[-2:] == ["d", "echo: d"] and resumed["turns"] == 3
        assert _history(client, "t1") == ["a", "echo: a", "b", "echo: b", "d", "echo: d"]
        assert len(client.open("t1").transcript.hidden_heads()) == 2


def _digest(saver: PlaitSaver, value: Any) -> str:
    kind, data = saver.serde.dumps_typed(value)
    return hashlib.sha256(kind.encode() + b"\0" + data).hexdigest()


def _expected(saver: PlaitSaver, threads: list[str]) -> set[str]:
    """The objects the live checkpoints of ``threads`` read: one per channel value."""
    found: set[str] = set()
    for thread in threads:
        for checkpoint in saver.list(_config(thread)):
            for channel, value in checkpoint.checkpoint["channel_values"].items():
                if channel != "messages":
                    found.add(_digest(saver, value))
    return found


def _objects(client: Client) -> set[str]:
    return set(client.store.object_digests())  # type: ignore[attr-defined]


def test_deletes_and_prunes_leave_no_object_no_live_checkpoint_reads(graph_target: str) -> None:
    with Client(".", store=graph_target) as client:
        saver = PlaitSaver(client, object_grace=0)
        graph = _graph(saver)
        for thread in ("t1", "t2", "t3"):
            for n in range(3):
                run = {"metadata": {"run_id": f"{thread}-{n}"}}
                graph.invoke(_turn(f"{thread} {n}"), {**_config(thread), **run})
        graph.invoke(_turn("branch"), list(graph.get_state_history(T1))[3].config)
        assert _objects(client) == _expected(saver, ["t1", "t2", "t3"])

        saver.delete_thread("t1")
        # t2 and t3 hold the same counter values as t1 did: those stay.
        assert _objects(client) == _expected(saver, ["t2", "t3"])
        assert _digest(saver, 1) in _objects(client)

        saver.prune(["t2"])
        assert len(list(saver.list(_config("t2")))) == 1
        assert _objects(client) == _expected(saver, ["t2", "t3"])

        before = len(list(saver.list(_config("t3"))))
        saver.delete_for_runs(["t3-2"])
        assert len(list(saver.list(_config("t3")))) == before - 3
        assert graph.get_state(_config("t3")).values["mood"] == "after t3 1"
        assert _objects(client) == _expected(saver, ["t2", "t3"])
        assert _digest(saver, "after t3 2") not in _objects(client)

        # plait's own erase, then its object collection: nothing of t3 is left.
        client.sessions.erase("t3")
        client.sessions.prune_checkpoints(grace=0)
        assert _objects(client) == _expected(saver, ["t2"])
        saver.delete_thread("t2")
        assert _objects(client) == set()


def test_plaits_checkpoint_pruning_keeps_what_a_live_checkpoint_reads(graph_target: str) -> None:
    with Client(".", store=graph_target) as client:
        saver = PlaitSaver(client, object_grace=0)
        graph = _graph(saver)
        for n in range(2):
            graph.invoke(_turn(f"hi {n}"), T1)
        before = _objects(client)
        assert before
        client.sessions.prune_checkpoints(grace=0)
        assert _objects(client) == before
        assert graph.get_state(T1).values["mood"] == "after hi 1"


_PRUNE_AND_STOP = textwrap.dedent(
    """
    import sys, time
    from plait.integrations.langgraph import PlaitSaver

    saver = PlaitSaver(sys.argv[1], object_grace=0)

    def stop(session_id, last):
        if last:
            print("swapped", flush=True)
            time.sleep(600)

    saver._moved = stop
    saver.prune(["t1"])
    """
)


def test_a_process_killed_between_a_prunes_swap_and_erase_leaves_a_pruned_thread(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "graph.db")
    with PlaitSaver.from_conn_string(path) as saver:
        graph = _graph(saver)
        for n in range(3):
            graph.invoke(_turn(f"hi {n}"), T1)
        graph.invoke(_turn("branch"), list(graph.get_state_history(T1))[3].config)
        newest = graph.get_state(T1)
    child = subprocess.Popen(
        [sys.executable, "-c", _PRUNE_AND_STOP, path],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "swapped"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL

    with Client(".", store=path) as client:
        saver = PlaitSaver(client, object_grace=0)
        # Consistent: the thread reads as pruned though its old heads are still stored.
        assert [c.config for c in saver.list(T1)] == [newest.config]
        assert _texts(_graph(saver).get_state(T1).values) == _texts(newest.values)
        assert _history(client, "t1") == _texts(newest.values)
        left = client.open("t1").transcript.hidden_heads()
        assert len(left) == 2  # the old head and the branch it had: not erased yet
        stale = _objects(client) - _expected(saver, ["t1"])
        assert stale  # values only the old heads held

        # The next write finishes the job: the heads are erased, their values freed.
        out = _graph(saver).invoke(_turn("after"), T1)
        assert _texts(out)[-2:] == ["after", "echo: after"]
        assert client.open("t1").transcript.hidden_heads() == []
        assert _objects(client) == _expected(saver, ["t1"])
        assert len(list(saver.list(T1))) == 4
