"""OpenTelemetry for runs, after the GenAI semantic conventions (``[otel]`` extra).

One run is one trace: an ``invoke_agent`` span, and under it a ``chat`` span per model
call and an ``execute_tool`` span per tool call. Chat spans carry the request settings,
the served model, the response id, the finish reasons, token usage (cache reads
included), ``server.address`` / ``server.port`` and, on failure, ``error.type``. Two
histograms are recorded per model call: ``gen_ai.client.token.usage`` (``{token}``, by
``gen_ai.token.type``) and ``gen_ai.client.operation.duration`` (seconds).

When the provider SDK's own OpenTelemetry instrumentation is active (the OpenAI or
Anthropic instrumentors), that instrumentation reports the model calls: plait then
opens no chat span and records no chat metrics of its own, so nothing is counted
twice; the SDK's spans still fall under the run's ``invoke_agent`` span.

With only ``opentelemetry-api`` installed nothing is exported: an application installs
an SDK and sets its providers (globally, or for plait alone with :func:`configure`).
Without the API at all every call here does nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from plait.providers import Provider, Reply, Request

__all__ = ["ChatSpan", "RunTelemetry", "configure", "sdk_instrumented"]

_INSTRUMENTORS: Final = {
    "openai": (
        ("opentelemetry.instrumentation.openai_v2", "OpenAIInstrumentor"),
        ("opentelemetry.instrumentation.openai", "OpenAIInstrumentor"),
    ),
    "anthropic": (("opentelemetry.instrumentation.anthropic", "AnthropicInstrumentor"),),
}
_INSTRUMENTORS["openai-responses"] = _INSTRUMENTORS["openai"]  # the same SDK
"""The SDK instrumentations that report a provider's model calls themselves."""

_providers: dict[str, Any] = {"tracer": None, "meter": None}


def configure(*, tracer_provider: Any = None, meter_provider: Any = None) -> None:
    """Send plait's spans and metrics to these providers (None: OpenTelemetry's global ones).

    Args:
        tracer_provider: an OpenTelemetry ``TracerProvider``.
        meter_provider: an OpenTelemetry ``MeterProvider``.
    """
    _providers["tracer"] = tracer_provider
    _providers["meter"] = meter_provider


def _tracer() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace.get_tracer("plait", tracer_provider=_providers["tracer"])


def _instruments() -> tuple[Any, Any] | None:
    try:
        from opentelemetry import metrics
    except ImportError:
        return None
    meter = metrics.get_meter("plait", meter_provider=_providers["meter"])
    usage = meter.create_histogram(
        "gen_ai.client.token.usage", unit="{token}", description="Tokens used per model call"
    )
    duration = meter.create_histogram(
        "gen_ai.client.operation.duration", unit="s", description="Duration of a model call"
    )
    return usage, duration


def sdk_instrumented(provider_name: str) -> bool:
    """Whether the SDK behind ``provider_name`` has its own OpenTelemetry instrumentation on.

    Only instrumentations already imported are asked (an active one is imported).
    """
    for module_name, class_name in _INSTRUMENTORS.get(provider_name, ()):
        module = sys.modules.get(module_name)
        instrumentor = getattr(module, class_name, None) if module is not None else None
        if instrumentor is None:
            continue
        try:
            if instrumentor().is_instrumented_by_opentelemetry:  # a singleton per class
                return True
        except Exception:  # an instrumentation's own failure is no reason to fail a run
            continue
    return False


def _server(provider: Provider) -> dict[str, Any]:
    url = getattr(provider, "base_url", None)
    if not isinstance(url, str) or not url:
        return {}
    parts = urlsplit(url)
    out: dict[str, Any] = {}
    if parts.hostname:
        out["server.address"] = parts.hostname
    if parts.port is not None:
        out["server.port"] = parts.port
    return out


@contextlib.contextmanager
def _span(tracer: Any, name: str, attributes: dict[str, Any], kind: str) -> Iterator[Any]:
    if tracer is None:
        yield None
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    with tracer.start_as_current_span(
        name,
        kind=SpanKind.CLIENT if kind == "client" else SpanKind.INTERNAL,
        attributes=attributes,
        record_exception=True,
        set_status_on_exception=True,
    ) as span:
        try:
            yield span
        except asyncio.CancelledError:
            span.set_status(Status(StatusCode.ERROR, "cancelled"))
            span.set_attribute("error.type", "cancelled")
            raise
        except BaseException as exc:
            span.set_attribute("error.type", type(exc).__qualname__)
            raise


