"""The store-call budget of a run: one row read per verb, and a writer asks nothing twice.

On PostgreSQL every store call is a network round trip, so the number of calls a run
makes is its latency floor. The budget is counted, not timed: a counting wrapper on
the store's public methods, around one ``prompt`` with two model calls and one tool
call (four records appended).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from plait import Client, Session
from plait.errors import NothingToDoError
from plait.providers import Reply, ScriptedProvider, Usage
from plait.records import ToolCall

BUDGET = 12


def _count_calls(store: Any) -> Counter[str]:
    """Count every call of the store's public methods (the instance's, from now on)."""
    calls: Counter[str] = Counter()
    for name in dir(type(store)):
        if name.startswith("_") or not callable(getattr(store, name, None)):
            continue
        method = getattr(store, name)

        def counted(*args: Any, _m: Callable[..., Any] = method, _n: str = name, **kw: Any) -> Any:
            calls[_n] += 1
            return _m(*args, **kw)

        setattr(store, name, counted)
    return calls


def _two_calls_one_tool() -> ScriptedProvider:
    return ScriptedProvider([
        Reply(tool_calls=(ToolCall("c1", "read_file", {"path": "hello.txt"}),),
              usage=Usage(10, 5, 0), finish_reason="tool_calls"),
        Reply(text="It says hi.", usage=Usage(20, 6, 0)),
    ])


def _session(client: Client, tmp_path: Path) -> Session:
    box = tmp_path / "box"
    box.mkdir()
    (box / "hello.txt").write_text("hi")
    return client.sessions.create([{"role": "system", "content": "Be terse."}]).to(
        "local", spec=str(box)
    )


def test_a_prompt_with_two_model_calls_and_a_tool_call_stays_within_budget(
    client: Client, tmp_path: Path
) -> None:
    s = _session(client, tmp_path)
    calls = _count_calls(client.store)
    result = asyncio.run(s.prompt("what does hello.txt say?", provider=_two_calls_one_tool()))
    assert result.text == "It says hi." and result.steps == 2
    assert calls["append"] == 4  # user, assistant with the call, tool result, reply
    assert calls["get"] <= 1  # one row read for the whole run
    assert sum(calls.values()) <= BUDGET, dict(calls)
    # What the run wrote is what a fresh reader sees.
    other = Client(tmp_path, store=client.store).open(s.id)
    assert [m.role for m in other.history()] == ["user", "assistant", "tool", "assistant"]


def test_the_second_run_reads_no_more_than_the_first(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    asyncio.run(s.prompt("first", provider=_two_calls_one_tool()))
    calls = _count_calls(client.store)
    asyncio.run(s.prompt("second", provider=_two_calls_one_tool()))
    assert calls["append"] == 4
    assert sum(calls.values()) <= BUDGET, dict(calls)


def test_properties_read_the_row_again_outside_a_run(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    calls = _count_calls(client.store)
    assert s.title is None
    assert s.transcript.length == 1
    assert calls["get"] == 2  # outside a run each property shows what is stored now


def test_a_writer_sees_what_another_handle_in_the_process_wrote(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with Client(tmp_path, store=path) as a, Client(tmp_path, store=path) as b:
        s = a.sessions.create([{"role": "user", "content": "hi"}])
        s.inject({"role": "assistant", "content": "hello"})
        s.context()  # the writer's memo now holds the transcript
        b.open(s.id).inject({"role": "user", "content": "from b"})
        assert [m.text for m in s.history()] == ["hi", "hello", "from b"]
        assert s.transcript.request_messages()[-1].text == "from b"
        report = s.context()
        fresh = Client(tmp_path, store=path).open(s.id).context()
        assert report is not None and fresh is not None and report.used == fresh.used


@pytest.mark.parametrize("seed", range(6))
def test_the_writers_memo_agrees_with_a_fresh_reader(
    client: Client, tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    s = client.sessions.create([{"role": "system", "content": "rules"}])
    for n in range(40):
        op = rng.random()
        if op < 0.55:
            s.inject({"role": "user", "content": f"q{n} " + "w " * rng.randint(0, 30)})
            s.inject({"role": "assistant", "content": f"a{n}",
                      "meta": {"usage": {"input_tokens": 10 + n, "output_tokens": 3}}})
        elif op < 0.70:
            with contextlib.suppress(NothingToDoError):
                asyncio.run(s.compact(keep_last=rng.randint(0, 4)))
        elif op < 0.78 and s.transcript.length > 2:
            s.trim(rng.randint(1, s.transcript.length))
        elif op < 0.83:
            with contextlib.suppress(NothingToDoError):
                s.transcript.uncompact()
        if rng.random() < 0.5:
            mine = s.context()
            reader = Client(tmp_path, store=client.store).open(s.id)
            assert mine == reader.context()
            assert s.transcript.request_messages() == reader.transcript.request_messages()
