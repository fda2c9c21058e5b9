"""The context report adds stored counts, by source, in seed 001's order."""

from __future__ import annotations

import pytest

from plait.context import SHARE_NAMES, ContextReport, Share, build_report
from plait.errors import InvalidArgumentError
from plait.records import (
    AssistantRecord,
    EventRecord,
    Record,
    SummaryRecord,
    SystemRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
)


def _records() -> list[Record]:
    return [
        SummaryRecord(seq=10, content="s", folds_from=1, folds_to=5, tokens=40),
        UserRecord(seq=5, content="u", tokens=10),
        AssistantRecord(seq=6, tool_calls=(ToolCall("c", "shell", {}),), tokens=7),
        EventRecord(seq=7, name="client_attached", tokens=None),
        ToolRecord(seq=8, content="out", tool_call_id="c", tokens=100),
        AssistantRecord(seq=9, content="done", tokens=3),
        UserRecord(seq=11, content="next", tokens=5),
    ]


def test_shares_in_seed_order_and_sums() -> None:
    report = build_report(
        _records(),
        window=1000,
        system_tokens=50,
        tool_schema_tokens=200,
        tool_schema_count=4,
        env_tokens=0,
        measured_by="toktok-rs/o200k_base",
    )
    assert [s.name for s in report.shares] == [
        "System prompt",
        "Tool schemas",
        "User messages",
        "Assistant messages",
        "Tool output",
        "Compaction summary",
    ]
    assert report.shares == (
        Share("System prompt", 50, 1),
        Share("Tool schemas", 200, 4),
        Share("User messages", 15, 2),
        Share("Assistant messages", 10, 2),
        Share("Tool output", 100, 1),
        Share("Compaction summary", 40, 1),
    )
    assert report.used == 415
    assert report.free == 585
    assert report.fraction == pytest.approx(0.415)
    assert not report.partial and not report.from_provider
    assert report.measured_by == "toktok-rs/o200k_base"
    order = [SHARE_NAMES.index(s.name) for s in report.shares]
    assert order == sorted(order)


def test_empty_sources_are_left_out() -> None:
    report = build_report([UserRecord(seq=0, content="hi", tokens=4)], window=100, measured_by="m")
    assert report.shares == (Share("User messages", 4, 1),)
    empty = build_report([], window=100, measured_by="m")
    assert empty.shares == () and empty.used == 0 and empty.fraction == 0.0


def test_environment_notes_share() -> None:
    report = build_report([], window=100, env_tokens=9, measured_by="m")
    assert report.shares == (Share("Environment notes", 9, 1),)


def test_a_record_without_a_count_makes_it_partial_and_is_not_retokenized() -> None:
    records = [
        UserRecord(seq=0, content="a very long message " * 100, tokens=None),
        AssistantRecord(seq=1, content="ok", tokens=3),
    ]
    report = build_report(records, window=100, measured_by="m")
    assert report.partial
    assert report.used == 3  # reads low, as seed 001 says
    assert report.shares[0] == Share("User messages", 0, 1)


def test_unknown_part_makes_it_partial() -> None:
    report = build_report([], window=100, system_tokens=None, measured_by="m")
    assert report.partial and report.shares == ()


def test_provider_count_wins() -> None:
    report = build_report(
        _records(), window=200, system_tokens=50, provider_used=180, measured_by="m"
    )
    assert report.from_provider and report.used == 180
    assert report.free == 20 and report.fraction == pytest.approx(0.9)
    over = build_report(_records(), window=100, provider_used=150, measured_by="m")
    assert over.free == 0 and over.fraction == pytest.approx(1.5)


def test_system_record_in_view_counts_when_no_prompt_given() -> None:
    records = [
        SystemRecord(seq=0, content="be brief", tokens=6),
        UserRecord(seq=1, content="hi", tokens=4),
    ]
    report = build_report(records, window=100, measured_by="m")
    assert report.shares[0] == Share("System prompt", 6, 1)
    given = build_report(records, window=100, system_tokens=8, measured_by="m")
    assert given.shares[0] == Share("System prompt", 8, 1)


def test_bad_window_and_counts() -> None:
    with pytest.raises(InvalidArgumentError):
        build_report([], window=0, measured_by="m")
    with pytest.raises(InvalidArgumentError):
        build_report([], window=10, system_tokens=-1, measured_by="m")


def test_report_is_frozen() -> None:
    report = build_report([], window=10, measured_by="m")
    assert isinstance(report, ContextReport)
    with pytest.raises(AttributeError):
        report.used = 3  # type: ignore[misc]
