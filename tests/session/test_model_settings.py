"""Model settings: one typed object, validated, sent with every model call, kept by the session."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from plait import Client
from plait.errors import InvalidArgumentError, UnknownOptionError
from plait.providers import ModelSettings, Reply, ScriptedProvider
from plait.records import ToolCall


def test_settings_are_checked_and_round_trip() -> None:
    s = ModelSettings(max_tokens=20, temperature=0.5, stop=["END"], extra_body={"k": 1})
    assert s.stop == ("END",) and s.temperature == 0.5
    assert ModelSettings.from_json(s.to_json()) == s
    with pytest.raises(UnknownOptionError):
        ModelSettings.from_json({"max_token": 20})
    for bad in ({"max_tokens": 0}, {"temperature": 3}, {"top_p": -0.1}, {"stop": [""]},
                {"max_tokens": True}, {"extra_headers": {"x": 1}}, {"tool_choice": ""}):
        with pytest.raises(InvalidArgumentError):
            ModelSettings.from_json(bad)


def test_over_lays_the_set_fields_over_a_base() -> None:
    base = ModelSettings(max_tokens=100, temperature=0.2, extra_body={"a": 1})
    top = ModelSettings(temperature=0.9, extra_body={"b": 2})
    both = top.over(base)
    assert (both.max_tokens, both.temperature) == (100, 0.9)
    assert both.extra_body == {"a": 1, "b": 2}


def test_a_run_sends_its_settings_and_the_session_keeps_them(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}]).to("local")
    provider = ScriptedProvider(["one", "two"])
    asyncio.run(s.prompt("go", provider=provider, tools=[],
                         model_settings={"max_tokens": 20, "stop": ["\n\n"], "seed": 7}))
    sent = provider.requests[0]
    assert (sent.max_tokens, sent.stop, sent.seed) == (20, ("\n\n",), 7)
    assert s.settings.model_settings == ModelSettings(max_tokens=20, stop=("\n\n",), seed=7)
    # The next run needs none: it goes on with what the session keeps, a new value wins.
    asyncio.run(s.prompt("again", provider=provider, tools=[],
                         model_settings={"max_tokens": 40}))
    assert (provider.requests[1].max_tokens, provider.requests[1].seed) == (40, 7)
    s.settings.set_model_settings(None)
    assert s.settings.model_settings == ModelSettings()


def test_bad_settings_refuse_the_run_and_write_nothing(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    before = s.live.version
    with pytest.raises(UnknownOptionError):
        s.stream("go", provider=ScriptedProvider([]), model_settings={"nope": 1})
    with pytest.raises(InvalidArgumentError, match="not offered"):
        s.stream("go", provider=ScriptedProvider([]), tools=[],
                 model_settings={"tool_choice": "shell"})
    assert s.live.refresh().live.version == before


def test_a_forced_tool_call_is_forced_once(client: Client, tmp_path: Path) -> None:
    box = tmp_path / "box"
    box.mkdir()
    s = client.sessions.create([{"role": "user", "content": "hi"}]).to("local", spec=str(box))
    provider = ScriptedProvider([
        Reply(tool_calls=(ToolCall("c1", "list_files", {}),), finish_reason="tool_calls"),
        Reply(text="done"),
    ])
    result = asyncio.run(s.prompt("look", provider=provider,
                                  model_settings={"tool_choice": "list_files"}))
    assert result.text == "done"
    assert [r.tool_choice for r in provider.requests] == ["list_files", None]
    assert s.settings.model_settings.tool_choice is None  # a tool choice is not kept for later runs


def test_set_settings_checks_model_settings_as_set_model_settings_does(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    s.settings.set(model_settings={"max_tokens": 20})
    before = s.live.version
    with pytest.raises(InvalidArgumentError, match="max_tokens must be between"):
        s.settings.set(model_settings={"max_tokens": -1})
    with pytest.raises(UnknownOptionError):
        s.settings.set(model_settings={"nope": 1})
    with pytest.raises(InvalidArgumentError, match="must be an object"):
        s.settings.set(model_settings="fast")
    assert s.live.refresh().live.version == before
    assert s.settings.model_settings == ModelSettings(max_tokens=20)  # still readable, still kept
