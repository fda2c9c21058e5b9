"""The agent graph the checkpointers run (``checkpointers.py``): a real LangGraph ``StateGraph``.

A ``messages`` channel reduced by ``add_messages``, a fake deterministic model node and
a ``ToolNode``. Given a person's message the model asks for one tool call, given the
tool's result it answers: one turn is the four items of ``transcript.py`` (user, tool
call, tool result, answer), with the same call ids and arguments. The texts are ~200
characters of words drawn from a fixed vocabulary by a generator seeded with the item's
number, not ``transcript.py``'s repeated sentence: PostgreSQL compresses a large value
(TOAST), and a conversation that repeats one sentence would compress many times better
than any real one, flattering a store that keeps the whole list in every checkpoint.
This module imports LangGraph at once and keeps its annotations evaluated (no
``from __future__ import annotations``): LangGraph and langchain-core read the state's
and the tool's type hints at run time.
"""

import random
import string
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode
from transcript import TOOL, step

__all__ = ["build_graph", "text", "turn"]

TEXT_CHARS = 200
_words = random.Random(0)
VOCABULARY = [
    "".join(_words.choices(string.ascii_lowercase, k=_words.randint(2, 9))) for _ in range(2000)
]
"""Words of the conversation's texts (a fixed vocabulary, so texts compress like prose)."""


def text(i: int) -> str:
    """Item ``i``'s text: its number, then words of the vocabulary, ``TEXT_CHARS`` long."""
    pick = random.Random(i).choice
    out = f"#{i:07d}"
    while len(out) < TEXT_CHARS:
        out += " " + pick(VOCABULARY)
    return out[:TEXT_CHARS]


class State(TypedDict):
    """The graph's state: the conversation."""

    messages: Annotated[list[AnyMessage], add_messages]


@tool(TOOL)
def read_file(path: str, call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Read a file of the project."""
    return text(int(call_id.removeprefix("call_")) * 4 + 2)  # the turn's tool result


def _position(message: AnyMessage) -> int:
    return int(str(message.id)[1:])


def model(state: State) -> dict[str, list[AnyMessage]]:
    """The fake model: a tool call for a person's message, an answer for a tool's result."""
    last = state["messages"][-1]
    if isinstance(last, HumanMessage):
        s = step(_position(last) + 1)
        call = {"id": s.call_id, "name": TOOL, "args": s.arguments}
        return {"messages": [AIMessage(content="", id=f"m{s.i:08d}", tool_calls=[call])]}
    assert isinstance(last, ToolMessage)
    s = step(_position(state["messages"][-2]) + 2)
    return {"messages": [AIMessage(content=text(s.i), id=f"m{s.i:08d}")]}


def route(state: State) -> str:
    """To the tools while the model asks for one, else the end."""
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


def build_graph(checkpointer: Any) -> Any:
    """The agent graph (model -> tools -> model) compiled with ``checkpointer``."""
    builder = StateGraph(State)
    builder.add_node("model", model)
    builder.add_node("tools", ToolNode([read_file]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tools", END])
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=checkpointer)


def turn(graph: Any, thread: str, k: int) -> None:
    """Run turn ``k`` of ``thread``: one user message in, four messages stored.

    ``durability="sync"``: each checkpoint is written before the next step runs, so a
    ``put`` is timed alone rather than overlapping the graph's next step.
    """
    s = step(k * 4)
    graph.invoke(
        {"messages": [HumanMessage(content=text(s.i), id=f"m{s.i:08d}")]},
        {"configurable": {"thread_id": thread}},
        durability="sync",
    )
