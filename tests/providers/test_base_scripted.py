"""The streaming protocol, complete(), the scripted provider and its bundle replay."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from plait import Client
from plait.errors import InvalidArgumentError, PlaitError
from plait.interop import export_bundle
from plait.providers import (
    Finish,
    Provider,
    ProviderResponseError,
    Reply,
    Request,
    ScriptedProvider,
    ScriptExhaustedError,
    StreamEvent,
    TextDelta,
    ToolArgumentsError,
    ToolCallDelta,
    ToolSpec,
    Usage,
    complete,
)
from plait.records import Message, ToolCall
from plait.store import MemoryStore

REQ = Request([Message("system", "be terse"), Message("user", "hi")])


async def _events(provider: Provider, request: Request = REQ) -> list[StreamEvent]:
    return [e async for e in provider.stream(request)]


def test_events_are_frozen_and_typed() -> None:
    assert [TextDelta("a").type, ToolCallDelta(0).type, Usage().type, Finish("stop").type] == [
        "text_delta",
        "tool_call_delta",
        "usage",
        "finish",
    ]
    with pytest.raises(AttributeError):
        TextDelta("a").text = "b"  # type: ignore[misc]
    assert Usage(5, 2, 1).to_json() == {"input_tokens": 5, "output_tokens": 2, "cached_tokens": 1}
    assert Usage.from_json(
        {"input_tokens": 5, "output_tokens": -1, "cached_tokens": True}
    ) == Usage(5, 0, 0)


def test_scripted_text_streams_in_pieces_and_records_requests() -> None:
    p = ScriptedProvider(["Hello there, friend."])
    assert isinstance(p, Provider)
    events = asyncio.run(_events(p))
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(texts) > 1 and "".join(texts) == "Hello there, friend."
    assert events[-1] == Finish("stop")
    assert p.requests == [REQ] and p.remaining == 0


def test_scripted_reply_roundtrips_through_complete() -> None:
    reply = Reply(
        "Reading.",
        (ToolCall("c1", "read_file", {"path": "a.txt"}), ToolCall("c2", "ls", {})),
        Usage(10, 3, 4),
        "tool_calls",
    )
    p = ScriptedProvider([reply, "done"])
    events = asyncio.run(_events(p))
    assert sum(isinstance(e, ToolCallDelta) for e in events) == 4  # two deltas per call
    assert isinstance(events[-1], Finish) and isinstance(events[-2], Usage)
    p2 = ScriptedProvider([reply, "done"])
    assert asyncio.run(complete(p2, REQ)) == reply
    assert asyncio.run(complete(p2, REQ)) == Reply("done")


def test_scripted_runs_out_with_a_typed_error() -> None:
    p = ScriptedProvider(["one"])
    asyncio.run(complete(p, REQ))
    with pytest.raises(ScriptExhaustedError) as info:
        asyncio.run(complete(p, REQ))
    assert isinstance(info.value, PlaitError) and info.value.served == 1
    assert len(p.requests) == 2
    p.add("two")
    assert asyncio.run(complete(p, REQ)).text == "two"


def test_scripted_rejects_bad_replies() -> None:
    with pytest.raises(InvalidArgumentError):
        ScriptedProvider([42])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError):
        ScriptedProvider([["not an event"]])  # type: ignore[list-item]


def _run(events: list[StreamEvent]) -> Reply:
    return asyncio.run(complete(ScriptedProvider([events]), REQ))


def test_complete_assembles_tool_call_deltas() -> None:
    reply = _run(
        [
            TextDelta("Let me "),
            TextDelta("look."),
            ToolCallDelta(1, "c2", "ls", ""),
            ToolCallDelta(0, "c1", "read_file", '{"pa'),
            ToolCallDelta(0, "c1", "read_file", 'th": "ü.txt"'),  # a server repeating id/name
            ToolCallDelta(0, arguments_delta="}"),
            Usage(1, 1, 0),
            Usage(12, 7, 2),
            Finish("tool_calls"),
        ]
    )
    assert reply.text == "Let me look."
    assert reply.tool_calls == (
        ToolCall("c1", "read_file", {"path": "ü.txt"}),
        ToolCall("c2", "ls", {}),
    )
    assert reply.tool_calls[1].arguments == {}
    assert reply.usage == Usage(12, 7, 2) and reply.finish_reason == "tool_calls"


def test_complete_gives_an_id_to_a_call_without_one() -> None:
    reply = _run([ToolCallDelta(0, None, "ls", "{}"), Finish("tool_calls")])
    assert reply.tool_calls[0].id.startswith("call_")


@pytest.mark.parametrize("raw", ['{"path": ', "[1, 2]", "nope"])
def test_complete_refuses_bad_tool_arguments(raw: str) -> None:
    with pytest.raises(ToolArgumentsError) as info:
        _run([ToolCallDelta(0, "c1", "ls", raw), Finish("tool_calls")])
    assert info.value.raw == raw and info.value.tool_name == "ls"
    assert isinstance(info.value, ProviderResponseError)


def test_complete_refuses_a_cut_off_or_malformed_stream() -> None:
    with pytest.raises(ProviderResponseError, match="without a finish"):
        _run([TextDelta("half")])
    with pytest.raises(ProviderResponseError, match="no name"):
        _run([ToolCallDelta(0, "c1", None, "{}"), Finish("tool_calls")])
    with pytest.raises(ProviderResponseError, match="after finish"):
        _run([Finish("stop"), TextDelta("late")])


def test_request_validates() -> None:
    r = Request([Message("user", "x")], tools=[{"name": "ls", "description": "list"}])  # type: ignore[list-item]
    assert r.tools == (ToolSpec("ls", "list"),)
    assert r.tools[0].to_dict()["parameters"] == {"type": "object", "properties": {}}
    with pytest.raises(InvalidArgumentError):
        Request([Message("user", "x")], max_tokens=0)
    with pytest.raises(InvalidArgumentError):
        Request([Message("user", "x")], tools=[ToolSpec("a"), ToolSpec("a")])
    with pytest.raises(InvalidArgumentError):
        ToolSpec.from_dict({"name": "a", "colour": "red"})
    with pytest.raises(InvalidArgumentError):
        Request([{"role": "user", "content": "x"}])  # type: ignore[list-item]


def test_from_replay_plays_back_an_exported_bundle(tmp_path: Path) -> None:
    with Client(tmp_path, store=MemoryStore()) as client:
        s = client.sessions.create([{"role": "system", "content": "be terse"}])
        s.inject({"role": "user", "content": "list files"})
        s.inject(
            {
                "role": "assistant",
                "content": "Listing.",
                "tool_calls": [{"id": "c1", "name": "ls", "arguments": {"path": "."}}],
                "meta": {"usage": {"input_tokens": 7, "output_tokens": 2, "cached_tokens": 1}},
            }
        )
        s.inject({"role": "tool", "content": "a b", "tool_call_id": "c1", "tool_name": "ls"})
        s.inject({"role": "assistant", "content": "Two files."})
        local = export_bundle(s, mode="local")
        stripped = export_bundle(s, mode="replay-only")
    p = ScriptedProvider.from_replay(local["replay"]["responses"])
    first = asyncio.run(complete(p, REQ))
    assert first == Reply(
        "Listing.", (ToolCall("c1", "ls", {"path": "."}),), Usage(7, 2, 1), "tool_calls"
    )
    assert asyncio.run(complete(p, REQ)) == Reply("Two files.")
    # replay-only bundles drop tool arguments: they replay as {}
    q = ScriptedProvider.from_replay(stripped["replay"]["responses"])
    assert asyncio.run(complete(q, REQ)).tool_calls == (ToolCall("c1", "ls", {}),)
    with pytest.raises(InvalidArgumentError):
        ScriptedProvider.from_replay([{"content": "x", "tool_calls": [{"name": "ls"}]}])
    with pytest.raises(InvalidArgumentError):
        ScriptedProvider.from_replay(["nope"])  # type: ignore[list-item]


def test_a_requests_sdk_settings_are_checked() -> None:
    hi = [Message("user", "hi")]
    for bad in ({"timeout": 0}, {"timeout": "5"}, {"max_retries": -1}, {"max_retries": 1.5},
                {"prompt_cache": "yes"}):
        with pytest.raises(InvalidArgumentError):
            Request(hi, **bad)  # type: ignore[arg-type]
    ok = Request(hi, timeout=2, max_retries=0, prompt_cache=False)
    assert (ok.timeout, ok.max_retries, ok.prompt_cache) == (2, 0, False)
