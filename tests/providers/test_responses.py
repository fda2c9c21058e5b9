"""The Responses API adapter against a local server replaying the Responses SSE wire format."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from plait.errors import ProviderError, ProviderResponseError
from plait.providers import (
    SUMMARY_PREFIX,
    Finish,
    ItemDone,
    OpenAIResponsesProvider,
    ReasoningDelta,
    Request,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    complete,
    select_provider,
)
from plait.records import Message, ToolCall

from .conftest import ReplayServer, sse

pytest.importorskip("openai")

MODEL = "gpt-5-mini"
RESPONSE = {"id": "resp_68a1", "object": "response", "model": "gpt-5-mini-2025-08-07",
            "status": "in_progress", "output": []}
REASONING = {
    "id": "rs_68a1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Need the file first."}],
    "encrypted_content": "gAAAAABo-opaque-blob",
}
USAGE = {
    "input_tokens": 310,
    "input_tokens_details": {"cached_tokens": 256},
    "output_tokens": 90,
    "output_tokens_details": {"reasoning_tokens": 64},
    "total_tokens": 400,
}


def ev(kind: str, **data: Any) -> tuple[str, dict[str, Any]]:
    return (kind, {"type": kind, **data})


def _seq(*events: tuple[str, dict[str, Any]]) -> str:
    return sse(*[(k, {**d, "sequence_number": i}) for i, (k, d) in enumerate(events)])


TOOL_STREAM = _seq(
    ev("response.created", response=RESPONSE),
    ev("response.output_item.added", output_index=0,
       item={"id": "rs_68a1", "type": "reasoning", "summary": []}),
    ev("response.reasoning_summary_text.delta", item_id="rs_68a1", output_index=0,
       summary_index=0, delta="Need the "),
    ev("response.reasoning_summary_text.delta", item_id="rs_68a1", output_index=0,
       summary_index=0, delta="file first."),
    ev("response.output_item.done", output_index=0, item=REASONING),
    ev("response.output_item.added", output_index=1,
       item={"id": "msg_1", "type": "message", "role": "assistant", "status": "in_progress",
             "content": []}),
    ev("response.output_text.delta", item_id="msg_1", output_index=1, content_index=0,
       delta="Reading "),
    ev("response.output_text.delta", item_id="msg_1", output_index=1, content_index=0,
       delta="it."),
    ev("response.output_item.added", output_index=2,
       item={"id": "fc_1", "type": "function_call", "call_id": "call_X", "name": "read_file",
             "arguments": "", "status": "in_progress"}),
    ev("response.function_call_arguments.delta", item_id="fc_1", output_index=2,
       delta='{"path": '),
    ev("response.function_call_arguments.delta", item_id="fc_1", output_index=2,
       delta='"notes.md"}'),
    ev("response.output_item.done", output_index=2,
       item={"id": "fc_1", "type": "function_call", "call_id": "call_X", "name": "read_file",
             "arguments": '{"path": "notes.md"}', "status": "completed"}),
    ev("response.completed", response={**RESPONSE, "status": "completed", "usage": USAGE}),
)

CONVERSATION = [
    Message("system", "You are terse."),
    Message("summary", "The user is fixing a bug."),
    Message("user", "What is in notes.md?"),
    Message("assistant", "Reading it.", tool_calls=(ToolCall("call_X", "read_file",
                                                             {"path": "notes.md"}),)),
    Message("tool", "TODO: fix", tool_call_id="call_X", tool_name="read_file", ok=True),
]
TOOLS = [ToolSpec("read_file", "Read a file.",
                  {"type": "object", "properties": {"path": {"type": "string"}}})]


def provider(server: ReplayServer) -> OpenAIResponsesProvider:
    return OpenAIResponsesProvider(MODEL, api_key="sk-test", base_url=server.url + "/v1",
                                   max_retries=0)


async def _events(p: OpenAIResponsesProvider, request: Request) -> list[StreamEvent]:
    return [e async for e in p.stream(request)]


def test_streams_reasoning_text_calls_and_usage(replay_server: ReplayServer) -> None:
    replay_server.queue(TOOL_STREAM)
    request = Request(CONVERSATION, TOOLS, max_tokens=500, temperature=0.5, tool_choice="auto",
                      stop=("END",), seed=3)
    events = asyncio.run(_events(provider(replay_server), request))
    assert events[:2] == [ReasoningDelta("Need the "), ReasoningDelta("file first.")]
    assert events[2] == ItemDone("openai-responses", REASONING)
    assert events[3:5] == [TextDelta("Reading "), TextDelta("it.")]
    assert events[5] == ToolCallDelta(0, "call_X", "read_file", "")
    assert events[-2:] == [
        Usage(310, 90, 256),
        Finish("tool_calls", "gpt-5-mini-2025-08-07", "resp_68a1"),
    ]
    seen = replay_server.requests[0]
    assert seen.path == "/v1/responses"
    body = seen.body
    assert body["model"] == MODEL and body["stream"] is True and body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["max_output_tokens"] == 500 and body["temperature"] == 0.5
    assert "stop" not in body and "seed" not in body  # the API takes neither
    assert body["tools"] == [{"type": "function", "name": "read_file",
                              "description": "Read a file.",
                              "parameters": {"type": "object",
                                             "properties": {"path": {"type": "string"}}}}]
    assert body["tool_choice"] == "auto"
    assert body["input"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": SUMMARY_PREFIX + "The user is fixing a bug."},
        {"role": "user", "content": "What is in notes.md?"},
        {"role": "assistant", "content": "Reading it."},
        {"type": "function_call", "call_id": "call_X", "name": "read_file",
         "arguments": '{"path":"notes.md"}'},
        {"type": "function_call_output", "call_id": "call_X", "output": "TODO: fix"},
    ]


def test_complete_assembles_reasoning_and_items(replay_server: ReplayServer) -> None:
    replay_server.queue(TOOL_STREAM)
    reply = asyncio.run(complete(provider(replay_server), Request(CONVERSATION, TOOLS)))
    assert reply.text == "Reading it." and reply.reasoning == "Need the file first."
    assert reply.tool_calls == (ToolCall("call_X", "read_file", {"path": "notes.md"}),)
    assert reply.items == (ItemDone("openai-responses", REASONING),)
    assert reply.finish_reason == "tool_calls" and reply.response_id == "resp_68a1"


def test_an_incomplete_response_is_cut_at_its_limit(replay_server: ReplayServer) -> None:
    replay_server.queue(_seq(
        ev("response.created", response=RESPONSE),
        ev("response.output_text.delta", item_id="m", output_index=0, content_index=0,
           delta="Once upon"),
        ev("response.incomplete", response={**RESPONSE, "status": "incomplete", "usage": USAGE,
                                            "incomplete_details": {"reason": "max_output_tokens"}}),
    ))
    reply = asyncio.run(complete(provider(replay_server), Request([Message("user", "Story?")])))
    assert (reply.text, reply.finish_reason) == ("Once upon", "length")


def test_failures_are_provider_errors_naming_the_server(replay_server: ReplayServer) -> None:
    replay_server.queue(_seq(
        ev("response.created", response=RESPONSE),
        ev("response.failed", response={**RESPONSE, "status": "failed",
                                        "error": {"code": "server_error", "message": "boom"}}),
    ))
    with pytest.raises(ProviderError, match="server_error: boom") as info:
        asyncio.run(complete(provider(replay_server), Request([Message("user", "hi")])))
    assert info.value.url is not None and replay_server.url in info.value.url
    replay_server.queue('{"error": {"message": "bad model"}}', 400, "application/json")
    with pytest.raises(ProviderError) as info:
        asyncio.run(complete(provider(replay_server), Request([Message("user", "hi")])))
    assert info.value.status_code == 400 and replay_server.url in str(info.value)


def test_a_kept_reasoning_item_is_sent_back_as_it_came(replay_server: ReplayServer) -> None:
    replay_server.queue(_seq(
        ev("response.created", response=RESPONSE),
        ev("response.output_text.delta", item_id="m", output_index=0, content_index=0,
           delta="Done."),
        ev("response.completed", response={**RESPONSE, "status": "completed", "usage": USAGE}),
    ))
    p = provider(replay_server)
    assert "openai-responses" in p.reads_formats
    kept = Message("opaque", "", item=REASONING, format="openai-responses")
    other = Message("opaque", "", item={"type": "thinking"}, format="anthropic")
    asyncio.run(complete(p, Request([Message("user", "Read notes.md"), kept, other])))
    assert replay_server.requests[0].body["input"] == [
        {"role": "user", "content": "Read notes.md"},
        REASONING,  # exactly as it came; another provider's item is not sent
    ]


def test_the_model_spec_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    chosen = select_provider("openai-responses:gpt-5-mini")
    assert isinstance(chosen, OpenAIResponsesProvider) and chosen.model == "gpt-5-mini"


def test_a_run_keeps_the_reasoning_item_and_sends_it_back(
    replay_server: ReplayServer, tmp_path: Any
) -> None:
    """Reasoning, tool call, result: the next request carries the reasoning item verbatim."""
    from plait import Client
    from plait.tools import tool

    @tool(read_only=True)
    def read_file(path: str) -> str:
        """Read a file."""
        return "TODO: fix"

    replay_server.queue(TOOL_STREAM)
    replay_server.queue(_seq(
        ev("response.created", response=RESPONSE),
        ev("response.output_text.delta", item_id="m", output_index=0, content_index=0,
           delta="It says TODO."),
        ev("response.completed", response={**RESPONSE, "status": "completed", "usage": USAGE}),
    ))
    with Client(tmp_path, store=tmp_path / "p.db") as client:
        s = client.sessions.create()
        result = asyncio.run(s.prompt("What is in notes.md?", provider=provider(replay_server),
                                      tools=[read_file]))
        assert result.text == "It says TODO."
        kinds = [r.kind for r in s.transcript.records]
        assert kinds == ["user", "opaque", "assistant", "tool", "assistant"]
        reply = s.transcript.records[2]
        assert reply.meta["reasoning"] == "Need the file first."
        assert [m.role for m in s.history()] == ["user", "assistant", "tool", "assistant"]
    second = replay_server.requests[1].body["input"]
    assert second[1] == REASONING
    assert [i.get("type", i.get("role")) for i in second] == [
        "user", "reasoning", "assistant", "function_call", "function_call_output"
    ]


def test_a_stored_response_asks_for_no_encrypted_reasoning(replay_server: ReplayServer) -> None:
    replay_server.queue(TOOL_STREAM)
    p = OpenAIResponsesProvider(MODEL, api_key="sk-test", base_url=replay_server.url + "/v1",
                                max_retries=0, store=True)
    asyncio.run(complete(p, Request([Message("user", "hi")])))
    body = replay_server.requests[0].body
    assert body["store"] is True and "include" not in body


def test_a_stream_with_invalid_json_is_a_provider_error(replay_server: ReplayServer) -> None:
    replay_server.queue(sse(("response.output_text.delta", '{"type": "response.output_')))
    with pytest.raises(ProviderResponseError, match="invalid JSON"):
        asyncio.run(complete(provider(replay_server), Request([Message("user", "x")])))
