"""Messages appended together: the records they become, their ids, their JSON, their rows."""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plait import Client
from plait._checks import check_json, flat_json
from plait._ids import new_id, new_ids
from plait.errors import InvalidMessageError
from plait.records import (
    AssistantRecord,
    JSONValue,
    Record,
    ToolCall,
    ToolRecord,
    UserRecord,
    encode_payload,
    record_from_message,
    records_from_messages,
)

CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "a.py", "n": 3}}],
}
RESULT = {"role": "tool", "tool_call_id": "c1", "tool_name": "read_file", "content": "x = 1",
          "ok": True}
TURN: list[dict[str, JSONValue]] = [
    {"role": "user", "content": "read a.py"}, CALL, RESULT,
    {"role": "assistant", "content": "a.py sets x"},
]


def same_but_id(a: Record, b: Record) -> bool:
    return replace(a, id=b.id, created_at_us=b.created_at_us) == b


def test_ids_minted_together_sort_after_every_earlier_id_and_are_uuid7() -> None:
    ids = [new_id(), *new_ids(5000), new_id(), *new_ids(3), *new_ids(0)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids) == 5005
    for i in ids[:20] + ids[-20:]:
        u = uuid.UUID(i)
        assert str(u) == i and u.version == 7 and u.variant == uuid.RFC_4122


@pytest.mark.parametrize("message", TURN)
def test_the_common_shapes_build_what_the_general_checks_build(
    message: dict[str, JSONValue],
) -> None:
    # An empty meta sends the same message through every general check.
    general = record_from_message({**message, "meta": {}}, seq=4)
    assert same_but_id(record_from_message(message, seq=4), general)
    assert same_but_id(records_from_messages([message], start=4)[0], general)


def test_a_batch_is_what_each_message_gives_alone_at_its_position() -> None:
    batch = records_from_messages(TURN, start=10, default_folds_from=2)
    assert [r.seq for r in batch] == [10, 11, 12, 13]
    for message, record in zip(TURN, batch, strict=True):
        assert same_but_id(record_from_message(message, seq=record.seq), record)
    assert [r.id for r in batch] == sorted(r.id for r in batch)
    assert isinstance(batch[1], AssistantRecord)
    assert batch[1].tool_calls == (ToolCall("c1", "read_file", {"path": "a.py", "n": 3}),)


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ({"role": "assistant", "content": "x", "ok": True}, "['ok'] not allowed"),
        ({"role": "assistant", "content": "x", "added": "hook", "ok": True},
         "['added'] not allowed"),
        ({"role": "tool", "content": "x", "tool_call_id": "c", "folds": [0, 0],
          "tool_calls": []}, "['tool_calls', 'folds'] not allowed"),
        ({"role": "tool", "content": "x"}, "needs a string 'tool_call_id'"),
        ({"role": "tool", "content": "x", "tool_call_id": "c", "ok": "yes"}, "'ok' must be"),
        ({"role": "assistant", "content": "", "tool_calls": [{"id": "c", "name": "f",
          "arguments": {"x": float("nan")}}]}, "not JSON-serializable"),
        ({"role": "assistant", "content": "", "tool_calls": [{"id": "", "name": "f"}]},
         "needs a string 'id'"),
    ],
)
def test_a_bad_message_in_a_batch_is_refused_with_its_position(
    message: dict[str, JSONValue], error: str
) -> None:
    with pytest.raises(InvalidMessageError, match="position 6") as caught:
        records_from_messages([TURN[0], message], start=5)
    assert error in str(caught.value)


@given(st.dictionaries(
    st.one_of(st.text(max_size=6), st.integers()),
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
              st.text(max_size=8), st.lists(st.integers(), max_size=2)),
    max_size=10,
))
def test_a_flat_object_encodes_as_the_json_encoder_does(value: dict[Any, Any]) -> None:
    text = flat_json(value)
    assert text is None or text == check_json(value)


def test_the_written_json_of_each_kind_is_the_encoders() -> None:
    records: list[Record] = [
        *records_from_messages(TURN, start=0),
        UserRecord(seq=0, content='é "q"\n\x00', images=2),
        UserRecord(seq=0, content="x", added="hook"),
        AssistantRecord(seq=0, content="", tool_calls=(
            ToolCall("c", "f", {"a": [1, {"b": None}], "f": 1.5}), ToolCall('c"2', "g", {}))),
        ToolRecord(seq=0, content="out", tool_call_id="c", ok=False),
        ToolRecord(seq=0, content="out", tool_call_id="c", tool_name="f", images=1),
    ]
    for record in records:
        assert encode_payload(record) == check_json(record.payload)


def test_a_batch_with_and_without_meta_reads_back_as_written(tmp_path: Path) -> None:
    with Client(tmp_path, store=tmp_path / "s.db") as client:
        s = client.session
        batch: list[dict[str, JSONValue]] = [
            *TURN, {"role": "user", "content": "and b?", "meta": {"from": "ui"}}, *TURN,
        ]
        written = s.transcript.inject_many(batch)
        s.inject({"role": "assistant", "content": "done", "meta": {"n": 1}})
        with Client(tmp_path, store=tmp_path / "s.db") as again:
            read = again.open(s.id).transcript.records
    assert read[:-1] == written
    assert read[4].meta == {"from": "ui"} and read[-1].meta == {"n": 1}
    assert [r.seq for r in read] == list(range(10))
