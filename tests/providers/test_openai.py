"""The OpenAI adapter against a local server replaying the chat-completions SSE wire format."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

from plait.errors import MissingDependencyError
from plait.providers import (
    SUMMARY_PREFIX,
    Finish,
    OpenAIProvider,
    ProviderError,
    ProviderResponseError,
    Request,
    StreamEvent,
    TextDelta,
    ToolArgumentsError,
    ToolCallDelta,
    ToolSpec,
    Usage,
    complete,
)
from plait.records import Message, ToolCall

from .conftest import ReplayServer, sse

pytest.importorskip("openai")


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> Any:
    """One chat.completion.chunk as OpenAI streams it."""
    body: dict[str, Any] = {
        "id": "chatcmpl-9xyz",
        "object": "chat.completion.chunk",
        "created": 1732000000,
        "model": "gpt-4o-mini-2024-07-18",
        "system_fingerprint": "fp_0ba0d124f1",
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        "usage": None,
    }
    body.update(extra)
    return (None, body)


def tool_delta(index: int, args: str, id: str | None = None, name: str | None = None) -> Any:
    call: dict[str, Any] = {"index": index, "function": {"arguments": args}}
    if id is not None:
        call.update(id=id, type="function")
        call["function"]["name"] = name
    return chunk({"tool_calls": [call]})


USAGE = {
    "prompt_tokens": 120,
    "completion_tokens": 31,
    "total_tokens": 151,
    "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
    "completion_tokens_details": {
        "reasoning_tokens": 0,
        "audio_tokens": 0,
        "accepted_prediction_tokens": 0,
        "rejected_prediction_tokens": 0,
    },
}

TOOL_STREAM = sse(
    chunk({"role": "assistant", "content": "", "refusal": None}),
    chunk({"content": "Let me "}),
    chunk({"content": "check."}),
    tool_delta(0, "", id="call_A1", name="read_file"),
    tool_delta(0, '{"path": "no'),
    tool_delta(0, 'tes.md"}'),
    tool_delta(1, "", id="call_B2", name="list_files"),
    tool_delta(1, '{"dir"'),
    tool_delta(1, ': "src"}'),
    chunk({}, "tool_calls"),
    chunk(None, usage=USAGE),
    (None, "[DONE]"),
)

CONVERSATION = [
    Message("system", "You are terse."),
    Message("summary", "The user is fixing a bug."),
    Message("user", "What is in notes.md?"),
    Message("assistant", "", (ToolCall("call_0", "read_file", {"path": "notes.md"}),)),
    Message("tool", "TODO: fix", tool_call_id="call_0", tool_name="read_file", ok=True),
    Message("assistant", "It says: TODO: fix"),
    Message("user", "And the rest?"),
]
TOOLS = [
    ToolSpec(
        "read_file",
        "Read a file.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolSpec("list_files", "List a directory."),
]


def provider(server: ReplayServer, **kw: Any) -> OpenAIProvider:
    return OpenAIProvider(
        "gpt-4o-mini", api_key="sk-test", base_url=server.url + "/v1", max_retries=0, **kw
    )


async def _events(p: OpenAIProvider, request: Request) -> list[StreamEvent]:
    return [e async for e in p.stream(request)]


def test_streams_text_tool_calls_and_usage(replay_server: ReplayServer) -> None:
    replay_server.queue(TOOL_STREAM)
    request = Request(CONVERSATION, TOOLS, max_tokens=256, temperature=0.2)
    events = asyncio.run(_events(provider(replay_server), request))
    assert events[:2] == [TextDelta("Let me "), TextDelta("check.")]
    assert events[2] == ToolCallDelta(0, "call_A1", "read_file", "")
    assert events[3] == ToolCallDelta(0, None, None, '{"path": "no')
    served = Finish("tool_calls", "gpt-4o-mini-2024-07-18", "chatcmpl-9xyz")
    assert events[-2:] == [Usage(120, 31, 64), served]

    seen = replay_server.requests[0]
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == "Bearer sk-test"
    body = seen.body
    assert body["model"] == "gpt-4o-mini" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 256 and body["temperature"] == 0.2
    assert body["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": SUMMARY_PREFIX + "The user is fixing a bug."},
        {"role": "user", "content": "What is in notes.md?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path":"notes.md"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": "TODO: fix"},
        {"role": "assistant", "content": "It says: TODO: fix"},
        {"role": "user", "content": "And the rest?"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file.",
                "parameters": {
                    "type": "object",
                    "properties": {"path": {"type": "string"}},
                    "required": ["path"],
                },
            },
        },
        {
            "type": "function",
            "function": {
                "name": "list_files",
                "description": "List a directory.",
                "parameters": {"type": "object", "properties": {}},
            },
        },
    ]


def test_complete_assembles_the_reply(replay_server: ReplayServer) -> None:
    replay_server.queue(TOOL_STREAM)
    reply = asyncio.run(complete(provider(replay_server), Request(CONVERSATION, TOOLS)))
    assert reply.text == "Let me check."
    assert reply.tool_calls == (
        ToolCall("call_A1", "read_file", {"path": "notes.md"}),
        ToolCall("call_B2", "list_files", {"dir": "src"}),
    )
    assert reply.usage == Usage(120, 31, 64) and reply.finish_reason == "tool_calls"
    body = replay_server.requests[0].body
    assert "max_tokens" not in body and "temperature" not in body


def test_request_model_and_openai_max_tokens_field(replay_server: ReplayServer) -> None:
    replay_server.queue(sse(chunk({"content": "ok"}), chunk({}, "length"), (None, "[DONE]")))
    p = provider(replay_server, max_tokens_field="max_completion_tokens")
    reply = asyncio.run(
        complete(
            p, Request([Message("user", "hi")], model="gpt-4.1", max_tokens=5, extra={"seed": 7})
        )
    )
    assert reply.finish_reason == "length" and reply.usage is None
    body = replay_server.requests[0].body
    assert body["model"] == "gpt-4.1" and body["max_completion_tokens"] == 5
    assert body["seed"] == 7 and "tools" not in body


def test_a_server_that_says_stop_after_tool_calls(replay_server: ReplayServer) -> None:
    # Ollama-style: the whole call in one chunk, then finish_reason "stop".
    whole = {
        "index": 0,
        "id": "call_x",
        "type": "function",
        "function": {"name": "list_files", "arguments": "{}"},
    }
    replay_server.queue(
        sse(
            chunk({"role": "assistant", "tool_calls": [whole]}), chunk({}, "stop"), (None, "[DONE]")
        )
    )
    reply = asyncio.run(complete(provider(replay_server), Request([Message("user", "ls")])))
    assert reply.finish_reason == "tool_calls"
    assert reply.tool_calls == (ToolCall("call_x", "list_files", {}),)


def test_invalid_tool_json_is_a_typed_error(replay_server: ReplayServer) -> None:
    replay_server.queue(
        sse(tool_delta(0, '{"path": ', id="c", name="read_file"), chunk({}, "tool_calls"))
    )
    with pytest.raises(ToolArgumentsError):
        asyncio.run(complete(provider(replay_server), Request([Message("user", "x")])))


def test_a_cut_off_stream_is_a_typed_error(replay_server: ReplayServer) -> None:
    replay_server.queue(sse(chunk({"content": "Half an ans"})))
    with pytest.raises(ProviderResponseError, match="without a finish"):
        asyncio.run(complete(provider(replay_server), Request([Message("user", "x")])))


def test_api_errors_are_provider_errors(replay_server: ReplayServer) -> None:
    error = {
        "error": {
            "message": "Incorrect API key provided: sk-test.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    replay_server.queue(json.dumps(error), status=401, content_type="application/json")
    with pytest.raises(ProviderError) as info:
        asyncio.run(complete(provider(replay_server), Request([Message("user", "x")])))
    assert info.value.status_code == 401 and info.value.provider == "openai"
    assert "Incorrect API key" in str(info.value)
    assert type(info.value.__cause__).__module__.startswith("openai")
    # The message names the server, so a misconfigured base URL is seen at once.
    assert info.value.url == provider(replay_server).base_url
    assert f"openai at {replay_server.url}" in str(info.value)


def test_a_refused_connection_names_the_url() -> None:
    p = OpenAIProvider("m", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=5)
    with pytest.raises(ProviderError, match=r"openai at http://127\.0\.0\.1:9/v1"):
        asyncio.run(complete(p, Request([Message("user", "x")])))


def test_reasoning_content_is_kept_apart_from_the_text(replay_server: ReplayServer) -> None:
    """llama.cpp and DeepSeek stream the model's thinking as ``reasoning_content``."""
    replay_server.queue(
        sse(
            chunk({"role": "assistant", "content": None, "reasoning_content": "Two and "}),
            chunk({"reasoning_content": "two: four."}),
            chunk({"content": "4"}),
            chunk({}, "stop"),
            (None, "[DONE]"),
        )
    )
    reply = asyncio.run(complete(provider(replay_server), Request([Message("user", "2+2?")])))
    assert (reply.text, reply.reasoning) == ("4", "Two and two: four.")


