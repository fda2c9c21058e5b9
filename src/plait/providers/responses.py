"""OpenAI's Responses API, through the official ``openai`` SDK (``[openai]`` extra).

The second OpenAI provider (model spec ``openai-responses:MODEL``): the API OpenAI's
reasoning models are best used through, where the model's reasoning items are carried
from one call to the next. plait keeps the conversation, so every request sends the whole
input (``store: false``) and asks for the reasoning items' encrypted content
(``include: ["reasoning.encrypted_content"]``), which is what lets a stateless caller send
them back.

How plait messages are sent (the ``input`` list):

* ``system`` / ``user`` -> ``{"role": "system"|"user", "content": text}``, where they stand;
* ``summary`` -> a ``user`` message, :data:`~plait.providers.base.SUMMARY_PREFIX` then the
  summary;
* ``assistant`` -> ``{"role": "assistant", "content": text}`` when it has text, then one
  ``{"type": "function_call", "call_id", "name", "arguments"}`` per tool call;
* ``tool`` -> ``{"type": "function_call_output", "call_id", "output"}``;
* an ``opaque`` item of format ``openai-responses`` (a reasoning item an earlier reply
  gave) -> the item exactly as it came.

What comes back: ``response.output_text.delta`` is text, ``function_call`` items and
their ``response.function_call_arguments.delta`` are tool calls (by the order the calls
came), reasoning summary and reasoning text deltas are
:class:`~plait.providers.base.ReasoningDelta`, and each finished ``reasoning`` item is an
:class:`~plait.providers.base.ItemDone` the run keeps as an opaque item. Usage is read
from ``response.completed`` (``input_tokens`` includes
``input_tokens_details.cached_tokens``, as plait's usage does). A response ``incomplete``
for ``max_output_tokens`` finished with ``length``, for ``content_filter`` with
``content_filter``; ``response.failed`` and ``error`` events are provider errors.

The API has no stop sequences and no seed: those settings are not sent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from plait.context import ModelLimits
from plait.errors import MissingCredentialsError, MissingDependencyError
from plait.providers.base import (
    Finish,
    FinishReason,
    ItemDone,
    ProviderError,
    ProviderResponseError,
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

__all__ = ["FORMAT", "OpenAIResponsesProvider", "to_responses_input"]

FORMAT: Final = "openai-responses"
"""The opaque-item format of the items this provider keeps (reasoning items)."""

_PROVIDER: Final = "openai-responses"

_INCOMPLETE: Final[dict[str, FinishReason]] = {
    "max_output_tokens": "length",
    "content_filter": "content_filter",
}


def _sdk() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise MissingDependencyError("the OpenAI Responses provider", "openai") from exc
    return openai


def to_responses_input(
    messages: list[Message] | tuple[Message, ...],
) -> list[dict[str, JSONValue]]:
    """Map plait messages to a Responses ``input`` list (the rules in the module docstring).

    Args:
        messages: the conversation, oldest first.

    Returns:
        The ``input`` array of the request body.
    """
    out: list[dict[str, JSONValue]] = []
    for m in messages:
        if m.role == "system" or m.role == "user":
            out.append({"role": m.role, "content": m.text})
        elif m.role == "summary":
            out.append({"role": "user", "content": summary_text(m)})
        elif m.role == "assistant":
            if m.text:
                out.append({"role": "assistant", "content": m.text})
            for c in m.tool_calls:
                out.append(
                    {
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.name,
                        "arguments": arguments_json(c),
                    }
                )
        elif m.role == "tool":
            out.append(
                {"type": "function_call_output", "call_id": m.tool_call_id, "output": m.text}
            )
        elif m.role == "opaque":
            item = getattr(m, "item", None)
            if getattr(m, "format", None) == FORMAT and isinstance(item, Mapping):
                out.append(dict(item))
    return out


class OpenAIResponsesProvider:
    """A model behind OpenAI's Responses API (or a server that speaks it).

    Args:
        model: the model to call when a request names none.
        api_key: the key; ``None`` lets the SDK read ``OPENAI_API_KEY`` (with a
            ``base_url`` and no key anywhere, a placeholder is sent).
        base_url: the API's root; ``None`` lets the SDK read ``OPENAI_BASE_URL``.
        max_retries: the SDK's retries on connection errors, 429 and 5xx.
        timeout: seconds before a request is abandoned.
        client: an ``openai.AsyncOpenAI`` to use as it is.
        context_window: the model's window, when the family table does not know it.
        output_limit: the most tokens one reply may have.
        store: let the API keep the responses (``store: true``); reasoning items are then
            sent back by id, and their encrypted content is not asked for (a server that
            refuses ``include`` works this way).

    Raises:
        MissingDependencyError: the ``openai`` package is not installed.
        MissingCredentialsError: no API key was found (and no ``base_url`` given).
    """

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        client: AsyncOpenAI | None = None,
        context_window: int | None = None,
        output_limit: int | None = None,
        store: bool = False,
    ) -> None:
        self._model = model
        self._store = store
        self._given = ModelLimits(context_window=context_window, output_limit=output_limit)
        if client is None:
            import os

            openai = _sdk()
            if api_key is None and base_url is not None:
                api_key = os.environ.get("OPENAI_API_KEY") or "not-needed"
            if api_key is None and not os.environ.get("OPENAI_API_KEY"):
                raise MissingCredentialsError(_PROVIDER, "OPENAI_API_KEY")
            try:
                client = openai.AsyncOpenAI(
                    api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout
                )
            except openai.OpenAIError as exc:
                raise ProviderError(_PROVIDER, f"cannot create the client: {exc}") from exc
        self._client: AsyncOpenAI = client

    @property
    def name(self) -> str:
        """``openai-responses``."""
        return _PROVIDER

    @property
    def model(self) -> str:
        """The model called when a request names none."""
        return self._model

    @property
    def base_url(self) -> str:
        """The API root requests go to."""
        return str(self._client.base_url)

    @property
    def reads_formats(self) -> frozenset[str]:
        """The opaque items it reads: its own reasoning items (``openai-responses``)."""
        return frozenset({FORMAT})

    async def limits(self) -> ModelLimits | None:
        """The window and output limit given at construction (the API does not say)."""
        return None if self._given.empty else self._given

    def _body(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": request.model or self._model,
            "input": to_responses_input(tuple(request.messages)),
            "stream": True,
            "store": self._store,
        }
        if not self._store:  # what lets a caller that keeps the conversation send them back
            body["include"] = ["reasoning.encrypted_content"]
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": dict(t.parameters),
                }
                for t in request.tools
            ]
            if request.tool_choice is not None:
                choice = request.tool_choice
                body["tool_choice"] = (
                    choice if choice in TOOL_CHOICES else {"type": "function", "name": choice}
                )
        if request.max_tokens is not None:
            body["max_output_tokens"] = request.max_tokens
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.top_p is not None:
            body["top_p"] = request.top_p
        if request.extra:
            body["extra_body"] = dict(request.extra)
        if request.headers:
            body["extra_headers"] = dict(request.headers)
        if request.timeout is not None:
            body["timeout"] = request.timeout
        return body

    def _error(self, message: str, status: int | None = None) -> ProviderError:
        return ProviderError(_PROVIDER, message, status_code=status, url=self.base_url)

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Send ``request`` as a streamed response and yield its events.

        Raises:
            ProviderError: the API or the connection failed, or the response failed.
        """
        openai = _sdk()
        client = self._client
        if request.max_retries is not None:
            client = client.with_options(max_retries=request.max_retries)
        create: Any = client.responses.create
        calls: dict[int, int] = {}  # output_index -> plait tool-call index
        streamed: set[int] = set()  # output indexes whose arguments came as deltas
        usage: Usage | None = None
        finish: FinishReason | None = None
        served: str | None = None
        response_id: str | None = None
        try:
            events = await create(**self._body(request))
            async with events:
                async for event in events:
                    kind = event.type
                    if kind in ("response.created", "response.in_progress"):
                        served = served or getattr(event.response, "model", None) or None
                        response_id = response_id or getattr(event.response, "id", None) or None
                    elif kind == "response.output_text.delta" and event.delta:
                        yield TextDelta(event.delta)
                    elif kind in (
                        "response.reasoning_summary_text.delta",
                        "response.reasoning_text.delta",
                    ) and event.delta:
                        yield ReasoningDelta(event.delta)
                    elif kind == "response.output_item.added":
                        item = event.item
                        if item.type == "function_call":
                            calls[event.output_index] = len(calls)
                            yield ToolCallDelta(
                                calls[event.output_index], item.call_id, item.name, ""
                            )
                    elif kind == "response.function_call_arguments.delta":
                        if event.output_index in calls and event.delta:
                            streamed.add(event.output_index)
                            yield ToolCallDelta(
                                calls[event.output_index], arguments_delta=event.delta
                            )
                    elif kind == "response.output_item.done":
                        item = event.item
                        if item.type == "reasoning":
                            yield ItemDone(FORMAT, _item_json(item))
                        elif item.type == "function_call":
                            if event.output_index not in calls:
                                calls[event.output_index] = len(calls)
                                yield ToolCallDelta(
                                    calls[event.output_index], item.call_id, item.name, ""
                                )
                            if event.output_index not in streamed and item.arguments:
                                # A server that sends the arguments only with the item.
                                yield ToolCallDelta(
                                    calls[event.output_index], arguments_delta=item.arguments
                                )
                    elif kind in ("response.completed", "response.incomplete"):
                        response = event.response
                        served = getattr(response, "model", None) or served
                        response_id = getattr(response, "id", None) or response_id
                        usage = _usage(getattr(response, "usage", None)) or usage
                        if kind == "response.completed":
                            finish = "tool_calls" if calls else "stop"
                        else:
                            details = getattr(response, "incomplete_details", None)
                            reason = getattr(details, "reason", None) or ""
                            finish = _INCOMPLETE.get(reason, "length")
                    elif kind == "response.failed":
                        error = getattr(event.response, "error", None)
                        raise self._error(f"the response failed: {_describe(error)}")
                    elif kind == "error":
                        raise self._error(f"the stream reported an error: {_describe(event)}")
        except openai.APIStatusError as exc:
            raise self._error(
                f"the API answered {exc.status_code}: {exc.message}", exc.status_code
            ) from exc
        except openai.OpenAIError as exc:
            raise self._error(f"request failed: {exc}") from exc
        except json.JSONDecodeError as exc:  # the SDK parses each event; a broken one is theirs
            said = f"the stream sent invalid JSON: {exc}"
            raise ProviderResponseError(_PROVIDER, said, url=self.base_url) from exc
        if usage is not None:
            yield usage
        if finish is not None:
            yield Finish(finish, served, response_id)
        # No response.completed: the stream was cut off; no Finish, so complete() says so.

    def __repr__(self) -> str:
        return f"OpenAIResponsesProvider(model={self._model!r}, base_url={self.base_url!r})"


def _item_json(item: Any) -> dict[str, JSONValue]:
    """An output item as the JSON the API takes back (fields it left unset left out)."""
    dumped = item.model_dump(mode="json", exclude_none=True)
    if not isinstance(dumped, dict):
        raise ProviderResponseError(_PROVIDER, f"not an output item: {item!r}")
    # A round trip through JSON so nothing but JSON values is kept.
    found: dict[str, JSONValue] = json.loads(json.dumps(dumped))
    return found


def _usage(usage: Any) -> Usage | None:
    if usage is None:
        return None
    details = getattr(usage, "input_tokens_details", None)
    return Usage(
        getattr(usage, "input_tokens", 0) or 0,
        getattr(usage, "output_tokens", 0) or 0,
        getattr(details, "cached_tokens", 0) or 0,
    )


def _describe(error: Any) -> str:
    code = getattr(error, "code", None)
    message = getattr(error, "message", None) or "no message"
    return f"{code}: {message}" if code else str(message)
