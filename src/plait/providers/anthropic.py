"""Anthropic's Messages API, through the official ``anthropic`` SDK (``[anthropic]`` extra).

How plait messages are sent:

* every ``system`` message goes into the separate ``system`` parameter (several are
  joined with a blank line, in order);
* ``user`` -> a ``user`` turn with a text block;
* ``summary`` -> a ``user`` text block, :data:`~plait.providers.base.SUMMARY_PREFIX`
  then the summary (the API has no summary role);
* ``assistant`` -> an ``assistant`` turn: a text block (when there is text) and a
  ``tool_use`` block ``{"id", "name", "input"}`` per tool call; an assistant message
  with neither is left out (the API refuses empty turns);
* ``tool`` -> a ``tool_result`` block ``{"tool_use_id", "content", "is_error"}`` in a
  ``user`` turn (``is_error`` is set when the tool failed).

* an ``opaque`` item of format ``anthropic`` (a thinking or redacted-thinking block the
  model wrote, stored verbatim) -> that block, in the ``assistant`` turn it came with:
  the API wants a turn's thinking blocks back, signature intact, when tools were used.

The API wants user and assistant turns to alternate, so consecutive blocks of one
role are merged into one turn (several tool results answer one assistant turn).
Empty text blocks are dropped (the API refuses them).

Prompt caching (``ModelSettings.prompt_cache``, on unless set false): ``cache_control``
``{"type": "ephemeral"}`` marks the end of the system prompt, of the tool list and of
the last message, so each request reads the prefix the one before it wrote (three of
the four marks the API allows).

Thinking (asked for with ``extra_body={"thinking": {...}}``): ``thinking_delta`` pieces
stream as :class:`~plait.providers.base.ReasoningDelta`; each whole thinking block (and
each ``redacted_thinking`` block) is an :class:`~plait.providers.base.ItemDone` of format
``anthropic``, which the run keeps as an opaque item and sends back.

Usage (decision D29): plait's ``input_tokens`` is ``input_tokens`` +
``cache_read_input_tokens`` + ``cache_creation_input_tokens``, because Anthropic's
``input_tokens`` counts only the uncached part; ``cached_tokens`` is
``cache_read_input_tokens``. Stop reasons: ``end_turn``, ``stop_sequence`` and
``pause_turn`` -> ``stop``; ``tool_use`` -> ``tool_calls``; ``max_tokens`` ->
``length``; ``refusal`` -> ``content_filter``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, Final

from plait.context import ModelLimits
from plait.errors import (
    MissingCredentialsError,
    MissingDependencyError,
    ProviderResponseError,
)
from plait.providers.base import (
    Finish,
    FinishReason,
    ItemDone,
    ProviderError,
    ReasoningDelta,
    Request,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    Usage,
    summary_text,
)
from plait.records import JSONValue, Message

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

__all__ = [
    "DEFAULT_ANTHROPIC_MODEL",
    "DEFAULT_MAX_TOKENS",
    "FORMAT",
    "AnthropicProvider",
    "to_anthropic",
]

FORMAT: Final = "anthropic"
"""The opaque-item format of the blocks this provider keeps (thinking blocks)."""

_THINKING: Final = frozenset({"thinking", "redacted_thinking"})
_CACHE: Final = {"type": "ephemeral"}

DEFAULT_ANTHROPIC_MODEL: Final = "claude-haiku-4-5"
"""The model used when none is named (``PLAIT_MODEL=anthropic`` or only ``ANTHROPIC_API_KEY``)."""

DEFAULT_MAX_TOKENS: Final = 4096
"""``max_tokens`` when a request gives none: the Messages API requires one."""

_FINISH: Final[dict[str, FinishReason]] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError as exc:
        raise MissingDependencyError("the Anthropic provider", "anthropic") from exc
    return anthropic


def to_anthropic(
    messages: list[Message] | tuple[Message, ...],
) -> tuple[str | None, list[dict[str, JSONValue]]]:
    """Map plait messages to the Messages API (the rules in the module docstring).

    Args:
        messages: the conversation, oldest first.

    Returns:
        ``(system, messages)``: the system prompt (``None`` without one) and the
        ``messages`` array of the request body.
    """
    system: list[str] = []
    turns: list[dict[str, JSONValue]] = []

    def add(role: str, blocks: list[dict[str, JSONValue]]) -> None:
        if not blocks:
            return
        last = turns[-1]["content"] if turns and turns[-1]["role"] == role else None
        if isinstance(last, list):
            last.extend(blocks)
        else:
            turns.append({"role": role, "content": list(blocks)})

    def text(value: str) -> list[dict[str, JSONValue]]:
        return [{"type": "text", "text": value}] if value else []

    for m in messages:
        if m.role == "system":
            if m.text:
                system.append(m.text)
        elif m.role == "user":
            add("user", text(m.text))
        elif m.role == "summary":
            add("user", text(summary_text(m)))
        elif m.role == "opaque":
            item = getattr(m, "item", None)
            if getattr(m, "format", None) == FORMAT and isinstance(item, Mapping):
                add("assistant", [dict(item)])
        elif m.role == "assistant":
            blocks = text(m.text)
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": dict(c.arguments)}
                for c in m.tool_calls
            ]
            add("assistant", blocks)
        elif m.role == "tool":
            add(
                "user",
                [
                    {
                        "type": "tool_result",
                        "tool_use_id": m.tool_call_id,
                        "content": m.text,
                        "is_error": m.ok is False,
                    }
                ],
            )
    return ("\n\n".join(system) if system else None), turns


class AnthropicProvider:
    """A Claude model behind Anthropic's Messages API.

    Args:
        model: the model to call when a request names none.
        api_key: the key; ``None`` lets the SDK read ``ANTHROPIC_API_KEY``.
        base_url: the API's root; ``None`` lets the SDK read ``ANTHROPIC_BASE_URL``
            or use Anthropic's.
        max_retries: the SDK's retries on connection errors, 429 and 5xx.
        timeout: seconds before a request is abandoned.
        client: an ``anthropic.AsyncAnthropic`` to use as it is (the other
            connection arguments are then ignored).
        context_window: the model's window, when it is not the Claude family's 200k.
        output_limit: the most tokens one reply may have.

    Raises:
        MissingDependencyError: the ``anthropic`` package is not installed.
        MissingCredentialsError: no key given and ``ANTHROPIC_API_KEY`` is unset.
    """

    def __init__(
        self,
        model: str = DEFAULT_ANTHROPIC_MODEL,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        timeout: float = 600.0,
        client: AsyncAnthropic | None = None,
        context_window: int | None = None,
        output_limit: int | None = None,
    ) -> None:
        self._model = model
        self._given = ModelLimits(context_window=context_window, output_limit=output_limit)
        if client is None:
            import os

            anthropic = _sdk()
            if api_key is None and not (
                os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")
            ):
                # Without a key the SDK fails only at the first request, with a TypeError.
                raise MissingCredentialsError("anthropic", "ANTHROPIC_API_KEY")
            client = anthropic.AsyncAnthropic(
                api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout
            )
        self._client: AsyncAnthropic = client

    @property
    def name(self) -> str:
        """``anthropic``."""
        return "anthropic"

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
        """The opaque items it reads: its own blocks (``anthropic``)."""
        return frozenset({FORMAT})

    async def limits(self) -> ModelLimits | None:
        """The window and output limit given at construction (the API does not say)."""
        return None if self._given.empty else self._given

    def _error(self, exc: Exception) -> ProviderError:
        anthropic = _sdk()
        if isinstance(exc, anthropic.APIStatusError):
            return ProviderError(
                "anthropic",
                f"the API answered {exc.status_code}: {exc.message}",
                status_code=exc.status_code,
                url=self.base_url,
            )
        return ProviderError("anthropic", f"request failed: {exc}", url=self.base_url)

    def _body(self, request: Request) -> dict[str, Any]:
        system, turns = to_anthropic(tuple(request.messages))
        cache = request.prompt_cache is not False
        body: dict[str, Any] = {
            "model": request.model or self._model,
            "messages": turns,
            "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
            "stream": True,
        }
        if system is not None:
            body["system"] = (
                [{"type": "text", "text": system, "cache_control": _CACHE}] if cache else system
            )
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in request.tools
            ]
            if cache:
                body["tools"][-1]["cache_control"] = _CACHE
        if cache:
            _mark_last(turns)
        if request.stop:
            body["stop_sequences"] = list(request.stop)
        if request.tool_choice is not None and request.tools:
            choice = request.tool_choice
            body["tool_choice"] = (
                {"type": {"auto": "auto", "none": "none", "required": "any"}[choice]}
                if choice in ("auto", "none", "required")
                else {"type": "tool", "name": choice}
            )
        if request.headers:
            body["extra_headers"] = dict(request.headers)
        if request.timeout is not None:
            body["timeout"] = request.timeout
        # The Messages API takes no seed: a request's seed is not sent.
        extra: dict[str, Any] = {}
        if request.temperature is not None:
            # In the JSON body rather than as a keyword: recent SDKs dropped the
            # ``temperature`` parameter from ``messages.create``, the API still takes it.
            extra["temperature"] = request.temperature
        if request.top_p is not None:
            extra["top_p"] = request.top_p  # in the body too, for the same reason
        extra.update(request.extra)
        if extra:
            body["extra_body"] = extra
        return body

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        """Send ``request`` as a streamed message and yield its events.

        Raises:
            ProviderError: the API or the connection failed, or the stream carried
                an ``error`` event (the SDK's error chained).
        """
        anthropic = _sdk()
        client = self._client
        if request.max_retries is not None:
            client = client.with_options(max_retries=request.max_retries)
        create: Any = client.messages.create
        tool_index: dict[int, int] = {}  # content block index -> plait tool-call index
        thinking: dict[int, dict[str, JSONValue]] = {}  # content block index -> the block
        counts = {"input": 0, "cache_read": 0, "cache_write": 0, "output": 0}
        stop: str | None = None
        finished = False
        served: str | None = None
        response_id: str | None = None
        try:
            events = await create(**self._body(request))
            async with events:
                async for event in events:
                    kind = event.type
                    if kind == "message_start":
                        _take_usage(counts, event.message.usage)
                        served = getattr(event.message, "model", None) or None
                        response_id = getattr(event.message, "id", None) or None
                    elif kind == "content_block_start":
                        block = event.content_block
                        if block.type == "tool_use":
                            tool_index[event.index] = len(tool_index)
                            yield ToolCallDelta(tool_index[event.index], block.id, block.name, "")
                        elif block.type == "text" and block.text:
                            yield TextDelta(block.text)
                        elif block.type in _THINKING:
                            thinking[event.index] = block.model_dump(mode="json")
                            if block.type == "thinking" and block.thinking:
                                yield ReasoningDelta(block.thinking)
                    elif kind == "content_block_delta":
                        delta = event.delta
                        if delta.type == "text_delta" and delta.text:
                            yield TextDelta(delta.text)
                        elif (
                            delta.type == "input_json_delta"
                            and event.index in tool_index
                            and delta.partial_json
                        ):
                            yield ToolCallDelta(
                                tool_index[event.index], arguments_delta=delta.partial_json
                            )
                        elif delta.type == "thinking_delta" and event.index in thinking:
                            kept = thinking[event.index]
                            kept["thinking"] = str(kept.get("thinking") or "") + delta.thinking
                            if delta.thinking:
                                yield ReasoningDelta(delta.thinking)
                        elif delta.type == "signature_delta" and event.index in thinking:
                            kept = thinking[event.index]
                            kept["signature"] = str(kept.get("signature") or "") + delta.signature
                    elif kind == "content_block_stop" and event.index in thinking:
                        yield ItemDone(FORMAT, thinking.pop(event.index))
                    elif kind == "message_delta":
                        _take_usage(counts, event.usage)
                        stop = event.delta.stop_reason or stop
                    elif kind == "message_stop":
                        finished = True
        except anthropic.AnthropicError as exc:
            raise self._error(exc) from exc
        except json.JSONDecodeError as exc:  # the SDK parses each event; a broken one is theirs
            said = f"the stream sent invalid JSON: {exc}"
            raise ProviderResponseError("anthropic", said) from exc
        yield Usage(
            counts["input"] + counts["cache_read"] + counts["cache_write"],
            counts["output"],
            counts["cache_read"],
        )
        if finished:
            yield Finish(_FINISH.get(stop or "end_turn", "stop"), served, response_id)
        # No message_stop: the stream was cut off; no Finish, so complete() says so.

    def __repr__(self) -> str:
        return f"AnthropicProvider(model={self._model!r}, base_url={self.base_url!r})"


def _mark_last(turns: list[dict[str, JSONValue]]) -> None:
    """Put a cache mark on the last block of the last turn that can carry one."""
    if not turns:
        return
    blocks = turns[-1]["content"]
    if not isinstance(blocks, list):
        return
    for block in reversed(blocks):
        if isinstance(block, dict) and block.get("type") not in _THINKING:
            block["cache_control"] = dict(_CACHE)
            return


def _take_usage(counts: dict[str, int], usage: Any) -> None:
    """Update the running counts from a usage object; the API's counts are cumulative."""
    if usage is None:
        return
    for key, attr in (
        ("input", "input_tokens"),
        ("cache_read", "cache_read_input_tokens"),
        ("cache_write", "cache_creation_input_tokens"),
        ("output", "output_tokens"),
    ):
        value = getattr(usage, attr, None)
        if isinstance(value, int):
            counts[key] = value
