"""The first read of a LangGraph thread through PlaitSaver, against the reads after it.

A thread of N turns of a real ``StateGraph`` (``add_messages`` and a counter) is
written once per store; then, in a fresh process each round, a new saver reads
the thread's newest checkpoint (``get_tuple``: the first read, which reads the
thread's records) and reads it again (the saver keeps what it read, so the second
only looks for records appended since). A cell is the median of the rounds.

Usage: python benchmarks/langgraph_first_read.py [--turns 50,200,500] [--rounds 5]
       [--postgres URL] [--source DIR]

``--source DIR`` runs another checkout's ``src`` (the code before a change, say)
for both the writes and the reads.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

_BUILD = """
import operator, sys
from typing import Annotated, TypedDict
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from plait.integrations.langgraph import PlaitSaver

class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    turns: Annotated[int, operator.add]

def reply(state):
    return {"messages": [AIMessage("echo: " + state["messages"][-1].content)], "turns": 1}

builder = StateGraph(State)
builder.add_node("reply", reply)
builder.add_edge(START, "reply")
target, turns = sys.argv[1], int(sys.argv[2])
with PlaitSaver(target) as saver:
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "long"}}
    for n in range(turns):
        graph.invoke({"messages": [HumanMessage(f"turn {n}: " + "x" * 200)], "turns": 0}, config)
"""

_READ = """
import json, sys, time
from plait.integrations.langgraph import PlaitSaver
from plait.store import open_store

target = sys.argv[1]
store = open_store(target)
store.get("long")  # the store open and warm: only the saver's reads are timed
decoded = [0]  # records the store decoded for the first read (read, read_messages)
for verb in ("read", "read_messages"):
    real = getattr(store, verb, None)
    if real is not None:
        def counted(row, lo, hi, real=real):
            found = real(row, lo, hi)
            decoded[0] += len(found)
            return found
        setattr(store, verb, counted)
with PlaitSaver(store) as saver:
    config = {"configurable": {"thread_id": "long"}}
    t0 = time.perf_counter()
    first = saver.get_tuple(config)
    t1 = time.perf_counter()
    decoded_first = decoded[0]
    again = saver.get_tuple(config)
    t2 = time.perf_counter()
    assert first is not None and again is not None
    print(json.dumps({
        "first_ms": (t1 - t0) * 1000,
        "again_ms": (t2 - t1) * 1000,
        "messages": len(first.checkpoint["channel_values"]["messages"]),
        "decoded": decoded_first,
        "records": store.get("long").layout.end_seq,
    }))
"""


def _run(code: str, *args: str, source: str | None = None) -> str:
    env = dict(os.environ)
    if source:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        check=True,
        env=env,
    )
    return done.stdout


def _drop(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def main() -> None:
    """Build each thread, read it in fresh processes, print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", default="50,200,500")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--postgres", default=None, help="a postgresql:// URL to add")
    parser.add_argument("--source", default=None, help="another checkout's src to run")
    options = parser.parse_args()
    print("| store | turns | records | decoded by the first read | first get_tuple ms | again ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as folder:
        for turns in (int(t) for t in options.turns.split(",")):
            targets = {"sqlite": str(Path(folder) / f"t{turns}.db")}
            schema = f"bench_lg_{uuid.uuid4().hex[:8]}"
            if options.postgres:
                targets["postgres"] = f"{options.postgres}?schema={schema}"
            try:
                for kind, target in targets.items():
                    _run(_BUILD, target, str(turns), source=options.source)
                    rows = [
                        json.loads(_run(_READ, target, source=options.source))
                        for _ in range(options.rounds)
                    ]
                    first = statistics.median(r["first_ms"] for r in rows)
                    again = statistics.median(r["again_ms"] for r in rows)
                    records, decoded = rows[0]["records"], rows[0]["decoded"]
                    print(
                        f"| {kind} | {turns} | {records} | {decoded} | {first:.1f} | {again:.2f} |",
                        flush=True,
                    )
            finally:
                if options.postgres:
                    _drop(options.postgres, schema)


if __name__ == "__main__":
    main()
