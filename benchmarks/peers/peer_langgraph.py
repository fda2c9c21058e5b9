"""LangGraph's checkpointers: SqliteSaver and PostgresSaver, driven as a graph drives them.

A graph whose state is a ``messages`` channel (``add_messages``, LangGraph's default
channel, not the beta DeltaChannel) writes one checkpoint per super-step holding the
whole message list: SqliteSaver serializes the checkpoint into one blob, PostgresSaver
writes the channel's new version as one blob. The adapter calls ``put`` as that graph
would, keeping the state in memory between steps as one run does (the read a new
``invoke`` makes first, and ``put_writes``, are not counted: both favour the peer).
Messages are langchain-core's ``HumanMessage``, ``AIMessage`` (with ``tool_calls``)
and ``ToolMessage``, serialized by the checkpointer's own serde.
"""

from __future__ import annotations

import sqlite3
from typing import Any, ClassVar

from base import Adapter, Place
from transcript import TOOL, Step

__all__ = ["PostgresSaver", "SqliteSaver"]

GET_TUPLE = "get_tuple()"


def langchain_message(s: Step) -> Any:
    """Return item ``s`` as a langchain-core message."""
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    mid = f"m{s.i:08d}"
    if s.kind == "user":
        return HumanMessage(content=s.text, id=mid)
    if s.kind == "call":
        return AIMessage(
            content="", id=mid, tool_calls=[{"id": s.call_id, "name": TOOL, "args": s.arguments}]
        )
    if s.kind == "result":
        return ToolMessage(content=s.text, id=mid, tool_call_id=s.call_id, name=TOOL)
    return AIMessage(content=s.text, id=mid)


class SqliteSaver(Adapter):
    """``langgraph.checkpoint.sqlite.SqliteSaver`` on a sqlite3 connection."""

    name: ClassVar[str] = "LangGraph SqliteSaver"
    ops: ClassVar[frozenset[str]] = frozenset(
        {"append_one", "append_batch", "load", "tail", "fork", "list"}
    )
    load_names: ClassVar[tuple[str, ...]] = (GET_TUPLE,)
    requires: ClassVar[tuple[str, ...]] = ("langgraph.checkpoint.sqlite", "langchain_core")
    notes: ClassVar[str] = (
        "append = put() of a checkpoint with the whole list (one super-step); "
        "load = get_tuple(); tail = get_tuple() then the last 20; "
        "fork = get_tuple(middle checkpoint) + put() of a child of it (update_state); "
        "list = list(None, limit=20) (checkpoints, one per thread here)"
    )

    def __init__(self, place: Place) -> None:
        super().__init__(place)
        self.saver = self._saver()
        self.thread = f"t-{place.key}"
        self.messages: list[Any] = []
        self.config: dict[str, Any] = self._config(self.thread)
        self.version: str | None = None
        self.step = 0
        self.checkpoints: list[tuple[int, dict[str, Any]]] = []
        """(messages in it, its config) for every checkpoint written, oldest first."""

    def _saver(self) -> Any:
        from langgraph.checkpoint.sqlite import SqliteSaver as Saver

        path = self.place.dir / f"langgraph-{self.place.key}.db"
        self.conn = sqlite3.connect(path, check_same_thread=False)
        return Saver(self.conn)

    @staticmethod
    def _config(thread: str) -> dict[str, Any]:
        return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}

    def native(self, s: Step) -> Any:
        return langchain_message(s)

    def build(self, size: int) -> None:
        # A checkpoint holds the whole list, so building a long thread costs the square of
        # its length: a few large steps, enough to leave a checkpoint near the middle.
        chunk = max(self.build_chunk, size // 8)
        while self.length < size:
            n = min(chunk, size - self.length)
            self.append_batch(self.items(self.length, n))
            self.length += n

    def _put(
        self, config: dict[str, Any], values: list[Any], version: str | None = None
    ) -> dict[str, Any]:
        """Write a checkpoint of ``values``: a new channel version unless ``version`` is given."""
        from langgraph.checkpoint.base import empty_checkpoint

        checkpoint = empty_checkpoint()
        if version is None:
            self.version = version = self.saver.get_next_version(self.version, None)
            new_versions = {"messages": version}
        else:
            new_versions = {}
        checkpoint["channel_values"] = {"messages": values}
        checkpoint["channel_versions"] = {"messages": version}
        self.step += 1
        metadata = {"source": "loop", "step": self.step, "parents": {}}
        return self.saver.put(config, checkpoint, metadata, new_versions)

    def append_one(self, item: Any) -> None:
        self.append_batch([item])

    def append_batch(self, items: list[Any]) -> None:
        self.messages.extend(items)
        self.config = self._put(self.config, self.messages)
        self.checkpoints.append((len(self.messages), self.config))

    def _latest(self) -> list[Any]:
        found = self.saver.get_tuple(self._config(self.thread))
        return list(found.checkpoint["channel_values"]["messages"])

    def load(self, variant: str) -> int:
        return len(self._latest())

    def tail(self, n: int) -> int:
        return len(self._latest()[-n:])

    def fork(self) -> None:
        half = len(self.messages) // 2
        _, config = min(self.checkpoints, key=lambda c: abs(c[0] - half))
        found = self.saver.get_tuple(config)
        values = found.checkpoint["channel_values"]["messages"]
        self._put(found.config, values, found.checkpoint["channel_versions"]["messages"])

    def fill_sessions(self, count: int) -> None:
        turn = self.items(0, 4)
        for k in range(count):
            self.version = None
            self._put(self._config(f"list-{k:06d}"), turn)

    def list_sessions(self, n: int) -> int:
        return sum(1 for _ in self.saver.list(None, limit=n))

    def close(self) -> None:
        self.conn.close()


class PostgresSaver(SqliteSaver):
    """``langgraph.checkpoint.postgres.PostgresSaver`` on one psycopg connection."""

    name: ClassVar[str] = "LangGraph PostgresSaver"
    engine: ClassVar[str] = "postgres"
    requires: ClassVar[tuple[str, ...]] = ("langgraph.checkpoint.postgres", "langchain_core")

    def _saver(self) -> Any:
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver as Saver
        from psycopg.rows import dict_row

        assert self.place.pg_url is not None
        self.conn = psycopg.connect(
            self.place.pg_url,
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
            options=f"-c search_path={self.place.schema}",
        )
        saver = Saver(self.conn)
        saver.setup()
        return saver
