"""Session.prompt / stream / run / steer / ask / name_it / resume, timeouts and interruptions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from plait import Client, Session, current_id
from plait.errors import (
    InvalidArgumentError,
    MissingDependencyError,
    NothingToDoError,
    ProviderError,
    RunInterruptedError,
    RunTimeoutError,
    SessionBusyError,
)
from plait.providers import (
    Reply,
    Request,
    ScriptedProvider,
    StreamEvent,
    TextDelta,
    Usage,
)
from plait.records import ToolCall
from plait.run import CONTINUE, INTERRUPTED, IterationEnd, RecordAdded, ToolFinished, ToolStarted
from plait.session import SessionWorkspace, host_of
from plait.tools import ToolContext, tool
from plait.views import model_messages


class Puppet:
    """A provider scripted step by step; a step may hang or fail part-way through."""

    name = "puppet"
    model = "puppet-1"

    def __init__(self, steps: list[str | Reply]) -> None:
        self.steps = list(steps)
        self.requests: list[Request] = []
        self.release = asyncio.Event()

    async def stream(self, request: Request) -> AsyncIterator[StreamEvent]:
        self.requests.append(request)
        step = self.steps.pop(0)
        if step == "hang":
            yield TextDelta("half an ans")
            await asyncio.Event().wait()  # until cancelled
        if step == "fail":
            yield TextDelta("half")
            raise ProviderError("puppet", "connection reset")
        if step == "wait":
            await self.release.wait()
            step = "done waiting"
        inner = ScriptedProvider([step])
        async for event in inner.stream(request):
            yield event


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    ws = tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=tmp_path / "plait.db") as c:
        yield c


def _session(client: Client, tmp_path: Path) -> Session:
    box = tmp_path / "box"
    box.mkdir(exist_ok=True)
    s = client.sessions.create([{"role": "system", "content": "You are terse."}])
    return s.to("local", spec=str(box))


def _call(name: str, cid: str = "c1", **args: object) -> Reply:
    return Reply(tool_calls=(ToolCall(cid, name, dict(args)),), finish_reason="tool_calls")


def test_prompt_records_the_exchange_and_adds_up_usage(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    provider = ScriptedProvider(
        [Reply("Hi.", usage=Usage(12, 3, 4)), Reply("Bye.", usage=Usage(20, 2))]
    )
    first = asyncio.run(s.prompt("hello", provider=provider))
    asyncio.run(s.prompt("goodbye", provider=provider))
    assert first.text == "Hi." and first.events == ()
    assert [m.text for m in s.history()] == ["hello", "Hi.", "goodbye", "Bye."]
    usage = s.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cached_tokens) == (32, 5, 4)
    assert usage.total_tokens == 37 and usage.replies == 2
    assert s.resumable() is None
    timing = s.transcript.records[-1].meta["timing"]
    assert timing["end_us"] >= timing["start_us"]


def test_stream_yields_deltas_records_tools_and_iteration_ends(
    client: Client, tmp_path: Path
) -> None:
    s = _session(client, tmp_path)
    (tmp_path / "box" / "a.txt").write_text("A")
    provider = ScriptedProvider([_call("read_file", path="a.txt"), "It says A."])

    async def main() -> tuple[list[object], object]:
        run = s.stream("read a.txt", provider=provider, keep_events=True)
        events = [event async for event in run]
        return events, await run

    events, result = asyncio.run(main())
    types = [e.type for e in events]
    assert types[0] == "record" and isinstance(events[0], RecordAdded)
    assert events[0].record.kind == "user"
    assert "text_delta" in types and "finish" in types
    started = [e for e in events if isinstance(e, ToolStarted)]
    finished = [e for e in events if isinstance(e, ToolFinished)]
    assert [e.call.name for e in started] == ["read_file"]
    assert finished[0].ok and finished[0].content == "A"
    ends = [e for e in events if isinstance(e, IterationEnd)]
    assert [e.step for e in ends] == [1, 2] and ends[0].session_id == s.id
    assert types.index("tool_start") < types.index("tool_end")
    assert result.text == "It says A." and len(result.events) == len(events)  # type: ignore[attr-defined]


def test_run_is_the_blocking_form_and_refuses_inside_an_event_loop(
    client: Client, tmp_path: Path
) -> None:
    s = _session(client, tmp_path)
    result = s.run("hi", provider=ScriptedProvider(["hello"]))
    assert result.text == "hello"

    async def inside() -> None:
        s.run("again", provider=ScriptedProvider(["x"]))

    with pytest.raises(InvalidArgumentError, match="await prompt"):
        asyncio.run(inside())
    assert len(s.history()) == 2  # nothing written by the refused call


def test_bad_arguments_write_nothing(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    before = s.transcript.length
    p = ScriptedProvider(["x"])
    for kwargs in ({"timeout": 0}, {"timeout": -1}, {"max_steps": 0}, {"tools": ["shell"]}):
        with pytest.raises(InvalidArgumentError):
            asyncio.run(s.prompt("hi", provider=p, **kwargs))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        asyncio.run(s.prompt("   ", provider=p))
    with pytest.raises(InvalidArgumentError):  # a model spec is not remembered either
        asyncio.run(s.prompt("hi", provider="scripted:remember-me", timeout=-1))
    assert s.transcript.length == before and not s.live.running and "model" not in s.settings


def test_a_client_runs_one_thing_at_a_time(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    other = client.sessions.create([{"role": "user", "content": "x"}])
    provider = Puppet(["wait"])

    async def main() -> None:
        run = s.stream("slow one", provider=provider)
        while not provider.requests:  # the run is in its model call
            await asyncio.sleep(0.001)
        assert s.live.running
        with pytest.raises(SessionBusyError):
            s.stream("second", provider=ScriptedProvider(["no"]))
        with pytest.raises(SessionBusyError):
            s.stream("second", provider="scripted:other")
        assert "model" not in s.settings
        with pytest.raises(SessionBusyError):
            await other.prompt("elsewhere", provider=ScriptedProvider(["no"]))
        provider.release.set()
        assert (await run).text == "done waiting"
        assert not s.live.running
        # Once it ended, the other session may run (and becomes current).
        await other.prompt("now", provider=ScriptedProvider(["yes"]))
        assert other.current and not s.current

    asyncio.run(main())


def test_steer_adds_a_user_message_before_the_next_model_call(
    client: Client, tmp_path: Path
) -> None:
    s = _session(client, tmp_path)
    gate = asyncio.Event()

    @tool
    async def slow(ctx: ToolContext) -> str:
        """Wait for the gate."""
        await gate.wait()
        return "slow done"

    provider = ScriptedProvider([_call("slow"), "Steered answer."])

    async def main() -> None:
        run = s.stream("start", provider=provider, tools=[slow])
        async for event in run:
            if isinstance(event, ToolStarted):
                s.steer("use tabs, not spaces")
                gate.set()
        await run

    asyncio.run(main())
    roles = [(m.role, m.text) for m in s.history()]
    assert roles[-3:] == [
        ("tool", "slow done"),
        ("user", "use tabs, not spaces"),
        ("assistant", "Steered answer."),
    ]
    assert provider.requests[1].messages[-1].text == "use tabs, not spaces"
    assert s.transcript.records[-2].meta == {"steered": True}
    with pytest.raises(NothingToDoError):
        s.steer("too late")


def test_a_steer_during_the_final_reply_gets_one_more_model_call(
    client: Client, tmp_path: Path
) -> None:
    s = _session(client, tmp_path)
    provider = Puppet(["wait", "Read your note."])

    async def main() -> None:
        run = s.stream("go", provider=provider)
        while not provider.requests:  # the run is in its first model call
            await asyncio.sleep(0.001)
        s.steer("one more thing")
        provider.release.set()
        result = await run
        assert result.text == "Read your note." and result.steps == 2

    asyncio.run(main())
    texts = [m.text for m in s.history()]
    assert texts[-3:] == ["done waiting", "one more thing", "Read your note."]


def test_timeout_keeps_the_cut_reply_and_resume_retries_it(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    with pytest.raises(RunTimeoutError) as caught:
        asyncio.run(s.prompt("long task", provider=Puppet(["hang"]), timeout=0.2))
    assert isinstance(caught.value, TimeoutError) and caught.value.timeout == 0.2
    cut = s.transcript.records[-1]
    assert cut.kind == "assistant" and cut.meta["finish_reason"] == "interrupted"
    assert cut.text == "half an ans"
    info = s.resumable()
    assert info is not None and info.kind == "retry_response"
    # The cut reply is never sent again; the model starts it over.
    assert [m.role for m in model_messages(s.transcript.records)] == ["system", "user"]
    provider = ScriptedProvider(["The whole answer."])
    result = asyncio.run(s.resume(provider=provider, timeout=5))
    assert result.text == "The whole answer."
    assert [m.role for m in provider.requests[0].messages] == ["system", "user"]
    assert s.resumable() is None
    with pytest.raises(NothingToDoError, match="not interrupted"):
        asyncio.run(s.resume(provider=provider))


def test_cancelling_during_a_tool_answers_it_as_interrupted(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    ran: list[str] = []

    @tool
    async def forever(ctx: ToolContext) -> str:
        """Never returns."""
        ran.append("forever")
        await asyncio.Event().wait()
        return "unreachable"

    reply = Reply(
        tool_calls=(ToolCall("a", "forever", {}), ToolCall("b", "forever", {})),
        finish_reason="tool_calls",
    )

    async def main() -> None:
        run = s.stream("go", provider=ScriptedProvider([reply]), tools=[forever])
        with pytest.raises(RunInterruptedError):
            async for event in run:
                if isinstance(event, ToolStarted):
                    run.cancel()
        with pytest.raises(RunInterruptedError):
            await run
        assert run.done and not s.live.running

    asyncio.run(main())
    tools = [m for m in s.history() if m.role == "tool"]
    assert [(m.tool_call_id, m.ok, m.text) for m in tools] == [
        ("a", False, INTERRUPTED),
        ("b", False, INTERRUPTED),
    ]
    last = s.transcript.records[-1]
    assert last.kind == "event" and last.name == "run_interrupted"  # type: ignore[attr-defined]
    assert ran == ["forever"]  # the second call never started
    info = s.resumable()
    assert info is not None and info.kind == "call_model"
    result = asyncio.run(s.resume(provider=ScriptedProvider(["Recovered."]), tools=[forever]))
    assert result.text == "Recovered." and ran == ["forever"]  # nothing re-run


def test_recover_tools_after_a_crash_never_reruns_a_tool(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    s.inject({"role": "user", "content": "deploy"})
    s.inject(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "d1", "name": "deploy", "arguments": {}}],
        }
    )
    ran: list[str] = []

    @tool
    def deploy() -> str:
        """Deploys."""
        ran.append("deploy")
        return "deployed"

    info = s.resumable()
    assert info is not None and info.kind == "recover_tools"
    assert [c.id for c in info.missing] == ["d1"] and "may or may not" in info.description
    assert s.transcript.records[-1].kind == "assistant"  # resumable() wrote nothing
    provider = ScriptedProvider(["It may have deployed; check before retrying."])
    asyncio.run(s.resume(provider=provider, tools=[deploy]))
    assert ran == []
    results = [m for m in s.history() if m.role == "tool"]
    assert [(m.tool_call_id, m.ok, m.text) for m in results] == [("d1", False, INTERRUPTED)]
    assert provider.requests[0].messages[-1].role == "tool"


def test_resume_asks_again_a_call_whose_approval_was_never_answered(
    client: Client, tmp_path: Path
) -> None:
    """A call waiting for its approval when its run died never started: resume asks again
    and runs it, while a call that may have started beside it is recorded as interrupted."""
    s = _session(client, tmp_path)
    s.inject({"role": "user", "content": "deploy and report"})
    s.inject(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "r1", "name": "report", "arguments": {}},
                {"id": "d1", "name": "deploy", "arguments": {}},
            ],
        }
    )
    # d1's approval was asked (the server's route event) and never answered.
    s.transcript.log_event(
        "live_session_permission_route",
        {"client_id": "tui", "request_id": "q1", "request": {"id": "d1", "tool": "deploy"}},
    )
    ran: list[str] = []

    @tool
    def deploy() -> str:
        """Deploys."""
        ran.append("deploy")
        return "deployed"

    @tool
    def report() -> str:
        """Reports."""
        ran.append("report")
        return "reported"

    info = s.resumable()
    assert info is not None and info.kind == "recover_tools"
    assert [c.id for c in info.unstarted] == ["d1"] and "asked again" in info.description
    asked: list[str] = []

    async def approve(call: ToolCall) -> bool:
        asked.append(call.id)
        return True

    provider = ScriptedProvider(["Deployed; the report may not have run."])
    asyncio.run(s.resume(provider=provider, tools=[deploy, report], on_approval=approve))
    assert ran == ["deploy"] and asked == ["d1"]  # asked again, then run; report not re-run
    results = {m.tool_call_id: (m.ok, m.text) for m in s.history() if m.role == "tool"}
    assert results == {"r1": (False, INTERRUPTED), "d1": (True, "deployed")}
    assert [m.role for m in provider.requests[0].messages][-3:] == ["assistant", "tool", "tool"]


def test_resume_runs_again_a_call_of_an_idempotent_tool(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    s.inject({"role": "user", "content": "look"})
    s.inject(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "l1", "name": "look", "arguments": {}}],
        }
    )
    ran: list[str] = []

    @tool(idempotent=True)
    def look() -> str:
        """Looks; doing it twice changes nothing."""
        ran.append("look")
        return "seen"

    asyncio.run(s.resume(provider=ScriptedProvider(["Seen."]), tools=[look]))
    assert ran == ["look"]
    [result] = [m for m in s.history() if m.role == "tool"]
    assert (result.tool_call_id, result.ok, result.text) == ("l1", True, "seen")


def test_a_new_prompt_on_a_crashed_transcript_repairs_it_first(
    client: Client, tmp_path: Path
) -> None:
    s = _session(client, tmp_path)
    s.inject({"role": "user", "content": "a"})
    s.inject({"role": "assistant", "content": "", "tool_calls": [{"id": "x", "name": "shell"}]})
    provider = ScriptedProvider(["ok"])
    asyncio.run(s.prompt("b", provider=provider))
    roles = [m.role for m in provider.requests[0].messages]
    assert roles == ["system", "user", "assistant", "tool", "user"]


def test_continue_response_asks_the_model_to_continue(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    cut = ScriptedProvider([Reply("Roses are", finish_reason="length")])
    asyncio.run(s.prompt("write a poem", provider=cut))
    info = s.resumable()
    assert info is not None and info.kind == "continue_response"
    provider = ScriptedProvider([" red."])
    asyncio.run(s.resume(provider=provider))
    sent = provider.requests[0].messages
    assert (sent[-2].text, sent[-1].text) == ("Roses are", CONTINUE)
    assert s.transcript.records[-2].meta == {"resume": "continue_response"}


def test_a_provider_failure_keeps_what_arrived_and_is_retried(
    client: Client, tmp_path: Path
) -> None:
    s = _session(client, tmp_path)
    with pytest.raises(ProviderError, match="connection reset"):
        asyncio.run(s.prompt("q", provider=Puppet(["fail"])))
    cut = s.transcript.records[-1]
    assert cut.meta["finish_reason"] == "error" and "connection reset" in cut.meta["error"]
    info = s.resumable()
    assert info is not None and info.kind == "retry_response"


def test_nothing_to_resume(client: Client, tmp_path: Path) -> None:
    fresh = client.session
    assert fresh.resumable() is None
    with pytest.raises(NothingToDoError):
        asyncio.run(fresh.resume(provider=ScriptedProvider(["x"])))
    s = _session(client, tmp_path)
    assert s.resumable() is None  # a system prompt alone is not an interrupted request
    s.inject({"role": "user", "content": "pending"})
    info = s.resumable()
    assert info is not None and info.kind == "call_model"
    assert asyncio.run(s.resume(provider=ScriptedProvider(["answered"]))).text == "answered"


def test_ask_adds_nothing_and_sees_the_conversation(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    asyncio.run(s.prompt("my name is Ada", provider=ScriptedProvider(["Noted."])))
    before = s.live.version
    provider = ScriptedProvider(["Your name is Ada.", "Ada again."])
    assert asyncio.run(s.ask("what is my name?", provider=provider)) == "Your name is Ada."
    sent = provider.requests[0]
    assert [m.text for m in sent.messages][-3:] == ["my name is Ada", "Noted.", "what is my name?"]
    assert sent.tools == ()

    async def pieces() -> list[str]:
        return [p async for p in s.ask_stream("again?", provider=provider)]

    got = asyncio.run(pieces())
    assert len(got) > 1 and "".join(got) == "Ada again."
    assert s.live.version == before
    with pytest.raises(InvalidArgumentError):
        s.ask_stream(" ")


def test_name_it(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    assert asyncio.run(s.name_it(provider=ScriptedProvider(["unused"]))) is None
    asyncio.run(s.prompt("refactor the parser", provider=ScriptedProvider(["Done."])))
    provider = ScriptedProvider(['"Parser refactor."\nextra line'])
    assert asyncio.run(s.name_it(provider=provider)) == "Parser refactor"
    assert s.title == "Parser refactor"
    assert "refactor the parser" in provider.requests[0].messages[-1].text
    # An existing title is left alone (and returned); the model is not asked.
    again = ScriptedProvider([])
    assert asyncio.run(s.name_it(provider=again)) == "Parser refactor" and again.requests == []
    # A blank answer falls back to the first request's words.
    t = _session(client, tmp_path)
    asyncio.run(t.prompt("make the build faster please", provider=ScriptedProvider(["ok"])))
    named = asyncio.run(t.name_it(provider=ScriptedProvider(["  "])))
    assert named == "make the build faster please"


def test_on_question_offers_ask_user(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    provider = ScriptedProvider([_call("ask_user", question="Which branch?"), "Using main."])
    asked: list[str] = []

    async def answer(question: str) -> str:
        asked.append(question)
        return "main"

    asyncio.run(s.prompt("merge it", provider=provider, on_question=answer))
    assert asked == ["Which branch?"]
    assert "ask_user" in [t.name for t in provider.requests[0].tools]
    result = next(m for m in s.history() if m.role == "tool")
    assert (result.ok, result.text) == (True, "main")


def test_subscribers_see_events_with_current_id(client: Client, tmp_path: Path) -> None:
    s = _session(client, tmp_path)
    seen: list[tuple[str, str | None]] = []

    def watch(event: object) -> None:
        seen.append((event.type, current_id()))

    def broken(event: object) -> None:
        raise RuntimeError("subscriber bug")

    unsubscribe = s.live.subscribe(watch)
    s.live.subscribe(broken)
    fork = s.fork()
    asyncio.run(s.prompt("hi", provider=ScriptedProvider(["hello"])))
    assert ("iteration_end", s.id) in seen
    assert {sid for _, sid in seen} == {s.id}
    assert current_id() is None
    count = len(seen)
    asyncio.run(fork.prompt("hi", provider=ScriptedProvider(["hello"])))
    assert len(seen) == count  # a fork does not copy subscribers
    s.reset()
    unsubscribe()
    asyncio.run(s.prompt("again", provider=ScriptedProvider(["x"])))
    assert len(seen) == count
    with pytest.raises(InvalidArgumentError):
        s.live.subscribe("not callable")  # type: ignore[arg-type]


def test_the_session_remembers_a_model_spec(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = _session(client, tmp_path)
    picked: list[str | None] = []
    import plait.session.runs as session_module

    def fake_select(spec: str | None) -> ScriptedProvider:
        picked.append(spec)
        if spec == "gone:model":
            raise MissingDependencyError("gone", "gone")
        return ScriptedProvider(["ok"])

    monkeypatch.setattr(session_module, "select_provider", fake_select)
    asyncio.run(s.prompt("hi"))  # nothing stored, nothing named: the default
    asyncio.run(s.prompt("hi", provider="openai:gpt-4o"))  # named: remembered
    asyncio.run(s.prompt("hi"))
    assert picked == [None, "openai:gpt-4o", "openai:gpt-4o"]
    assert s.settings["model"] == "openai:gpt-4o"
    reopened = client.open(s.id)
    assert reopened.settings["model"] == "openai:gpt-4o"
    s.settings.set(model="gone:model")  # the configuration no longer has it
    picked.clear()
    asyncio.run(s.prompt("hi"))
    assert picked == ["gone:model", None]


def _long_session(client: Client, tmp_path: Path, pairs: int, words: int) -> Session:
    s = _session(client, tmp_path)
    s.transcript.inject_many(
        [
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"part {i} " + "word " * words,
            }
            for i in range(pairs * 2)
        ]
    )
    return s


def test_a_run_compacts_by_itself_at_the_models_compact_percent(
    client: Client, tmp_path: Path
) -> None:
    s = _long_session(client, tmp_path, pairs=12, words=400)  # ~9.6k tokens; gpt-4: 8,192
    assert s.transcript.compaction_due(model="gpt-4")
    provider = ScriptedProvider(["Still with you."], model="gpt-4")
    events: list[object] = []
    asyncio.run(s.prompt("next step?", provider=provider, on_event=events.append))
    summaries = [r for r in s.transcript.records if r.kind == "summary"]
    assert len(summaries) == 1
    sent = provider.requests[0].messages
    assert [m.role for m in sent][:2] == ["system", "summary"]
    assert sent[-1].text == "next step?"  # the newest request is never folded
    assert any(isinstance(e, RecordAdded) and e.record.kind == "summary" for e in events)
    assert not s.transcript.compaction_due(model="gpt-4")
    # A big-window model is not compacted.
    t = _long_session(client, tmp_path, pairs=12, words=400)
    asyncio.run(t.prompt("next?", provider=ScriptedProvider(["ok"], model="gpt-4o")))
    assert not any(r.kind == "summary" for r in t.transcript.records)


def test_self_compaction_is_offered_and_runs_when_in_force(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLAIT_SELF_COMPACTION", raising=False)
    s = _long_session(client, tmp_path, pairs=10, words=5)
    off = ScriptedProvider(["fine"])
    asyncio.run(s.prompt("hi", provider=off))
    assert "compact_context" not in [t.name for t in off.requests[0].tools]
    s.settings.use_self_compaction(True)
    assert s.settings.self_compaction and s.settings.self_compaction_choice is True
    on = ScriptedProvider([_call("compact_context"), "Compacted and continuing."])
    result = asyncio.run(s.prompt("tidy up", provider=on))
    assert "compact_context" in [t.name for t in on.requests[0].tools]
    tool_result = next(m for m in reversed(s.history(full=True)) if m.role == "tool")
    assert tool_result.ok and tool_result.text.startswith("Compacted:")
    assert any(r.kind == "summary" for r in s.transcript.records)
    assert [m.role for m in on.requests[1].messages][:2] == ["system", "summary"]
    assert result.text == "Compacted and continuing."
    monkeypatch.setenv("PLAIT_SELF_COMPACTION", "1")
    s.settings.use_self_compaction(None)
    assert s.settings.self_compaction and s.settings.self_compaction_choice is None


def test_the_system_prompt_survives_trim_and_reset(client: Client, tmp_path: Path) -> None:
    s = _long_session(client, tmp_path, pairs=3, words=2)
    s.trim(2)
    assert all(r.kind != "system" for r in s.transcript.records)
    provider = ScriptedProvider(["a", "b", "c"])
    asyncio.run(s.prompt("after trim", provider=provider))
    sent = provider.requests[0].messages
    assert (sent[0].role, sent[0].text) == ("system", "You are terse.")
    assert [m.role for m in sent[1:]] == ["user", "assistant", "user"]
    s.reset()
    asyncio.run(s.prompt("after reset", provider=provider))
    assert [(m.role, m.text) for m in provider.requests[1].messages] == [
        ("system", "You are terse."), ("user", "after reset")
    ]
    # A new system prompt in view wins over the hidden one.
    s.inject({"role": "system", "content": "Now be verbose."})
    asyncio.run(s.prompt("again", provider=provider))
    assert provider.requests[2].messages[0].text == "Now be verbose."
    assert s.transcript.request_messages()[0].text == "Now be verbose."


def test_a_failing_summarizer_falls_back_to_the_model_free_compaction(
    client: Client, tmp_path: Path
) -> None:
    s = _long_session(client, tmp_path, pairs=12, words=400)
    model = Puppet(["fail", "Answered after compacting."])
    model.name, model.model = "openai", "gpt-4"  # a capable provider: the llm strategy first
    result = asyncio.run(s.prompt("go on", provider=model))
    assert result.text == "Answered after compacting."
    assert len(model.requests) == 2  # the summary request (failed), then the turn
    summaries = [r for r in s.transcript.records if r.kind == "summary"]
    assert len(summaries) == 1 and "part 0" in summaries[0].text  # extractive


def test_a_failure_before_the_tools_run_answers_every_call(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from plait.errors import NoSandboxError

    def no_sandbox(workspace: SessionWorkspace) -> ToolContext:
        raise NoSandboxError("no sandbox to take")

    monkeypatch.setattr(SessionWorkspace, "tool_context", no_sandbox)
    s = _session(client, tmp_path)
    reply = Reply(
        tool_calls=(ToolCall("a", "list_files", {}), ToolCall("b", "list_files", {})),
        finish_reason="tool_calls",
    )
    with pytest.raises(NoSandboxError):
        asyncio.run(s.prompt("list", provider=ScriptedProvider([reply])))
    tools = [m for m in s.history() if m.role == "tool"]
    assert [(m.tool_call_id, m.ok) for m in tools] == [("a", False), ("b", False)]
    event = s.transcript.records[-1]
    assert event.kind == "event" and event.data["error"] == "NoSandboxError"  # type: ignore[attr-defined]
    info = s.resumable()
    assert info is not None and info.kind == "call_model"


def test_usage_is_added_up_incrementally_and_follows_the_view(
    client: Client, tmp_path: Path
) -> None:
    s = _session(client, tmp_path)
    provider = ScriptedProvider([Reply(f"r{i}", usage=Usage(10 * i, i, 1)) for i in range(1, 7)])
    for i in range(1, 4):
        asyncio.run(s.prompt(f"q{i}", provider=provider))
        assert s.usage.input_tokens == sum(10 * k for k in range(1, i + 1))
    read: list[tuple[int, int]] = []
    real = host_of(s).store.read

    def spy(row: object, lo: int, hi: int) -> list[object]:
        read.append((lo, hi))
        return real(row, lo, hi)  # type: ignore[arg-type]

    host_of(s).store.read = spy  # type: ignore[method-assign]
    try:
        asyncio.run(s.prompt("q4", provider=provider))
        read.clear()
        usage = s.usage
    finally:
        del host_of(s).store.read
    assert (usage.input_tokens, usage.output_tokens, usage.replies) == (100, 10, 4)
    assert read and all(hi - lo == 2 for lo, hi in read)  # only the new request and reply
    s.trim(2)  # the view moves: only the last reply is in view
    assert (s.usage.input_tokens, s.usage.replies) == (40, 1)
    fork = s.fork()
    asyncio.run(fork.prompt("q5", provider=provider))
    assert fork.usage.input_tokens == 90 and s.usage.input_tokens == 40
