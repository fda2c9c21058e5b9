"""The OpenAI provider against a real OpenAI-compatible server: llama.cpp's, on 127.0.0.1.

Beside the wire-format replays: the server is llama.cpp's own (from the ``xllamacpp``
wheel CI installs) serving the embedded SmolLM2 model, so what is checked is what a user
of a local server meets: streaming, usage, the output limit, the window the server reads
out, a tool call made after a few-shot prefix, a cancelled stream, and a server killed in
the middle of a reply. Assertions hold for any wording of the model except the tool call's,
which is checked as the user gets it (the greedy reply of this model on this prefix).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from plait.errors import ProviderError
from plait.providers import (
    Finish,
    ModelSettings,
    OpenAIProvider,
    Request,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    complete,
)
from plait.providers.local import default_model_path
from plait.records import Message, ToolCall

pytest.importorskip("xllamacpp", reason="the [local] extra is not installed")
pytest.importorskip("openai", reason="the [openai] extra is not installed")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
QUESTION = [Message("user", "Write a long story about a lighthouse keeper.")]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _server() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.providers.llama_server", str(default_model_path()),
         str(port)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:  # listening is announced; wait until it answers
            try:
                urllib.request.urlopen(url + "/health", timeout=2).read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield url + "/v1", proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with _server() as (url, _):
        yield url


def _provider(url: str) -> OpenAIProvider:
    return OpenAIProvider("smollm2", base_url=url, max_retries=0, timeout=60)


def test_a_streamed_reply_stops_at_max_tokens(server: str) -> None:
    request = ModelSettings(max_tokens=20, temperature=0).request(QUESTION, [])

    async def main() -> list[object]:
        return [e async for e in _provider(server).stream(request)]

    events = asyncio.run(main())
    texts = [e for e in events if isinstance(e, TextDelta)]
    assert len(texts) >= 2  # it streamed, piece by piece
    usage = next(e for e in events if isinstance(e, Usage))
    assert 0 < usage.output_tokens <= 20 and usage.input_tokens > 0
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason == "length"
    assert finish.response_id  # the server's id for the response is kept


def test_the_servers_own_window_is_read(server: str) -> None:
    """llama.cpp's /props says the window it was started with (2,048, not SmolLM2's 8k)."""
    limits = asyncio.run(_provider(server).limits())
    assert limits is not None and limits.context_window == 2048


READ_FILE = ToolSpec(
    "read_file",
    "Read a file.",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


def _asked(n: int, path: str) -> list[Message]:
    call = ToolCall(f"shot{n}", "read_file", {"path": path})
    return [Message("user", f"What is in {path}?"), Message("assistant", "", tool_calls=(call,))]


def test_a_few_shot_prefix_gets_a_tool_call_and_its_result_read(server: str) -> None:
    """What a user of a local server sees: the server's parsed call, run, and answered.

    The prefix is two earlier questions answered by a ``read_file`` call each (a 135M model
    copies that pattern; told about the tool alone, it answers in prose). The third
    question's answer is checked as the API gave it: a streamed, structured call that
    plait assembles; then the tool's result goes back and the reply uses it.
    """
    provider = _provider(server)
    prefix = [Message("system", "You read files with the read_file tool.")]
    prefix += _asked(1, "a.md") + _asked(2, "b.txt")
    question = [*prefix, Message("user", "What is in notes.md?")]
    request = ModelSettings(max_tokens=60, temperature=0).request(question, [READ_FILE])

    async def main() -> list[object]:
        return [e async for e in provider.stream(request)]

    events = asyncio.run(main())
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert deltas and deltas[0].name == "read_file" and deltas[0].id
    finish = events[-1]
    assert isinstance(finish, Finish) and finish.reason == "tool_calls"
    reply = asyncio.run(complete(_provider(server), request))  # a client per event loop
    assert [(c.name, dict(c.arguments)) for c in reply.tool_calls] == [
        ("read_file", {"path": "notes.md"})
    ]
    call = reply.tool_calls[0]
    answered = [
        *question,
        Message("assistant", reply.text, tool_calls=reply.tool_calls),
        Message("tool", "Fix the lighthouse lamp.", tool_call_id=call.id,
                tool_name="read_file", ok=True),
    ]
    final = asyncio.run(
        complete(_provider(server), ModelSettings(max_tokens=40, temperature=0).request(
            answered, [READ_FILE]))
    )
    assert not final.tool_calls and final.finish_reason in ("stop", "length")
    assert "Fix the lighthouse lamp." in final.text  # the file's text reached the answer


def test_a_run_compacts_before_the_server_refuses_its_window(
    server: str, tmp_path: Path
) -> None:
    """Past 2,048 tokens the server answers 400; a run reads its window and compacts first."""
    from plait import Client

    history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"note {i}: " + "word " * 110}
        for i in range(20)
    ]
    whole = [Message(m["role"], m["content"]) for m in history] + [Message("user", "Hi.")]
    with pytest.raises(ProviderError) as refused:
        asyncio.run(complete(_provider(server), Request(whole, max_tokens=8)))
    assert refused.value.status_code == 400  # what a run without the server's window meets
    with Client(tmp_path, store=tmp_path / "p.db") as client:
        s = client.sessions.create(history)
        assert not s.transcript.compaction_due("smollm2")  # the family table alone says 8,192
        result = asyncio.run(
            s.prompt("Hi.", provider=_provider(server), tools=[], model_settings={"max_tokens": 8})
        )
        assert result.text
        assert any(r.kind == "summary" for r in s.transcript.records)


def test_a_cancelled_stream_leaves_the_server_serving(server: str) -> None:
    provider = _provider(server)

    async def cancel_after_two() -> None:
        seen = 0
        async for event in provider.stream(Request(QUESTION, max_tokens=400)):
            if isinstance(event, TextDelta):
                seen += 1
                if seen == 2:
                    raise asyncio.CancelledError

    async def main() -> None:
        task = asyncio.ensure_future(cancel_after_two())
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    reply = asyncio.run(complete(provider, Request([Message("user", "Say hi.")], max_tokens=8)))
    assert reply.text and reply.usage is not None


def test_a_server_killed_mid_reply_is_a_provider_error() -> None:
    with _server() as (url, proc):
        provider = _provider(url)

        async def main() -> None:
            seen = 0
            async for event in provider.stream(Request(QUESTION, max_tokens=500)):
                if isinstance(event, TextDelta):
                    seen += 1
                    if seen == 3:
                        proc.kill()

        with pytest.raises(ProviderError):
            asyncio.run(asyncio.wait_for(main(), timeout=60))


def test_plait_run_dash_o_max_tokens_stops_at_the_limit(server: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "OPENAI_BASE_URL": server,
        "PLAIT_HOME": str(tmp_path),
        "PLAIT_MODEL": "openai:smollm2",
    }
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-m", "plait", "run", "--json", "--no-tools",
         "-o", "max_tokens", "20", "Write a long story about a lighthouse keeper."],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 3, done.stderr  # stopped at a limit: the answer is incomplete
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    result = lines[-1]
    assert result["type"] == "result" and result["finish_reason"] == "length"
    assert result["complete"] is False
    assert 0 < result["usage"]["output_tokens"] <= 20
