"""Each strategy's summary text, the callbacks, and the Compaction result."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from plait.compaction import (
    SUMMARY_MAX_CHARS,
    CompactionPlan,
    CompactOptions,
    compact,
    masked_messages,
    parse_options,
    plan,
    resolve_strategy,
    write_summary,
)
from plait.errors import InvalidArgumentError
from plait.records import Message, Record, record_from_message
from plait.views import history

from ._transcripts import T


def _transcript() -> T:
    t = T().system()
    t.user("Please fix the failing test in parser.py")
    t.call("shell", text="Let me run the tests.", out="FAILED test_parser.py::test_x\n" * 50)
    t.call("read_file", out="def parse(x):\n    return x\n" * 20)
    t.say("The parser dropped trailing commas; I fixed it and the test passes now.")
    t.user("Now update the changelog")
    t.call("edit", out="error: permission denied", ok=False)
    t.say("The changelog is read-only; please unlock it.")
    t.user("Unlocked, try again")
    t.say("Working on it.")
    return t


def _plan(t: T, **options: Any) -> tuple[CompactionPlan, CompactOptions]:
    opts = parse_options({"keep_last": 2, **options})
    p = plan(t.records, opts)
    assert p is not None
    return p, opts


def test_truncate() -> None:
    p, opts = _plan(_transcript(), compact_strategy="truncate")
    done = write_summary(p, opts)
    assert done.strategy == "truncate"
    assert done.summary == (
        f"[{p.compressed} earlier messages (seq 1-{p.folds_to - 1}) "
        "were dropped to fit the context window.]"
    )
    assert (done.compressed, done.kept) == (p.compressed, 2)
    assert done.message() == {
        "role": "summary",
        "content": done.summary,
        "folds": [p.folds_from, p.folds_to],
    }


def test_observation_mask() -> None:
    p, opts = _plan(_transcript(), compact_strategy="observation_mask")
    text = write_summary(p, opts).summary
    lines = text.splitlines()
    assert lines[0].startswith(f"Earlier conversation, {p.compressed} earlier messages")
    assert "user: Please fix the failing test in parser.py" in lines
    assert 'assistant: Let me run the tests. [calls shell({"arg":0})]' in lines
    assert "tool shell: [shell output masked: 1,500 chars, ok]" in lines
    assert "tool edit: [edit output masked: 24 chars, failed]" in lines
    assert "FAILED test_parser" not in text


def test_observation_mask_keeps_short_outputs_and_cuts_long_ones() -> None:
    p, opts = _plan(_transcript(), compact_strategy="observation_mask", tool_output_max_chars=30)
    text = write_summary(p, opts).summary
    assert "tool edit: error: permission denied" in text
    assert (
        "tool shell: FAILED test_parser.py::test_x [shell output masked: 1,500 chars, ok]" in text
    )


def test_mask_callback() -> None:
    seen: list[Message] = []

    def mask(message: Message) -> str:
        seen.append(message)
        return f"<{message.tool_name} hidden>"

    p, opts = _plan(_transcript(), compact_strategy="observation_mask", mask_callback=mask)
    text = write_summary(p, opts).summary
    assert "tool shell: <shell hidden>" in text and "tool edit: <edit hidden>" in text
    assert [m.tool_name for m in seen] == ["shell", "read_file", "edit"]


def test_compress_callback_rewrites_what_is_summarized() -> None:
    def compress(messages: list[Message]) -> list[Message]:
        return [m for m in messages if m.role == "user"]

    p, opts = _plan(_transcript(), compact_strategy="observation_mask", compress_callback=compress)
    body = write_summary(p, opts).summary.splitlines()[1:]
    assert body == [
        "user: Please fix the failing test in parser.py",
        "user: Now update the changelog",
    ]


def test_default_without_a_model_is_extractive() -> None:
    p, opts = _plan(_transcript())
    assert resolve_strategy(p, has_model=False) == "extractive"
    assert resolve_strategy(p, has_model=True) == "llm"
    done = write_summary(p, opts)
    assert done.strategy == "extractive"
    assert done.summary == "\n".join(
        [
            f"Summary of {p.compressed} earlier messages (seq 1-{p.folds_to - 1}), "
            "compacted without a model.",
            "User requests:",
            "  - Please fix the failing test in parser.py",
            "  - Now update the changelog",
            "Assistant conclusions:",
            "  - The parser dropped trailing commas; I fixed it and the test passes now.",
            "  - The changelog is read-only; please unlock it.",
            "Tools used: edit x1 (1 failed), read_file x1, shell x1.",
            "Tool outputs masked: 3 (2,064 chars).",
        ]
    )
    assert write_summary(p, opts) == done  # deterministic


def test_extractive_carries_the_previous_summary_and_is_capped() -> None:
    t = T().system()
    for i in range(200):
        t.user(f"request number {i} " + "detail " * 30).say(f"answer {i} " + "words " * 30)
    t.user("latest")
    p, opts = _plan(t)
    first = write_summary(p, opts)
    assert len(first.summary) <= SUMMARY_MAX_CHARS
    assert "request number 0 " in first.summary and "request number 199 " in first.summary
    assert "more omitted" in first.summary
    t.summary(first.summary, first.folds_from, first.folds_to)
    t.say("on it").user("and another").say("ok").user("last")
    p2, opts2 = _plan(t)
    second = write_summary(p2, opts2)
    assert second.summary.splitlines()[1] == "Earlier summary:"
    assert second.summary.startswith("Summary of 4 earlier messages (seq 400-404)")
    assert "  Summary of 399 earlier messages (seq 1-399)" in second.summary
    assert "  - latest" in second.summary
    assert len(second.summary) <= SUMMARY_MAX_CHARS


def test_custom() -> None:
    got: list[Sequence[Record]] = []

    def custom(records: Sequence[Record], options: CompactOptions) -> str:
        got.append(records)
        return f"{len(records)} records, keep_last={options.keep_last}"

    p, opts = _plan(_transcript(), compact_strategy="custom", custom_compactor=custom)
    done = write_summary(p, opts)
    assert done.summary == f"{p.compressed} records, keep_last=2"
    assert [r.seq for r in got[0]] == list(p.folded_seqs)


def test_custom_must_return_text() -> None:
    p, opts = _plan(
        _transcript(), compact_strategy="custom", custom_compactor=lambda records, options: 3
    )
    with pytest.raises(InvalidArgumentError, match="must return text"):
        write_summary(p, opts)
    p, opts = _plan(
        _transcript(), compact_strategy="custom", custom_compactor=lambda records, options: " "
    )
    with pytest.raises(InvalidArgumentError, match="empty"):
        write_summary(p, opts)


def test_llm_takes_a_summarizer() -> None:
    seen: list[list[Message]] = []

    async def summarize(messages: list[Message]) -> str:
        seen.append(messages)
        return "The user asked to fix parser.py; fixed. Changelog was locked."

    p, opts = _plan(_transcript(), compact_strategy="llm", tool_output_max_chars=10)
    done = asyncio.run(compact(p, opts, summarize=summarize))
    assert done.strategy == "llm" and done.summary.startswith("The user asked")
    assert [m.seq for m in seen[0]] == list(p.folded_seqs)
    tool_texts = [m.text for m in seen[0] if m.role == "tool"]
    assert tool_texts[0] == "FAILED tes\n[shell output masked: 1,500 chars, ok]"
    with pytest.raises(InvalidArgumentError, match="needs a model"):
        write_summary(p, opts)
    with pytest.raises(InvalidArgumentError, match="summarizing model"):
        asyncio.run(compact(p, opts))


def test_llm_is_the_default_with_a_model_and_compress_callback_applies() -> None:
    async def summarize(messages: list[Message]) -> str:
        return " | ".join(m.text for m in messages)

    def compress(messages: list[Message]) -> list[Message]:
        return [m for m in messages if m.role == "user"]

    p, opts = _plan(_transcript(), compress_callback=compress)
    done = asyncio.run(compact(p, opts, summarize=summarize))
    assert done.strategy == "llm"
    assert done.summary == "Please fix the failing test in parser.py | Now update the changelog"
    # without a model, the same plan gets the model-free digest
    assert asyncio.run(compact(p, opts)).strategy == "extractive"


def test_llm_sees_the_previous_summary_first() -> None:
    t = _transcript()
    p, _ = _plan(t)
    t.summary("earlier things", p.folds_from, p.folds_to)
    t.say("more").user("again").say("fine").user("end")
    p2, opts2 = _plan(t)
    messages = masked_messages(p2, opts2)
    assert messages[0].role == "summary" and messages[0].text == "earlier things"


def test_the_summary_message_round_trips_through_history() -> None:
    t = _transcript()
    p, opts = _plan(t)
    done = write_summary(p, opts)
    t.records.append(record_from_message(done.message(), seq=t.seq))
    shown = history(t.records)
    assert shown[0].role == "summary" and shown[0].text == done.summary
    assert len(shown) == 1 + done.kept
