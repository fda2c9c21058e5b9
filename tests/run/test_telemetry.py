"""A run is one trace after the GenAI conventions, with its metrics, and nothing counted twice."""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import Client
from plait.providers import Reply, ScriptedProvider, ScriptExhaustedError, Usage
from plait.records import ToolCall
from plait.run import telemetry

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace", reason="opentelemetry-sdk not installed")
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)


class Otel:
    """In-memory span and metric exporters plait reports to."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        tracer_provider = sdk_trace.TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.reader = InMemoryMetricReader()
        telemetry.configure(
            tracer_provider=tracer_provider, meter_provider=MeterProvider([self.reader])
        )

    def metrics(self) -> dict[str, list[Any]]:
        data = self.reader.get_metrics_data()
        out: dict[str, list[Any]] = {}
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    out.setdefault(metric.name, []).extend(metric.data.data_points)
        return out


@pytest.fixture
def otel() -> Iterator[Otel]:
    found = Otel()
    yield found
    telemetry.configure()


def _run(client: Client, tmp_path: Path, model: str = "scripted") -> str:
    box = tmp_path / "box"
    box.mkdir(exist_ok=True)
    (box / "f.txt").write_text("F")
    s = client.sessions.create([{"role": "system", "content": "terse"}]).to("local", spec=str(box))
    provider = ScriptedProvider([
        Reply(tool_calls=(ToolCall("c1", "read_file", {"path": "f.txt"}),),
              usage=Usage(10, 4, 6), finish_reason="tool_calls",
              model="scripted-2026-01", response_id="resp-1"),
        Reply("done", usage=Usage(7, 2), model="scripted-2026-01", response_id="resp-2"),
    ], model=model)
    asyncio.run(s.prompt("read", provider=provider, model_settings={"max_tokens": 50}))
    return s.id


def test_a_run_is_one_trace_under_invoke_agent(client: Client, tmp_path: Path, otel: Otel) -> None:
    session_id = _run(client, tmp_path)
    spans = otel.spans.get_finished_spans()
    names = sorted(s.name for s in spans)
    assert names == ["chat scripted", "chat scripted", "execute_tool read_file", "invoke_agent"]
    assert len({s.context.trace_id for s in spans}) == 1
    agent = next(s for s in spans if s.name == "invoke_agent")
    assert agent.parent is None
    assert all(s.parent is not None and s.parent.span_id == agent.context.span_id
               for s in spans if s is not agent)
    first = next(s for s in spans if s.name.startswith("chat"))
    attrs = dict(first.attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.conversation.id"] == session_id
    assert attrs["gen_ai.request.max_tokens"] == 50
    assert (attrs["gen_ai.response.model"], attrs["gen_ai.response.id"]) == (
        "scripted-2026-01", "resp-1")
    assert (attrs["gen_ai.usage.input_tokens"], attrs["gen_ai.usage.output_tokens"]) == (10, 4)
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 6
    assert tuple(attrs["gen_ai.response.finish_reasons"]) == ("tool_calls",)
    tool = dict(next(s for s in spans if s.name.startswith("execute_tool")).attributes or {})
    assert (tool["gen_ai.tool.name"], tool["gen_ai.tool.call.id"]) == ("read_file", "c1")
    assert dict(agent.attributes or {})["gen_ai.operation.name"] == "invoke_agent"


def test_token_usage_and_duration_metrics(client: Client, tmp_path: Path, otel: Otel) -> None:
    _run(client, tmp_path)
    metrics = otel.metrics()
    durations = metrics["gen_ai.client.operation.duration"]
    assert sum(p.count for p in durations) == 2
    usage = metrics["gen_ai.client.token.usage"]
    by_type = {p.attributes["gen_ai.token.type"]: p.sum for p in usage}
    assert by_type == {"input": 17, "output": 6}
    assert all(p.attributes["gen_ai.response.model"] == "scripted-2026-01" for p in usage)


def test_a_failed_model_call_carries_its_error_type(
    client: Client, tmp_path: Path, otel: Otel
) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    with pytest.raises(ScriptExhaustedError):
        asyncio.run(s.prompt("go", provider=ScriptedProvider([]), tools=[]))
    chat = next(x for x in otel.spans.get_finished_spans() if x.name.startswith("chat"))
    assert dict(chat.attributes or {})["error.type"] == "ScriptExhaustedError"
    points = otel.metrics()["gen_ai.client.operation.duration"]
    assert points[0].attributes["error.type"] == "ScriptExhaustedError"


def test_an_instrumented_sdk_reports_the_model_calls_alone(
    client: Client, tmp_path: Path, otel: Otel, monkeypatch: pytest.MonkeyPatch
) -> None:
    class FakeInstrumentor:
        is_instrumented_by_opentelemetry = True

    module = types.ModuleType("opentelemetry.instrumentation.openai_v2")
    module.OpenAIInstrumentor = FakeInstrumentor  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "opentelemetry.instrumentation.openai_v2", module)
    assert telemetry.sdk_instrumented("openai") and not telemetry.sdk_instrumented("scripted")

    class OpenAIish(ScriptedProvider):
        @property
        def name(self) -> str:
            return "openai"

    box = tmp_path / "box"
    box.mkdir()
    s = client.sessions.create([{"role": "user", "content": "hi"}]).to("local", spec=str(box))
    asyncio.run(s.prompt("go", provider=OpenAIish([Reply("ok", usage=Usage(3, 1))]), tools=[]))
    names = [x.name for x in otel.spans.get_finished_spans()]
    assert names == ["invoke_agent"]  # the SDK's own chat span would sit under it
    assert "gen_ai.client.token.usage" not in otel.metrics()
