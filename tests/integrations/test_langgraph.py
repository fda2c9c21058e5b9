"""PlaitSaver against LangGraph's own checkpointer conformance kit and a real StateGraph.

The kit (``langgraph-checkpoint-conformance``) is LangGraph's published contract
for a saver; it runs here on a SQLite file, an in-memory store and PostgreSQL.
Then a real graph (``add_messages`` and a counter, nodes that are plain
functions) is run, resumed, branched from an older checkpoint, interrupted and
read back through plait's API.
"""

from __future__ import annotations

import asyncio
import operator
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

from plait import Client
from plait.errors import InvalidArgumentError
from plait.integrations.langgraph import AsyncPlaitSaver, PlaitSaver


def test_conformance_kit_passes_every_capability(graph_target: str, tmp_path: Path) -> None:
    made = iter(range(1_000))

    @checkpointer_test(name=f"PlaitSaver[{graph_target.split('?')[0]}]")
    async def saver() -> AsyncIterator[AsyncPlaitSaver]:
        # A fresh store per capability suite, as the kit asks (a new file or schema each time).
        target = graph_target
        if target.endswith(".db"):
            target = str(tmp_path / f"kit-{next(made)}.db")
        async with AsyncPlaitSaver.from_conn_string(target) as s:
            yield s

    report = asyncio.run(validate(saver))
    report.print_report()
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert report.passed_all(), failures
    assert report.conformance_level() == "FULL"
    extended = ("copy_thread", "delete_for_runs", "prune")
    assert all(report.results[name].passed is True for name in extended)


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turns: Annotated[int, operator.add]


def _reply(state: State) -> dict[str, Any]:
    last = state["messages"][-1]
    return {"messages": [AIMessage(f"echo: {last.content}")], "turns": 1}


def _graph(saver: Any, *, approve: bool = False) -> Any:
    builder = StateGraph(State)
    builder.add_node("reply", _reply)
    builder.add_edge(START, "reply")
    if approve:

        def ask(state: State) -> dict[str, Any]:
            answer = interrupt("send it?")
            return {"messages": [AIMessage(f"approved: {answer}")]}

        builder.add_node("ask", ask)
        builder.add_edge("reply", "ask")
    return builder.compile(checkpointer=saver)


def _turn(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(text)], "turns": 0}


CONFIG = {"configurable": {"thread_id": "t1"}}


def test_a_graph_runs_resumes_and_reads_through_plait(graph_target: str) -> None:
    client = Client(".", store=graph_target)
    try:
        saver = PlaitSaver(client)
        graph = _graph(saver)
        for n in range(3):
            graph.invoke(_turn(f"hi {n}"), CONFIG)
        state = graph.get_state(CONFIG)
        assert state.values["turns"] == 3
        assert [m.content for m in state.values["messages"]] == [
            "hi 0", "echo: hi 0", "hi 1", "echo: hi 1", "hi 2", "echo: hi 2",
        ]  # fmt: skip

        # plait's API reads the thread as a conversation.
        history = client.open("t1").history()
        assert [(m.role, m.text) for m in history] == [
            ("user", "hi 0"), ("assistant", "echo: hi 0"),
            ("user", "hi 1"), ("assistant", "echo: hi 1"),
            ("user", "hi 2"), ("assistant", "echo: hi 2"),
        ]  # fmt: skip

        # A new graph over the same store continues the thread where it stopped.
        again = _graph(PlaitSaver(client))
        out = again.invoke(_turn("hi 3"), CONFIG)
        assert out["turns"] == 4
        assert len(out["messages"]) == 8
    finally:
        client.close()


def test_each_message_is_stored_once_however_many_checkpoints_hold_it(tmp_path: Path) -> None:
    path = str(tmp_path / "graph.db")
    with PlaitSaver.from_conn_string(path) as saver:
        graph = _graph(saver)
        for n in range(5):
            graph.invoke(_turn(f"turn {n}"), CONFIG)
        checkpoints = list(saver.list(CONFIG))
        records = saver.client.open("t1").transcript.records
    # Three checkpoints per turn, each holding the conversation so far: 10 message records.
    assert len(checkpoints) == 15
    assert sum(r.kind != "event" for r in records) == 10


