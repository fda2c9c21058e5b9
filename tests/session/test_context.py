"""``session.context()`` and friends on every store: counted once, read in O(1) (issue 4)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import plait.context._tokens as tokens_module
from plait import Client, Session
from plait.context import SHARE_NAMES, count_record, count_text
from plait.errors import InvalidArgumentError, MissingDependencyError, StoreError
from plait.providers.scripted import ScriptedProvider
from plait.records import Record, SummaryRecord, newest_summary
from plait.store import Store


def converse(s: Session, turns: int, tag: str = "t") -> None:
    for i in range(turns):
        s.inject({"role": "user", "content": f"{tag} request {i} " + "word " * i})
        s.inject(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": f"{tag}{i}", "name": "read", "arguments": {"n": i}}],
            }
        )
        s.inject(
            {
                "role": "tool",
                "tool_call_id": f"{tag}{i}",
                "tool_name": "read",
                "content": "output " * (10 + i),
            }
        )
        s.inject({"role": "assistant", "content": f"{tag} answer {i}"})


def reference(records: list[Record], encoding: str = "cl100k_base") -> list[tuple[str, int, int]]:
    """The report's shares computed the slow way: re-tokenize the history view."""
    summary = newest_summary(records)
    start = summary.folds_to if isinstance(summary, SummaryRecord) else -1
    by_kind = {"user": "User messages", "assistant": "Assistant messages", "tool": "Tool output"}
    sums = {name: [0, 0] for name in SHARE_NAMES}
    system = next((r for r in reversed(records) if r.kind == "system"), None)
    if system is not None:
        sums["System prompt"] = [count_record(system, encoding), 1]
    if summary is not None:
        sums["Compaction summary"] = [count_record(summary, encoding), 1]
    for r in records:
        if r.seq >= start and r.kind in by_kind:
            sums[by_kind[r.kind]][0] += count_record(r, encoding)
            sums[by_kind[r.kind]][1] += 1
    return [(n, t, i) for n, (t, i) in sums.items() if t or i]


def shares(s: Session, **kw: Any) -> list[tuple[str, int, int]]:
    report = s.context(**kw)
    assert report is not None
    return [(sh.name, sh.tokens, sh.items) for sh in report.shares]


def test_none_before_the_first_reply(client: Client) -> None:
    s = client.sessions.create([{"role": "system", "content": "be brief"}])
    assert s.context() is None
    s.inject({"role": "user", "content": "hello"})
    assert s.context() is None
    assert not s.transcript.compaction_due()
    s.inject({"role": "assistant", "content": "hi"})
    report = s.context()
    assert report is not None
    assert [sh.name for sh in report.shares] == [
        "System prompt",
        "User messages",
        "Assistant messages",
    ]
    assert report.window == 128_000 and not report.partial and not report.from_provider
    assert report.measured_by.endswith("/cl100k_base")
    assert report.used == sum(sh.tokens for sh in report.shares)
    assert report.free == report.window - report.used
    assert report.fraction == report.used / report.window


def test_the_report_matches_a_full_recount_through_compaction_undo_trim_and_branches(
    client: Client,
) -> None:
    s = client.sessions.create([{"role": "system", "content": "be brief"}])
    converse(s, 6)
    assert shares(s) == reference(s.transcript.records)
    assert asyncio.run(s.compact(keep_last=4)) is not None
    assert shares(s) == reference(s.transcript.records)
    converse(s, 3, "u")
    assert asyncio.run(s.compact(keep_last=2)) is not None
    assert shares(s) == reference(s.transcript.records)
    s.transcript.uncompact()
    assert shares(s) == reference(s.transcript.records)
    s.inject({"role": "system", "content": "a newer, longer system prompt for the rest"})
    converse(s, 1, "v")
    assert shares(s) == reference(s.transcript.records)
    fork = s.fork()
    converse(fork, 2, "f")
    assert shares(fork) == reference(fork.transcript.records)
    assert shares(s) == reference(s.transcript.records)
    s.trim(5)
    assert shares(s) == reference(s.transcript.records)
    merged = fork.merge(s)
    assert shares(merged) == reference(merged.transcript.records)
    at = s.fork_at(3)
    at.inject({"role": "assistant", "content": "late reply"})
    assert shares(at) == reference(at.transcript.records)


