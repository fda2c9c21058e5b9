"""The pure record model: kinds, payloads, the codec, the message view, ids."""

from __future__ import annotations

import uuid
from datetime import UTC

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plait._ids import is_session_id, new_id
from plait._time import from_micros, to_micros
from plait.errors import InvalidMessageError, StoreCorruptError
from plait.records import (
    KINDS,
    AssistantRecord,
    EventRecord,
    Message,
    OpaqueRecord,
    Record,
    SummaryRecord,
    SystemRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
    decode_record,
    decode_rows,
    encode_payload,
    record_from_message,
)


def roundtrip(r: Record) -> Record:
    return decode_record(r.kind, encode_payload(r), seq=r.seq, id=r.id,
                         created_at_us=r.created_at_us, meta=dict(r.meta), tokens=r.tokens)


def test_every_kind_round_trips_through_the_codec() -> None:
    records: list[Record] = [
        SystemRecord(seq=0, content="sys"),
        UserRecord(seq=1, content="hi", images=2, meta={"src": "cli"}, tokens=3),
        AssistantRecord(seq=2, content="", tool_calls=(ToolCall("c", "ls", {"p": "."}),)),
        ToolRecord(seq=3, content="out", tool_call_id="c", tool_name="ls", ok=False),
        SummaryRecord(seq=4, content="sum", folds_from=0, folds_to=3),
        EventRecord(seq=5, name="agent_session_closed", data={"status": "done"}),
        OpaqueRecord(seq=6, format="openai-agents", item={"type": "reasoning", "id": "rs_1"}),
    ]
    assert {r.kind for r in records} == set(KINDS)
    for r in records:
        assert roundtrip(r) == r


def test_payloads_are_the_plain_dicts_the_seed_prints() -> None:
    assert UserRecord(seq=0, content="x").payload == {"content": "x"}
    assert ToolRecord(seq=0, content="o", tool_call_id="c", tool_name="t").payload == {
        "content": "o", "tool_call_id": "c", "tool_name": "t", "ok": True}


def test_records_are_frozen_and_timestamps_are_utc() -> None:
    r = UserRecord(seq=0, content="x")
    with pytest.raises(AttributeError):
        r.content = "y"  # type: ignore[misc]
    assert r.created_at.tzinfo is UTC
    assert to_micros(from_micros(r.created_at_us)) == r.created_at_us
    assert hash(r) == hash(roundtrip(r))


def test_decode_rejects_unknown_kinds_and_broken_payloads() -> None:
    with pytest.raises(StoreCorruptError):
        decode_record("wizard", "{}", seq=0, id="i", created_at_us=0)
    with pytest.raises(StoreCorruptError):
        decode_record("user", "{not json", seq=0, id="i", created_at_us=0)
    with pytest.raises(StoreCorruptError):
        decode_record("tool", '{"content": "x"}', seq=0, id="i", created_at_us=0)


def test_message_view_fields() -> None:
    tool = ToolRecord(seq=3, content="out", tool_call_id="c", tool_name="ls", ok=False, images=1)
    m = Message.from_record(tool)
    assert (m.role, m.text, m.tool_call_id, m.tool_name, m.ok, m.images, m.seq) == (
        "tool", "out", "c", "ls", False, 1, 3)
    assert record_from_message(m.to_dict(), seq=3).payload == tool.payload | {"images": 1}
    with pytest.raises(InvalidMessageError):
        Message.from_record(EventRecord(seq=0, name="e"))


def test_summary_folds_are_checked() -> None:
    s = record_from_message({"role": "summary", "content": "s"}, seq=7, default_folds_from=2)
    assert isinstance(s, SummaryRecord) and (s.folds_from, s.folds_to) == (2, 7)
    for folds in ([3, 1], [0, 8], [0], "0,1", [True, 2]):
        with pytest.raises(InvalidMessageError):
            record_from_message({"role": "summary", "content": "s", "folds": folds}, seq=7)


def test_fields_not_allowed_on_a_role_are_errors() -> None:
    with pytest.raises(InvalidMessageError):
        record_from_message({"role": "user", "content": "x", "tool_call_id": "c"}, seq=0)
    with pytest.raises(InvalidMessageError):
        record_from_message({"role": "assistant", "content": "x", "ok": True}, seq=0)
    with pytest.raises(InvalidMessageError):
        record_from_message("not a dict", seq=0)  # type: ignore[arg-type]
    with pytest.raises(InvalidMessageError):
        record_from_message({"role": "user", "content": [{"type": "audio"}]}, seq=0)


@given(st.dictionaries(st.sampled_from(["role", "content", "tool_calls", "tool_call_id",
                                        "ok", "meta", "images", "folds", "x"]),
                       st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=4),
                                 st.lists(st.integers(), max_size=3),
                                 st.sampled_from(["user", "assistant", "tool", "system",
                                                  "summary"]))))
def test_any_message_dict_gives_a_record_or_a_typed_error(message: dict[str, object]) -> None:
    try:
        record = record_from_message(message, seq=5)
    except InvalidMessageError:
        return
    assert record.kind == message["role"]
    assert roundtrip(record) == record


