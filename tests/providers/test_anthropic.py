"""The Anthropic adapter against a local server replaying the Messages API SSE wire format."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

from plait.errors import MissingDependencyError
from plait.providers import (
    SUMMARY_PREFIX,
    AnthropicProvider,
    Finish,
    ProviderError,
    ProviderResponseError,
    Request,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    complete,
)
from plait.records import Message, ToolCall

from .conftest import ReplayServer, sse

pytest.importorskip("anthropic")

MODEL = "claude-haiku-4-5"


def ev(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return (data["type"], data)


def start(usage: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    return ev(
        {
            "type": "message_start",
            "message": {
                "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": usage
                or {
                    "input_tokens": 30,
                    "cache_creation_input_tokens": 200,
                    "cache_read_input_tokens": 1000,
                    "output_tokens": 1,
                },
            },
        }
    )


def text_delta(index: int, text: str) -> Any:
    return ev(
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "text_delta", "text": text},
        }
    )


def json_delta(index: int, part: str) -> Any:
    return ev(
        {
            "type": "content_block_delta",
            "index": index,
            "delta": {"type": "input_json_delta", "partial_json": part},
        }
    )


def stop_block(index: int) -> Any:
    return ev({"type": "content_block_stop", "index": index})


def message_delta(reason: str, output_tokens: int) -> Any:
    return ev(
        {
            "type": "message_delta",
            "delta": {"stop_reason": reason, "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        }
    )


TOOL_STREAM = sse(
    start(),
    ev({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ("ping", {"type": "ping"}),
    text_delta(0, "Let me "),
    text_delta(0, "check."),
    stop_block(0),
    ev(
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_01A",
                "name": "read_file",
                "input": {},
            },
        }
    ),
    json_delta(1, ""),
    json_delta(1, '{"path": "no'),
    json_delta(1, 'tes.md"}'),
    stop_block(1),
    ev(
        {
            "type": "content_block_start",
            "index": 2,
            "content_block": {
                "type": "tool_use",
                "id": "toolu_02B",
                "name": "list_files",
                "input": {},
            },
        }
    ),
    stop_block(2),
    message_delta("tool_use", 42),
    ev({"type": "message_stop"}),
)

CONVERSATION = [
    Message("system", "You are terse."),
    Message("summary", "The user is fixing a bug."),
    Message("user", "What is in notes.md and a.md?"),
    Message(
        "assistant",
        "Reading both.",
        (
            ToolCall("toolu_0", "read_file", {"path": "notes.md"}),
            ToolCall("toolu_1", "read_file", {"path": "a.md"}),
        ),
    ),
    Message("tool", "TODO: fix", tool_call_id="toolu_0", tool_name="read_file", ok=True),
    Message("tool", "no such file", tool_call_id="toolu_1", tool_name="read_file", ok=False),
    Message("assistant", "notes.md says TODO; a.md is missing."),
    Message("user", "Thanks."),
]
TOOLS = [
    ToolSpec(
        "read_file",
        "Read a file.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolSpec("list_files", "List a directory."),
]


def provider(server: ReplayServer) -> AnthropicProvider:
    return AnthropicProvider(MODEL, api_key="sk-ant-test", base_url=server.url, max_retries=0)


async def _events(p: AnthropicProvider, request: Request) -> list[StreamEvent]:
    return [e async for e in p.stream(request)]


def test_streams_text_tool_use_and_usage(replay_server: ReplayServer) -> None:
    replay_server.queue(TOOL_STREAM)
    events = asyncio.run(
        _events(
            provider(replay_server),
            Request(CONVERSATION, TOOLS, temperature=0, prompt_cache=False),
        )
    )
    assert events[:2] == [TextDelta("Let me "), TextDelta("check.")]
    assert events[2] == ToolCallDelta(0, "toolu_01A", "read_file", "")
    assert events[3] == ToolCallDelta(0, None, None, '{"path": "no')
    assert ToolCallDelta(1, "toolu_02B", "list_files", "") in events
    # D29: input includes the cache reads and writes; cached is the reads
    served = Finish("tool_calls", MODEL, "msg_01XFDUDYJgAACzvnptvVoYEL")
    assert events[-2:] == [Usage(1230, 42, 1000), served]

    seen = replay_server.requests[0]
    assert seen.path == "/v1/messages"
    # the key travels as x-api-key (older SDKs) or as a bearer token (newer ones)
    key = seen.headers.get("x-api-key") or seen.headers["authorization"].removeprefix("Bearer ")
    assert key == "sk-ant-test" and "anthropic-version" in seen.headers
    body = seen.body
    assert body["model"] == MODEL and body["stream"] is True
    assert body["max_tokens"] == 4096 and body["temperature"] == 0
    assert body["system"] == "You are terse."
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": SUMMARY_PREFIX + "The user is fixing a bug."},
                {"type": "text", "text": "What is in notes.md and a.md?"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading both."},
                {
                    "type": "tool_use",
                    "id": "toolu_0",
                    "name": "read_file",
                    "input": {"path": "notes.md"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "read_file",
                    "input": {"path": "a.md"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_0",
                    "content": "TODO: fix",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": "no such file",
                    "is_error": True,
                },
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "notes.md says TODO; a.md is missing."}],
        },
        {"role": "user", "content": [{"type": "text", "text": "Thanks."}]},
    ]
    assert body["tools"] == [
        {
            "name": "read_file",
            "description": "Read a file.",
            "input_schema": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
            },
        },
        {
            "name": "list_files",
            "description": "List a directory.",
            "input_schema": {"type": "object", "properties": {}},
        },
    ]


def test_complete_assembles_the_reply(replay_server: ReplayServer) -> None:
    replay_server.queue(TOOL_STREAM)
    reply = asyncio.run(complete(provider(replay_server), Request(CONVERSATION, TOOLS)))
    assert reply.text == "Let me check."
    assert reply.tool_calls == (
        ToolCall("toolu_01A", "read_file", {"path": "notes.md"}),
        ToolCall("toolu_02B", "list_files", {}),
    )
    assert reply.usage == Usage(1230, 42, 1000) and reply.finish_reason == "tool_calls"


@pytest.mark.parametrize(
    ("stop", "reason"),
    [("end_turn", "stop"), ("max_tokens", "length"), ("refusal", "content_filter")],
)
def test_stop_reasons(replay_server: ReplayServer, stop: str, reason: str) -> None:
    usage = {"input_tokens": 12, "output_tokens": 1}
    replay_server.queue(
        sse(
            start(usage),
            ev(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                }
            ),
            text_delta(0, "Hi."),
            stop_block(0),
            message_delta(stop, 3),
            ev({"type": "message_stop"}),
        )
    )
    request = Request([Message("user", "hi")], model="claude-opus-4-1", max_tokens=10)
    reply = asyncio.run(complete(provider(replay_server), request))
    assert (reply.text, reply.finish_reason, reply.usage) == ("Hi.", reason, Usage(12, 3, 0))
    body = replay_server.requests[0].body
    assert body["model"] == "claude-opus-4-1" and body["max_tokens"] == 10
    assert "system" not in body and "tools" not in body


def test_an_error_event_mid_stream_is_a_provider_error(replay_server: ReplayServer) -> None:
    replay_server.queue(
        sse(
            start(),
            (
                "error",
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            ),
        )
    )
    with pytest.raises(ProviderError, match="Overloaded"):
        asyncio.run(complete(provider(replay_server), Request([Message("user", "x")])))


def test_a_cut_off_stream_is_a_typed_error(replay_server: ReplayServer) -> None:
    replay_server.queue(sse(start(), text_delta(0, "Half")))
    with pytest.raises(ProviderResponseError, match="without a finish"):
        asyncio.run(complete(provider(replay_server), Request([Message("user", "x")])))


def test_http_errors_are_provider_errors(replay_server: ReplayServer) -> None:
    error = {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: bad"},
    }
    replay_server.queue(json.dumps(error), status=400, content_type="application/json")
    with pytest.raises(ProviderError) as info:
        asyncio.run(complete(provider(replay_server), Request([Message("user", "x")])))
    assert info.value.status_code == 400 and "max_tokens: bad" in str(info.value)


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'plait\[anthropic\]'"):
        AnthropicProvider(api_key="sk-ant-test")


def test_model_settings_go_on_the_wire_and_the_served_model_comes_back(
    replay_server: ReplayServer,
) -> None:
    from plait.providers import ModelSettings

    replay_server.queue(TOOL_STREAM)
    settings = ModelSettings(
        max_tokens=64, top_p=0.9, tool_choice="required", stop=("END",), seed=3,
        extra_headers={"X-Trace": "t1"},
    )
    reply = asyncio.run(complete(provider(replay_server), settings.request(CONVERSATION, TOOLS)))
    seen = replay_server.requests[0]
    body = seen.body
    assert (body["max_tokens"], body["top_p"], body["stop_sequences"]) == (64, 0.9, ["END"])
    assert body["tool_choice"] == {"type": "any"} and "seed" not in body
    assert seen.headers["x-trace"] == "t1"
    assert (reply.model, reply.response_id) == (MODEL, "msg_01XFDUDYJgAACzvnptvVoYEL")


THINKING_STREAM = sse(
    start(),
    ev({"type": "content_block_start", "index": 0,
        "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
    ev({"type": "content_block_delta", "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "The file "}}),
    ev({"type": "content_block_delta", "index": 0,
        "delta": {"type": "thinking_delta", "thinking": "comes first."}}),
    ev({"type": "content_block_delta", "index": 0,
        "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA"}}),
    stop_block(0),
    ev({"type": "content_block_start", "index": 1,
        "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}}),
    stop_block(1),
    ev({"type": "content_block_start", "index": 2,
        "content_block": {"type": "tool_use", "id": "toolu_9", "name": "read_file", "input": {}}}),
    json_delta(2, '{"path": "notes.md"}'),
    stop_block(2),
    message_delta("tool_use", 40),
    ev({"type": "message_stop"}),
)
THOUGHT = {"type": "thinking", "thinking": "The file comes first.",
           "signature": "EqQBCgIYAhIM1gbcDa9GJwZA"}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}


def test_thinking_blocks_are_kept_whole_and_shown_as_reasoning(
    replay_server: ReplayServer,
) -> None:
    from plait.providers import ItemDone, ReasoningDelta

    replay_server.queue(THINKING_STREAM)
    reply = asyncio.run(complete(provider(replay_server), Request(CONVERSATION, TOOLS)))
    assert reply.reasoning == "The file comes first."
    assert reply.items == (ItemDone("anthropic", THOUGHT), ItemDone("anthropic", REDACTED))
    assert reply.tool_calls == (ToolCall("toolu_9", "read_file", {"path": "notes.md"}),)
    replay_server.queue(THINKING_STREAM)
    events = asyncio.run(_events(provider(replay_server), Request(CONVERSATION, TOOLS)))
    assert events[:2] == [ReasoningDelta("The file "), ReasoningDelta("comes first.")]


def test_kept_thinking_goes_back_first_in_its_turn_and_the_prefix_is_cached(
    replay_server: ReplayServer,
) -> None:
    replay_server.queue(sse(start(), message_delta("end_turn", 1), ev({"type": "message_stop"})))
    conversation = [
        Message("system", "You are terse."),
        Message("user", "What is in notes.md?"),
        Message("opaque", "", item=THOUGHT, format="anthropic"),
        Message("opaque", "", item={"type": "reasoning", "id": "rs_1"}, format="openai-responses"),
        Message("assistant", "", tool_calls=(ToolCall("toolu_9", "read_file",
                                                      {"path": "notes.md"}),)),
        Message("tool", "TODO: fix", tool_call_id="toolu_9", tool_name="read_file", ok=True),
    ]
    p = provider(replay_server)
    assert p.reads_formats == frozenset({"anthropic"})
    asyncio.run(complete(p, Request(conversation, TOOLS)))
    body = replay_server.requests[0].body
    cache = {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": "You are terse.", "cache_control": cache}]
    assert body["tools"][-1]["cache_control"] == cache and "cache_control" not in body["tools"][0]
    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            THOUGHT,  # verbatim, signature intact, before the tool use
            {"type": "tool_use", "id": "toolu_9", "name": "read_file",
             "input": {"path": "notes.md"}},
        ],
    }
    last = body["messages"][-1]["content"][-1]
    assert last["type"] == "tool_result" and last["cache_control"] == cache
    marks = json.dumps(body).count("cache_control")
    assert marks == 3  # the API allows four


def test_timeouts_and_retries_per_request_and_errors_name_the_url(
    replay_server: ReplayServer,
) -> None:
    for _ in range(3):
        replay_server.queue('{"type": "error", "error": {"type": "overloaded_error", '
                            '"message": "Overloaded"}}', 529, "application/json")
    with pytest.raises(ProviderError) as info:
        asyncio.run(complete(provider(replay_server),
                             Request([Message("user", "hi")], max_retries=1, timeout=5)))
    assert info.value.status_code == 529 and info.value.url == provider(replay_server).base_url
    assert replay_server.url in str(info.value)
    assert len(replay_server.requests) == 2  # the first try and one retry


def test_a_stream_with_invalid_json_is_a_provider_error(replay_server: ReplayServer) -> None:
    replay_server.queue(sse(start(), ("content_block_delta", '{"type": "content_block_delta",')))
    with pytest.raises(ProviderResponseError, match="invalid JSON"):
        asyncio.run(complete(provider(replay_server), Request([Message("user", "x")])))
