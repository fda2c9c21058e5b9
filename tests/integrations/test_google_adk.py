"""Google ADK's session service backed by plait, checked against ADK's in-memory service."""

from __future__ import annotations

import asyncio
import copy
import subprocess
import sys
import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, InMemorySessionService
from google.adk.sessions.base_session_service import GetSessionConfig
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from plait.integrations.google_adk import EVENT_FORMAT, PlaitSessionService

from .conftest import Targets

APP = "shop"


def _events() -> list[Event]:
    """User text, a model's text and call, the call's response, a state-only event."""
    call = types.FunctionCall(id="c1", name="lookup", args={"sku": "A-1"})
    answer = types.FunctionResponse(id="c1", name="lookup", response={"price": 3})
    return [
        Event(
            id="e1",
            invocation_id="i1",
            author="user",
            timestamp=1000.0,
            content=types.Content(role="user", parts=[types.Part(text="price of A-1?")]),
        ),
        Event(
            id="e2",
            invocation_id="i1",
            author="clerk",
            timestamp=1001.0,
            content=types.Content(
                role="model", parts=[types.Part(text="Looking."), types.Part(function_call=call)]
            ),
        ),
        Event(
            id="e3",
            invocation_id="i1",
            author="clerk",
            timestamp=1002.0,
            content=types.Content(role="user", parts=[types.Part(function_response=answer)]),
        ),
        Event(
            id="e4",
            invocation_id="i1",
            author="clerk",
            timestamp=1003.0,
            actions=EventActions(
                state_delta={
                    "cart": ["A-1"],
                    "app:currency": "EUR",
                    "user:tier": "gold",
                    "temp:draft": "x",
                    "empty": None,
                }
            ),
        ),
        Event(
            id="e5",
            invocation_id="i1",
            author="clerk",
            timestamp=1004.0,
            partial=True,
            content=types.Content(role="model", parts=[types.Part(text="It c")]),
        ),
        Event(
            id="e6",
            invocation_id="i1",
            author="clerk",
            timestamp=1005.0,
            content=types.Content(role="model", parts=[types.Part(text="It costs 3 EUR.")]),
        ),
    ]


def _dump(events: list[Event]) -> list[dict[str, Any]]:
    return [e.model_dump(mode="json", exclude_none=True) for e in events]


async def _scenario(service: BaseSessionService) -> dict[str, Any]:
    """One run of every verb; what it returns is compared across services."""
    out: dict[str, Any] = {}
    s1 = await service.create_session(
        app_name=APP,
        user_id="ann",
        session_id="s1",
        state={"step": 0, "app:motd": "hi", "user:name": "Ann", "temp:t": 1},
    )
    out["created"] = copy.deepcopy(s1.state)
    s2 = await service.create_session(app_name=APP, user_id="bob", session_id=" s2 ")
    out["s2"] = (s2.id, copy.deepcopy(s2.state))
    await service.create_session(app_name="other", user_id="ann", session_id="s1")
    try:
        await service.create_session(app_name=APP, user_id="ann", session_id="s1")
    except AlreadyExistsError:
        out["duplicate"] = "refused"
    returned = []
    for event in _events():
        returned.append(await service.append_event(s1, event))
    out["returned"] = _dump(returned)
    out["in_hand"] = s1.state  # temp: applied to the session in hand
    out["in_hand_events"] = len(s1.events)
    got = await service.get_session(app_name=APP, user_id="ann", session_id="s1")
    assert got is not None
    out["events"] = _dump(got.events)
    out["state"] = got.state
    for name, config in {
        "recent2": GetSessionConfig(num_recent_events=2),
        "recent0": GetSessionConfig(num_recent_events=0),
        "recent9": GetSessionConfig(num_recent_events=9),
        "after": GetSessionConfig(after_timestamp=1002.0),
        "after_all": GetSessionConfig(after_timestamp=0.0),
        "after_none": GetSessionConfig(after_timestamp=5000.0),
        "both": GetSessionConfig(num_recent_events=3, after_timestamp=1001.5),
    }.items():
        part = await service.get_session(
            app_name=APP, user_id="ann", session_id="s1", config=config
        )
        assert part is not None
        out[name] = [e.id for e in part.events]
    bob = await service.get_session(app_name=APP, user_id="bob", session_id="s2")
    assert bob is not None
    out["bob"] = bob.state  # app: is shared, user: is not
    for user in (None, "ann", "bob", "nobody"):
        listed = await service.list_sessions(app_name=APP, user_id=user)
        out[f"list_{user}"] = [(s.user_id, s.id, s.state, len(s.events)) for s in listed.sessions]
    out["list_unknown_app"] = (await service.list_sessions(app_name="nope")).sessions
    out["user_state"] = await service.get_user_state(app_name=APP, user_id="ann")
    out["missing"] = await service.get_session(app_name=APP, user_id="ann", session_id="zz")
    await service.delete_session(app_name=APP, user_id="ann", session_id="s1")
    await service.delete_session(app_name=APP, user_id="ann", session_id="never")
    out["deleted"] = await service.get_session(app_name=APP, user_id="ann", session_id="s1")
    out["after_delete"] = [s.id for s in (await service.list_sessions(app_name=APP)).sessions]
    out["other_app"] = [s.id for s in (await service.list_sessions(app_name="other")).sessions]
    return out


