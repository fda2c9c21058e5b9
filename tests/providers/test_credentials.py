"""A provider chosen without its API key fails at once, naming the variable to set."""

from __future__ import annotations

import pytest

from plait.errors import MissingCredentialsError, ProviderError
from plait.providers import select_provider


@pytest.mark.parametrize(
    ("spec", "variable"), [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY")]
)
def test_a_provider_without_its_key_names_the_variable(
    spec: str, variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(MissingCredentialsError, match=variable) as caught:
        select_provider(env={"PLAIT_MODEL": spec})
    assert caught.value.variable == variable
    assert isinstance(caught.value, ProviderError)


def test_a_key_in_the_environment_is_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-x")
    assert select_provider(env={"PLAIT_MODEL": "anthropic"}).name == "anthropic"
