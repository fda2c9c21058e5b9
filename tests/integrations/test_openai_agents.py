"""PlaitSession against the openai-agents SDK's own session contract.

Each point of the SDK's published session behaviour (its docs and the session
tests its source distribution ships: ``tests/memory/test_session.py``,
``test_session_limit.py``) is checked here on SQLite and PostgreSQL, driving
the SDK's real ``Runner`` with its offline ``agents.testing.ScriptedModel``.
Then what plait adds: items kept verbatim, one item per plait message, the
conversation open to plait's API, and two processes serving one conversation.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SessionSettings, function_tool
from agents.memory import Session as SDKSession
from agents.testing import ScriptedModel, assistant_message, function_call

from plait import Client
from plait.errors import (
    AdapterClosedError,
    InvalidArgumentError,
    MissingDependencyError,
    SessionClosedError,
)
from plait.integrations.openai_agents import PlaitSession
from tests.integrations._stores import target

__all__ = ["target"]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _run_sync(agent: Agent[Any], data: Any, **kwargs: Any) -> Any:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return Runner.run_sync(agent, data, **kwargs)
    finally:
        loop.close()


async def run_agent(method: str, agent: Agent[Any], data: Any, **kwargs: Any) -> Any:
    """The three ways the SDK runs an agent, as its own session tests drive them."""
    if method == "run":
        return await Runner.run(agent, data, **kwargs)
    if method == "run_sync":
        return await asyncio.to_thread(_run_sync, agent, data, **kwargs)
    result = Runner.run_streamed(agent, data, **kwargs)
    async for _ in result.stream_events():
        pass
    return result


METHODS = ["run", "run_sync", "run_streamed"]


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


# -- the protocol ------------------------------------------------------------------------


def test_is_the_sdks_session_protocol(target: str) -> None:
    session = PlaitSession("protocol", target)
    try:
        assert isinstance(session, SDKSession)
        assert session.session_id == "protocol"
    finally:
        session.close()


# -- Runner: multi-turn runs with a tool call, history from plait ------------------------


@pytest.mark.parametrize("method", METHODS)
def test_runner_second_turn_sees_the_first_through_plait(target: str, method: str) -> None:
    async def scenario() -> None:
        model = ScriptedModel()
        agent = Agent(name="weather", model=model, tools=[get_weather])
        session = PlaitSession("user/123", target)
        model.enqueue([function_call("get_weather", {"city": "Paris"}, call_id="call_1")])
        model.enqueue([assistant_message("It is sunny in Paris.")])
        first = await run_agent(method, agent, "Weather in Paris?", session=session)
        assert first.final_output == "It is sunny in Paris."
        session.close()

        # A new session object on the same store (another worker, a restart).
        again = PlaitSession("user/123", target)
        model.enqueue([assistant_message("Tomorrow too.")])
        second = await run_agent(method, agent, "And tomorrow?", session=again)
        assert second.final_output == "Tomorrow too."
        sent = model.calls[-1].input
        assert [i.get("type", "message") for i in sent] == [
            "message",
            "function_call",
            "function_call_output",
            "message",
            "message",
        ]
        assert sent[0]["content"] == "Weather in Paris?"
        assert sent[1]["name"] == "get_weather" and sent[1]["call_id"] == "call_1"
        assert sent[2]["output"] == "sunny in Paris"
        assert sent[3]["content"][0]["text"] == "It is sunny in Paris."
        assert sent[4]["content"] == "And tomorrow?"
        stored = await again.get_items()
        assert stored[:4] == sent[:4]
        assert len(stored) == 6

        # The same conversation through plait's own API.
        plait = again.plait_session()
        assert plait is not None and plait.id == "user/123"
        history = plait.history()
        assert [m.role for m in history] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
        ]
        assert history[1].tool_calls[0].name == "get_weather"
        assert history[1].tool_calls[0].arguments == {"city": "Paris"}
        assert history[2].tool_call_id == "call_1" and history[2].text == "sunny in Paris"
        assert history[5].text == "Tomorrow too."
        again.close()

    run(scenario())


@pytest.mark.parametrize("method", METHODS)
def test_runner_keeps_sessions_apart(target: str, method: str) -> None:
    async def scenario() -> None:
        model = ScriptedModel()
        agent = Agent(name="test", model=model)
        one, two = PlaitSession("session_1", target), PlaitSession("session_2", target)
        model.enqueue([assistant_message("cats noted")])
        await run_agent(method, agent, "I like cats", session=one)
        model.enqueue([assistant_message("dogs noted")])
        await run_agent(method, agent, "I like dogs", session=two)
        model.enqueue([assistant_message("you said cats")])
        await run_agent(method, agent, "What do I like?", session=one)
        contents = [i.get("content") for i in model.calls[-1].input]
        assert "I like cats" in contents and "I like dogs" not in contents
        one.close()
        two.close()

    run(scenario())


@pytest.mark.parametrize("method", METHODS)
def test_list_input_is_appended_to_the_history(target: str, method: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("list_input", target)
        history: list[Any] = [
            {"role": "user", "content": "Earlier message"},
            {"role": "assistant", "content": "Saved reply"},
        ]
        await session.add_items(history)
        model = ScriptedModel()
        model.enqueue([assistant_message("ok")])
        new = [{"role": "user", "content": "Test message"}]
        await run_agent(method, Agent(name="t", model=model), new, session=session)
        assert model.calls[-1].input == history + new
        session.close()

    run(scenario())


@pytest.mark.parametrize("method", METHODS)
def test_session_input_callback_prepares_the_input(target: str, method: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("callback", target)
        history: list[Any] = [
            {"role": "user", "content": "Hello there."},
            {"role": "assistant", "content": "Hi, I'm here to assist you."},
        ]
        await session.add_items(history)

        def users_only(old: list[Any], new: list[Any]) -> list[Any]:
            return [i for i in old if i["role"] == "user"] + new

        model = ScriptedModel()
        model.enqueue([assistant_message("I'm a model")])
        new = [{"role": "user", "content": "What is your name?"}]
        await run_agent(
            method,
            Agent(name="t", model=model),
            new,
            session=session,
            run_config=RunConfig(session_input_callback=users_only),
        )
        assert model.calls[-1].input == [history[0], new[0]]
        session.close()

    run(scenario())


@pytest.mark.parametrize("method", METHODS)
def test_repeating_history_in_the_callback_does_not_grow_the_session(
    target: str, method: str
) -> None:
    async def scenario() -> None:
        session = PlaitSession("repeat", target)
        model = ScriptedModel()
        agent = Agent(name="t", model=model)

        def repeat_first(old: list[Any], new: list[Any]) -> list[Any]:
            return new if not old else [*old, old[0], *new]

        for turn in range(3):
            model.enqueue([assistant_message(f"assistant {turn}")])
            await run_agent(
                method,
                agent,
                f"user {turn}",
                session=session,
                run_config=RunConfig(session_input_callback=repeat_first),
            )
        stored = await session.get_items()
        assert [i["content"] for i in stored if i.get("role") == "user"] == [
            "user 0",
            "user 1",
            "user 2",
        ]
        assert len(stored) == 6
        session.close()

    run(scenario())


# -- session_settings and limits ---------------------------------------------------------


def test_session_settings_default_and_constructor(target: str) -> None:
    default = PlaitSession("s1", target)
    assert isinstance(default.session_settings, SessionSettings)
    assert default.session_settings.limit is None
    default.close()
    five = PlaitSession("s2", target, session_settings=SessionSettings(limit=5))
    assert five.session_settings is not None and five.session_settings.limit == 5
    five.close()
    zero = PlaitSession("s3", target, session_settings={"limit": 0})
    assert isinstance(zero.session_settings, SessionSettings)
    assert zero.session_settings.limit == 0
    assert zero.session_settings.resolve({"limit": 4}).limit == 4
    zero.close()
    with pytest.raises(TypeError, match="Unknown session settings: limitt"):
        PlaitSession("s4", target, session_settings={"limitt": 1})


def test_get_items_uses_the_settings_limit_and_an_explicit_one_wins(target: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("limits", target, session_settings=SessionSettings(limit=3))
        await session.add_items([{"role": "user", "content": f"Message {i}"} for i in range(10)])
        assert [i["content"] for i in await session.get_items()] == [
            "Message 7",
            "Message 8",
            "Message 9",
        ]
        assert [i["content"] for i in await session.get_items(limit=2)] == [
            "Message 8",
            "Message 9",
        ]
        session.close()

    run(scenario())


def test_get_items_with_a_limit(target: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("count", target)
        items: list[Any] = []
        for n in (1, 2, 3):
            items += [
                {"role": "user", "content": f"Message {n}"},
                {"role": "assistant", "content": f"Response {n}"},
            ]
        await session.add_items(items)
        assert await session.get_items() == items
        assert await session.get_items(limit=2) == items[-2:]
        assert await session.get_items(limit=4) == items[-4:]
        assert await session.get_items(limit=10) == items
        assert await session.get_items(limit=0) == []
        assert await session.get_items(limit=-1) == items  # as SQLite's LIMIT -1
        session.close()

    run(scenario())


@pytest.mark.parametrize("limit", [2, 0, None, 100])
def test_run_config_session_settings_override_the_sessions(target: str, limit: int | None) -> None:
    async def scenario() -> None:
        session = PlaitSession("override", target, session_settings=SessionSettings(limit=100))
        model = ScriptedModel()
        agent = Agent(name="t", model=model)
        for n in (1, 2, 3):
            model.enqueue([assistant_message(f"Reply {n}")])
            await Runner.run(agent, f"Message {n}", session=session)
        assert len(await session.get_items()) == 6
        model.enqueue([assistant_message("Reply 4")])
        await Runner.run(
            agent,
            "Message 4",
            session=session,
            run_config=RunConfig(session_settings=SessionSettings(limit=limit)),
        )
        sent = model.calls[-1].input
        kept = 6 if limit is None else min(limit, 6)
        # limit=None in the override keeps the session's own (100).
        assert len(sent) == kept + 1
        assert sent[-1]["content"] == "Message 4"
        if limit == 2:
            assert sent[0]["content"] == "Message 3"
            assert sent[1]["content"][0]["text"] == "Reply 3"
        session.close()

    run(scenario())


def test_a_limit_boundary_drops_an_output_whose_call_it_left_out(target: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("tool_pair", target)
        history: list[Any] = [
            {"role": "user", "content": "What is the weather?"},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}],
            },
        ]
        await session.add_items(history)
        assert await session.get_items(limit=2) == history[-2:]
        model = ScriptedModel()
        model.enqueue([assistant_message("Tomorrow is sunny too.")])
        await Runner.run(
            Agent(name="t", model=model),
            "What about tomorrow?",
            session=session,
            run_config=RunConfig(session_settings=SessionSettings(limit=2)),
        )
        assert model.calls[-1].input == [
            history[-1],
            {"role": "user", "content": "What about tomorrow?"},
        ]
        session.close()

    run(scenario())


# -- add, get, pop, clear ----------------------------------------------------------------


def test_add_get_and_clear(target: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("direct", target)
        items: list[Any] = [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi there!"},
        ]
        await session.add_items(items)
        assert await session.get_items() == items
        await session.clear_session()
        assert await session.get_items() == []
        assert session.plait_session() is None  # erased, as SQLiteSession deletes its rows
        await session.add_items([{"role": "user", "content": "again"}])
        assert await session.get_items() == [{"role": "user", "content": "again"}]
        session.close()

    run(scenario())


def test_pop_item_returns_the_newest_until_empty(target: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("pop", target)
        assert await session.pop_item() is None
        items: list[Any] = [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi there!"},
            {"role": "user", "content": "How are you?"},
        ]
        await session.add_items(items)
        assert await session.pop_item() == items[2]
        assert await session.get_items() == items[:2]
        assert await session.pop_item() == items[1]
        assert await session.pop_item() == items[0]
        assert await session.pop_item() is None
        assert await session.get_items() == []
        session.close()

    run(scenario())


def test_pop_item_only_touches_its_own_session(target: str) -> None:
    async def scenario() -> None:
        one, two = PlaitSession("session_1", target), PlaitSession("session_2", target)
        await one.add_items([{"role": "user", "content": "Session 1 message"}])
        await two.add_items(
            [
                {"role": "user", "content": "Session 2 message 1"},
                {"role": "user", "content": "Session 2 message 2"},
            ]
        )
        assert (await two.pop_item() or {})["content"] == "Session 2 message 2"
        assert [i["content"] for i in await one.get_items()] == ["Session 1 message"]
        assert [i["content"] for i in await two.get_items()] == ["Session 2 message 1"]
        one.close()
        two.close()

    run(scenario())


def test_unicode_and_sql_look_alikes_are_stored_as_given(target: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("special", target)
        items: list[Any] = [
            {"role": "user", "content": "こんにちは"},
            {"role": "assistant", "content": "😊👍"},
            {"role": "user", "content": "O'Reilly"},
            {"role": "assistant", "content": "DROP TABLE sessions;"},
            {"role": "user", "content": '"SELECT * FROM users WHERE name = "admin";"'},
            {"role": "assistant", "content": "Robert'); DROP TABLE students;--"},
        ]
        await session.add_items(items)
        assert await session.get_items() == items
        session.close()

    run(scenario())


def test_concurrent_adds_from_threads_all_land(target: str) -> None:
    session = PlaitSession("concurrent", target)

    def add(n: int) -> None:
        asyncio.run(session.add_items([{"role": "user", "content": f"Message {n}"}]))

    with ThreadPoolExecutor(max_workers=5) as pool:
        list(pool.map(add, range(10)))
    items = run(session.get_items())
    assert {i["content"] for i in items} == {f"Message {n}" for n in range(10)}
    session.close()


def test_a_failed_add_stores_nothing_and_the_session_stays_usable(target: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("rollback", target)
        await session.add_items([{"role": "user", "content": "kept"}])
        with pytest.raises(InvalidArgumentError):
            await session.add_items(
                [
                    {"role": "user", "content": "fine"},
                    {"role": "user", "content": object()},  # type: ignore[typeddict-item]
                ]
            )
        with pytest.raises(InvalidArgumentError):
            await session.add_items(["not an item"])  # type: ignore[list-item]
        assert await session.get_items() == [{"role": "user", "content": "kept"}]
        await session.add_items([{"role": "user", "content": "after failure"}])
        assert [i["content"] for i in await session.get_items()] == ["kept", "after failure"]
        session.close()

    run(scenario())


def test_a_closed_session_refuses_even_an_empty_add(target: str) -> None:
    session = PlaitSession("closed", target)
    session.close()
    with pytest.raises(AdapterClosedError, match="closed"):
        run(session.add_items([]))
    with pytest.raises(AdapterClosedError):
        run(session.get_items())


@pytest.mark.parametrize("operation", ["add", "pop", "clear"])
def test_a_cancelled_write_finishes_before_the_cancellation_is_raised(
    tmp_path: Path, operation: str
) -> None:
    path = tmp_path / "cancel.db"
    item: Any = {"role": "user", "content": "once"}

    async def scenario() -> None:
        session = PlaitSession("cancel", str(path))
        if operation != "add":
            await session.add_items([item])
        blocker = sqlite3.connect(path, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")  # the write waits for SQLite's write lock
        if operation == "add":
            task: asyncio.Task[Any] = asyncio.create_task(session.add_items([item]))
        elif operation == "pop":
            task = asyncio.create_task(session.pop_item())
        else:
            task = asyncio.create_task(session.clear_session())
        await asyncio.sleep(0.2)
        task.cancel()
        await asyncio.sleep(0)
        task.cancel()
        assert not task.done()  # still waiting for the write it started
        blocker.execute("ROLLBACK")
        blocker.close()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert task.cancelled()
        assert await session.get_items() == ([item] if operation == "add" else [])
        session.close()

    run(scenario())


# -- items round-trip; one item, one plait message ---------------------------------------

ITEMS: list[Any] = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hello"},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "What is in this picture?"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"},
        ],
    },
    {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Looking at it."}],
        "encrypted_content": "gAAAA-secret",
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "A cat.", "annotations": [], "logprobs": []}],
    },
    {
        "type": "function_call",
        "call_id": "c1",
        "name": "lookup",
        "arguments": '{"q": "cat"}',
        "id": "fc_1",
        "status": "completed",
    },
    {
        "type": "function_call_output",
        "call_id": "c1",
        "output": [{"type": "input_text", "text": "felis catus"}],
    },
    {
        "type": "web_search_call",
        "id": "ws_1",
        "status": "completed",
        "action": {"type": "search", "query": "cats"},
    },
    {
        "type": "computer_call",
        "id": "cu_1",
        "call_id": "cc1",
        "status": "completed",
        "action": {"type": "click", "x": 1, "y": 2, "button": "left"},
        "pending_safety_checks": [],
    },
    {
        "type": "mcp_call",
        "id": "mcp_1",
        "server_label": "docs",
        "name": "search",
        "arguments": "{}",
        "output": "none",
        "error": None,
    },
    {"type": "custom_tool_call", "call_id": "ct1", "name": "grammar", "input": "x = 1"},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "refusal", "refusal": "I can't help with that."}],
    },
    {
        "role": "developer",
        "content": "Mind the nested 🐍 data",
        "extra": {"a": [1, 2.5, None, True]},
    },
]


def test_items_round_trip_exactly_one_plait_message_each(target: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("tenant:acme:chat-9", target)
        await session.add_items(ITEMS[:5])
        await session.add_items(ITEMS[5:])
        assert await session.get_items() == ITEMS
        for n in (1, 3, 7, len(ITEMS)):
            assert await session.get_items(limit=n) == ITEMS[-n:]
        plait = session.plait_session()
        assert plait is not None
        assert plait.transcript.length == len(ITEMS)
        kinds = [r.kind for r in plait.transcript.records]
        assert kinds == [
            "system",
            "user",
            "user",
            "opaque",
            "assistant",
            "assistant",
            "tool",
            "opaque",
            "opaque",
            "opaque",
            "opaque",
            "assistant",
            "system",
        ]
        opaque = [r for r in plait.transcript.records if r.kind == "opaque"]
        assert all(r.format == "openai-agents" for r in opaque)  # type: ignore[attr-defined]
        assert opaque[0].item == ITEMS[3]  # type: ignore[attr-defined]
        history = plait.history()
        assert [m.role for m in history] == [
            "user",
            "user",
            "assistant",
            "assistant",
            "tool",
            "assistant",
        ]
        assert history[1].text == "What is in this picture?" and history[1].images == 1
        assert history[4].text == "felis catus"
        assert history[5].text == "I can't help with that."
        assert all(m.text or m.tool_calls for m in history)  # no empty messages
        session.close()

    run(scenario())


def test_a_tool_result_in_plait_names_its_tool(target: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("named", target)
        model = ScriptedModel(
            [
                [function_call("get_weather", {"city": "Oslo"}, call_id="c1")],
                [assistant_message("Sunny.")],
            ]
        )
        agent = Agent(name="a", model=model, tools=[get_weather])
        await Runner.run(agent, "Weather in Oslo?", session=session)
        # An output added apart from its call, as a run resumed after an approval adds it.
        call = {"type": "function_call", "call_id": "c2", "name": "refund", "arguments": "{}"}
        await session.add_items([call])
        await session.add_items([{"type": "function_call_output", "call_id": "c2", "output": "ok"}])
        await session.add_items([{"type": "function_call_output", "call_id": "c9", "output": "?"}])
        plait = session.plait_session()
        assert plait is not None
        tools = [(m.tool_call_id, m.tool_name) for m in plait.history() if m.role == "tool"]
        assert tools == [("c1", "get_weather"), ("c2", "refund"), ("c9", None)]
        session.close()

    run(scenario())


def test_pop_item_of_a_message_plait_wrote_pops_one_item(target: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("continued", target)
        await session.add_items([{"role": "user", "content": "Refund order 7?"}])
        plait = session.plait_session()
        assert plait is not None
        calls = [
            {"id": "t1", "name": "lookup", "arguments": {"order": 7}},
            {"id": "t2", "name": "refund", "arguments": {"order": 7}},
        ]
        # Continued with plait's own run: one message, read as three items.
        plait.inject({"role": "assistant", "content": "Checking.", "tool_calls": calls})
        before = await session.get_items()
        assert len(before) == 4
        popped = await session.pop_item()
        assert popped == before[-1]  # as SQLiteSession pops: the newest item only
        assert await session.get_items() == before[:-1]
        assert await session.pop_item() == before[-2]
        assert await session.get_items() == before[:-2]
        session.close()

    run(scenario())


def test_pop_item_is_one_rewind_that_can_be_undone(target: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("undo", target)
        await session.add_items(ITEMS)
        assert await session.pop_item() == ITEMS[-1]
        assert await session.pop_item() == ITEMS[-2]
        plait = session.plait_session()
        assert plait is not None and plait.id == "undo"
        assert plait.transcript.length == len(ITEMS) - 2
        plait.transcript.undo_rewind()
        assert await session.get_items() == ITEMS[:-1]
        session.close()

    run(scenario())


def test_clear_by_rewind_can_be_undone(target: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("rewound", target, clear="rewind")
        await session.add_items(ITEMS[:3])
        await session.clear_session()
        assert await session.get_items() == []
        plait = session.plait_session()
        assert plait is not None
        plait.transcript.undo_rewind()
        assert await session.get_items() == ITEMS[:3]
        session.close()

    run(scenario())


# -- what plait adds: the same conversation through plait's API --------------------------


def test_plaits_api_reads_and_branches_the_conversation(target: str, tmp_path: Path) -> None:
    async def scenario() -> None:
        with Client(tmp_path, store=target) as client:
            session = PlaitSession("user/7", client)
            model = ScriptedModel()
            agent = Agent(name="t", model=model)
            for n in range(1, 4):
                model.enqueue([assistant_message(f"Reply {n}")])
                await Runner.run(agent, f"Message {n}", session=session)
            plait = client.open("user/7")
            report = plait.context("gpt-4o-mini")
            assert report is not None and report.used > 0

            # A fork shares the records; the SDK continues it under its own id.
            plait.fork_at(2, "user/7/retry")
            branch = PlaitSession("user/7/retry", client)
            assert [i.get("content") for i in await branch.get_items()][:1] == ["Message 1"]
            assert len(await branch.get_items()) == 2

            # A compaction is a view: the next turn sends its summary, then what it kept.
            await plait.compact(keep_last=2)
            items = await session.get_items()
            assert items[0]["role"] == "system"
            assert items[0]["content"].startswith("Summary of the earlier conversation:")
            assert [i.get("content") for i in items[-2:-1]] == ["Message 3"]
            model.enqueue([assistant_message("Reply 4")])
            await Runner.run(agent, "Message 4", session=session)
            assert model.calls[-1].input[0]["content"].startswith("Summary of")
            plait.transcript.uncompact()
            assert (await session.get_items())[0] == {"role": "user", "content": "Message 1"}

            page = plait.export(tmp_path / "chat.html")
            text = Path(page).read_text()
            assert "Message 1" in text and "Reply 4" in text

    run(scenario())


def test_two_processes_serve_one_conversation(target: str) -> None:
    script = (
        "import asyncio, sys\n"
        "from plait.integrations.openai_agents import PlaitSession\n"
        "s = PlaitSession('shared', sys.argv[1])\n"
        "for n in range(20):\n"
        "    asyncio.run(s.add_items([{'role': 'user', 'content': f'other {n}'}]))\n"
        "s.close()\n"
    )
    session = PlaitSession("shared", target)
    run(session.add_items([{"role": "user", "content": "mine start"}]))
    other = subprocess.Popen(
        [sys.executable, "-c", script, target], stderr=subprocess.PIPE, text=True
    )
    try:
        for n in range(20):  # both processes write while the other does
            run(session.add_items([{"role": "user", "content": f"mine {n}"}]))
    finally:
        _, errors = other.communicate(timeout=120)
    assert other.returncode == 0, errors
    contents = [i["content"] for i in run(session.get_items())]
    assert sorted(contents) == sorted(
        ["mine start", *(f"mine {n}" for n in range(20)), *(f"other {n}" for n in range(20))]
    )
    assert [c for c in contents if c.startswith("other")] == [f"other {n}" for n in range(20)]
    newest = run(session.get_items(limit=1))[0]
    assert run(session.pop_item()) == newest
    session.close()


def test_ids_and_stores_it_takes(tmp_path: Path) -> None:
    memory = PlaitSession("a/b c:d", ":memory:")
    run(memory.add_items([{"role": "user", "content": "hi"}]))
    assert run(memory.get_items()) == [{"role": "user", "content": "hi"}]
    memory.close()
    with pytest.raises(InvalidArgumentError):
        PlaitSession("", ":memory:")
    with pytest.raises(InvalidArgumentError):
        PlaitSession("x", ":memory:", clear="drop")  # type: ignore[arg-type]


def test_without_the_sdk_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "agents.memory.session_settings", None)
    with pytest.raises(MissingDependencyError, match=r"plait\[openai-agents\]"):
        PlaitSession("x", ":memory:")


def test_items_json_is_what_the_sdk_would_store(target: str) -> None:
    # SQLiteSession stores json.dumps(item); what plait returns compares equal to its json.loads.
    async def scenario() -> None:
        session = PlaitSession("json", target)
        await session.add_items(ITEMS)
        assert await session.get_items() == json.loads(json.dumps(ITEMS))
        session.close()

    run(scenario())


def test_a_failing_write_reaches_a_streamed_run(target: str) -> None:
    # A conversation closed in plait refuses writes: the stream raises instead of hanging.
    async def scenario() -> None:
        session = PlaitSession("refusing", target)
        await session.add_items([{"role": "user", "content": "earlier"}])
        plait = session.plait_session()
        assert plait is not None
        plait.close("archived")
        model = ScriptedModel()
        model.enqueue([assistant_message("never stored")])
        result = Runner.run_streamed(Agent(name="t", model=model), "Hello", session=session)

        async def consume() -> None:
            async for _ in result.stream_events():
                pass

        with pytest.raises(SessionClosedError):
            await asyncio.wait_for(consume(), timeout=60)
        assert await session.get_items() == [{"role": "user", "content": "earlier"}]
        session.close()

    run(scenario())


def test_pop_item_after_a_compaction_undone_pops_the_newest_item_shown(target: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("undone", target)
        items = [{"role": "user", "content": f"m{n}"} for n in range(6)]
        await session.add_items(items)  # type: ignore[arg-type]
        plait = session.plait_session()
        assert plait is not None
        await plait.compact(keep_last=2)
        plait.transcript.uncompact()  # the summary stays, hidden: a message that shows as no item
        assert await session.get_items() == items
        assert await session.pop_item() == items[-1]
        assert await session.get_items() == items[:-1]
        plait.transcript.undo_rewind()
        assert await session.get_items() == items
        session.close()

    run(scenario())


def test_plait_serve_shows_the_conversation(target: str, tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from plait.server import create_app

    async def converse() -> None:
        model = ScriptedModel()
        model.enqueue([function_call("get_weather", {"city": "Oslo"}, call_id="c1")])
        model.enqueue([assistant_message("Snow in Oslo.")])
        session = PlaitSession("user/9", target, workspace=tmp_path)
        agent = Agent(name="t", model=model, tools=[get_weather])
        await Runner.run(agent, "Weather in Oslo?", session=session)
        session.close()

    run(converse())
    with Client(tmp_path, store=target) as client:
        app = create_app(client, api_keys={"k" * 24: "tester"})
        with TestClient(app, headers={"Authorization": f"Bearer {'k' * 24}"}) as api:
            got = api.get("/sessions/user%2F9/history")
            assert got.status_code == 200, got.text
            messages = got.json()["messages"]
            assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
            assert messages[-1]["text"] == "Snow in Oslo."
            page = api.get("/")
            assert page.status_code == 200 and "<html" in page.text.lower()


@function_tool(name_override="delete_note", needs_approval=True)
def delete_note(query: str) -> str:
    """Delete a note (needs a person's approval)."""
    return f"deleted:{query}"


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_an_approval_resumed_by_another_worker_lands_once(target: str, decision: str) -> None:
    # The SDK's human-in-the-loop scenario: a run stops for approval, another worker
    # (a new PlaitSession on the same store) resumes it from the run state.
    async def scenario() -> None:
        model = ScriptedModel()
        agent = Agent(
            name="notes",
            model=model,
            tools=[delete_note],
            tool_use_behavior="stop_on_first_tool",
        )
        model.enqueue([function_call("delete_note", {"query": "n1"}, call_id="call_1")])
        first = PlaitSession("hitl", target)
        stopped = await Runner.run(agent, "Delete note n1.", session=first)
        assert len(stopped.interruptions) == 1
        state = stopped.to_state()
        if decision == "approve":
            state.approve(stopped.interruptions[0])
        else:
            state.reject(stopped.interruptions[0])
        first.close()

        second = PlaitSession("hitl", target)
        resumed = await Runner.run(agent, state, session=second)
        assert resumed.interruptions == []
        items = await second.get_items()
        assert [i.get("role") for i in items if i.get("role") == "user"] == ["user"]
        calls = [i for i in items if i.get("type") == "function_call"]
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        assert len(calls) == 1 and calls[0]["call_id"] == "call_1"
        assert len(outputs) == 1 and outputs[0]["call_id"] == "call_1"
        if decision == "approve":
            assert resumed.final_output == "deleted:n1"
            assert outputs[0]["output"] == "deleted:n1"
        else:
            assert outputs[0]["output"] != "deleted:n1"
        plait = second.plait_session()
        assert plait is not None
        tool = [m for m in plait.history() if m.role == "tool"]
        assert len(tool) == 1 and tool[0].tool_call_id == "call_1"
        second.close()

    run(scenario())


def test_pop_item_takes_the_newest_item_shown_past_another_formats_item(target: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("mixed", target)
        items: list[Any] = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
        await session.add_items(items)
        plait = session.plait_session()
        assert plait is not None
        plait.inject({"role": "opaque", "format": "somebody-else", "item": {"x": 1}})
        assert await session.get_items() == items  # not an openai-agents item: not shown
        assert await session.pop_item() == items[1]  # one rewind, past the foreign item
        assert await session.get_items() == items[:1]
        plait.transcript.undo_rewind()
        assert plait.transcript.length == 3 and await session.get_items() == items
        session.close()

    run(scenario())


def test_get_items_with_a_limit_reads_past_another_formats_items(target: str) -> None:
    async def scenario() -> None:
        session = PlaitSession("mixed-tail", target)
        items: list[Any] = [{"role": "user", "content": f"m{n}"} for n in range(4)]
        await session.add_items(items)
        plait = session.plait_session()
        assert plait is not None
        for text in ("x", "y", "z"):  # as a run of plait's with another provider leaves them
            plait.inject({"role": "opaque", "format": "anthropic", "item": {"thinking": text}})
        assert await session.get_items() == items
        for n in (1, 2, 3, 4, 9):
            assert await session.get_items(limit=n) == items[-n:]
        session.close()

    run(scenario())