def test_same_behaviour_as_the_in_memory_service(targets: Targets, tmp_path: Path) -> None:
    expected = asyncio.run(_scenario(InMemorySessionService()))
    service = PlaitSessionService(targets.new(), workspace=tmp_path)
    try:
        got = asyncio.run(_scenario(service))
    finally:
        service.close()
    assert got == expected
    # What the scenario pins down, spelled out.
    assert expected["state"] == {
        "step": 0,
        "cart": ["A-1"],
        "empty": None,
        "app:motd": "hi",
        "app:currency": "EUR",
        "user:name": "Ann",
        "user:tier": "gold",
    }
    assert expected["in_hand"]["temp:draft"] == "x"
    assert [e["id"] for e in expected["events"]] == ["e1", "e2", "e3", "e4", "e6"]
    assert expected["recent2"] == ["e4", "e6"] and expected["after"] == ["e3", "e4", "e6"]


def test_temp_state_is_never_stored(tmp_path: Path) -> None:
    service = PlaitSessionService(str(tmp_path / "s.db"), workspace=tmp_path)
    session = asyncio.run(
        service.create_session(app_name=APP, user_id="ann", state={"temp:a": 1, "k": 1})
    )
    for event in _events():
        asyncio.run(service.append_event(session, event))
    stored = service.session(APP, "ann", session.id)
    for record in stored.transcript.records:
        assert "temp:" not in str(record.meta)
        assert "temp:" not in str(getattr(record, "item", ""))
    assert "temp:" not in str(stored.settings.metadata)
    service.close()


def test_events_read_as_a_plait_conversation(tmp_path: Path) -> None:
    service = PlaitSessionService(str(tmp_path / "s.db"), workspace=tmp_path)
    session = asyncio.run(service.create_session(app_name=APP, user_id="ann", session_id="s1"))
    for event in _events():
        asyncio.run(service.append_event(session, event))
    plait = service.session(APP, "ann", "s1")
    assert plait.id == "adk/shop/ann/s1"
    history = plait.history()
    assert [(m.role, m.text) for m in history] == [
        ("user", "price of A-1?"),
        ("assistant", "Looking."),
        ("tool", '{"price": 3}'),
        ("assistant", "It costs 3 EUR."),
    ]
    assert history[1].tool_calls[0].name == "lookup"
    assert history[2].tool_call_id == "c1"
    opaque = [r for r in plait.transcript.records if r.kind == "opaque"]
    assert [(r.format, r.item["id"]) for r in opaque] == [(EVENT_FORMAT, "e4")]  # type: ignore[attr-defined]
    # A plait fork and compaction change nothing ADK reads.
    plait.fork("adk-what-if")
    asyncio.run(plait.compact({"keep_last": 1}))
    got = asyncio.run(service.get_session(app_name=APP, user_id="ann", session_id="s1"))
    assert got is not None and [e.id for e in got.events] == ["e1", "e2", "e3", "e4", "e6"]
    service.close()


