"""pydantic-ai message history and its ConversationStore, backed by plait.

Driven with pydantic-ai's offline models (``TestModel``, ``FunctionModel``) on
SQLite and PostgreSQL: multi-turn runs whose second turn loads its history from
plait, messages that round-trip with no field lost, and the ConversationStore's
contract (revisions as compare-and-set, forks sharing records, branches kept).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.conversation import Conversation
from pydantic_ai.conversation_store import ConversationConflict, InMemoryConversationStore
from pydantic_ai.messages import (
    BinaryContent,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

from plait import Client
from plait.integrations.pydantic_ai import (
    PlaitConversationStore,
    from_records,
    load_messages,
    save_messages,
    to_plait_messages,
)
from tests.integrations._stores import target

__all__ = ["target"]

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)

MESSAGES: list[ModelMessage] = [
    ModelRequest(
        parts=[
            SystemPromptPart("You are terse.", timestamp=T0),
            UserPromptPart(
                ["What is in this picture?", ImageUrl("https://example.com/cat.png")],
                timestamp=T0,
            ),
        ],
        instructions="Answer in English.",
        timestamp=T0,
        run_id="run-1",
        metadata={"tenant": "acme", "n": [1, 2.5, None]},
    ),
    ModelResponse(
        parts=[
            ThinkingPart("Looks feline.", signature="sig-1"),
            TextPart("Let me look it up."),
            ToolCallPart("lookup", {"q": "cat"}, tool_call_id="call_1"),
            NativeToolCallPart("web_search", {"query": "cat"}, tool_call_id="ws_1"),
        ],
        usage=RequestUsage(input_tokens=12, output_tokens=7),
        model_name="gpt-test",
        timestamp=T0,
        provider_name="openai",
        provider_response_id="resp_1",
        finish_reason="tool_call",
    ),
    ModelRequest(
        parts=[
            ToolReturnPart(
                "lookup", {"species": "felis catus"}, tool_call_id="call_1", timestamp=T0
            ),
            ToolReturnPart(
                "lookup",
                "bad args, try again",
                tool_call_id="call_2",
                outcome="retried",
                timestamp=T0,
            ),
            RetryFeedbackPart(
                "please answer in one word", retry=RetryInfo(cause="model_retry"), timestamp=T0
            ),
        ],
        timestamp=T0,
    ),
    ModelResponse(parts=[TextPart("A cat. 🐈")], model_name="gpt-test", timestamp=T0),
]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _json(messages: list[ModelMessage]) -> bytes:
    return ModelMessagesTypeAdapter.dump_json(messages)


def test_messages_round_trip_with_no_field_lost(target: str, tmp_path: Path) -> None:
    with Client(tmp_path, store=target) as client:
        session = client.sessions.create(to_plait_messages(MESSAGES), session_id="chat/1")
        back = load_messages(client.open("chat/1"))
        assert back == MESSAGES
        assert _json(back) == _json(MESSAGES)
        assert from_records(session.transcript.records) == MESSAGES


def test_parts_map_to_the_records_a_reader_expects(tmp_path: Path) -> None:
    with Client(tmp_path, store=":memory:") as client:
        session = client.sessions.create(to_plait_messages(MESSAGES))
        kinds = [r.kind for r in session.transcript.records]
        assert kinds == [
            "system",
            "system",
            "user",  # instructions, system prompt, user prompt
            "opaque",
            "assistant",
            "opaque",  # thinking, text + tool call, built-in call
            "tool",
            "tool",
            "user",  # tool return, retry with a tool, retry without
            "assistant",
        ]
        history = session.history()
        assert [m.role for m in history] == [
            "user",
            "assistant",
            "tool",
            "tool",
            "user",
            "assistant",
        ]
        assert history[0].text == "What is in this picture?" and history[0].images == 1
        assert history[1].text == "Let me look it up."
        assert history[1].tool_calls[0].name == "lookup"
        assert history[1].tool_calls[0].arguments == {"q": "cat"}
        assert history[2].tool_call_id == "call_1" and history[2].ok is True
        assert history[2].text == '{"species":"felis catus"}'
        assert history[3].ok is False and history[3].tool_call_id == "call_2"
        assert history[5].text == "A cat. 🐈"
        opaque = [r for r in session.transcript.records if r.kind == "opaque"]
        assert {r.format for r in opaque} == {"pydantic-ai"}  # type: ignore[attr-defined]
        assert opaque[0].item["part_kind"] == "thinking"  # type: ignore[attr-defined]
        assert session.transcript.length == len(kinds)


def test_a_prompts_typed_text_is_its_text_and_only_images_count_as_images(
    tmp_path: Path,
) -> None:
    prompt = UserPromptPart(
        [
            "Compare",
            TextContent("these two files"),
            BinaryContent(b"%PDF-1.7", media_type="application/pdf"),
            BinaryContent(b"\x89PNG", media_type="image/png"),
            DocumentUrl("https://example.com/a.pdf"),
        ],
        timestamp=T0,
    )
    messages: list[ModelMessage] = [ModelRequest(parts=[prompt], timestamp=T0)]
    with Client(tmp_path, store=":memory:") as client:
        session = client.sessions.create(to_plait_messages(messages))
        (said,) = session.history()
        assert said.text == "Compare\nthese two files"
        assert said.images == 1  # the PNG; a PDF is no image
        # As pydantic-ai's own JSON reads them back (a PNG's BinaryContent as a BinaryImage).
        assert from_records(session.transcript.records) == ModelMessagesTypeAdapter.validate_json(
            _json(messages)
        )


def _weather_agent(model: Any) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(model, instructions="Be brief.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    return agent


def test_second_turn_loads_its_history_from_plait(target: str, tmp_path: Path) -> None:
    seen: list[list[ModelMessage]] = []

    def second(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        return ModelResponse(parts=[TextPart("Still sunny.")])

    async def scenario() -> None:
        with Client(tmp_path, store=target) as client:
            session = client.open("user/42")
            first = await _weather_agent(TestModel()).run("Weather in Paris?")
            save_messages(session, first.new_messages())

        with Client(tmp_path, store=target) as client:  # another process, later
            session = client.open("user/42")
            history = load_messages(session)
            assert history == first.all_messages()
            again = await _weather_agent(FunctionModel(second)).run(
                "And tomorrow?", message_history=history
            )
            assert again.output == "Still sunny."
            sent = seen[-1]
            assert sent[: len(history)] == history
            save_messages(session, again.new_messages())
            assert load_messages(session) == again.all_messages()
            roles = [m.role for m in session.history()]
            assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]

    run(scenario())


def test_a_plait_compaction_is_what_the_next_turn_loads(tmp_path: Path) -> None:
    async def scenario() -> None:
        with Client(tmp_path, store=":memory:") as client:
            session = client.open("long")
            agent: Agent[None, str] = Agent(TestModel(custom_output_text="ok"))
            history: list[ModelMessage] = []
            for n in range(4):
                result = await agent.run(f"question {n}", message_history=history)
                save_messages(session, result.new_messages())
                history = load_messages(session)
            await session.compact(keep_last=2)
            loaded = load_messages(session)
            first = loaded[0]
            assert isinstance(first, ModelRequest)
            assert isinstance(first.parts[0], SystemPromptPart)
            assert len(loaded) == 3  # the summary, then the last request and reply
            session.transcript.uncompact()
            assert load_messages(session) == history

    run(scenario())


# -- the ConversationStore ---------------------------------------------------------------


def test_store_load_run_save_load(target: str) -> None:
    async def scenario() -> None:
        store = PlaitConversationStore(target)
        agent = _weather_agent(TestModel())
        assert await store.load("c/1") is None
        conversation = Conversation(conversation_id="c/1")
        result = await agent.run("Weather in Paris?", conversation=conversation)
        entries = await store.save(result)
        assert len(entries) == len(result.all_messages())
        loaded = await store.load("c/1")
        assert loaded is not None and loaded.messages == result.all_messages()
        assert loaded.usage == result.usage
        assert loaded.revision == result.conversation.revision
        second = await agent.run("And tomorrow?", conversation=loaded)
        await store.save(second)
        again = await store.load("c/1")
        assert again is not None and again.messages == second.all_messages()
        assert [e.id for e in (await store.load_entries("c/1") or [])][:2] == [
            e.id for e in entries[:2]
        ]
        window = await store.load("c/1", limit=2)
        assert window is not None and window.messages == second.all_messages()[-2:]
        # The conversation is a plait session under the same id.
        plait = store.client.open("c/1")
        assert [m.role for m in plait.history()][:2] == ["user", "assistant"]
        store.close()

    run(scenario())


def test_store_revisions_are_compare_and_set(target: str) -> None:
    async def scenario() -> None:
        store = PlaitConversationStore(target)
        agent: Agent[None, str] = Agent(TestModel(custom_output_text="hi"))
        await store.save(await agent.run("one", conversation=Conversation(conversation_id="x")))
        a, b = await store.load("x"), await store.load("x")
        assert a is not None and b is not None and a.revision == b.revision
        await store.save(await agent.run("from a", conversation=a))
        with pytest.raises(ConversationConflict):
            await store.save(await agent.run("from b", conversation=b))
        with pytest.raises(ConversationConflict):  # it exists: a new one cannot take its id
            await store.save(await agent.run("new", conversation=Conversation(conversation_id="x")))
        stale = b.revision
        assert stale is not None
        with pytest.raises(ConversationConflict):
            await store.delete_record("x", expected_revision=stale)
        await store.delete("x")
        assert await store.load("x") is None
        # Created again under the same id: the copy loaded before the delete cannot save over it.
        await store.save(await agent.run("anew", conversation=Conversation(conversation_id="x")))
        with pytest.raises(ConversationConflict):
            await store.save(await agent.run("late", conversation=a))
        store.close()

    run(scenario())


def test_store_forks_share_records_and_branches_keep_the_history_they_leave(target: str) -> None:
    async def scenario() -> None:
        store = PlaitConversationStore(target)
        agent: Agent[None, str] = Agent(TestModel(custom_output_text="ok"))
        conversation = Conversation(conversation_id="main")
        for prompt in ("one", "two", "three"):
            result = await agent.run(prompt, conversation=conversation)
            await store.save(result)
            conversation = result.conversation
        full = conversation.messages
        assert len(full) == 6

        fork = await store.fork("main", at=2, new_conversation_id="main/alt")
        assert fork.messages == full[:2]
        plait_fork = store.client.open("main/alt")
        assert plait_fork.parent_session_ids == ("main",)  # shares main's records
        continued = await agent.run("alt two", conversation=fork)
        await store.save(continued)
        assert (await store.load("main/alt") or fork).messages[2:] == continued.new_messages()
        assert (await store.load("main") or fork).messages == full  # untouched

        record = await store.read_record("main")
        assert record is not None
        branched = await store.branch("main", at=4, expected_revision=record.revision)
        assert branched.messages == full[:4]
        redo = await agent.run("three, again", conversation=branched)
        await store.save(redo)
        record = await store.read_record("main")
        assert record is not None and len(record.branches) == 1
        loaded = await store.load("main")
        assert loaded is not None and loaded.messages == full[:4] + redo.new_messages()

        back = await store.branch(
            "main", from_entry=record.branches[0], expected_revision=record.revision
        )
        assert back.messages == full
        assert (await store.load("main") or back).messages == full
        listed = await store.list_conversations()
        assert {r.conversation_id for r in listed} == {"main", "main/alt"}
        store.close()

    run(scenario())


def test_store_scopes(target: str) -> None:
    async def scenario() -> None:
        store = PlaitConversationStore(target)
        agent: Agent[None, str] = Agent(TestModel(custom_output_text="ok"))
        await store.save(
            await agent.run("a", conversation=Conversation(conversation_id="a")), scope="alice"
        )
        await store.save(
            await agent.run("b", conversation=Conversation(conversation_id="b")), scope="bob"
        )
        assert [r.conversation_id for r in await store.list_conversations(scope="alice")] == ["a"]
        assert await store.load("a", scope="bob") is None
        assert await store.load("a", scope="alice") is not None
        assert len(await store.list_conversations(limit=1)) == 1
        store.close()

    run(scenario())


def test_store_after_a_plait_compaction_loads_the_view_and_keeps_saving(target: str) -> None:
    async def scenario() -> None:
        store = PlaitConversationStore(target)
        agent: Agent[None, str] = Agent(TestModel(custom_output_text="ok"))
        conversation = Conversation(conversation_id="long")
        for n in range(4):
            result = await agent.run(f"question {n}", conversation=conversation)
            await store.save(result)
            conversation = result.conversation
        full = conversation.messages
        plait = store.client.open("long")
        await plait.compact(keep_last=2)
        loaded = await store.load("long")
        assert loaded is not None and len(loaded.messages) == 3
        assert isinstance(loaded.messages[0].parts[0], SystemPromptPart)
        assert loaded.messages[1:] == full[-2:]
        more = await agent.run("question 4", conversation=loaded)
        await store.save(more)
        plait.transcript.uncompact()
        again = await store.load("long")
        assert again is not None and again.messages == full + more.new_messages()
        store.close()

    run(scenario())


_SAVER = """
import asyncio, sys
from pydantic_ai import Agent
from pydantic_ai.conversation_store import ConversationConflict, InMemoryConversationStore
from pydantic_ai.models.test import TestModel
from plait.integrations.pydantic_ai import PlaitConversationStore

