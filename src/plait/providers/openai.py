"""OpenAI-compatible chat completions, through the official ``openai`` SDK (``[openai]`` extra).

Works with OpenAI itself and with any server that speaks the chat-completions
wire format (vLLM, Ollama, llama.cpp's server, ...): give ``base_url``.

How plait messages are sent:

* ``system`` -> ``{"role": "system"}``, where it stands;
* ``user`` -> ``{"role": "user"}``;
* ``assistant`` -> ``{"role": "assistant", "content": text or null, "tool_calls":
  [{"id", "type": "function", "function": {"name", "arguments": JSON string}}]}``;
* ``tool`` -> ``{"role": "tool", "tool_call_id", "content"}``; the wire format has no
  failure flag, so a failed result's text is sent as it is (tools say why they failed);
* ``summary`` (a compaction's text) -> a ``user`` message whose content is
  :data:`~plait.providers.base.SUMMARY_PREFIX` then the summary, because the API has
  no summary role and the model must see it as context, not as its own words.

A delta's ``reasoning_content`` (llama.cpp, DeepSeek, vLLM's reasoning parsers; ``reasoning``
on some) is streamed as :class:`~plait.providers.base.ReasoningDelta` and kept with the
reply; it is not sent back (chat completions has no field for it in a request, and
DeepSeek refuses one).

The window and output limit the server declares are read by :meth:`OpenAIProvider.limits`
(:mod:`plait.providers._served`), once per model; errors name the server's URL.

Streaming asks for ``stream_options={"include_usage": true}``, so the final chunk
carries the usage (``prompt_tokens`` includes ``prompt_tokens_details.cached_tokens``,
as plait's usage does). Some servers report ``finish_reason: "stop"`` on a reply with
tool calls; the adapter reports ``tool_calls`` then, because that is what happened.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Final, Literal

from plait.context import ModelLimits
from plait.errors import (
    MissingCredentialsError,
    MissingDependencyError,
    ProviderResponseError,
)
from plait.providers._served import probe_limits
from plait.providers.base import (
    Finish,
    FinishReason,
    ProviderError,
    ReasoningDelta,
    Request,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
    arguments_json,
    summary_text,
)
from plait.providers.settings import TOOL_CHOICES
from plait.records import JSONValue, Message

if TYPE_CHECKING:
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletionChunk

__all__ = ["DEFAULT_OPENAI_MODEL", "OpenAIProvider", "to_openai_messages"]

DEFAULT_OPENAI_MODEL: Final = "gpt-4o-mini"
"""The model used when none is named (``PLAIT_MODEL=openai`` or only ``OPENAI_API_KEY``)."""

_PROBE_TIMEOUT: Final = 10.0
"""Seconds each question about the model's limits may take (a server that hangs declares
nothing rather than holding the run)."""

_FINISH: Final[dict[str, FinishReason]] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
}


def _sdk() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise MissingDependencyError("the OpenAI provider", "openai") from exc
    return openai


def to_openai_messages(messages: list[Message] | tuple[Message, ...]) -> list[dict[str, JSONValue]]:
    """Map plait messages to chat-completions messages (the rules in the module docstring).

    Args:
        messages: the conversation, oldest first.

    Returns:
        The ``messages`` array of the request body.
    """
    out: list[dict[str, JSONValue]] = []
    for m in messages:
        if m.role == "system" or m.role == "user":
            out.append({"role": m.role, "content": m.text})
        elif m.role == "summary":
            out.append({"role": "user", "content": summary_text(m)})
        elif m.role == "assistant":
            entry: dict[str, JSONValue] = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                entry["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": arguments_json(c)},
                    }
                    for c in m.tool_calls
                ]
            out.append(entry)
        elif m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.text})
        # An opaque item is another API's: chat completions has no place for it.
    return out


class OpenAIProvider:
    """A model behind an OpenAI-compatible chat-completions API.

    Args:
        model: the model to call when a request names none.
        api_key: the key; ``None`` lets the SDK read ``OPENAI_API_KEY``. With a
            ``base_url`` and no key anywhere, a placeholder is sent (local servers
            ignore it).
        base_url: the API's root, e.g. ``http://localhost:11434/v1`` for Ollama;
            ``None`` lets the SDK read ``OPENAI_BASE_URL`` or use OpenAI's.
        max_retries: the SDK's retries on connection errors, 429 and 5xx.
        timeout: seconds before a request is abandoned.
        max_tokens_field: the body field ``Request.max_tokens`` is sent in. OpenAI
            wants ``max_completion_tokens`` (its reasoning models refuse
            ``max_tokens``); other servers understand ``max_tokens``. ``None`` picks
            ``max_tokens`` when a ``base_url`` is given, else ``max_completion_tokens``.
        client: an ``openai.AsyncOpenAI`` to use as it is (the other connection
            arguments are then ignored).
        context_window: the model's window, when you know it better than its server.
        output_limit: the most tokens one reply may have, likewise.
        ask_server: read the window from the server (:meth:`limits`); ``None`` asks
            any server but OpenAI's own, whose model list says nothing of it.

    Raises:
        MissingDependencyError: the ``openai`` package is not installed.
        MissingCredentialsError: no API key was found (and no ``base_url`` given).
    """

    def __init__(
        self,
        model: str = DEFAULT_OPENAI_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        max_tokens_field: Literal["max_tokens", "max_completion_tokens"] | None = None,
        client: AsyncOpenAI | None = None,
        context_window: int | None = None,
        output_limit: int | None = None,
        ask_server: bool | None = None,
    ) -> None:
        self._model = model
        self._given = ModelLimits(context_window=context_window, output_limit=output_limit)
        self._ask_server = ask_server
        self._max_tokens_field = max_tokens_field or (
            "max_tokens" if base_url else "max_completion_tokens"
        )
        if client is None:
            import os

            openai = _sdk()
            if api_key is None and base_url is not None:
                api_key = os.environ.get("OPENAI_API_KEY") or "not-needed"
            if api_key is None and not os.environ.get("OPENAI_API_KEY"):
                # The SDK's own message names no variable; say which one to set.
                raise MissingCredentialsError("openai", "OPENAI_API_KEY")
            try:
                client = openai.AsyncOpenAI(
                    api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout
                )
            except openai.OpenAIError as exc:
                raise ProviderError("openai", f"cannot create the client: {exc}") from exc
        self._client: AsyncOpenAI = client

    @property
    def name(self) -> str:
        """``openai``."""
        return "openai"

    @property
    def model(self) -> str:
        """The model called when a request names none."""
        return self._model

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return str(self._client.base_url)

    async def limits(self, model: str | None = None) -> ModelLimits | None:
        """The model's window and output limit: what was given, else what the server says.

        The server is asked once per model and process (:mod:`plait.providers._served`);
        a server that says nothing declares nothing.
        """
        name = model or self._model
        if self._given.context_window is not None:
            return self._given
        ask = self._ask_server
        if ask is None:
            ask = "api.openai.com" not in self.base_url
        if not ask:
            return None if self._given.empty else self._given
        # Remembered for the process by probe_limits (not here: a refusal is asked again).
        found = await probe_limits(
            self.base_url, name, api_key=self._client.api_key, timeout=_PROBE_TIMEOUT
        )
        if found is None:
            return None if self._given.empty else self._given
        return self._given.over(found)

    def _body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model or self._model,
            "messages": to_openai_messages(tuple(request.messages)),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in request.tools
            ]
        if request.max_tokens is not None:
            body[self._max_tokens_field] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.tool_choice is not None and request.tools:
            choice = request.tool_choice
            body["tool_choice"] = (
                choice
                if choice in TOOL_CHOICES
                else {"type": "function", "function": {"name": choice}}
            )
        if request.stop:
            body["stop"] = list(request.stop)
        if request.seed is not None:
            body["seed"] = request.seed
        if request.extra:
            body["extra_body"] = dict(request.extra)
        if request.headers:
            body["extra_headers"] = dict(request.headers)
        if request.timeout is not None:
            body["timeout"] = request.timeout
        return body

    def _error(self, exc: Exception) -> ProviderError:
        """The SDK's failure as a ProviderError naming this server."""
        openai = _sdk()
        url = self.base_url
        if isinstance(exc, openai.APIStatusError):
            return ProviderError(
                "openai",
                f"the API answered {exc.status_code}: {exc.message}",
                status_code=exc.status_code,
                url=url,
            )
        return ProviderError("openai", f"request failed: {exc}", url=url)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Send ``request`` as a streamed chat completion and yield its events.

        Raises:
            ProviderError: the API or the connection failed (the SDK's error chained).
        """
        openai = _sdk()
        client = self._client
        if request.max_retries is not None:
            client = client.with_options(max_retries=request.max_retries)
        create: Any = client.chat.completions.create
        finish: str | None = None
        saw_tools = False
        usage: Usage | None = None
        served: str | None = None
        response_id: str | None = None
        try:
            chunks = await create(**self._body(request))
            async with chunks:
                async for chunk in chunks:
                    chunk_: ChatCompletionChunk = chunk
                    served = served or chunk_.model or None
                    response_id = response_id or chunk_.id or None
                    if chunk_.usage is not None:
                        details = getattr(chunk_.usage, "prompt_tokens_details", None)
                        usage = Usage(
                            chunk_.usage.prompt_tokens or 0,
                            chunk_.usage.completion_tokens or 0,
                            getattr(details, "cached_tokens", None) or 0,
                        )
                    for choice in chunk_.choices:
                        if choice.index != 0:
                            continue  # plait asks for one choice (n=1)
                        delta = choice.delta
                        thought = _reasoning(delta)
                        if thought:
                            yield ReasoningDelta(thought)
                        if delta.content:
                            yield TextDelta(delta.content)
                        for tc in delta.tool_calls or ():
                            saw_tools = True
                            fn = tc.function
                            yield ToolCallDelta(
                                tc.index,
                                tc.id or None,
                                (fn.name if fn else None) or None,
                                (fn.arguments if fn else None) or "",
                            )
                        if choice.finish_reason:
                            finish = choice.finish_reason
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc
        except json.JSONDecodeError as exc:  # the SDK parses each event; a broken one is theirs
            raise ProviderResponseError(
                "openai", f"the stream sent invalid JSON: {exc}", url=self.base_url
            ) from exc
        if usage is not None:
            yield usage
        if finish is not None:
            reason = _FINISH.get(finish, "stop")
            if reason == "stop" and saw_tools:
                reason = "tool_calls"
            yield Finish(reason, served, response_id)
        # No finish_reason: the stream was cut off; no Finish, so complete() says so.

    def __repr__(self) -> str:
        return f"OpenAIProvider(model={self._model!r}, base_url={self.base_url!r})"


def _reasoning(delta: Any) -> str:
    """A delta's reasoning text: ``reasoning_content`` (llama.cpp, DeepSeek), or ``reasoning``.

    Neither is a field of the SDK's types; servers send them as extra fields, which the
    SDK keeps as attributes.
    """
    for name in ("reasoning_content", "reasoning"):
        value = getattr(delta, name, None)
        if isinstance(value, str) and value:
            return value
    return ""