def test_reopened_store_gives_the_same_session(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    service = PlaitSessionService(path, workspace=tmp_path)
    session = asyncio.run(
        service.create_session(app_name=APP, user_id="ann", session_id="s1", state={"a": 1})
    )
    for event in _events():
        asyncio.run(service.append_event(session, event))
    before = asyncio.run(service.get_session(app_name=APP, user_id="ann", session_id="s1"))
    service.close()
    again = PlaitSessionService(path, workspace=tmp_path)
    after = asyncio.run(again.get_session(app_name=APP, user_id="ann", session_id="s1"))
    assert before is not None and after is not None
    assert after.model_dump() == before.model_dump()
    again.close()


def test_a_stale_session_is_refused(tmp_path: Path) -> None:
    service = PlaitSessionService(str(tmp_path / "s.db"), workspace=tmp_path)
    asyncio.run(service.create_session(app_name=APP, user_id="ann", session_id="s1"))
    first = asyncio.run(service.get_session(app_name=APP, user_id="ann", session_id="s1"))
    second = asyncio.run(service.get_session(app_name=APP, user_id="ann", session_id="s1"))
    assert first is not None and second is not None
    later = Event(invocation_id="i", author="user", timestamp=second.last_update_time + 5)
    asyncio.run(service.append_event(first, later))
    with pytest.raises(StaleSessionError):
        asyncio.run(service.append_event(second, Event(invocation_id="i", author="user")))
    service.close()


def test_an_equal_redelivery_is_stored_once(tmp_path: Path) -> None:
    service = PlaitSessionService(str(tmp_path / "s.db"), workspace=tmp_path)
    session = asyncio.run(service.create_session(app_name=APP, user_id="ann", session_id="s1"))
    event = _events()[3]
    asyncio.run(service.append_event(session, event))
    asyncio.run(service.append_event(session, event.model_copy(deep=True)))
    got = asyncio.run(service.get_session(app_name=APP, user_id="ann", session_id="s1"))
    assert got is not None and [e.id for e in got.events] == ["e4"]
    service.close()


class _Scripted(BaseLlm):
    """A model that plays a script: a call to the tool, then a final answer."""

    model: str = "scripted"
    turn: int = 0

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.turn += 1
        if self.turn % 2 == 1:
            call = types.FunctionCall(name="add_to_cart", args={"sku": "A-1"})
            parts = [types.Part(function_call=call)]
        else:
            parts = [types.Part(text="Added A-1.")]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def add_to_cart(sku: str, tool_context: ToolContext) -> dict[str, Any]:
    """Put an item in the cart."""
    cart = [*tool_context.state.get("cart", []), sku]
    tool_context.state["cart"] = cart
    tool_context.state["user:last_sku"] = sku
    tool_context.state["temp:seen"] = True
    return {"cart": cart}


async def _run(service: BaseSessionService) -> tuple[list[tuple[str, Any]], dict[str, Any]]:
    agent = LlmAgent(name="clerk", model=_Scripted(), tools=[add_to_cart], output_key="reply")
    runner = Runner(agent=agent, app_name=APP, session_service=service)
    await service.create_session(app_name=APP, user_id="ann", session_id="s1")
    message = types.Content(role="user", parts=[types.Part(text="add A-1")])
    async for _ in runner.run_async(user_id="ann", session_id="s1", new_message=message):
        pass
    session = await service.get_session(app_name=APP, user_id="ann", session_id="s1")
    assert session is not None
    shape = []
    for event in session.events:
        parts = event.content.parts if event.content and event.content.parts else []
        shape.append(
            (
                event.author,
                [
                    p.text
                    or (p.function_call and p.function_call.name)
                    or (p.function_response and p.function_response.response)
                    for p in parts
                ],
            )
        )
    return shape, session.state


def test_a_runner_with_a_scripted_model_sees_the_same_session(tmp_path: Path) -> None:
    expected = asyncio.run(_run(InMemorySessionService()))
    service = PlaitSessionService(str(tmp_path / "s.db"), workspace=tmp_path)
    got = asyncio.run(_run(service))
    assert got == expected
    shape, state = got
    assert state == {"cart": ["A-1"], "user:last_sku": "A-1", "reply": "Added A-1."}
    assert [author for author, _ in shape] == ["user", "clerk", "clerk", "clerk"]
    history = service.session(APP, "ann", "s1").history()
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    service.close()


_WORKER = """
import asyncio, os, sys, time
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from plait.integrations.google_adk import PlaitSessionService

path, name, folder = sys.argv[1:4]
service = PlaitSessionService(path, workspace=folder)
session = asyncio.run(service.create_session(app_name="shop", user_id="ann", session_id=name))
open(folder + "/ready-" + name, "w").close()
while not os.path.exists(folder + "/go"):  # both start writing together
    time.sleep(0.01)
for n in range(20):
    delta = {f"user:seen_{name}": n, f"app:by_{name}": n, "mine": n}
    event = Event(invocation_id="i", author="clerk", actions=EventActions(state_delta=delta))
    asyncio.run(service.append_event(session, event))
    time.sleep(0.002)  # the other worker's events come between
service.close()
"""


def _started_together(script: str, path: str, tmp_path: Path) -> list[subprocess.Popen[str]]:
    """Two worker processes running ``script``, let go at once when both are ready."""
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", script, path, name, str(tmp_path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("w1", "w2")
    ]
    while not all((tmp_path / f"ready-{name}").exists() for name in ("w1", "w2")):
        assert all(w.poll() is None for w in workers), "a worker stopped before it was ready"
        time.sleep(0.01)
    (tmp_path / "go").touch()
    return workers