def test_an_older_checkpoint_branches_without_the_later_turns(tmp_path: Path) -> None:
    with PlaitSaver.from_conn_string(str(tmp_path / "graph.db")) as saver:
        graph = _graph(saver)
        graph.invoke(_turn("first"), CONFIG)
        after_first = graph.get_state(CONFIG).config
        graph.invoke(_turn("second"), CONFIG)
        out = graph.invoke(_turn("instead"), after_first)
        assert [m.content for m in out["messages"]] == [
            "first", "echo: first", "instead", "echo: instead",
        ]  # fmt: skip
        assert out["turns"] == 2
        # The main line is still readable at its own checkpoint.
        history = list(graph.get_state_history(CONFIG))
        contents = {tuple(m.content for m in s.values.get("messages", [])) for s in history}
        assert ("first", "echo: first", "second", "echo: second") in contents


def test_an_interrupt_resumes_from_the_saved_checkpoint(tmp_path: Path) -> None:
    path = str(tmp_path / "graph.db")
    with PlaitSaver.from_conn_string(path) as saver:
        _graph(saver, approve=True).invoke(_turn("deploy"), CONFIG)
    # Another process (a new saver over the same file) answers the question.
    with PlaitSaver.from_conn_string(path) as saver:
        graph = _graph(saver, approve=True)
        assert graph.get_state(CONFIG).next == ("ask",)
        out = graph.invoke(Command(resume="yes"), CONFIG)
    assert [m.content for m in out["messages"]][-1] == "approved: yes"


def test_the_async_saver_runs_an_async_graph(graph_target: str) -> None:
    async def main() -> list[str]:
        async with AsyncPlaitSaver.from_conn_string(graph_target) as saver:
            graph = _graph(saver)
            await graph.ainvoke(_turn("a"), CONFIG)
            out = await graph.ainvoke(_turn("b"), CONFIG)
            return [m.content for m in out["messages"]]

    assert asyncio.run(main()) == ["a", "echo: a", "b", "echo: b"]


def test_a_thread_id_plait_cannot_name_is_a_clear_error(tmp_path: Path) -> None:
    with PlaitSaver.from_conn_string(str(tmp_path / "graph.db")) as saver:
        graph = _graph(saver)
        with pytest.raises(InvalidArgumentError):
            graph.invoke(_turn("x"), {"configurable": {"thread_id": "t" * 300}})


def test_a_copied_thread_is_a_fork_that_goes_its_own_way(graph_target: str) -> None:
    with PlaitSaver.from_conn_string(graph_target) as saver:
        graph = _graph(saver)
        for n in range(2):
            graph.invoke(_turn(f"hi {n}"), CONFIG)
        saver.copy_thread("t1", "t2")
        copy = {"configurable": {"thread_id": "t2"}}
        out = graph.invoke(_turn("only in the copy"), copy)
        assert out["turns"] == 3
        assert len(graph.get_state(CONFIG).values["messages"]) == 4
        # plait's lineage: the copy is a branch of the thread, sharing its records.
        branch = saver.client.open("t2")
        assert branch.parent_session_ids == ("t1",)
        assert [m.text for m in branch.history()][-2:] == [
            "only in the copy",
            "echo: only in the copy",
        ]
        # Deleting the source leaves the copy whole.
        saver.delete_thread("t1")
        assert graph.get_state(CONFIG).values == {}
        assert len(graph.get_state(copy).values["messages"]) == 6