def test_timeout_and_retries_are_set_per_request(replay_server: ReplayServer) -> None:
    busy = json.dumps({"error": {"message": "busy", "type": "server_error"}})
    for _ in range(3):
        replay_server.queue(busy, status=503, content_type="application/json")
    request = Request([Message("user", "x")], max_retries=2, timeout=7.5)
    with pytest.raises(ProviderError) as info:
        asyncio.run(complete(provider(replay_server), request))  # the provider's own: 0
    assert info.value.status_code == 503
    assert len(replay_server.requests) == 3  # one try and the request's two retries
    assert replay_server.requests[0].headers.get("x-stainless-read-timeout") == "7.5"


def test_a_local_server_needs_no_key(
    replay_server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    replay_server.queue(sse(chunk({"content": "hi"}), chunk({}, "stop"), (None, "[DONE]")))
    p = OpenAIProvider("llama3.2", base_url=replay_server.url + "/v1", max_retries=0)
    assert asyncio.run(complete(p, Request([Message("user", "x")]))).text == "hi"


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'plait\[openai\]'"):
        OpenAIProvider(api_key="sk-test")


def test_model_settings_go_on_the_wire_and_the_served_model_comes_back(
    replay_server: ReplayServer,
) -> None:
    from plait.providers import ModelSettings

    replay_server.queue(TOOL_STREAM)
    settings = ModelSettings(
        max_tokens=20, top_p=0.5, tool_choice="read_file", stop=("END",), seed=3,
        extra_headers={"X-Trace": "t1"},
    )
    reply = asyncio.run(complete(provider(replay_server), settings.request(CONVERSATION, TOOLS)))
    seen = replay_server.requests[0]
    body = seen.body
    assert (body["max_tokens"], body["top_p"], body["stop"], body["seed"]) == (20, 0.5, ["END"], 3)
    assert body["tool_choice"] == {"type": "function", "function": {"name": "read_file"}}
    assert seen.headers["x-trace"] == "t1"
    assert (reply.model, reply.response_id) == ("gpt-4o-mini-2024-07-18", "chatcmpl-9xyz")
    replay_server.queue(TOOL_STREAM)
    asyncio.run(complete(provider(replay_server), ModelSettings(tool_choice="required").request(
        CONVERSATION, TOOLS)))
    assert replay_server.requests[1].body["tool_choice"] == "required"


def test_an_opaque_item_is_never_sent_as_a_chat_message() -> None:
    from plait.providers.openai import to_openai_messages

    thought = Message("opaque", "", item={"type": "reasoning", "id": "rs_1"},
                      format="openai-responses")
    assert to_openai_messages([Message("user", "hi"), thought]) == [
        {"role": "user", "content": "hi"}
    ]


def test_a_stream_with_invalid_json_is_a_provider_error(replay_server: ReplayServer) -> None:
    replay_server.queue(sse(chunk({"content": "Hi"}), (None, '{"choices": [{"delta":')))
    with pytest.raises(ProviderResponseError, match="invalid JSON"):
        asyncio.run(complete(provider(replay_server), Request([Message("user", "x")])))