def test_two_workers_share_user_and_app_state(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    workers = _started_together(_WORKER, path, tmp_path)
    for worker in workers:
        _, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
    service = PlaitSessionService(path, workspace=tmp_path)
    assert asyncio.run(service.get_user_state(app_name=APP, user_id="ann")) == {
        "seen_w1": 19,
        "seen_w2": 19,
    }
    for name in ("w1", "w2"):
        got = asyncio.run(service.get_session(app_name=APP, user_id="ann", session_id=name))
        assert got is not None and len(got.events) == 20
        assert got.state["mine"] == 19
        assert got.state["app:by_w1"] == got.state["app:by_w2"] == 19
    service.close()


async def _rewound(service: BaseSessionService) -> tuple[list[tuple[str, Any]], dict[str, Any]]:
    """Two invocations, then ADK's rewind to before the second."""
    agent = LlmAgent(name="clerk", model=_Scripted(), tools=[add_to_cart])
    runner = Runner(agent=agent, app_name=APP, session_service=service)
    await service.create_session(app_name=APP, user_id="ann", session_id="s1")
    for text in ("add A-1", "add it again"):
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id="ann", session_id="s1", new_message=message):
            pass
    session = await service.get_session(app_name=APP, user_id="ann", session_id="s1")
    assert session is not None
    second = session.events[-1].invocation_id
    await runner.rewind_async(user_id="ann", session_id="s1", rewind_before_invocation_id=second)
    session = await service.get_session(app_name=APP, user_id="ann", session_id="s1")
    assert session is not None
    shape = [
        (e.author, bool(e.actions.rewind_before_invocation_id), e.invocation_id == second)
        for e in session.events
    ]
    return shape, session.state


def test_a_rewind_in_adk_is_a_rewind_in_plait(tmp_path: Path) -> None:
    expected = asyncio.run(_rewound(InMemorySessionService()))
    service = PlaitSessionService(str(tmp_path / "s.db"), workspace=tmp_path)
    got = asyncio.run(_rewound(service))
    assert got == expected  # every event, the rewound ones too, and the state rewound
    shape, state = got
    assert state == {"cart": ["A-1"], "user:last_sku": "A-1"}
    assert sum(1 for _, _, in_second in shape if in_second) == 4
    plait = service.session(APP, "ann", "s1")
    # plait's view drops the rewound invocation; a hidden head keeps it.
    assert [m.text for m in plait.history() if m.role == "user"] == ["add A-1"]
    (hidden,) = plait.transcript.hidden_heads()
    held = service.client.sessions.history_of(hidden)
    assert [m.text for m in held if m.role == "user"] == ["add A-1", "add it again"]
    service.close()