def _agent_graph(saver: Any) -> Any:
    """A model-free agent: a node that calls a tool, LangGraph's ToolNode, then a subgraph
    that asks a person for approval."""
    from langchain_core.tools import tool
    from langgraph.prebuilt import ToolNode

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    def plan(state: State) -> dict[str, Any]:
        call = {"id": "call-1", "name": "add", "args": {"a": 2, "b": 3}}
        return {"messages": [AIMessage("", tool_calls=[call])], "turns": 1}

    def approve(state: State) -> dict[str, Any]:
        answer = interrupt(f"send {state['messages'][-1].content}?")
        return {"messages": [AIMessage(f"sent: {answer}")]}

    sub = StateGraph(State)
    sub.add_node("approve", approve)
    sub.add_edge(START, "approve")

    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_node("tools", ToolNode([add]))
    builder.add_node("review", sub.compile())
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "tools")
    builder.add_edge("tools", "review")
    return builder.compile(checkpointer=saver)


def test_a_tool_node_and_an_interrupted_subgraph_read_through_plait(graph_target: str) -> None:
    client = Client(".", store=graph_target)
    try:
        graph = _agent_graph(PlaitSaver(client))
        graph.invoke(_turn("add 2 and 3"), CONFIG)
        state = graph.get_state(CONFIG, subgraphs=True)
        assert state.next == ("review",)
        # The subgraph's namespace has its own session, marked as the thread's.
        marks = [r.metadata.get("langgraph") for r in client.store.recent(None, 50) if r.id != "t1"]
        assert any(isinstance(m, dict) and m["thread"] == "t1" and m["ns"] for m in marks)

        # Resumed by a fresh saver, as another process would.
        out = _agent_graph(PlaitSaver(client)).invoke(Command(resume="yes"), CONFIG)
        assert out["messages"][-1].content == "sent: yes"

        history = client.open("t1").history()
        assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
        assert history[1].tool_calls[0].name == "add"
        assert history[2].text == "5"
    finally:
        client.close()


def test_two_savers_on_one_store_see_each_others_turns(tmp_path: Path) -> None:
    path = str(tmp_path / "graph.db")
    with PlaitSaver.from_conn_string(path) as one, PlaitSaver.from_conn_string(path) as two:
        first, second = _graph(one), _graph(two)
        first.invoke(_turn("from one"), CONFIG)
        second.invoke(_turn("from two"), CONFIG)
        out = first.invoke(_turn("one again"), CONFIG)
    assert out["turns"] == 3
    assert [m.content for m in out["messages"]][::2] == ["from one", "from two", "one again"]


def test_plaits_own_trim_and_rewind_never_lose_a_checkpoint(tmp_path: Path) -> None:
    with PlaitSaver.from_conn_string(str(tmp_path / "graph.db")) as saver:
        graph = _graph(saver)
        for n in range(3):
            graph.invoke(_turn(f"hi {n}"), CONFIG)
        session = saver.client.open("t1")
        session.trim(2)  # a reader's view: the checkpoints still name every message
        assert graph.get_state(CONFIG).values["turns"] == 3
        assert len(graph.get_state(CONFIG).values["messages"]) == 6
        # Rewound through plait's API and written again: the saver reads it afresh.
        session.transcript.rewind(2)
        out = graph.invoke(_turn("after the rewind"), CONFIG)
        assert out["messages"][-1].content == "echo: after the rewind"


def test_prune_keeps_the_newest_checkpoint_and_frees_the_rest(graph_target: str) -> None:
    with PlaitSaver.from_conn_string(graph_target) as saver:
        graph = _graph(saver)
        for n in range(4):
            graph.invoke(_turn(f"hi {n}"), CONFIG)
        before = saver.client.store.get("t1")
        assert before is not None
        saver.prune(["t1"])
        after = saver.client.store.get("t1")
        assert after is not None
        assert len(list(saver.list(CONFIG))) == 1
        # One checkpoint event and the eight messages it holds; no hidden copy of the old.
        assert after.layout.end_seq == 9 < before.layout.end_seq
        session = saver.client.open("t1")
        assert session.transcript.hidden_heads() == []
        assert [m.text for m in session.history()][-1] == "echo: hi 3"
        out = graph.invoke(_turn("after the prune"), CONFIG)
        assert out["turns"] == 5
        assert len(out["messages"]) == 10


