"""The bulk decoders' fast paths give what ``decode_record`` gives, and refuse what it refuses.

A full load reads a tool call's or tool result's payload in the shape the codec writes
it with one scanner call, and builds records and tool calls in blanks
(``records._blanks``); these tests hold them to the constructor and to
``decode_record``, row by row and with a damaged row amid a batch.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plait import Client
from plait.errors import StoreCorruptError
from plait.records import (
    AssistantRecord,
    Message,
    Record,
    SystemRecord,
    ToolCall,
    ToolRecord,
    UserRecord,
    _blanks,
    decode_record,
    decode_records,
    decode_rows,
    decode_view_rows,
    encode_payload,
)
from plait.store.sqlite import _packed as packing
from plait.store.sqlite._packed import decode_packed

TEXT = st.text(max_size=30)
ARGS = st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), TEXT, st.none()), max_size=3)
CALLS = st.lists(st.builds(ToolCall, TEXT, TEXT, ARGS), max_size=3).map(tuple)


def _row(r: Record, meta: str | None = None) -> tuple[Any, ...]:
    return (r.id, r.kind, encode_payload(r), meta, r.created_at_us, r.tokens)


def _decoded(kind: str, payload: str, seq: int = 3, meta: str | None = None) -> Record:
    return decode_record(kind, payload, seq=seq, id="i", created_at_us=5, meta=meta, tokens=None)


def _same(got: object, want: object) -> None:
    assert type(got) is type(want) and got == want
    assert dataclasses.asdict(got) == dataclasses.asdict(want)  # type: ignore[call-overload]
    if isinstance(want, AssistantRecord | Message):
        for g, w in zip(got.tool_calls, want.tool_calls, strict=True):  # type: ignore[attr-defined]
            assert type(g) is ToolCall and g == w


def test_the_blanks_are_what_the_constructors_make() -> None:
    call = _blanks.tool_call("c", "ls", {"p": "."})
    _same(call, ToolCall("c", "ls", {"p": "."}))
    assert hash(call) == hash(ToolCall("c", "ls", {}))
    cases: list[tuple[Record, Record]] = [
        (_blanks.system_record(1, "a", 2, {}, None, "s"),
         SystemRecord(seq=1, id="a", created_at_us=2, content="s")),
        (_blanks.user_record(1, "a", 2, {"m": 1}, 4, "u", 2),
         UserRecord(seq=1, id="a", created_at_us=2, meta={"m": 1}, tokens=4, content="u",
                    images=2)),
        (_blanks.assistant_record(1, "a", 2, {}, None, "t", (call,), 1),
         AssistantRecord(seq=1, id="a", created_at_us=2, content="t", tool_calls=(call,),
                         images=1)),
        (_blanks.tool_record(1, "a", 2, {}, None, "o", "c", None, False, 0),
         ToolRecord(seq=1, id="a", created_at_us=2, content="o", tool_call_id="c", ok=False)),
    ]
    for got, want in cases:
        _same(got, want)
        assert hash(got) == hash(want) and repr(got) == repr(want)
        with pytest.raises(AttributeError):
            got.seq = 9  # type: ignore[misc]  # frozen, as the constructor's


@given(
    content=TEXT,
    call_id=TEXT,
    name=st.one_of(st.none(), TEXT),
    ok=st.booleans(),
    images=st.integers(0, 2),
    calls=CALLS,
    meta=st.one_of(st.none(), st.just('{"m":1}')),
)
def test_tool_calls_and_results_decode_as_decode_record_does(
    content: str,
    call_id: str,
    name: str | None,
    ok: bool,
    images: int,
    calls: tuple[ToolCall, ...],
    meta: str | None,
) -> None:
    written: list[Record] = [
        ToolRecord(seq=0, content=content, tool_call_id=call_id, tool_name=name, ok=ok,
                   images=images),
        AssistantRecord(seq=1, content=content, tool_calls=calls, images=images),
    ]
    rows = [_row(r, meta) for r in written]
    want = [
        decode_record(r.kind, p, seq=r.seq, id=rid, created_at_us=t, meta=m, tokens=k)
        for r, (rid, _, p, m, t, k) in zip(written, rows, strict=True)
    ]
    for got, w in zip(decode_records(rows, range(2)), want, strict=True):
        _same(got, w)
    views, whole = decode_view_rows([(k, p) for _, k, p, *_ in rows], range(2))
    assert whole == []
    for view, w in zip(views, want, strict=True):
        _same(view, Message.from_record(w))


# Payloads near the codec's shape: each is read as decode_record reads it.
NEAR = [
    ("tool", '{"content":"o","tool_call_id":"c","tool_name":null,"ok":true}'),
    ("tool", '{"tool_call_id":"c","ok":false,"content":"o","tool_name":"t"}'),
    ("tool", '{"content":"o","tool_call_id":"c","tool_name":"t","ok":1}'),
    ("tool", '{"content":"o","tool_call_id":"c","tool_name":"t","ok":0}'),
    ("tool", '{"content":"o","tool_call_id":"c","tool_name":"t"}'),
    ("tool", '{"content":"o","tool_call_id":"c","tool_name":"t","ok":true,"images":2}'),
    ("tool", '{"content":"o","tool_call_id":"c","tool_name":"t","ok":true,"x":1}'),
    ("tool", ' {"content":"o","tool_call_id":"c","tool_name":"t","ok":true} '),
    ("tool", '{"content":"o","content":"p","tool_call_id":"c","tool_name":"t","ok":true}'),
    ("assistant", '{"content":"","tool_calls":[]}'),
    ("assistant", '{"content":"","tool_calls":null}'),
    ("assistant", '{"tool_calls":[{"id":"c","name":"t","arguments":{}}]}'),
    ("assistant", '{"content":"a","tool_calls":[{"id":"c","name":"t"}]}'),
    ("assistant", '{"content":"a","tool_calls":[{"id":"c","name":"t","arguments":null}]}'),
    ("assistant", '{"content":"a","tool_calls":[{"id":"c","name":"t","arguments":{},"x":1}]}'),
    ("assistant", '{"content":"a","tool_calls":[{"id":"c","name":"t","arguments":{"n":1.5}},'
                  '{"id":"d","name":"u","arguments":{"l":[1,{"k":null}]}}]}'),
    ("assistant", '{"content":"a","tool_calls":[{"id":"c","name":"t","arguments":{}}],"images":1}'),
    ("assistant", '\n{"content":"a","tool_calls":[{"id":"c","name":"t","arguments":{}}]}\t'),
    ("user", '{"content":"u","images":1}'),
    ("user", '{ "content" : "u" }'),
    ("system", '{"content":"s"}'),
]


@pytest.mark.parametrize(("kind", "payload"), NEAR)
def test_payloads_near_the_written_shape_decode_as_decode_record_does(
    kind: str, payload: str
) -> None:
    want = _decoded(kind, payload)
    (got,) = decode_records([("i", kind, payload, None, 5, None)], range(3, 4))
    _same(got, want)
    (view,), _ = decode_view_rows([(kind, payload)], range(3, 4))
    _same(view, Message.from_record(want))


# Rows decode_record refuses, in or near the codec's shape.
BAD = [
    ("tool", '{"content":"o","tool_call_id":"c","tool_name":"t","ok":true'),  # cut short
    ("tool", '{"content":"o","tool_call_id":"c","tool_name":"t","ok":true}}'),  # extra data
    ("tool", '{"content":"o","tool_call_id":"c","tool_name":"t","ok":true}{"content":"p"}'),
    ("tool", '{"content":"o","tool_call_id":7,"tool_name":"t","ok":true}'),
    ("tool", '{"content":["o"],"tool_call_id":"c","tool_name":"t","ok":true}'),
    ("tool", '{"content":"o","tool_call_id":"c","tool_name":5,"ok":true}'),
    ("tool", '{"content":"o","tool_name":"t","ok":true,"x":1}'),
    ("tool", '["o","c","t",true]'),
    ("tool", '"o"'),
    ("tool", ""),
    ("tool", "\ufeff" + '{"content":"o","tool_call_id":"c","tool_name":"t","ok":true}'),
    ("assistant", '{"content":"","tool_calls":[{"id":"c","name":"t","arguments":[1]}]}'),
    ("assistant", '{"content":"","tool_calls":[{"id":1,"name":"t","arguments":{}}]}'),
    ("assistant", '{"content":"","tool_calls":[{"id":"c","name":null,"arguments":{}}]}'),
    ("assistant", '{"content":"","tool_calls":[{"id":"c","name":"t","arguments":{}}'),
    ("assistant", '{"content":"","tool_calls":[["c","t",{}]]}'),
    ("assistant", '{"content":"","tool_calls":{"id":"c","name":"t","arguments":{}}}'),
    ("assistant", '{"content":5,"tool_calls":[{"id":"c","name":"t","arguments":{}}]}'),
    ("assistant", '{"content":"","tool_calls":[{"id":"c","name":"t","arguments":{"a":NaN]}}'),
]


@pytest.mark.parametrize(("kind", "payload"), BAD)
def test_a_bad_row_amid_a_batch_is_corrupt_and_named(kind: str, payload: str) -> None:
    with pytest.raises(StoreCorruptError):
        _decoded(kind, payload)
    # An agent's transcript of two batches' worth, the bad row in the middle of the second.
    good = [
        UserRecord(seq=0, id="u", created_at_us=1, content="question"),
        AssistantRecord(seq=0, id="a", created_at_us=1, content="",
                        tool_calls=(ToolCall("c", "read", {"path": "x"}),)),
        ToolRecord(seq=0, id="t", created_at_us=1, content="out", tool_call_id="c",
                   tool_name="read"),
        AssistantRecord(seq=0, id="b", created_at_us=1, content="answer"),
    ]
    rows = [_row(good[i % 4]) for i in range(6000)]
    at = 4096 + 1234
    rows[at] = ("x", kind, payload, None, 1, None)
    for lo in (0, 4096):
        batch = rows[lo : lo + 4096]
        if lo <= at < lo + 4096:
            with pytest.raises(StoreCorruptError, match=f"seq={at} kind='{kind}'"):
                decode_records(batch, range(lo, 6000))
            with pytest.raises(StoreCorruptError, match=f"seq={at} kind='{kind}'"):
                decode_view_rows([(k, p) for _, k, p, *_ in batch], range(lo, 6000))
        else:
            assert len(decode_records(batch, range(lo, 6000))) == len(batch)


def _agent_session(client: Client, turns: int) -> str:
    s = client.sessions.create()
    items: list[dict[str, Any]] = []
    for t in range(turns):
        call = {"id": f"call_{t}", "name": "read_file", "arguments": {"path": f"m{t}.py"}}
        items += [
            {"role": "user", "content": f"question {t}"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{t}", "tool_name": "read_file",
             "content": f"file {t}", "ok": True},
            {"role": "assistant", "content": f"answer {t}"},
        ]
    s.transcript.inject_many(items)
    return s.id


@pytest.mark.parametrize("kind_at", [(2, "tool"), (1, "assistant")])
def test_a_damaged_tool_row_amid_a_full_load_is_corrupt_on_every_read(
    tmp_path: Path, kind_at: tuple[int, str]
) -> None:
    db, ws = tmp_path / "plait.db", tmp_path / "ws"
    ws.mkdir()
    offset, kind = kind_at
    seq = 4 * 1500 + offset  # in the second batch of rows a read decodes
    with Client(ws, store=db) as client:
        sid = _agent_session(client, 2000)
        s = client.open(sid)
        want_full = s.history(full=True)
        want_records = s.transcript.records
        target = s.transcript.records[seq]
        assert target.kind == kind
        assert [Message.from_record(r) for r in want_records] == want_full
    payload = json.loads(encode_payload(target))
    if kind == "tool":
        payload["tool_call_id"] = 12
    else:
        payload["tool_calls"][0]["arguments"] = "not an object"
    with closing(sqlite3.connect(db)) as raw, raw:
        raw.execute(
            "UPDATE records SET payload = ? WHERE id = ?", (json.dumps(payload), target.id)
        )
    with Client(ws, store=db) as client:
        s = client.open(sid)
        for read in (
            lambda: s.history(full=True),
            s.history,
            lambda: s.transcript.records,
            lambda: list(s.transcript.iter_records()),
            lambda: list(s.transcript.iter_history(full=True)),
        ):
            with pytest.raises(StoreCorruptError, match=f"seq={seq}"):
                read()


# SQLite's packed rows (its store's decode_packed), read with json and, if installed, orjson.
try:
    import orjson
except ImportError:  # the default install: json alone
    orjson = None

LOADERS: list[Any] = [None] + ([orjson.loads] if orjson is not None else [])
CODES = {"assistant": 1, "user": 2, "tool": 3, "system": 4, "summary": 5, "event": 6, "opaque": 7}


def _packed(r: Record, meta: str | None = None) -> tuple[Any, ...]:
    if meta is None:
        extra: Any = r.tokens
    else:
        extra = f"[{json.dumps(r.tokens)},{meta}]"
    return (r.id, r.created_at_us * 8 + CODES[r.kind], encode_payload(r), extra)


def _each_loader(check: Any) -> None:
    for loads in LOADERS:
        before = packing._fast_loads
        packing._fast_loads = loads
        try:
            check()
        finally:
            packing._fast_loads = before


@given(
    content=TEXT,
    call_id=TEXT,
    name=st.one_of(st.none(), TEXT),
    ok=st.booleans(),
    images=st.integers(0, 2),
    calls=CALLS,
    meta=st.one_of(st.none(), st.just('{"m":1}')),
    tokens=st.one_of(st.none(), st.integers(0, 9)),
)
def test_packed_rows_decode_as_decode_record_does(
    content: str,
    call_id: str,
    name: str | None,
    ok: bool,
    images: int,
    calls: tuple[ToolCall, ...],
    meta: str | None,
    tokens: int | None,
) -> None:
    written: list[Record] = [
        ToolRecord(seq=0, content=content, tool_call_id=call_id, tool_name=name, ok=ok,
                   images=images, tokens=tokens),
        AssistantRecord(seq=1, content=content, tool_calls=calls, images=images, tokens=tokens),
        AssistantRecord(seq=2, content=content, tokens=tokens),
        UserRecord(seq=3, content=content, images=images, tokens=tokens),
        SystemRecord(seq=4, content=content, tokens=tokens),
    ]
    want = [
        decode_record(r.kind, encode_payload(r), seq=r.seq, id=r.id,
                      created_at_us=r.created_at_us, meta=meta, tokens=r.tokens)
        for r in written
    ]

    def check() -> None:
        got, whole = decode_packed([_packed(r, meta) for r in written], range(5))
        assert whole == []
        for g, w in zip(got, want, strict=True):
            _same(g, w)

    _each_loader(check)


@pytest.mark.parametrize(("kind", "payload"), NEAR)
def test_packed_payloads_near_the_written_shape_decode_as_decode_record_does(
    kind: str, payload: str
) -> None:
    want = _decoded(kind, payload)

    def check() -> None:
        (got,), _ = decode_packed([("i", 5 * 8 + CODES[kind], payload, None)], range(3, 4))
        _same(got, want)

    _each_loader(check)


@pytest.mark.parametrize(("kind", "payload"), BAD)
def test_a_bad_packed_row_is_corrupt_and_named(kind: str, payload: str) -> None:
    def check() -> None:
        rows = [_packed(UserRecord(seq=0, content="q"))] * 3
        rows[1] = ("x", 1 * 8 + CODES[kind], payload, None)
        with pytest.raises(StoreCorruptError, match=f"seq=11 kind='{kind}'"):
            decode_packed(rows, range(10, 13))

    _each_loader(check)


def test_packed_columns_a_store_did_not_pack_are_left_to_read_whole() -> None:
    good = _packed(UserRecord(seq=0, content="q"))
    odd = [
        ("i", 5 * 8, '{"content":"x"}', None),  # no kind's code
        ("i", 5.5, '{"content":"x"}', None),  # a time that is not an integer
        ("i", 5 * 8 + 2, '{"content":"x"}', "-"),  # a count that is not an integer
        ("i", 5 * 8 + 2, '{"content":"x"}', "[1,[2]]"),  # meta not an object
        ("i", 5 * 8 + 2, '{"content":"x"}', "[1,{}],{}"),  # meta past its column
        ("i", 5 * 8 + 2, '{"content":"x"}', "[1,{},2]"),
    ]

    def check() -> None:
        got, whole = decode_packed([good, *odd, good], range(len(odd) + 2))
        assert whole == list(range(1, len(odd) + 1))
        assert all(got[i] is None for i in whole)
        assert [type(got[0]), type(got[-1])] == [UserRecord, UserRecord]

    _each_loader(check)


def test_sqlite_reads_meta_tokens_and_damaged_columns_as_decode_record_does(
    tmp_path: Path,
) -> None:
    db, ws = tmp_path / "plait.db", tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=db) as client:
        sid = _agent_session(client, 3)
        s = client.open(sid)
        ids = [r.id for r in s.transcript.records]
    with closing(sqlite3.connect(db)) as raw, raw:
        raw.execute("UPDATE records SET meta = ?, tokens = 7 WHERE id = ?", ('{"m":[1]}', ids[0]))
        raw.execute("UPDATE records SET tokens = 9 WHERE id = ?", (ids[1],))
        raw.execute("UPDATE records SET meta = ' {\"a\":2} ' WHERE id = ?", (ids[2],))
        raw.execute("UPDATE records SET tokens = 'many' WHERE id = ?", (ids[3],))
        raw.execute("UPDATE records SET tokens = 2.5, meta = '{}' WHERE id = ?", (ids[4],))
        rows = raw.execute(
            "SELECT key, id, kind, payload, meta, created_at, tokens FROM records ORDER BY key"
        ).fetchall()
    want = decode_rows(rows, (1 << 32) - 1)
    assert want[0].meta == {"m": [1]} and want[0].tokens == 7 and want[3].tokens == "many"

    def check() -> None:
        with Client(ws, store=db) as client:
            got = client.open(sid).transcript.records
        for g, w in zip(got, want, strict=True):
            _same(g, w)

    _each_loader(check)
    with closing(sqlite3.connect(db)) as raw, raw:
        raw.execute("UPDATE records SET kind = 'nope' WHERE id = ?", (ids[5],))
    with Client(ws, store=db) as client, pytest.raises(StoreCorruptError, match="'nope'"):
        _ = client.open(sid).transcript.records