def _said(session: Any) -> list[tuple[str, str | None]]:
    return [
        (e.invocation_id, e.content.parts[0].text if e.content and e.content.parts else None)
        for e in session.events
    ]


async def _fork_scenario(service: PlaitSessionService) -> dict[str, Any]:
    """A plait fork of an ADK session (fork_at), used by ADK: read, listed, appended, rewound."""
    out: dict[str, Any] = {}
    s1 = await service.create_session(
        app_name=APP, user_id="ann", session_id="s1", state={"k": 1, "user:u": 2}
    )
    for n, (author, role, text) in enumerate(
        [("user", "user", "q1"), ("clerk", "model", "a1"), ("user", "user", "q2")]
    ):
        event = Event(
            invocation_id=f"i{n // 2}",
            author=author,
            content=types.Content(role=role, parts=[types.Part(text=text)]),
            actions=EventActions(state_delta={"n": n}),
        )
        await service.append_event(s1, event)
    service.session(APP, "ann", "s1").fork_at(2, "adk/shop/ann/alt")
    alt = await service.get_session(app_name=APP, user_id="ann", session_id="alt")
    assert alt is not None
    out["read"] = (alt.id, _said(alt), copy.deepcopy(alt.state))
    out["listed"] = sorted(s.id for s in (await service.list_sessions(app_name=APP)).sessions)
    for text in ("f-q", "f-a"):
        event = Event(
            invocation_id="f1",
            author="user",
            content=types.Content(role="user", parts=[types.Part(text=text)]),
            actions=EventActions(state_delta={"fk": text}),
        )
        await service.append_event(alt, event)
    rewind = Event(
        invocation_id="r",
        author="user",
        actions=EventActions(rewind_before_invocation_id="f1"),
    )
    await service.append_event(alt, rewind)
    again = await service.get_session(app_name=APP, user_id="ann", session_id="alt")
    assert again is not None
    out["appended"] = (_said(again), again.state)
    return out


def test_a_plait_fork_is_an_adk_session(tmp_path: Path) -> None:
    service = PlaitSessionService(str(tmp_path / "s.db"), workspace=tmp_path)
    got = asyncio.run(_fork_scenario(service))
    # What ADK has for a session of the two events the fork kept: the same events and state.
    assert got["read"] == ("alt", [("i0", "q1"), ("i0", "a1")], {"k": 1, "n": 1, "user:u": 2})
    assert got["listed"] == ["alt", "s1"]
    # Every event after a rewind in the fork, the ones it kept from s1 in their place.
    events, state = got["appended"]
    assert events == [("i0", "q1"), ("i0", "a1"), ("f1", "f-q"), ("f1", "f-a"), ("r", None)]
    assert state == {"k": 1, "n": 1, "fk": "f-a", "user:u": 2}
    original = asyncio.run(service.get_session(app_name=APP, user_id="ann", session_id="s1"))
    assert original is not None and [t for _, t in _said(original)] == ["q1", "a1", "q2"]
    service.close()


def test_a_plait_session_under_an_adk_id_is_not_an_adk_session(tmp_path: Path) -> None:
    service = PlaitSessionService(str(tmp_path / "s.db"), workspace=tmp_path)
    service.client.sessions.create(
        [{"role": "user", "content": "hi"}], session_id="adk/shop/ann/plain"
    )
    got = asyncio.run(service.get_session(app_name=APP, user_id="ann", session_id="plain"))
    assert got is None
    assert asyncio.run(service.list_sessions(app_name=APP)).sessions == []
    service.close()