def test_uuid7_ids_sort_by_creation_and_are_version_7() -> None:
    ids = [new_id() for _ in range(5000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert all(uuid.UUID(i).version == 7 and uuid.UUID(i).variant == uuid.RFC_4122
               for i in ids[:50])


def test_session_id_rules() -> None:
    assert is_session_id("incident-debug") and is_session_id(new_id())
    # Ids are keys: any printable string of at most 200 characters.
    for good in ("user/123", "tenant:acme:chat-9", "a\\b", "../x", "/abs", "a b", "é/日本",
                 "100%", "x" * 200, "..."):
        assert is_session_id(good), good
    for bad in ("", ".", "..", "a\x00", " x", "x ", "x" * 201, "tab\t", "new\nline",
                "\u200b", "\ud800", 5, None, b"x"):
        assert not is_session_id(bad), bad


def test_decode_rejects_payloads_of_the_wrong_types() -> None:
    bad = [
        ("user", '{"content": 5}'),
        ("user", '{"content": "x", "images": "two"}'),
        ("summary", '{"content": "s", "folds": ["a", 1]}'),
        ("summary", '{"content": "s", "folds": [3, 99]}'),
        ("assistant", '{"content": "", "tool_calls": [{"id": 1, "name": "x"}]}'),
        ("assistant", '{"content": "", "tool_calls": "nope"}'),
        ("tool", '{"content": "x", "tool_call_id": 7}'),
        ("event", '{"name": "e", "data": [1]}'),
        ("user", "[1, 2]"),
    ]
    for kind, payload in bad:
        with pytest.raises(StoreCorruptError):
            decode_record(kind, payload, seq=5, id="i", created_at_us=0)
    with pytest.raises(StoreCorruptError):
        decode_record("user", '{"content": "x"}', seq=0, id="i", created_at_us=0, meta="[1]")


def _columns(r: Record, meta: str | None = None) -> tuple[object, ...]:
    return ((7 << 32) | r.seq, r.id, r.kind, encode_payload(r), meta, r.created_at_us, r.tokens)


def test_decode_rows_gives_what_the_constructors_give() -> None:
    import dataclasses
    import gc
    import json

    records: list[Record] = [
        SystemRecord(seq=0, content="sys \u00e9 \\"),
        UserRecord(seq=1, content='say "hi"\n', tokens=4),
        AssistantRecord(seq=2, content="plain"),
        UserRecord(seq=3, content="two images", images=2),
        AssistantRecord(seq=4, content="", tool_calls=(ToolCall("c", "ls", {"p": "."}),)),
        ToolRecord(seq=5, content="out", tool_call_id="c", tool_name="ls", ok=False),
        SummaryRecord(seq=6, content="sum", folds_from=0, folds_to=3),
        EventRecord(seq=7, name="e", data={"k": [1]}),
        OpaqueRecord(seq=8, format="f", item={"a": 1}),
    ]
    rows = [_columns(r) for r in records]
    with_meta: list[Record] = [
        UserRecord(seq=9, content="with meta", meta={"m": 1}),
        AssistantRecord(
            seq=10, content="t", tool_calls=(ToolCall("d", "rd", {"a": [1]}),), images=1,
            meta={"usage": {"input_tokens": 3}},
        ),
        ToolRecord(seq=11, content="r", tool_call_id="d", images=2, meta={"m": 2}),
    ]
    for r in with_meta:
        rows.append(_columns(r, json.dumps(r.meta)))
    expected = [*records, *with_meta]
    for r, row in zip(with_meta, rows[-3:], strict=True):
        object.__setattr__(r, "id", row[1])
        object.__setattr__(r, "created_at_us", row[5])
    got = decode_rows(rows, (1 << 32) - 1)
    assert got == expected
    for g, e in zip(got, expected, strict=True):
        assert type(g) is type(e)
        assert dataclasses.asdict(g) == dataclasses.asdict(e)  # every field set
        assert hash(g) == hash(e) and repr(g) == repr(e)
    # Columns after others (a store's own first columns) and the collector left as found.
    assert decode_rows([("x", *row) for row in rows], (1 << 32) - 1, first=1) == expected
    assert gc.isenabled()
    gc.disable()
    try:
        decode_rows(rows, (1 << 32) - 1)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_decode_rows_refuses_what_decode_record_refuses() -> None:
    mask = (1 << 32) - 1
    for bad in [
        (1, "i", "user", b'{"content":"x"}', None, 1, None),  # bytes, not text
        (1, "i", "user", '{"content":"x"', None, 1, None),  # cut short
        (1, "i", "user", '{"content":"x"}x"}', None, 1, None),
        (1, "i", "nope", '{"content":"x"}', None, 1, None),
        (1, "i", "assistant", '{"content":7}', None, 1, None),
        (1, "i", "assistant", '{"content":"","tool_calls":[{"id":1,"name":"t"}]}', None, 1, None),
        (1, "i", "tool", '{"content":"o","tool_call_id":"c"}', "[1]", 1, None),  # meta no object
        (1, "i", "tool", '{"content":"o","tool_name":"t"}', None, 1, None),
    ]:
        with pytest.raises(StoreCorruptError):
            decode_rows([bad], mask)


def test_decode_view_rows_gives_the_messages_of_what_decode_rows_gives() -> None:
    import dataclasses
    import json

    from plait.records import decode_view_rows

    records: list[Record] = [
        SystemRecord(seq=0, content="sys \u00e9 \\"),
        UserRecord(seq=1, content='say "hi"\n\u2028', tokens=4, meta={"m": 1}),
        AssistantRecord(seq=2, content="plain"),
        UserRecord(seq=3, content="two images", images=2),
        AssistantRecord(seq=4, content="", tool_calls=(ToolCall("c", "ls", {"p": "."}),)),
        ToolRecord(seq=5, content="out", tool_call_id="c", tool_name="ls", ok=False),
        SummaryRecord(seq=6, content="sum", folds_from=0, folds_to=3),
        EventRecord(seq=7, name="e", data={"k": [1]}, meta={"n": 2}),
        OpaqueRecord(seq=8, format="f", item={"a": 1}),
    ]
    rows = [_columns(r, json.dumps(r.meta) if r.meta else None) for r in records]
    full = decode_rows(rows, (1 << 32) - 1)
    kept = ("summary", "event", "opaque")
    views = [r if r.kind in kept else Message.from_record(r) for r in full]
    # (kind, payload): the rows kept whole are left for the store to read.
    got, whole = decode_view_rows([(r[2], r[3]) for r in rows], range(9))
    assert whole == [6, 7, 8] and [got[i] for i in whole] == [None, None, None]
    assert [g for g in got if g is not None] == [v for v in views if isinstance(v, Message)]
    # (kind, payload, whole): the others' columns as one JSON array, None for a message.
    def shaped(r: tuple[object, ...]) -> tuple[object, ...]:
        keep = r[2] in kept
        return (r[2], r[3], json.dumps([r[1], r[4], r[5], r[6]]) if keep else None)

    # The store's unpacking of them (a view read's third column is the store's packing).
    from plait.store.sql._rows import whole_columns

    got, whole = decode_view_rows([shaped(r) for r in rows], iter(range(9)), whole_columns)
    assert whole == [] and got == views
    # Without it, they are left for the store to read whole.
    _, whole = decode_view_rows([shaped(r) for r in rows], iter(range(9)))
    assert whole == [6, 7, 8]
    for g, v in zip(got, views, strict=True):
        assert type(g) is type(v) and dataclasses.asdict(g) == dataclasses.asdict(v)  # type: ignore[arg-type]


def test_decode_view_rows_refuses_what_decode_record_refuses() -> None:
    from plait.records import decode_view_rows
    from plait.store.sql._rows import whole_columns

    for bad in [
        ("user", b'{"content":"x"}'),  # bytes, not text
        ("user", '{"content":"x"'),  # cut short
        ("user", '{"content":"x"}x"}'),
        ("user", '{"content":"a\x01b"}'),  # a raw control character in the string
        ("assistant", '{"content":7}'),
        ("assistant", '{"content":"","tool_calls":[1]}'),
        ("assistant", '{"content":"","tool_calls":[{"id":"c","name":2}]}'),
        ("assistant", '{"content":"","tool_calls":[{"id":"c","name":"t","arguments":[1]}]}'),
        ("assistant", '{"content":"","images":true}'),
        ("tool", '{"content":"o","tool_call_id":3}'),
        ("tool", '{"content":"o","tool_call_id":"c","tool_name":4}'),
        ("tool", '{"content":"o"}'),
        ("tool", '{"content":"o","tool_call_id":"c","images":-1}'),
        ("user", '["content"]'),
        ("system", '{"content":null}'),
        ("nope", '{"content":"x"}', '["i", null, 1, null]'),
        ("event", '{"name":"e"}', "not json"),
    ]:
        with pytest.raises(StoreCorruptError):
            decode_view_rows([bad], range(1), whole_columns)


def test_message_views_are_what_the_constructor_makes() -> None:
    import dataclasses

    cases = [
        (UserRecord(seq=1, content="u", images=1), Message("user", "u", images=1, seq=1)),
        (
            AssistantRecord(seq=2, content="a", tool_calls=(ToolCall("c", "t", {}),)),
            Message("assistant", "a", (ToolCall("c", "t", {}),), seq=2),
        ),
        (
            ToolRecord(seq=3, content="o", tool_call_id="c", tool_name="t", ok=False, images=2),
            Message("tool", "o", (), "c", "t", False, 2, 3),
        ),
        (SummaryRecord(seq=4, content="s", folds_from=0, folds_to=1),
         Message("summary", "s", seq=4)),
        (SystemRecord(seq=5, content="p"), Message("system", "p", seq=5)),
    ]
    for record, message in cases:
        view = Message.from_record(record)
        assert view == message and type(view) is Message
        assert dataclasses.asdict(view) == dataclasses.asdict(message)
