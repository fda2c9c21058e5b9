"""Running tallies, the model table, batch counting and the self-compaction default (pure)."""

from __future__ import annotations

import pytest

from plait.compaction import (
    SELF_COMPACTION_TOOL,
    SELF_COMPACTION_TOOL_NAME,
    self_compaction_default,
    self_compaction_result,
)
from plait.context import (
    SUMMARY_UNKNOWN,
    UNKNOWN_MODEL,
    Tally,
    count_record,
    count_records,
    model_info,
)
from plait.errors import InvalidArgumentError
from plait.records import (
    COMPACTION_UNDONE,
    AssistantRecord,
    EventRecord,
    Record,
    SummaryRecord,
    SystemRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
)


def _no_lookup(seq: int) -> int | None:
    raise AssertionError(f"looked up {seq}")


def run(records: list[Record], counts: list[int], lookup=_no_lookup) -> list[Tally]:  # type: ignore[no-untyped-def]
    out: list[Tally] = []
    tally = Tally()
    for record, n in zip(records, counts, strict=True):
        tally = tally.advance(record, n, lookup)
        out.append(tally)
    return out


def test_a_tally_sums_messages_by_kind_and_tracks_the_newest_special_records() -> None:
    records: list[Record] = [
        SystemRecord(seq=0, content="sys"),
        UserRecord(seq=1, content="a"),
        AssistantRecord(seq=2, content="b", tool_calls=(ToolCall("c", "sh", {}),)),
        ToolRecord(seq=3, content="out", tool_call_id="c", tool_name="sh"),
        EventRecord(seq=4, name="note"),
        AssistantRecord(seq=5, content="done", meta={"usage": {"input_tokens": 9}}),
        SummaryRecord(seq=6, content="sum", folds_from=0, folds_to=3),
    ]
    head = run(records, [5, 2, 7, 11, 0, 3, 4])[-1]
    assert head == Tally(
        system=0, summary=6, reply=5, usage=5, tokens=(2, 10, 11, 0), items=(1, 2, 1, 0)
    )
    assert Tally.from_json(head.to_json()) == head


def test_uncompact_of_the_visible_summary_restores_the_one_before() -> None:
    records: list[Record] = [
        UserRecord(seq=0, content="a"),
        SummaryRecord(seq=1, content="s1", folds_from=0, folds_to=1),
        UserRecord(seq=2, content="b"),
        SummaryRecord(seq=3, content="s2", folds_from=0, folds_to=3),
        EventRecord(seq=4, name=COMPACTION_UNDONE, data={"summary_seq": 3}),
    ]
    tallies = run(records, [1] * 5, lambda seq: {2: 1}[seq])
    assert [t.summary for t in tallies] == [-1, 1, 1, 3, 1]
    # Hiding a summary that is not the visible one is beyond a tally: the view decides.
    odd = EventRecord(seq=5, name=COMPACTION_UNDONE, data={"summary_seq": 0})
    assert tallies[-1].advance(odd, 0, _no_lookup).summary == SUMMARY_UNKNOWN
    plain = EventRecord(seq=5, name=COMPACTION_UNDONE, data={})
    assert tallies[-1].advance(plain, 0, _no_lookup).summary == 1


def test_a_tally_counts_cut_off_replies_and_hidden_summaries_apart() -> None:
    records: list[Record] = [
        UserRecord(seq=0, content="a"),
        AssistantRecord(seq=1, content="par", meta={"finish_reason": "interrupted"}),
        AssistantRecord(seq=2, content="whole"),
        SummaryRecord(seq=3, content="s", folds_from=0, folds_to=2),
        EventRecord(seq=4, name=COMPACTION_UNDONE, data={"summary_seq": 3}),
    ]
    head = run(records, [1, 5, 2, 3, 0], lambda seq: {2: -1}[seq])[-1]
    assert (head.tokens[1], head.items[1]) == (7, 2)  # both replies are in the transcript
    assert head.cut == (5, 1)  # one of them no request sends
    assert head.hidden == 1 and head.summary == -1
    assert Tally.from_json(head.to_json()) == head
    # A tally stored before these were kept reads as none of them.
    older = Tally.from_json("[-1,-1,2,-1,1,7,0,0,1,2,0,0]")
    assert (older.cut, older.hidden) == ((0, 0), 0)


@pytest.mark.parametrize("text", ["", "[1,2]", "{}", '[1,2,3,4,5,6,7,8,9,"x"]', "nope"])
def test_a_bad_stored_tally_is_an_error(text: str) -> None:
    with pytest.raises(InvalidArgumentError):
        Tally.from_json(text)


@pytest.mark.parametrize(
    ("model", "family", "window", "encoding"),
    [
        ("gpt-4o-mini", "gpt-4o", 128_000, "o200k_base"),
        ("openai/gpt-4.1-nano", "gpt-4.1", 1_047_576, "o200k_base"),
        ("o3-mini", "o3", 200_000, "o200k_base"),
        ("anthropic:claude-sonnet-4-5", "claude", 200_000, "cl100k_base"),
        ("SmolLM2-360M-Instruct", "smollm2", 8_192, "cl100k_base"),
        ("scripted", "scripted", 128_000, "cl100k_base"),
        ("gpt-4", "gpt-4", 8_192, "cl100k_base"),
    ],
)
def test_model_families(model: str, family: str, window: int, encoding: str) -> None:
    info = model_info(model)
    assert (info.family, info.window, info.encoding) == (family, window, encoding)
    assert 0 < info.compact_percent <= 100


def test_an_unknown_model_gets_the_defaults() -> None:
    assert model_info("mystery-7b") is UNKNOWN_MODEL
    assert model_info(None) is UNKNOWN_MODEL
    assert UNKNOWN_MODEL.source == "guess"  # and says they are a guess
    assert model_info("gpt-4o").source == "table"


def test_batch_counting_matches_one_by_one_and_keeps_stored_counts() -> None:
    records: list[Record] = [
        UserRecord(seq=0, content="hello world"),
        AssistantRecord(seq=1, content="", tool_calls=(ToolCall("c", "sh", {"cmd": "ls"}),)),
        ToolRecord(seq=2, content="a\nb", tool_call_id="c", tool_name="sh"),
        EventRecord(seq=3, name="x"),
        UserRecord(seq=4, content=""),
    ]
    for encoding in ("o200k_base", "cl100k_base"):
        assert count_records(records, encoding) == [count_record(r, encoding) for r in records]
    assert count_records([UserRecord(seq=0, content="hello", tokens=99)], "o200k_base") == [99]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, False), ("", False), ("0", False), ("off", False), ("1", True), (" Yes ", True)],
)
def test_self_compaction_default_from_the_environment(value: str | None, expected: bool) -> None:
    env = {} if value is None else {"PLAIT_SELF_COMPACTION": value}
    assert self_compaction_default(env) is expected


def test_a_bad_self_compaction_default_fails_loud() -> None:
    with pytest.raises(InvalidArgumentError, match="PLAIT_SELF_COMPACTION"):
        self_compaction_default({"PLAIT_SELF_COMPACTION": "sometimes"})


def test_the_self_compaction_tool() -> None:
    assert SELF_COMPACTION_TOOL["name"] == SELF_COMPACTION_TOOL_NAME
    assert set(SELF_COMPACTION_TOOL) == {"name", "description", "parameters"}
    assert "Nothing to compact" in self_compaction_result(None)