def test_delete_for_runs_removes_a_runs_checkpoints_and_writes(tmp_path: Path) -> None:
    with PlaitSaver.from_conn_string(str(tmp_path / "graph.db")) as saver:
        graph = _graph(saver)
        graph.invoke(_turn("kept"), {**CONFIG, "metadata": {"run_id": "run-1"}})
        graph.invoke(_turn("dropped"), {**CONFIG, "metadata": {"run_id": "run-2"}})
        runs = {c.metadata.get("run_id") for c in saver.list(CONFIG)}
        assert "run-2" in runs
        saver.delete_for_runs(["run-2"])
        left = list(saver.list(CONFIG))
        assert {c.metadata.get("run_id") for c in left} == {"run-1"}
        assert graph.get_state(CONFIG).values["turns"] == 1
        # The run's messages are gone from the store too, not only from LangGraph's view.
        history = saver.client.open("t1").history()
        assert [m.text for m in history] == ["kept", "echo: kept"]


def test_a_thread_with_only_a_subgraph_namespace_is_listed_and_deleted(tmp_path: Path) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    with PlaitSaver.from_conn_string(str(tmp_path / "graph.db")) as saver:
        config = {"configurable": {"thread_id": "t9", "checkpoint_ns": "child:1"}}
        saver.put(config, empty_checkpoint(), {"source": "loop", "step": 0}, {})
        assert [c.config["configurable"]["thread_id"] for c in saver.list(None)] == ["t9"]
        saver.delete_thread("t9")
        assert list(saver.list(None)) == []


def test_a_checkpoint_record_stays_the_same_size_as_the_conversation_grows(
    tmp_path: Path,
) -> None:
    import json

    def newest_checkpoint_size(saver: PlaitSaver) -> int:
        records = saver.client.open("t1").transcript.records
        events = [r for r in records if r.kind == "event" and r.name == "langgraph.checkpoint"]
        return len(json.dumps(events[-1].data))

    with PlaitSaver.from_conn_string(str(tmp_path / "graph.db")) as saver:
        graph = _graph(saver)
        for n in range(3):
            graph.invoke(_turn(f"turn {n}"), CONFIG)
        early = newest_checkpoint_size(saver)
        for n in range(3, 30):
            graph.invoke(_turn(f"turn {n}"), CONFIG)
        late = newest_checkpoint_size(saver)
        assert len(graph.get_state(CONFIG).values["messages"]) == 60
    # The 60 messages are named as one run of positions, not one entry each: 54 more
    # messages would add hundreds of bytes; wider numbers (counts, versions, ids) add a few.
    assert late <= early + 96, (early, late)


def _extend(state: list[str] | None, writes: Any) -> list[str]:
    return [*(state or []), *(x for w in writes for x in w)]


class Log(TypedDict):
    log: Annotated[list[str], DeltaChannel(_extend)]


def test_a_delta_channel_branch_reads_only_its_own_writes(tmp_path: Path) -> None:
    """A fork from an older checkpoint and ``update_state`` there stay on their branch.

    LangGraph's ``DeltaChannel`` (beta) rebuilds a value from the writes along the
    parent chain, so the saver's parents and writes decide what a branch sees.
    """

    def note(state: Log) -> dict[str, Any]:
        return {"log": [f"seen {len(state['log'])}"]}

    with PlaitSaver.from_conn_string(str(tmp_path / "graph.db")) as saver:
        builder = StateGraph(Log)
        builder.add_node("note", note)
        builder.add_edge(START, "note")
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "d"}}
        graph.invoke({"log": ["A"]}, config)
        after_a = graph.get_state(config).config
        graph.invoke({"log": ["B"]}, config)
        main = graph.get_state(config).config
        assert graph.get_state(main).values["log"] == ["A", "seen 1", "B", "seen 3"]
        # The fork does not replay the abandoned sibling's writes (B).
        fork = graph.invoke({"log": ["C"]}, after_a)
        assert fork["log"] == ["A", "seen 1", "C", "seen 3"]
        # update_state on the older checkpoint writes into a branch of its own.
        updated = graph.update_state(after_a, {"log": ["U"]})
        assert graph.get_state(updated).values["log"] == ["A", "seen 1", "U"]
        assert graph.get_state(main).values["log"] == ["A", "seen 1", "B", "seen 3"]


