"""A model server that streams without end, or sends only keep-alives, never holds a run.

The server here writes chat-completions SSE until the client goes away (or, so that the
old behaviour fails instead of hanging, until it has written far more than any cap). What
is asserted is how the run ended and what it recorded, and that the server saw its
connection closed long before its own limit: never how long anything took.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from plait import Client
from plait.errors import ProviderStalledError, ReplyTooLargeError
from plait.providers import ModelSettings, Reply, ScriptedProvider
from plait.records import ToolCall

pytest.importorskip("openai")

_HARD_STOP = 64 * 1024 * 1024
"""Bytes the server writes before it gives up by itself (the old code read them all)."""
_SLOW_PIECES = 2000
"""Keep-alives (one each 10 ms) a slow stream sends before it gives up by itself."""


@dataclass
class Endless:
    url: str = ""
    mode: str = "text"
    sent: int = 0
    pieces: int = 0
    closed_by_client: bool = False


def _chunk(delta: dict[str, Any], usage: dict[str, Any] | None = None) -> bytes:
    body = {
        "id": "chatcmpl-endless",
        "object": "chat.completion.chunk",
        "created": 1732000000,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": None}] if delta else [],
        "usage": usage,
    }
    return f"data: {json.dumps(body)}\n\n".encode()


@pytest.fixture
def endless() -> Iterator[Endless]:
    state = Endless()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # no length: the body is what comes until the close

        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.path != "/v1/chat/completions":  # what the server says of its model
                return self._answer_endlessly() if state.mode == "probe" else self.send_error(404)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            if state.mode == "text":
                first, piece = b"", _chunk({"content": "x" * 4000})
            elif state.mode == "arguments":
                call = {"index": 0, "id": "call_1", "type": "function",
                        "function": {"name": "echo", "arguments": '{"text": "'}}
                first = _chunk({"tool_calls": [call]})
                more = {"index": 0, "function": {"arguments": "y" * 4000}}
                piece = _chunk({"tool_calls": [more]})
            elif state.mode == "usage":
                first, piece = _chunk({"content": "Hel"}), _chunk({}, {"prompt_tokens": 1,
                                                                       "completion_tokens": 1})
            else:  # keep-alive comments only
                first, piece = b"", b": keep-alive\n\n"
            pause = 0.0 if state.mode in ("text", "arguments") else 0.01
            try:
                self.wfile.write(first)
                for n in range(_HARD_STOP):
                    if state.sent >= _HARD_STOP or (pause and n >= _SLOW_PIECES):
                        break
                    self.wfile.write(piece)
                    self.wfile.flush()
                    state.sent += len(piece)
                    state.pieces += 1
                    time.sleep(pause)
            except OSError:
                state.closed_by_client = True

        def do_GET(self) -> None:
            self.do_POST()

        def _answer_endlessly(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.end_headers()
            sent = 0  # each answer counts apart: the most one answer wrote is kept
            try:
                self.wfile.write(b'{"parameters": "')
                while sent < _HARD_STOP:
                    self.wfile.write(b"n" * 65536)
                    sent += 65536
                    state.sent = max(state.sent, sent)
            except OSError:
                state.closed_by_client = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _provider(server: Endless) -> Any:
    from plait.providers import OpenAIProvider

    return OpenAIProvider("gpt-4o-mini", api_key="sk-test", base_url=server.url, max_retries=0)


def test_a_reply_streamed_without_end_stops_at_its_cap_recorded_and_resumable(
    client: Client, endless: Endless
) -> None:
    s = client.sessions.create()
    settings = ModelSettings(max_reply_chars=100_000)
    with pytest.raises(ReplyTooLargeError) as caught:
        asyncio.run(s.prompt("talk", provider=_provider(endless), model_settings=settings))
    assert (caught.value.what, caught.value.limit) == ("text", 100_000)
    last = s.transcript.records[-1]
    assert last.kind == "assistant" and last.meta["finish_reason"] == "error"
    assert last.text == "x" * 100_000  # what arrived, cut to the cap, and no more
    assert "passed the limit of 100,000 characters" in last.meta["error"]
    info = s.resumable()
    assert info is not None and info.kind == "retry_response"
    # The run closed the stream: the server never got near writing all it would.
    assert endless.sent < _HARD_STOP
    # And it resumes: the model is asked again and its answer ends the run.
    done = asyncio.run(s.resume(provider=ScriptedProvider(["Short."])))
    assert done.text == "Short." and s.resumable() is None


def test_a_tool_call_whose_arguments_never_end_stops_at_its_cap(
    client: Client, endless: Endless
) -> None:
    endless.mode = "arguments"
    s = client.sessions.create()
    settings = ModelSettings(max_tool_arguments_chars=50_000)
    with pytest.raises(ReplyTooLargeError) as caught:
        asyncio.run(s.prompt("call", provider=_provider(endless), model_settings=settings))
    assert (caught.value.what, caught.value.limit) == ("tool call arguments", 50_000)
    last = s.transcript.records[-1]
    assert last.kind == "assistant" and last.meta["finish_reason"] == "error"
    assert not last.tool_calls  # no half call is ever recorded, nor run
    assert s.resumable() is not None and s.resumable().kind == "retry_response"
    assert endless.sent < _HARD_STOP


@pytest.mark.parametrize("mode", ["keepalive", "usage"])
def test_a_stream_that_sends_nothing_new_ends_the_run_with_a_stalled_error(
    client: Client, endless: Endless, mode: str
) -> None:
    endless.mode = mode
    s = client.sessions.create()
    settings = ModelSettings(idle_timeout=0.3)
    with pytest.raises(ProviderStalledError) as caught:
        asyncio.run(s.prompt("hello?", provider=_provider(endless), model_settings=settings))
    assert caught.value.idle_timeout == 0.3
    last = s.transcript.records[-1]
    # Recorded even with nothing (or little) said: the transcript tells why the run ended.
    assert last.kind == "assistant" and last.meta["finish_reason"] == "error"
    assert last.text == ("Hel" if mode == "usage" else "")
    assert "idle timeout" in last.meta["error"]
    assert s.resumable() is not None and s.resumable().kind == "retry_response"
    assert endless.pieces < _SLOW_PIECES  # the run let go before the server gave up


def test_a_tool_output_past_its_cap_is_cut_and_says_so(client: Client) -> None:
    from plait.tools import tool

    @tool
    def flood() -> str:
        """Say a lot."""
        return "z" * 5000

    s = client.sessions.create()
    provider = ScriptedProvider([
        Reply(tool_calls=(ToolCall("c1", "flood", {}),), finish_reason="tool_calls"),
        "Done.",
    ])
    asyncio.run(s.prompt("go", provider=provider, tools=[flood],
                         model_settings=ModelSettings(max_tool_output_chars=1000)))
    result = next(m for m in s.history() if m.role == "tool")
    assert result.text == "z" * 1000 + "\n[... 4,000 more characters cut]"
    assert provider.requests[1].messages[-1].text == result.text


def test_caps_and_idle_timeout_are_checked_settings() -> None:
    from plait.errors import InvalidArgumentError

    for bad in ({"max_reply_chars": 0}, {"max_tool_output_chars": True},
                {"idle_timeout": -1}, {"max_tool_arguments_chars": "big"}):
        with pytest.raises(InvalidArgumentError):
            ModelSettings.from_json(bad)
    kept = ModelSettings(max_reply_chars=10, idle_timeout=5).to_json()
    assert ModelSettings.from_json(kept).request([], []).max_reply_chars == 10


def test_a_server_that_describes_its_model_without_end_declares_nothing(endless: Endless) -> None:
    endless.mode = "probe"
    assert asyncio.run(_provider(endless).limits()) is None
    assert endless.sent < _HARD_STOP  # each answer was let go past its bound