def test_state_json_cannot_hold_is_refused_before_anything_is_stored(tmp_path: Path) -> None:
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    from plait.errors import InvalidArgumentError

    async def scenario(service: BaseSessionService) -> tuple[Any, ...]:
        made = await service.create_session(app_name=APP, user_id="ann", session_id="s1")
        lossy = Event(
            invocation_id="i1", author="clerk", actions=EventActions(state_delta={"f": len})
        )
        await service.append_event(made, lossy)
        got = await service.get_session(app_name=APP, user_id="ann", session_id="s1")
        assert got is not None
        return got.state, len(got.events)

    # A callable is kept as its string, as ADK's own database service keeps it.
    reference = asyncio.run(scenario(SqliteSessionService(str(tmp_path / "adk.db"))))
    service = PlaitSessionService(str(tmp_path / "s.db"), workspace=tmp_path)
    assert asyncio.run(scenario(service)) == reference == ({"f": str(len)}, 1)

    session = asyncio.run(service.get_session(app_name=APP, user_id="ann", session_id="s1"))
    assert session is not None
    bad = Event(
        invocation_id="i2",
        author="clerk",
        content=types.Content(role="model", parts=[types.Part(text="hi")]),
        actions=EventActions(state_delta={"user:x": float("nan")}),
    )
    with pytest.raises(InvalidArgumentError):
        asyncio.run(service.append_event(session, bad))
    assert len(session.events) == 1 and "user:x" not in session.state  # left as it was
    again = asyncio.run(service.get_session(app_name=APP, user_id="ann", session_id="s1"))
    assert again is not None and len(again.events) == 1
    with pytest.raises(InvalidArgumentError):
        asyncio.run(service.create_session(app_name=APP, user_id="ann", state={"b": b"\xff"}))
    assert [s.id for s in asyncio.run(service.list_sessions(app_name=APP)).sessions] == ["s1"]
    service.close()


_ONE_SESSION_WORKER = """
import asyncio, os, sys, time
from google.adk.errors import StaleSessionError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from plait.integrations.google_adk import PlaitSessionService

path, name, folder = sys.argv[1:4]
service = PlaitSessionService(path, workspace=folder)
open(folder + "/ready-" + name, "w").close()
while not os.path.exists(folder + "/go"):
    time.sleep(0.01)

async def main():
    landed = []
    for n in range(25):
        session = await service.get_session(app_name="shop", user_id="ann", session_id="s1")
        event = Event(invocation_id="i", author=name, actions=EventActions(
            state_delta={f"{name}_{n}": n}))
        try:
            await service.append_event(session, event)
        except StaleSessionError:
            continue  # the other worker came between the read and the append
        landed.append(f"{name}_{n}")
    print(" ".join(landed))

asyncio.run(main())
service.close()
"""


def test_two_workers_on_one_session_lose_no_state_delta(tmp_path: Path) -> None:
    path = str(tmp_path / "s.db")
    service = PlaitSessionService(path, workspace=tmp_path)
    asyncio.run(service.create_session(app_name=APP, user_id="ann", session_id="s1"))
    workers = _started_together(_ONE_SESSION_WORKER, path, tmp_path)
    landed: set[str] = set()
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        landed.update(out.split())
    got = asyncio.run(service.get_session(app_name=APP, user_id="ann", session_id="s1"))
    assert got is not None
    # Each append either landed with its delta or was refused as stale: none half-applied.
    assert {key for e in got.events for key in (e.actions.state_delta or {})} == landed
    assert set(got.state) == landed
    service.close()


def test_a_users_image_is_counted_on_their_message(tmp_path: Path) -> None:
    service = PlaitSessionService(str(tmp_path / "s.db"), workspace=tmp_path)
    session = asyncio.run(service.create_session(app_name=APP, user_id="ann", session_id="s1"))
    photo = types.Part(inline_data=types.Blob(mime_type="image/png", data=b"\x89PNG"))
    manual = types.Part(inline_data=types.Blob(mime_type="application/pdf", data=b"%PDF"))
    event = Event(
        invocation_id="i1",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="what is this?"), photo, manual]),
    )
    asyncio.run(service.append_event(session, event))
    (said,) = service.session(APP, "ann", "s1").history()
    assert (said.role, said.text, said.images) == ("user", "what is this?", 1)
    got = asyncio.run(service.get_session(app_name=APP, user_id="ann", session_id="s1"))
    assert got is not None and got.events == [event]  # the event itself, files and all
    service.close()