class Big(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    blob: str


def test_values_past_plaits_record_limit_go_to_the_object_space(tmp_path: Path) -> None:
    """A write or a message form bigger than a record may hold (8 MiB of JSON) is stored."""
    big = "x" * (5 * 1024 * 1024)

    def bulky(state: Big) -> dict[str, Any]:
        return {"messages": [AIMessage(big)], "blob": big + "y" * (4 * 1024 * 1024)}

    builder = StateGraph(Big)
    builder.add_node("bulky", bulky)
    builder.add_edge(START, "bulky")
    with PlaitSaver.from_conn_string(str(tmp_path / "graph.db")) as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"messages": [HumanMessage("go")], "blob": ""}, CONFIG)
        values = PlaitSaver(saver.client).get_tuple(CONFIG).checkpoint["channel_values"]
        assert values["messages"][-1].content == big
        assert len(values["blob"]) == 9 * 1024 * 1024
        assert saver.client.open("t1").history()[-1].text == big


class Snapped(TypedDict):
    log: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=2)]


def test_the_delta_history_read_agrees_with_langgraphs_own_walk(graph_target: str) -> None:
    from langgraph.checkpoint.base import BaseCheckpointSaver

    def note(state: Snapped) -> dict[str, Any]:
        return {"log": [f"seen {len(state['log'])}"]}

    with PlaitSaver.from_conn_string(graph_target) as saver:
        builder = StateGraph(Snapped)
        builder.add_node("note", note)
        builder.add_edge(START, "note")
        graph = builder.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "d"}}
        for text in ("A", "B", "C", "D"):
            graph.invoke({"log": [text]}, config)
        assert graph.get_state(config).values["log"][-2:] == ["D", "seen 7"]
        seeded = 0
        for checkpoint in saver.list(config):
            ours = saver.get_delta_channel_history(config=checkpoint.config, channels=["log"])
            theirs = BaseCheckpointSaver.get_delta_channel_history(
                saver, config=checkpoint.config, channels=["log"]
            )
            assert ours == theirs
            seeded += "seed" in ours["log"]
        assert seeded  # snapshots every two updates: some walks stop at a seed


def test_a_plait_conversation_of_the_same_id_is_never_written_into(tmp_path: Path) -> None:
    client = Client(".", store=str(tmp_path / "graph.db"))
    try:
        client.sessions.create([{"role": "user", "content": "mine"}], session_id="t1")
        saver = PlaitSaver(client)
        assert saver.get_tuple(CONFIG) is None
        with pytest.raises(InvalidArgumentError, match="not LangGraph thread"):
            _graph(saver).invoke(_turn("x"), CONFIG)
        saver.delete_thread("t1")
        assert [m.text for m in client.open("t1").history()] == ["mine"]
    finally:
        client.close()


def test_plaits_session_list_says_langgraph_wrote_the_thread(tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from plait.cli import cli

    store = str(tmp_path / "graph.db")
    with PlaitSaver.from_conn_string(store, workspace=tmp_path) as saver:
        _graph(saver).invoke(_turn("hello"), CONFIG)
    result = CliRunner().invoke(
        cli, ["--store", store, "--workspace", str(tmp_path), "sessions", "list", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert {r["id"]: r["source"] for r in json.loads(result.output)} == {"t1": "langgraph"}