async def main() -> None:
    store = PlaitConversationStore(sys.argv[1])
    agent = Agent(TestModel(custom_output_text="ok"))
    for n in range(5):
        while True:  # the store's documented retry: load again, run again, save
            conversation = await store.load("shared")
            assert conversation is not None
            try:
                await store.save(await agent.run(f"{sys.argv[2]} {n}", conversation=conversation))
                break
            except ConversationConflict:
                continue
    store.close()

asyncio.run(main())
"""


def test_two_processes_save_one_conversation_by_compare_and_set(target: str) -> None:
    import subprocess
    import sys

    async def scenario() -> None:
        store = PlaitConversationStore(target)
        agent: Agent[None, str] = Agent(TestModel(custom_output_text="ok"))
        await store.save(
            await agent.run("start", conversation=Conversation(conversation_id="shared"))
        )
        workers = [
            subprocess.Popen(
                [sys.executable, "-c", _SAVER, target, name], stderr=subprocess.PIPE, text=True
            )
            for name in ("left", "right")
        ]
        for worker in workers:
            _, errors = worker.communicate(timeout=180)
            assert worker.returncode == 0, errors
        loaded = await store.load("shared")
        assert loaded is not None
        prompts = [
            part.content
            for message in loaded.messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, UserPromptPart)
        ]
        assert sorted(prompts) == sorted(
            ["start", *(f"left {n}" for n in range(5)), *(f"right {n}" for n in range(5))]
        )
        assert len(loaded.messages) == 22  # nothing lost, nothing twice
        store.close()

    run(scenario())


def test_a_plait_fork_of_a_conversation_is_one_the_store_loads(target: str) -> None:
    async def scenario() -> None:
        store = PlaitConversationStore(target)
        agent: Agent[None, str] = Agent(TestModel(custom_output_text="ok"))
        conversation = Conversation(conversation_id="main")
        for prompt in ("one", "two"):
            result = await agent.run(prompt, conversation=conversation)
            await store.save(result, scope="ann")
            conversation = result.conversation
        plait = store.client.open("main")
        plait.fork_at(2, "main/plait-alt")  # with plait's API (or `plait sessions fork`)
        # As store.fork("main", at=2) would have it: the history kept, the scope, no usage.
        fork = await store.load("main/plait-alt", scope="ann")
        assert fork is not None and fork.messages == conversation.messages[:2]
        assert fork.usage.requests == 0
        record = await store.read_record("main/plait-alt")
        assert record is not None and record.forked_from == "main"
        listed = {r.conversation_id for r in await store.list_conversations(scope="ann")}
        assert listed == {"main", "main/plait-alt"}
        continued = await agent.run("alt two", conversation=fork)
        await store.save(continued)
        again = await store.load("main/plait-alt")
        assert again is not None and again.messages == continued.all_messages()
        whole = plait.fork("main/copy")
        copy = await store.load(whole.id)
        assert copy is not None and copy.messages == conversation.messages
        assert copy.usage == conversation.usage
        # A rewind's hidden branch is no conversation of its own.
        plait.transcript.rewind(2)
        assert {r.conversation_id for r in await store.list_conversations()} == {
            "main",
            "main/plait-alt",
            "main/copy",
        }
        store.close()

    run(scenario())


def test_a_message_with_no_json_form_is_refused_with_a_typed_error(tmp_path: Path) -> None:
    from plait.errors import InvalidArgumentError

    unwritable = ModelRequest(parts=[ToolReturnPart("f", object(), tool_call_id="c1")])

    async def scenario() -> None:
        with Client(tmp_path, store=str(tmp_path / "s.db")) as client:
            session = client.open("bad")
            with pytest.raises(InvalidArgumentError):
                save_messages(session, [MESSAGES[0], unwritable])
            assert session.transcript.length == 0  # neither message
            store = PlaitConversationStore(client)
            conversation = Conversation(conversation_id="bad/2", messages=[unwritable])
            with pytest.raises(InvalidArgumentError):
                await store.save(conversation)
            assert await store.load("bad/2") is None

    run(scenario())


def test_another_formats_item_at_the_end_leaves_the_conversation_whole(target: str) -> None:
    async def scenario() -> None:
        store = PlaitConversationStore(target)
        agent: Agent[None, str] = Agent(TestModel(custom_output_text="ok"))
        first = await agent.run("one", conversation=Conversation(conversation_id="mixed"))
        await store.save(first)
        plait = store.client.open("mixed")
        # As a plait run with another provider leaves its thinking: not pydantic-ai's.
        plait.inject({"role": "opaque", "format": "anthropic", "item": {"thinking": "hm"}})
        loaded = await store.load("mixed")
        assert loaded is not None and loaded.messages == first.all_messages()
        second = await agent.run("two", conversation=loaded)
        await store.save(second)
        entries = await store.load_entries("mixed")
        assert entries is not None
        assert [e.message for e in entries] == second.all_messages()
        assert [e.parent_id for e in entries[1:]] == [e.id for e in entries[:-1]]
        assert load_messages(store.client.open("mixed")) == second.all_messages()
        store.close()

    run(scenario())


@pytest.mark.parametrize("outcome", ["success", "failed", "denied", "interrupted", "retried"])
def test_a_tool_return_is_ok_only_when_it_succeeded(tmp_path: Path, outcome: Any) -> None:
    part = ToolReturnPart("refund", "no", tool_call_id="c1", outcome=outcome, timestamp=T0)
    with Client(tmp_path, store=":memory:") as client:
        session = client.sessions.create(to_plait_messages([ModelRequest(parts=[part])]))
        (result,) = session.history()
        assert (result.role, result.ok) == ("tool", outcome == "success")


def test_a_limit_past_the_conversations_length_loads_all_of_it(target: str) -> None:
    async def scenario() -> None:
        agent: Agent[None, str] = Agent(TestModel(custom_output_text="ok"))
        reference = InMemoryConversationStore()
        store = PlaitConversationStore(target)
        for each in (reference, store):
            await each.save(await agent.run("one", conversation=Conversation(conversation_id="c")))
        whole = await store.load("c")
        assert whole is not None and len(whole.messages) == 2
        for limit in (0, 1, 2, 3, 50):
            mine = await store.load("c", limit=limit)
            theirs = await reference.load("c", limit=limit)
            assert mine is not None and theirs is not None
            assert len(mine.messages) == len(theirs.messages) == min(limit, 2)
            assert mine.messages == whole.messages[2 - min(limit, 2) :]
        store.close()

    run(scenario())
