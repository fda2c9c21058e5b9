"""Model limits: read from the server where it says, overridable, used by auto-compaction."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from plait import Client
from plait.context import (
    ModelLimits,
    bare_model_name,
    encoding_for,
    limits_from_env,
    model_info,
)
from plait.errors import InvalidArgumentError, UnknownOptionError
from plait.providers import OpenAIProvider, ScriptedProvider, declared_limits
from plait.providers._served import from_models_list, from_ollama_show, from_props

from .conftest import ReplayServer, sse
from .test_openai import chunk

pytest.importorskip("openai")

# What the servers answer, trimmed to the fields around the ones read.
VLLM_MODELS = {
    "object": "list",
    "data": [
        {
            "id": "Qwen/Qwen2.5-7B-Instruct",
            "object": "model",
            "created": 1732000000,
            "owned_by": "vllm",
            "root": "Qwen/Qwen2.5-7B-Instruct",
            "parent": None,
            "max_model_len": 32768,
            "permission": [],
        }
    ],
}
OPENROUTER_MODELS = {
    "data": [
        {
            "id": "mistralai/mistral-small",
            "context_length": 32000,
            "top_provider": {"context_length": 32000, "max_completion_tokens": 8192},
        },
        {"id": "other/model", "context_length": 4096},
    ]
}
LLAMA_MODELS = {  # llama.cpp lists its one model by file name, with the training length only
    "object": "list",
    "data": [{"id": "SmolLM2.gguf", "object": "model", "meta": {"n_ctx_train": 8192}}],
}
LLAMA_PROPS = {
    "default_generation_settings": {"n_ctx": 2048, "params": {"n_predict": -1}},
    "total_slots": 1,
    "model_path": "/models/SmolLM2.gguf",
}
OLLAMA_SHOW = {
    "modelfile": "FROM qwen2.5:7b-instruct",
    "parameters": 'num_ctx                        8192\nstop                  "<|im_end|>"',
    "model_info": {"general.architecture": "qwen2", "qwen2.context_length": 32768},
}


@pytest.mark.parametrize(
    ("name", "bare"),
    [
        ("gpt-oss:20b", "gpt-oss"),
        ("qwen2.5:7b-instruct", "qwen2.5"),
        ("openai:gpt-oss:20b", "gpt-oss"),
        ("azure:gpt-4o", "gpt-4o"),
        ("openai/gpt-4o-mini", "gpt-4o-mini"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b-instruct"),
        ("us.anthropic.claude-3-5-sonnet-20240620-v1:0", "claude-3-5-sonnet-20240620-v1"),
        ("", ""),
    ],
)
def test_a_tag_is_not_a_provider_prefix(name: str, bare: str) -> None:
    assert bare_model_name(name) == bare


def test_tagged_models_find_their_family() -> None:
    assert model_info("gpt-oss:20b").family == "gpt-oss"
    assert encoding_for("gpt-oss:20b") == "o200k_base"
    assert model_info("openai:gpt-4o").family == "gpt-4o"
    assert model_info("bedrock:anthropic.claude-3-haiku-20240307-v1:0").family == "claude"
    assert model_info("qwen2.5:7b-instruct").source == "guess"  # no family knows it: said so


def test_what_each_server_says_is_read() -> None:
    vllm = from_models_list(VLLM_MODELS, "Qwen/Qwen2.5-7B-Instruct")
    assert vllm == ModelLimits(context_window=32768)
    routed = from_models_list(OPENROUTER_MODELS, "mistralai/mistral-small")
    assert routed == ModelLimits(context_window=32000, output_limit=8192)
    assert from_models_list(OPENROUTER_MODELS, "not/listed") is None  # two entries: no guess
    assert from_models_list(LLAMA_MODELS, "anything") is None  # n_ctx_train is not the window
    assert from_props(LLAMA_PROPS) == ModelLimits(context_window=2048)
    assert from_props({"n_ctx": 4096}) == ModelLimits(context_window=4096)
    assert from_ollama_show(OLLAMA_SHOW) == ModelLimits(context_window=8192)
    no_num_ctx = {k: v for k, v in OLLAMA_SHOW.items() if k != "parameters"}
    assert from_ollama_show(no_num_ctx) == ModelLimits(context_window=32768)
    for junk in (None, [], "x", {"data": "x"}, {"default_generation_settings": {"n_ctx": -1}}):
        assert from_models_list(junk, "m") is None and from_props(junk) is None
        assert from_ollama_show(junk) is None


def _provider(server: ReplayServer, model: str = "smollm2", **kw: Any) -> OpenAIProvider:
    return OpenAIProvider(model, base_url=server.url + "/v1", max_retries=0, **kw)


def test_llama_cpp_props_give_the_window_once(replay_server: ReplayServer) -> None:
    replay_server.route("GET", "/v1/models", LLAMA_MODELS)
    replay_server.route("GET", "/props", LLAMA_PROPS)
    provider = _provider(replay_server)
    assert asyncio.run(provider.limits()) == ModelLimits(context_window=2048)
    asked = [(r.method, r.path) for r in replay_server.requests]
    assert asked == [("GET", "/v1/models"), ("GET", "/props")]
    assert asyncio.run(declared_limits(provider)) == ModelLimits(context_window=2048)
    assert len(replay_server.requests) == 2  # asked once per model


def test_vllm_model_list_and_ollama_show(replay_server: ReplayServer) -> None:
    replay_server.route("GET", "/v1/models", VLLM_MODELS)
    vllm = _provider(replay_server, "Qwen/Qwen2.5-7B-Instruct")
    assert asyncio.run(vllm.limits()) == ModelLimits(context_window=32768)
    replay_server.routes.clear()
    replay_server.route("GET", "/v1/models", {"object": "list", "data": []})
    replay_server.route("POST", "/api/show", OLLAMA_SHOW)
    ollama = _provider(replay_server, "qwen2.5:7b-instruct")
    assert asyncio.run(ollama.limits()) == ModelLimits(context_window=8192)
    show = replay_server.requests[-1]
    assert (show.method, show.path, show.body) == (
        "POST",
        "/api/show",
        {"model": "qwen2.5:7b-instruct"},
    )


def test_a_server_that_says_nothing_declares_nothing(replay_server: ReplayServer) -> None:
    replay_server.route("POST", "/api/show", {"error": "not found"}, status=404)
    assert asyncio.run(_provider(replay_server).limits()) is None
    given = _provider(replay_server, output_limit=512)
    assert asyncio.run(given.limits()) == ModelLimits(output_limit=512)
    # A window given at construction is not asked for.
    before = len(replay_server.requests)
    told = _provider(replay_server, context_window=4096)
    assert asyncio.run(told.limits()) == ModelLimits(context_window=4096)
    assert len(replay_server.requests) == before
    assert asyncio.run(_provider(replay_server, ask_server=False).limits()) is None
    assert len(replay_server.requests) == before


def test_limits_are_checked_and_the_environment_is_read() -> None:
    with pytest.raises(UnknownOptionError):
        ModelLimits.from_json({"window": 8192})
    with pytest.raises(InvalidArgumentError):
        ModelLimits.from_json({"context_window": "big"})
    with pytest.raises(InvalidArgumentError):
        ModelLimits(tokenizer="llama3")  # type: ignore[arg-type]
    env = {"PLAIT_CONTEXT_WINDOW": "8_192", "PLAIT_TOKENIZER": "o200k_base"}
    assert limits_from_env(env) == ModelLimits(context_window=8192, tokenizer="o200k_base")
    with pytest.raises(InvalidArgumentError, match="PLAIT_OUTPUT_LIMIT"):
        limits_from_env({"PLAIT_OUTPUT_LIMIT": "lots"})
    info = model_info(
        "qwen2.5:7b",
        settings=ModelLimits(output_limit=256),
        env=ModelLimits(context_window=16384),
        declared=ModelLimits(context_window=8192, output_limit=1024),
    )
    assert (info.window, info.output_limit, info.source) == (16384, 256, "environment")


def _session_near(client: Client, words: int) -> Any:
    """A session of twenty messages of ``words`` tokens each (and a system prompt)."""
    s = client.sessions.create([{"role": "system", "content": "You are terse."}])
    s.transcript.inject_many(
        [
            {"role": "user" if i % 2 == 0 else "assistant", "content": "word " * words}
            for i in range(20)
        ]
    )
    return s


def test_session_settings_beat_the_environment_and_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Client(tmp_path, store=tmp_path / "p.db") as client:
        s = _session_near(client, 10)
        assert s.settings.model_info("qwen2.5:7b").window == 128_000
        before = s.context("qwen2.5:7b")
        assert before is not None and before.window_source == "guess"  # no family knows it
        declared = ModelLimits(context_window=2048)
        assert s.settings.model_info("qwen2.5:7b", declared=declared).source == "server"
        monkeypatch.setenv("PLAIT_CONTEXT_WINDOW", "4096")
        assert s.settings.model_info("qwen2.5:7b", declared=declared).window == 4096
        from_env = s.context("qwen2.5:7b")
        assert from_env is not None and (from_env.window, from_env.window_source) == (
            4096,
            "environment",
        )
        s.settings.set(model_info={"context_window": 1024, "tokenizer": "o200k_base"})
        found = s.settings.model_info("qwen2.5:7b", declared=declared)
        assert (found.window, found.encoding, found.source) == (1024, "o200k_base", "settings")
        report = s.context("qwen2.5:7b")
        assert report is not None and (report.window, report.window_source) == (1024, "settings")
        with pytest.raises(InvalidArgumentError):
            s.settings.set(model_info={"context_window": 0})
        assert s.settings["model_info"] == {"context_window": 1024, "tokenizer": "o200k_base"}


def test_room_for_the_reply_brings_compaction_forward(tmp_path: Path) -> None:
    with Client(tmp_path, store=tmp_path / "p.db") as client:
        s = _session_near(client, 70)  # ~1,450 tokens
        window = ModelLimits(context_window=2048)  # 80 % is 1,638
        assert not s.transcript.compaction_due("m", declared=window)
        assert s.transcript.compaction_due("m", declared=window, reserve=400)
        with_limit = ModelLimits(context_window=2048, output_limit=400)
        assert s.transcript.compaction_due("m", declared=with_limit)


def test_a_run_compacts_before_the_servers_window_is_full(
    replay_server: ReplayServer, tmp_path: Path
) -> None:
    """A 2,048-token llama.cpp server: the run compacts first instead of meeting its 400."""
    replay_server.route("GET", "/props", LLAMA_PROPS)
    replay_server.queue(sse(chunk({"content": "Earlier: words."}, "stop"), (None, "[DONE]")))
    replay_server.queue(sse(chunk({"content": "Done."}, "stop"), (None, "[DONE]")))
    with Client(tmp_path, store=tmp_path / "p.db") as client:
        s = _session_near(client, 90)  # ~1,850 tokens: under 8k, over 75 % of 2,048
        assert not s.transcript.compaction_due("smollm2")
        result = asyncio.run(s.prompt("And now?", provider=_provider(replay_server), tools=[]))
        assert result.text == "Done."
        assert any(r.kind == "summary" for r in s.transcript.records)
        reply = s.transcript.records[-1]
        assert reply.meta["model_limits"] == {"context_window": 2048}
        report = s.context()  # read later, without asking the server: the window it said
        assert report is not None and report.window == 2048
    posts = [r for r in replay_server.requests if r.method == "POST"]
    answered = posts[-1].body["messages"]
    assert any("Earlier: words." in str(m.get("content")) for m in answered)
    assert answered[-1] == {"role": "user", "content": "And now?"}


def test_a_scripted_provider_declares_what_it_was_given() -> None:
    provider = ScriptedProvider(["ok"], context_window=4096)
    assert asyncio.run(declared_limits(provider)) == ModelLimits(context_window=4096)
    assert asyncio.run(declared_limits(ScriptedProvider(["ok"]))) is None


def test_bad_arguments_are_typed_errors(tmp_path: Path) -> None:
    with Client(tmp_path, store=tmp_path / "p.db") as client:
        s = _session_near(client, 5)
        with pytest.raises(InvalidArgumentError):
            s.settings.model_info(123)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            s.transcript.compaction_due("m", reserve=-1)
        with pytest.raises(InvalidArgumentError):
            s.context("m", declared="big")  # type: ignore[arg-type]
        given = s.settings.model_info("m", declared={"context_window": 4096})
        assert given.window == 4096


def test_an_answer_is_remembered_across_providers(
    replay_server: ReplayServer,
) -> None:
    replay_server.route("GET", "/props", LLAMA_PROPS)
    assert asyncio.run(_provider(replay_server, "m1").limits()) == ModelLimits(context_window=2048)
    asked = len(replay_server.requests)
    # A service makes a provider per run: the next one does not ask again.
    assert asyncio.run(_provider(replay_server, "m1").limits()) == ModelLimits(context_window=2048)
    assert len(replay_server.requests) == asked


def test_a_summary_is_bounded_by_the_window(tmp_path: Path) -> None:
    """A summary asked of the model may take an eighth of its window, never all of it."""
    from plait.session.context import summary_budget

    assert (summary_budget(2048), summary_budget(128_000), summary_budget(100)) == (256, 4096, 64)
    with Client(tmp_path, store=tmp_path / "p.db") as client:
        s = _session_near(client, 90)
        small = ScriptedProvider(["The user wrote words."], context_window=2048)
        asyncio.run(s.compact(provider=small))
        assert small.requests[-1].max_tokens == 256
        big = ScriptedProvider(["Still words."], model="gpt-4.1")
        s.transcript.inject_many([{"role": "user", "content": "more " * 50}] * 8)
        asyncio.run(s.compact(provider=big))
        assert big.requests[-1].max_tokens == 4096
