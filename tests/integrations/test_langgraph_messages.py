"""Messages a LangGraph thread changes: replaced by id, or changed in place by a node.

A put recognises a stored message by its id and its stored form, and a read hands
out messages of the caller's own: what is read back is always what the graph had
at that checkpoint, however the objects it was given were changed since.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages

from plait.integrations.langgraph import PlaitSaver

T1 = {"configurable": {"thread_id": "t1"}}


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def _reply(state: State) -> dict[str, Any]:
    last = state["messages"][-1]
    return {"messages": [AIMessage(f"echo: {last.content}")]}


def _shout(state: State) -> dict[str, Any]:
    first = state["messages"][0]
    first.content = str(first.content).upper()  # in place, then handed back by its id
    return {"messages": [first]}


def _graph(saver: Any, *, shout: bool = False) -> Any:
    builder = StateGraph(State)
    builder.add_node("reply", _reply)
    builder.add_edge(START, "reply")
    if shout:
        builder.add_node("shout", _shout)
        builder.add_edge("reply", "shout")
    return builder.compile(checkpointer=saver)


def _texts(graph: Any, config: Any = T1) -> list[str]:
    return [str(m.content) for m in graph.get_state(config).values["messages"]]


def test_a_message_replaced_by_its_id_reads_back_replaced_and_older_checkpoints_keep_it(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "graph.db")
    with PlaitSaver(path) as saver:
        graph = _graph(saver)
        graph.invoke({"messages": [HumanMessage("hi", id="h0")]}, T1)
        graph.invoke({"messages": [HumanMessage("again", id="h1")]}, T1)
        before = graph.get_state(T1).config
        graph.update_state(T1, {"messages": [HumanMessage("hello", id="h0")]})
        assert _texts(graph) == ["hello", "echo: hi", "again", "echo: again"]
        assert _texts(graph, before) == ["hi", "echo: hi", "again", "echo: again"]
    with PlaitSaver(path) as fresh:  # read from the store, not from what a saver kept
        graph = _graph(fresh)
        assert _texts(graph) == ["hello", "echo: hi", "again", "echo: again"]
        assert _texts(graph, before) == ["hi", "echo: hi", "again", "echo: again"]


def test_changing_a_read_message_changes_neither_the_thread_nor_a_later_read(
    tmp_path: Path,
) -> None:
    with PlaitSaver(str(tmp_path / "graph.db")) as saver:
        graph = _graph(saver)
        graph.invoke({"messages": [HumanMessage("hi", id="h0")]}, T1)
        read = graph.get_state(T1).values["messages"]
        read[0].content = "scribbled"
        read[1].additional_kwargs["note"] = "scribbled"
        again = graph.get_state(T1).values["messages"]
        assert [m.content for m in again] == ["hi", "echo: hi"]
        assert again[1].additional_kwargs == {}
        # Handed back as an update, the changed message is stored as changed.
        graph.update_state(T1, {"messages": [read[0]]})
        assert _texts(graph) == ["scribbled", "echo: hi"]


def test_a_message_a_node_changes_in_place_is_stored_as_changed(tmp_path: Path) -> None:
    path = str(tmp_path / "graph.db")
    with PlaitSaver(path) as saver:
        graph = _graph(saver, shout=True)
        graph.invoke({"messages": [HumanMessage("hi", id="h0")]}, T1)
        graph.invoke({"messages": [HumanMessage("more", id="h1")]}, T1)
        assert _texts(graph) == ["HI", "echo: hi", "more", "echo: more"]
    with PlaitSaver(path) as fresh:
        assert _texts(_graph(fresh)) == ["HI", "echo: hi", "more", "echo: more"]