@dataclass
class ChatSpan:
    """One model call being reported; the loop hands it the reply with :meth:`done`."""

    span: Any = None
    reply: Reply | None = None
    attributes: dict[str, Any] = field(default_factory=dict)

    def done(self, reply: Reply) -> None:
        """The call answered: its response attributes go on the span."""
        self.reply = reply
        if self.span is None:
            return
        span = self.span
        span.set_attribute("gen_ai.response.finish_reasons", [reply.finish_reason])
        if reply.model:
            span.set_attribute("gen_ai.response.model", reply.model)
        if reply.response_id:
            span.set_attribute("gen_ai.response.id", reply.response_id)
        if reply.usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", reply.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", reply.usage.output_tokens)
            span.set_attribute("gen_ai.usage.cache_read.input_tokens", reply.usage.cached_tokens)


class RunTelemetry:
    """The spans and metrics of one run on one session.

    Args:
        provider: the run's model.
        session_id: the session being driven (``gen_ai.conversation.id``).
    """

    def __init__(self, provider: Provider, session_id: str) -> None:
        self._tracer = _tracer()
        self._provider = provider
        self._session_id = session_id
        self._base = {
            "gen_ai.provider.name": provider.name,
            "gen_ai.request.model": provider.model,
            **_server(provider),
        }
        # The SDK's instrumentation reports model calls itself: plait does not, twice.
        self._chat_spans = not sdk_instrumented(provider.name)
        self._metrics = _instruments() if self._tracer is not None and self._chat_spans else None

    @contextlib.contextmanager
    def agent(self) -> Iterator[None]:
        """The run's ``invoke_agent`` span: the parent of every span the run makes."""
        attributes = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.conversation.id": self._session_id,
            **self._base,
        }
        with _span(self._tracer, "invoke_agent", attributes, "internal"):
            yield

    @contextlib.contextmanager
    def chat(self, request: Request) -> Iterator[ChatSpan]:
        """One model call's ``chat`` span and metrics (none when the SDK reports it)."""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": self._session_id,
            **self._base,
        }
        for key, value in (
            ("gen_ai.request.max_tokens", request.max_tokens),
            ("gen_ai.request.temperature", request.temperature),
            ("gen_ai.request.top_p", request.top_p),
            ("gen_ai.request.seed", request.seed),
            ("gen_ai.request.stop_sequences", list(request.stop) or None),
        ):
            if value is not None:
                attributes[key] = value
        record = ChatSpan(attributes=attributes)
        started = time.perf_counter()
        error: str | None = None
        try:
            if not self._chat_spans:
                yield record
                return
            with _span(self._tracer, f"chat {self._provider.model}", attributes, "client") as span:
                record.span = span
                yield record
        except asyncio.CancelledError:
            error = "cancelled"
            raise
        except BaseException as exc:
            error = type(exc).__qualname__
            raise
        finally:
            self._record(record, time.perf_counter() - started, error)

    def _record(self, record: ChatSpan, seconds: float, error: str | None) -> None:
        if self._metrics is None:
            return
        usage_hist, duration_hist = self._metrics
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self._provider.name,
            "gen_ai.request.model": self._provider.model,
            **{k: v for k, v in self._base.items() if k.startswith("server.")},
        }
        reply = record.reply
        if reply is not None and reply.model:
            attributes["gen_ai.response.model"] = reply.model
        if error is not None:
            attributes["error.type"] = error
        duration_hist.record(seconds, attributes)
        if reply is not None and reply.usage is not None:
            for kind, tokens in (
                ("input", reply.usage.input_tokens),
                ("output", reply.usage.output_tokens),
            ):
                usage_hist.record(tokens, {**attributes, "gen_ai.token.type": kind})

    @contextlib.contextmanager
    def tool(self, call_id: str, name: str) -> Iterator[None]:
        """One tool call's ``execute_tool`` span."""
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            "gen_ai.conversation.id": self._session_id,
        }
        with _span(self._tracer, f"execute_tool {name}", attributes, "internal"):
            yield
