"""Two processes invoking one LangGraph thread at once through PlaitSaver.

Each process runs a real ``StateGraph`` over the same store (a SQLite file, a
PostgreSQL schema). Both read the thread's newest checkpoint before either writes
(they meet at a barrier inside ``get_tuple``): one run commits, the other is
refused with ``ThreadConflictError`` and writes nothing, so the thread's
checkpoints stay one chain. With ``saver.turn`` the second waits for the first
run to end and continues from it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from plait import Client
from plait.integrations.langgraph import PlaitSaver
from tests.conftest import POSTGRES_SKIP, POSTGRES_URL, drop_schema, fresh_schema

_RUN = textwrap.dedent(
    """
    import asyncio, operator, os, sys, time
    from pathlib import Path
    from typing import Annotated, TypedDict

    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langgraph.checkpoint.base import get_checkpoint_id
    from langgraph.graph import START, StateGraph
    from langgraph.graph.message import add_messages

    from plait.errors import ThreadConflictError
    from plait.integrations.langgraph import AsyncPlaitSaver, PlaitSaver

    target, mode, me, meet = sys.argv[1:5]


    class State(TypedDict):
        messages: Annotated[list[AnyMessage], add_messages]
        turns: Annotated[int, operator.add]


    class AtTheBarrier(PlaitSaver):
        def get_tuple(self, config):
            found = super().get_tuple(config)
            if mode == "race" and not get_checkpoint_id(config):
                # Both runs have read the newest checkpoint before either writes.
                Path(meet, me).touch()
                while len(os.listdir(meet)) < 2:
                    time.sleep(0.01)
            return found


    def reply(state):
        time.sleep(0.3)  # a model call: the other run is under way meanwhile
        text = state["messages"][-1].content
        return {"messages": [AIMessage(f"echo: {text}")], "turns": 1}


    builder = StateGraph(State)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    with AtTheBarrier(target, lock_timeout=60) as saver:
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "t1"}}
        turn = {"messages": [HumanMessage(f"from {me}")], "turns": 0}
        try:
            if mode == "turns":
                with saver.turn("t1"):
                    graph.invoke(turn, config)
            elif mode == "aturns":

                async def run():
                    async with AsyncPlaitSaver(target, lock_timeout=60) as asaver:
                        agraph = builder.compile(checkpointer=asaver)
                        async with asaver.aturn("t1"):
                            await agraph.ainvoke(turn, config)

                asyncio.run(run())
            else:
                graph.invoke(turn, config)
        except ThreadConflictError as exc:
            print(f"refused: {exc}", flush=True)
            sys.exit(3)
    print("committed", flush=True)
    """
)


@pytest.fixture(params=["sqlite", "postgres"])
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store two processes can open: a file or a PostgreSQL schema of its own."""
    if request.param == "sqlite":
        yield str(tmp_path / "graph.db")
    else:
        if POSTGRES_URL is None:
            pytest.skip(POSTGRES_SKIP)
        schema = fresh_schema()
        yield f"{POSTGRES_URL}?schema={schema}"
        drop_schema(schema)


def _both(target: str, mode: str, meet: Path) -> dict[str, subprocess.CompletedProcess[str]]:
    meet.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    started = {
        me: subprocess.Popen(
            [sys.executable, "-c", _RUN, target, mode, me, str(meet)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        for me in ("A", "B")
    }
    done: dict[str, subprocess.CompletedProcess[str]] = {}
    for me, process in started.items():
        out, err = process.communicate(timeout=120)
        done[me] = subprocess.CompletedProcess(process.args, process.returncode, out, err)
    return done


def _chain(saver: PlaitSaver) -> list[str | None]:
    """The parents of the thread's checkpoints, each checked to have one child at most."""
    parents = [
        (c.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        for c in saver.list({"configurable": {"thread_id": "t1"}})
    ]
    assert len(parents) == len(set(parents)), "two checkpoints continue the same one"
    return parents


def test_two_processes_racing_on_one_thread_never_both_commit(shared: str, tmp_path: Path) -> None:
    with PlaitSaver.from_conn_string(shared) as saver:
        from tests.integrations.test_langgraph import _graph, _turn

        _graph(saver).invoke(_turn("first"), {"configurable": {"thread_id": "t1"}})

    done = _both(shared, "race", tmp_path / "meet")
    codes = sorted(p.returncode for p in done.values())
    assert codes == [0, 3], {me: (p.returncode, p.stderr[-2000:]) for me, p in done.items()}
    (winner,) = [me for me, p in done.items() if p.returncode == 0]
    (loser,) = [me for me, p in done.items() if p.returncode == 3]
    assert "refused: LangGraph thread 't1': another run continued it" in done[loser].stdout

    with Client(".", store=shared) as client:
        saver = PlaitSaver(client)
        _chain(saver)
        state = saver.get_tuple({"configurable": {"thread_id": "t1"}})
        assert state is not None
        assert state.checkpoint["channel_values"]["turns"] == 2
        history = [m.text for m in client.open("t1").history()]
        assert history == ["first", "echo: first", f"from {winner}", f"echo: from {winner}"]
        assert client.open("t1").transcript.hidden_heads() == []


@pytest.mark.parametrize("mode", ["turns", "aturns"])
def test_two_processes_taking_turns_on_one_thread_both_commit_in_order(
    shared: str, mode: str, tmp_path: Path
) -> None:
    done = _both(shared, mode, tmp_path / "meet")
    assert [p.returncode for p in done.values()] == [0, 0], {
        me: p.stderr[-2000:] for me, p in done.items()
    }
    with Client(".", store=shared) as client:
        saver = PlaitSaver(client)
        _chain(saver)
        state = saver.get_tuple({"configurable": {"thread_id": "t1"}})
        assert state is not None
        assert state.checkpoint["channel_values"]["turns"] == 2
        history = [m.text for m in client.open("t1").history()]
        first, second = history[0].removeprefix("from "), history[2].removeprefix("from ")
        assert {first, second} == {"A", "B"}
        assert history == [
            f"from {first}", f"echo: from {first}", f"from {second}", f"echo: from {second}",
        ]  # fmt: skip