def test_a_system_prompt_hidden_by_trim_or_reset_still_counts(client: Client) -> None:
    s = client.sessions.create([{"role": "system", "content": "follow the house rules"}])
    converse(s, 3)
    system = s.transcript.records[0]
    s.trim(2)
    report = s.context()
    assert report is not None
    assert (report.shares[0].name, report.shares[0].items) == ("System prompt", 1)
    assert report.shares[0].tokens == count_record(system, "cl100k_base")
    s.reset()
    s.inject({"role": "assistant", "content": "fresh start"})
    report = s.context()
    assert report is not None
    assert [sh.name for sh in report.shares] == ["System prompt", "Assistant messages"]


def test_counted_once_then_only_added(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    s = client.sessions.create([{"role": "system", "content": "be brief"}])
    converse(s, 4)
    first = s.context()
    assert all(r.tokens is not None for r in s.transcript.records)  # the writer stored the counts

    def refuse(*args: object, **kwargs: object) -> list[int]:
        raise AssertionError("re-tokenized a stored record")

    monkeypatch.setattr(tokens_module, "count_texts", refuse)
    assert s.context() == first
    assert asyncio.run(s.compact(keep_last=2)) is not None
    monkeypatch.undo()
    assert s.context() is not None


def test_a_reader_counts_in_memory_while_another_process_writes(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = client.sessions.create([{"role": "user", "content": "hello"}])
    s.inject({"role": "assistant", "content": "hi"})
    writer_view = s.context()
    reader = Client(client.workspace, store=client.store).sessions.open(s.id)
    s.inject({"role": "user", "content": "one more question"})
    monkeypatch.setattr(client.store, "locked_elsewhere", lambda session_id: True)
    report = reader.context()
    assert report is not None and writer_view is not None
    assert report.used > writer_view.used
    assert (
        reader.transcript.records[-1].tokens is None
    )  # nothing stored while another process writes
    assert s.context() == report
    assert reader.transcript.records[-1].tokens is not None  # the writer stored it


def test_a_reader_stores_counts_when_nobody_writes_and_a_refusal_is_no_error(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = client.sessions.create([{"role": "user", "content": "hello"}])
    s.inject({"role": "assistant", "content": "hi"})
    reader = Client(client.workspace, store=client.store).sessions.open(s.id)

    def refuse(*args: object) -> bool:
        raise StoreError("attempt to write a readonly database")

    monkeypatch.setattr(client.store, "set_tallies", refuse)
    first = reader.context()
    assert first is not None and reader.transcript.records[-1].tokens is None
    monkeypatch.undo()
    assert reader.context() == first
    assert all(
        r.tokens is not None for r in reader.transcript.records
    )  # counted once, for everyone


def test_provider_usage_is_preferred_until_a_compaction(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hello there"}])
    converse(s, 3)
    usage = {"input_tokens": 400, "output_tokens": 20}
    s.inject({"role": "assistant", "content": "ok", "meta": {"model": "gpt-4o", "usage": usage}})
    after = s.inject({"role": "user", "content": "and then some more"})
    report = s.context()
    assert report is not None and report.from_provider
    assert report.used == 420 + count_record(after, "o200k_base")
    assert report.window == 128_000 and report.measured_by.endswith("/o200k_base")
    assert asyncio.run(s.compact(keep_last=2)) is not None
    report = s.context()
    assert report is not None and not report.from_provider
    assert report.used == sum(sh.tokens for sh in report.shares)


def test_tool_schemas_and_the_model_choice(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hello"}])
    s.inject({"role": "assistant", "content": "hi"})
    tool = {"name": "sh", "description": "run a command", "parameters": {"type": "object"}}
    report = s.context(model="claude-sonnet-4", tools=[tool, tool | {"name": "ls"}])
    assert report is not None and report.window == 200_000
    share = next(sh for sh in report.shares if sh.name == "Tool schemas")
    assert share.items == 2 and share.tokens > 2 * count_text("run a command", "cl100k_base")
    with pytest.raises(InvalidArgumentError):
        s.context(tools=[object()])
    # A report for another model uses its window; measured_by names the stored counts' counter.
    s.settings.set(model="gpt-4o")
    s.inject({"role": "user", "content": "counted with o200k from now on"})
    other = s.context(model="smollm2")
    assert other is not None and other.window == 8_192
    assert other.measured_by.endswith("/o200k_base")


def test_partial_when_no_tokenizer_is_available(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = client.sessions.create([{"role": "user", "content": "hello"}])
    s.inject({"role": "assistant", "content": "hi"})

    def missing(*args: object, **kwargs: object) -> list[int]:
        raise MissingDependencyError("token counting", "context")

    monkeypatch.setattr("plait.session.counting.count_records", missing)
    report = s.context()
    assert report is not None and report.partial
    monkeypatch.undo()
    report = s.context()
    assert report is not None and not report.partial and report.used > 0


def test_compaction_is_due_at_the_models_compact_percent(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hello"}])
    s.inject({"role": "assistant", "content": "hi"})
    assert not s.transcript.compaction_due("smollm2-135m")
    s.inject({"role": "tool", "tool_call_id": "c", "tool_name": "x", "content": "word " * 7000})
    assert s.transcript.compaction_due("smollm2-135m")  # 8,192 tokens, compact at 75 %
    assert not s.transcript.compaction_due("gpt-4.1")


def test_compact_summarizes_with_a_provider(client: Client) -> None:
    s = client.sessions.create([{"role": "system", "content": "be brief"}])
    converse(s, 5)
    main = ScriptedProvider(["the summary from the main model"])
    done = asyncio.run(s.compact(provider=main, keep_last=2))
    assert done is not None and done.strategy == "llm"
    assert done.summary == "the summary from the main model"
    cheap = ScriptedProvider(["a cheaper summary"])
    converse(s, 3, "u")
    done = asyncio.run(
        s.compact(strategy="llm", provider=main, summary_provider=cheap, keep_last=2)
    )
    assert done is not None and done.summary == "a cheaper summary"
    assert s.history()[0].text == "a cheaper summary"
    with pytest.raises(InvalidArgumentError):
        asyncio.run(s.compact(strategy="llm", compact_strategy="truncate"))


class FailingWrites:
    """A store whose session-row writes fail as a full disk would."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def write(self, *args: object, **kwargs: object) -> Any:
        raise OSError(28, "No space left on device")


def test_self_compaction_choice_is_written_into_the_session(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PLAIT_SELF_COMPACTION", raising=False)
    s = client.sessions.create([{"role": "user", "content": "hello"}])
    assert s.settings.self_compaction_choice is None and s.settings.self_compaction is False
    monkeypatch.setenv("PLAIT_SELF_COMPACTION", "true")
    assert s.settings.self_compaction is True
    s.settings.use_self_compaction(False)
    assert s.settings.self_compaction_choice is False and s.settings.self_compaction is False
    # It survives a restart, and a branch inherits it.
    again = Client(client.workspace, store=client.store).sessions.open(s.id)
    assert again.settings.self_compaction_choice is False
    assert s.fork().settings.self_compaction_choice is False
    s.settings.use_self_compaction(None)
    assert s.settings.self_compaction_choice is None and s.settings.self_compaction is True
    with pytest.raises(InvalidArgumentError):
        s.settings.use_self_compaction("yes")  # type: ignore[arg-type]
    monkeypatch.setenv("PLAIT_SELF_COMPACTION", "maybe")
    with pytest.raises(InvalidArgumentError):
        _ = s.settings.self_compaction


def test_an_unwritable_choice_leaves_the_one_in_force(client: Client) -> None:
    s = client.sessions.create([{"role": "user", "content": "hello"}])
    s.settings.use_self_compaction(True)
    broken = Client(client.workspace, store=FailingWrites(client.store))  # type: ignore[arg-type]
    handle = broken.sessions.open(s.id)
    with pytest.raises(OSError):
        handle.settings.use_self_compaction(False)
    assert handle.settings.self_compaction_choice is True
    assert s.settings.self_compaction_choice is True
