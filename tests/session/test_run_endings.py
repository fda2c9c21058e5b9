"""Every way a run ends is its last event: ``stream()`` says it before any error it raises."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from plait import Client, Session
from plait.errors import ProviderError, RunInterruptedError, RunTimeoutError
from plait.providers import Reply, Request, ScriptedProvider, StreamEvent, TextDelta
from plait.records import ToolCall
from plait.run import Run, RunEnded, event_json


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    (tmp_path / "ws").mkdir()
    (tmp_path / "box").mkdir()
    with Client(tmp_path / "ws", store=tmp_path / "plait.db") as client:
        s = client.sessions.create([{"role": "system", "content": "You are terse."}])
        yield s.to("local", spec=str(tmp_path / "box"))


def _call(cid: str) -> Reply:
    return Reply(
        tool_calls=(ToolCall(cid, "list_files", {"path": "."}),), finish_reason="tool_calls"
    )


class Hanging:
    """A model that streams a little and then waits for ever (until cancelled)."""

    name = "hanging"
    model = "hanging-1"

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        yield TextDelta("half an ans")
        await asyncio.Event().wait()


class Failing:
    """A model whose connection breaks part-way through its reply."""

    name = "failing"
    model = "failing-1"

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        yield TextDelta("half")
        raise ProviderError("failing", "connection reset")


def _events(
    start: Callable[[], Run], *, cancel_after: type | None = None
) -> tuple[list[object], object]:
    """Every event a stream yields, and what awaiting it gave (its result, or its error)."""

    async def main() -> tuple[list[object], object]:
        run: Run = start()
        seen: list[object] = []
        try:
            async for event in run:
                seen.append(event)
                if cancel_after is not None and isinstance(event, cancel_after):
                    run.cancel()
            return seen, await run
        except Exception as exc:  # the run's own error, raised after its last event
            return seen, exc

    return asyncio.run(main())


def _ending(events: list[object]) -> RunEnded:
    assert isinstance(events[-1], RunEnded), events[-1]
    assert sum(isinstance(e, RunEnded) for e in events) == 1
    return events[-1]


def test_a_finished_run_ends_done(session: Session) -> None:
    provider = ScriptedProvider([_call("c1"), "Nothing here."])
    events, _ = _events(lambda: session.stream("list files", provider=provider))
    end = _ending(events)
    assert (end.reason, end.complete, end.steps, end.denied) == ("done", True, 2, 0)
    assert end.words == "done in 2 steps"
    assert event_json(end) == {
        "type": "ended", "reason": "done", "complete": True, "steps": 2, "denied": 0,
        "words": "done in 2 steps",
    }


def test_the_step_limit_is_said(session: Session) -> None:
    provider = ScriptedProvider([_call("c1"), _call("c2"), "never asked"])
    events, result = _events(
        lambda: session.stream("list files", provider=provider, max_steps=2)
    )
    end = _ending(events)
    assert (end.reason, end.complete, end.steps) == ("max_steps", False, 2)
    assert end.words == "ended at the step limit (2 steps) before the model finished"
    assert result.finish_reason == "max_steps"  # type: ignore[attr-defined]


def test_the_output_limit_and_the_content_filter_are_said(session: Session) -> None:
    provider = ScriptedProvider(
        [Reply("The first half of", finish_reason="length"),
         Reply("Filtered", finish_reason="content_filter")]
    )
    end = _ending(_events(lambda: session.stream("write", provider=provider))[0])
    assert (end.reason, end.complete) == ("length", False)
    assert "the reply hit the output limit" in end.words
    end = _ending(_events(lambda: session.stream("again", provider=provider))[0])
    assert (end.reason, end.complete) == ("content_filter", False)
    assert "content filter" in end.words


def test_denied_tool_calls_are_counted_in_the_ending(session: Session) -> None:
    provider = ScriptedProvider([_call("c1"), _call("c2"), "I may not look."])
    events, _ = _events(
        lambda: session.stream("list files", provider=provider, on_approval=lambda call: False)
    )
    end = _ending(events)
    assert (end.reason, end.denied, end.complete) == ("done", 2, True)
    assert end.words == "done in 3 steps; 2 tool calls were denied"
    finished = [e for e in events if getattr(e, "type", "") == "tool_end"]
    assert [e.denied for e in finished] == [True, True]  # type: ignore[attr-defined]


def test_a_timeout_is_said_before_the_error(session: Session) -> None:
    events, error = _events(lambda: session.stream("hi", provider=Hanging(), timeout=0.2))
    end = _ending(events)
    assert isinstance(error, RunTimeoutError)
    assert (end.reason, end.complete, end.timeout) == ("timeout", False, 0.2)
    assert end.words == "stopped after 0 steps: the run passed its timeout of 0.2 s"


def test_a_cancel_is_said_before_the_error(session: Session) -> None:
    events, error = _events(
        lambda: session.stream("hi", provider=Hanging()), cancel_after=TextDelta
    )
    end = _ending(events)
    assert isinstance(error, RunInterruptedError)
    assert (end.reason, end.complete) == ("cancelled", False)
    assert end.words == "stopped after 0 steps: the run was cancelled"


def test_an_error_is_said_before_it_is_raised(session: Session) -> None:
    events, error = _events(lambda: session.stream("hi", provider=Failing()))
    end = _ending(events)
    assert isinstance(error, ProviderError)
    assert (end.reason, end.complete) == ("error", False)
    assert end.words.startswith("failed after 0 steps: ") and "connection reset" in end.words


def test_subscribers_and_kept_events_get_the_ending_too(session: Session) -> None:
    seen: list[object] = []
    session.live.subscribe(seen.append)
    result = asyncio.run(
        session.prompt("hi", provider=ScriptedProvider(["Hello."]), keep_events=True)
    )
    assert isinstance(seen[-1], RunEnded) and seen[-1].reason == "done"
    assert isinstance(result.events[-1], RunEnded)
