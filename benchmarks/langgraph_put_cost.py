"""What a LangGraph ``put`` and ``get_tuple`` cost through PlaitSaver as a thread grows.

The agent graph of ``benchmarks/peers/agent_graph.py`` (a real ``StateGraph``: the
``messages`` channel with ``add_messages``, a fake deterministic model, a ``ToolNode``;
four messages and four checkpoints a turn) runs on a SQLite file. At each mark it
reports the median ``put`` and ``get_tuple`` the graph made over the 10 turns before
it, then a fresh saver's first ``get_tuple`` of the thread and its second, and what
the thread's records hold per turn (checkpoint events, write events, messages: bytes
of their JSON).

Usage: python benchmarks/langgraph_put_cost.py [--turns 50,200,500] [--source DIR]

``--source DIR`` runs another checkout's ``src`` (the code before a change, say).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent


def main() -> None:
    """Run the marks and print one JSON line per mark."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", default="50,200,500")
    parser.add_argument("--source", default=None)
    args = parser.parse_args()
    if args.source:
        sys.path.insert(0, str(Path(args.source) / "src"))
    sys.path.insert(0, str(_HERE / "peers"))
    from agent_graph import build_graph, turn

    from plait.integrations.langgraph import PlaitSaver
    from plait.records import EventRecord

    calls: dict[str, list[float]] = {"put": [], "get_tuple": []}

    class Timed(PlaitSaver):
        def put(self, *a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return super().put(*a, **k)
            finally:
                calls["put"].append(time.perf_counter() - t)

        def get_tuple(self, *a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return super().get_tuple(*a, **k)
            finally:
                calls["get_tuple"].append(time.perf_counter() - t)

    marks = sorted(int(n) for n in args.turns.split(","))
    path = Path(tempfile.mkdtemp()) / "lg.db"
    config = {"configurable": {"thread_id": "t"}}
    with Timed(str(path)) as saver:
        graph = build_graph(saver)
        done = 0
        for mark in marks:
            for k in range(done, mark):
                if k == mark - 10:
                    calls["put"].clear()
                    calls["get_tuple"].clear()
                turn(graph, "t", k)
            done = mark
            put = statistics.median(calls["put"]) * 1e6
            got = statistics.median(calls["get_tuple"]) * 1e6
            with PlaitSaver(str(path)) as fresh:
                t = time.perf_counter()
                fresh.get_tuple(config)
                first = (time.perf_counter() - t) * 1e6
                t = time.perf_counter()
                fresh.get_tuple(config)
                second = (time.perf_counter() - t) * 1e6
            sizes = {"checkpoint": 0, "writes": 0, "message meta": 0}
            row = saver.client.store.get("t")
            assert row is not None
            for record in saver.client.store.read(row, 0, row.layout.end_seq):
                if isinstance(record, EventRecord):
                    size = len(json.dumps(dict(record.data)))
                else:
                    size = len(json.dumps(dict(record.meta)))  # its serialized form
                if isinstance(record, EventRecord):
                    sizes["checkpoint" if record.name.endswith("checkpoint") else "writes"] += size
                else:
                    sizes["message meta"] += size
            print(
                json.dumps(
                    {
                        "turns": mark,
                        "put_us": round(put),
                        "get_tuple_us": round(got),
                        "fresh_first_get_us": round(first),
                        "fresh_second_get_us": round(second),
                        "bytes_per_turn": {k: round(v / mark) for k, v in sizes.items()},
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
