"""``read_messages``: a range's records without its events, on every SQL store."""

from __future__ import annotations

from plait import Client
from plait.store import MessageReader


def test_read_messages_leaves_out_the_events_and_keeps_each_position(client: Client) -> None:
    store = client.store
    assert isinstance(store, MessageReader)
    session = client.sessions.create([{"role": "user", "content": "a"}], session_id="s")
    session.transcript.log_event("step", {"n": 1})
    session.transcript.inject_many([{"role": "assistant", "content": "b"}])
    session.transcript.log_event("step", {"n": 2})
    fork = session.fork("f")  # a branch: its first rows are the parent's
    fork.transcript.inject_many([{"role": "user", "content": "c"}])
    row = store.get("f")
    assert row is not None
    every = store.read(row, 0, row.layout.end_seq)
    skimmed = store.read_messages(row, 0, row.layout.end_seq)
    assert skimmed == [r for r in every if r.kind != "event"]
    assert [(r.seq, getattr(r, "content", None)) for r in skimmed] == [
        (0, "a"), (2, "b"), (4, "c"),
    ]  # fmt: skip
    assert [r.seq for r in store.read_messages(row, 1, 3)] == [2]
    assert store.read_messages(row, 3, 3) == []
