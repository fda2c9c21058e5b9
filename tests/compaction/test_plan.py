"""What a compaction folds: keep_last, the never-fold rules, thresholds, NothingToDoError."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plait.compaction import CompactionPlan, parse_options, plan
from plait.errors import NothingToDoError
from plait.records import (
    AssistantRecord,
    Record,
    SummaryRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
)
from plait.views import history

from ._transcripts import T


def _long(turns: int = 10) -> T:
    t = T().system()
    for i in range(turns):
        t.user(f"request {i}").call("shell", out="x" * 100).say(f"done {i}")
    return t


def _plan(records: list[Record], **options: object) -> CompactionPlan:
    result = plan(records, parse_options(options))
    assert result is not None
    return result


def test_keep_last_and_folds_range() -> None:
    t = _long()  # seq 0 system; each turn is 4 messages; 40 messages, seq 1..40
    p = _plan(t.records, keep_last=4)
    assert p.kept_count == 4 and p.compressed == 36
    assert p.folds_from == 1  # the system prompt (seq 0) is not folded
    assert p.folds_to == 37
    assert p.folded_seqs == tuple(range(1, 37))
    assert [r.seq for r in p.kept] == [37, 38, 39, 40]
    assert p.previous is None
    assert p.to_dict()["folds"] == [1, 37]
    assert p.to_dict()["compressed"] == 36
    assert p.history_tokens == sum(r.tokens or 0 for r in t.records[1:])


def test_default_keep_last_is_12() -> None:
    p = _plan(_long().records)
    assert p.kept_count == 12


def test_system_prompt_is_never_folded() -> None:
    t = _long(5)
    p = _plan(t.records, keep_last=0)
    assert all(r.kind != "system" for r in p.folded)
    # a system prompt written mid-conversation is not a folded message either
    t2 = T().user("a").say("b").system("new rules").user("c").say("d").user("e")
    p2 = _plan(t2.records, keep_last=0)
    assert [r.kind for r in p2.folded] == ["user", "assistant", "user", "assistant"]


def test_newest_user_request_is_never_folded() -> None:
    t = _long(3).user("the newest request").call("shell").call("read").say("working")
    p = _plan(t.records, keep_last=0)
    assert isinstance(p.kept[0], UserRecord) and p.kept[0].content == "the newest request"
    assert all(r.seq < p.kept[0].seq for r in p.folded)


def test_a_tool_pair_is_never_split() -> None:
    t = T().user("old").call("a", "b").say("done").user("new").say("ok")  # seq 0..6
    for keep_last in (4, 5):  # the boundary would fall between the call and its results
        p = _plan(t.records, keep_last=keep_last)
        assert [r.seq for r in p.folded] == [0]
        assert isinstance(p.kept[0], AssistantRecord) and p.kept[0].tool_calls
    p = _plan(t.records, keep_last=3)  # a clean boundary stays where it is
    assert [r.seq for r in p.folded] == [0, 1, 2, 3]
    # when moving the boundary leaves nothing before it, nothing is worth folding
    t2 = T().call("a", "b").say("done").user("go")
    assert plan(t2.records, parse_options({"keep_last": 3})) is None


def test_events_are_skipped() -> None:
    t = T().user("a").event().say("b").event().user("c").say("d")
    p = _plan(t.records, keep_last=2)
    assert [r.seq for r in p.folded] == [0, 2]
    assert [r.seq for r in p.kept] == [4, 5]


def test_nothing_worth_folding_is_none() -> None:
    assert plan([], parse_options({})) is None
    t = T().system().user("hi").say("hello")
    assert plan(t.records, parse_options({})) is None  # fewer than keep_last
    assert plan(T().system().records, parse_options({})) is None


def test_token_threshold() -> None:
    t = _long(5)
    total = sum(r.tokens or 0 for r in t.records[1:])
    assert plan(t.records, parse_options({"keep_last": 2, "token_threshold": total + 1})) is None
    assert plan(t.records, parse_options({"keep_last": 2, "token_threshold": total})) is not None


def test_hard_limit_folds_more_and_switches_strategy() -> None:
    t = _long(5)
    p = _plan(
        t.records,
        keep_last=12,
        compact_strategy="observation_mask",
        hard_limit_tokens=40,
        hard_limit_strategy="truncate",
    )
    assert p.over_hard_limit and p.strategy == "truncate"
    # folded down to the newest request's turn, which is never folded (56 tokens > 40)
    assert isinstance(p.kept[0], UserRecord) and p.kept[0].content == "request 4"
    assert p.kept_count == 4
    under = _plan(t.records, compact_strategy="observation_mask", hard_limit_tokens=10**6)
    assert not under.over_hard_limit and under.strategy == "observation_mask"
    assert under.kept_count == 12
    t.user("short", tokens=1).say("ok", tokens=1)
    p2 = _plan(t.records, keep_last=12, hard_limit_tokens=40)
    # the cut lands inside the last tool pair, which is then folded whole
    assert sum(r.tokens or 0 for r in p2.kept) == 12 and p2.kept_count == 3
    assert p2.kept[0].text == "done 4"


def test_hard_limit_still_keeps_the_newest_request() -> None:
    t = T().user("old").say("x").user("newest", tokens=500).say("y")
    p = _plan(t.records, keep_last=4, hard_limit_tokens=10)
    assert [r.seq for r in p.kept] == [2, 3]


def test_after_a_summary_the_next_plan_folds_it_in() -> None:
    t = _long(5)
    first = _plan(t.records, keep_last=4)
    t.summary("first summary", first.folds_from, first.folds_to)
    for i in range(3):
        t.user(f"more {i}").say(f"answer {i}")
    second = _plan(t.records, keep_last=2)
    assert second.previous is not None and second.previous.content == "first summary"
    assert second.folds_from == first.folds_from
    assert second.folded_seqs[0] == first.folds_to
    assert all(r.kind != "summary" for r in second.folded)
    assert second.folded_tokens == sum(r.tokens or 0 for r in second.folded) + 20


def test_already_compacted_to_the_newest_message() -> None:
    t = T().user("a").say("b")
    t.summary("all of it", 0, 2)
    with pytest.raises(NothingToDoError, match="already compacted to the newest message"):
        plan(t.records, parse_options({}))
    t.event()  # events after it change nothing
    with pytest.raises(NothingToDoError):
        plan(t.records, parse_options({}))


def test_plan_matches_history_view() -> None:
    t = _long(6)
    p = _plan(t.records, keep_last=5)
    t.summary("s", p.folds_from, p.folds_to)
    shown = history(t.records)
    assert shown[0].role == "summary"
    assert [m.seq for m in shown[1:]] == [r.seq for r in p.kept]


# -- properties over random transcripts ----------------------------------------------------

_step = st.one_of(
    st.tuples(st.just("user")),
    st.tuples(st.just("say")),
    st.tuples(st.just("event")),
    st.tuples(st.just("call"), st.integers(1, 3), st.booleans()),
)


@st.composite
def transcripts(draw: st.DrawFn) -> list[Record]:
    t = T()
    if draw(st.booleans()):
        t.system()
    for step in draw(st.lists(_step, max_size=40)):
        if step[0] == "user":
            t.user("u", tokens=draw(st.integers(0, 50)))
        elif step[0] == "say":
            t.say("a", tokens=draw(st.integers(0, 50)))
        elif step[0] == "event":
            t.event()
        else:
            n, interleave = step[1], step[2]
            names = [f"t{i}" for i in range(n)]
            if interleave:
                # results arrive after an unrelated message (a steer, a late result)
                calls = tuple(ToolCall(f"id{t.seq}_{i}", nm, {}) for i, nm in enumerate(names))
                t.records.append(AssistantRecord(seq=t.seq, tool_calls=calls, tokens=5))
                t.say("meanwhile")
                for c in calls:
                    t.records.append(
                        ToolRecord(
                            seq=t.seq, content="o", tool_call_id=c.id, tool_name=c.name, tokens=4
                        )
                    )
            else:
                t.call(*names)
    return t.records


def _pairs(records: list[Record]) -> list[tuple[int, int]]:
    call_seq = {
        c.id: r.seq for r in records if isinstance(r, AssistantRecord) for c in r.tool_calls
    }
    return [
        (call_seq[r.tool_call_id], r.seq)
        for r in records
        if isinstance(r, ToolRecord) and r.tool_call_id in call_seq
    ]


@settings(max_examples=300, deadline=None)
@given(
    records=transcripts(),
    keep_last=st.integers(0, 15),
    hard=st.one_of(st.none(), st.integers(0, 300)),
    compactions=st.integers(1, 3),
)
def test_never_fold_rules_hold(
    records: list[Record], keep_last: int, hard: int | None, compactions: int
) -> None:
    options = parse_options({"keep_last": keep_last, "hard_limit_tokens": hard})
    records = list(records)
    for _ in range(compactions):
        try:
            p = plan(records, options)
        except NothingToDoError:
            summary = next(r for r in reversed(records) if isinstance(r, SummaryRecord))
            assert not [
                r
                for r in records
                if r.seq >= summary.folds_to and r.kind not in {"event", "system", "summary"}
            ]
            return
        if p is None:
            return
        folded = set(p.folded_seqs)
        kept = {r.seq for r in p.kept}
        assert folded and not folded & kept
        assert max(folded) < p.folds_to <= (min(kept) if kept else p.folds_to)
        assert p.folds_from <= min(folded)
        # no system prompt, event or summary folded
        assert all(r.kind in {"user", "assistant", "tool"} for r in p.folded)
        # the newest user request is kept
        users = [r.seq for r in records if isinstance(r, UserRecord)]
        if users:
            assert max(users) in kept
        # a tool call and its result are never on different sides of the boundary
        for call, result in _pairs(records):
            assert not (call in folded and result in kept)
            assert not (result in folded and call in kept)
        assert p.compressed + p.kept_count == len(folded | kept)
        records.append(
            SummaryRecord(
                seq=len(records),
                content="s",
                folds_from=p.folds_from,
                folds_to=p.folds_to,
                tokens=1,
            )
        )
        # what history() shows after the compaction is the summary, then the kept messages
        shown = history(records)
        assert shown[0].role == "summary"
        assert [m.seq for m in shown[1:]] == sorted(kept)
