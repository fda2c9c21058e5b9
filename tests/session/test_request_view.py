"""The request a run sends, read cheaply from the tallies, equals the one read from everything.

``session.transcript.request_messages()`` and ``history()`` read only from the newest summary's kept
part (D92), and ``resumable()`` only the tail back to the last turn; each is checked against
the naive reading of the whole view after random sequences of writes, compactions, undos,
trims, resets, forks and cut-off replies.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from pathlib import Path

import pytest

from plait import Client, Session
from plait.errors import NothingToDoError
from plait.records import Message
from plait.session import host_of
from plait.views import history, model_messages, resume_info, system_prompt


def _reference(s: Session) -> list[Message]:
    row = host_of(s).lookup(s.id)
    store = host_of(s).store
    records = store.read(row, row.layout.view_start, row.layout.end_seq)
    hidden = None
    if not any(r.kind == "system" for r in records):
        hidden = system_prompt(store.read(row, 0, row.layout.view_start))
    return model_messages(records, hidden)


def _step(s: Session, rng: random.Random, n: int) -> Session:
    op = rng.random()
    if op < 0.30:
        s.inject({"role": "user", "content": f"question {n} " + "w " * rng.randint(0, 40)})
        s.inject({"role": "assistant", "content": f"answer {n}"})
    elif op < 0.40:
        s.inject({"role": "user", "content": f"run {n}"})
        s.inject({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{n}", "name": "shell", "arguments": {"command": "ls"}}]})
        if rng.random() < 0.7:
            s.inject({"role": "tool", "tool_call_id": f"c{n}", "tool_name": "shell",
                      "content": "a b c " * rng.randint(1, 30)})
    elif op < 0.45:
        s.inject({"role": "system", "content": f"rules v{n}"})
    elif op < 0.50:
        s.inject({"role": "user", "content": f"cut {n}"})
        s.inject({"role": "assistant", "content": "half", "meta": {"finish_reason": "interrupted"}})
    elif op < 0.65:
        with contextlib.suppress(NothingToDoError):
            asyncio.run(s.compact(keep_last=rng.randint(0, 6)))
    elif op < 0.72:
        with contextlib.suppress(NothingToDoError):
            s.transcript.uncompact()
    elif op < 0.77 and s.transcript.length > 2:
        s.trim(rng.randint(1, s.transcript.length))
    elif op < 0.79:
        s.reset()
    elif op < 0.86:
        s = s.fork()
    elif op < 0.90 and s.transcript.length > 1:
        s = s.fork_at(rng.randint(1, s.transcript.length))
    else:
        s.transcript.log_event("noise", {"n": n})
    return s


@pytest.mark.parametrize("seed", range(12))
def test_the_cheap_request_is_the_full_one(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    with Client(tmp_path, store=tmp_path / "r.db") as client:
        s = client.sessions.create([{"role": "system", "content": "rules v0"}])
        for n in range(60):
            s = _step(s, rng, n)
            if rng.random() < 0.5:
                s.context()  # count now and then, as runs do: both counted and uncounted tails
            assert s.transcript.request_messages() == _reference(s), f"seed {seed}, step {n}"
            assert s.resumable() == resume_info(s.transcript.records), f"seed {seed}, step {n}"
            assert s.history() == history(s.transcript.records), f"seed {seed}, step {n}"


def test_a_compacted_session_reads_only_what_it_kept(tmp_path: Path) -> None:
    with Client(tmp_path, store=tmp_path / "r.db") as client:
        s = client.sessions.create([{"role": "system", "content": "rules"}])
        for n in range(200):
            s.inject({"role": "user" if n % 2 == 0 else "assistant", "content": f"m{n}"})
        asyncio.run(s.compact(keep_last=4))
        s.context()
        read: list[tuple[int, int]] = []
        store = host_of(s).store
        real = store.read

        def spy(row: object, lo: int, hi: int) -> list[object]:
            read.append((lo, hi))
            return real(row, lo, hi)  # type: ignore[arg-type]

        store.read = spy  # type: ignore[method-assign]
        try:
            messages = s.transcript.request_messages()
        finally:
            del store.read
        assert [m.role for m in messages][:2] == ["system", "summary"] and len(messages) == 6
        assert sum(hi - lo for lo, hi in read) < 12  # not the 202 records of the view
        tail = s.transcript.tail(3)
        assert s.resumable() is None and tail[-1].kind == "summary"


def test_a_long_uncounted_tail_is_read_rather_than_counted(tmp_path: Path) -> None:
    with Client(tmp_path, store=tmp_path / "r.db") as client:
        s = client.sessions.create([{"role": "system", "content": "rules"}])
        roles = ("user", "assistant")
        s.transcript.inject_many([{"role": roles[n % 2], "content": f"m{n}"} for n in range(300)])
        host = host_of(s)
        before = host.store.counted_end(host.lookup(s.id))
        assert s.transcript.request_messages() == _reference(s)
        assert host.store.counted_end(host.lookup(s.id)) == before  # nothing was counted to find it
        s.trim(3)
        assert s.transcript.request_messages() == _reference(s)
        assert s.transcript.request_messages()[0].text == "rules"


def test_an_id_used_again_sends_its_own_hidden_system_prompt(tmp_path: Path) -> None:
    """A trim hides the system prompt; the request still sends it, that session's own,
    even when an erased session of the same id sent another from the same client."""
    roles = ("user", "assistant")
    messages = [{"role": roles[n % 2], "content": f"m{n}"} for n in range(300)]
    with Client(tmp_path, store=tmp_path / "r.db") as client:
        first = client.sessions.create([{"role": "system", "content": "old rules"}])
        # a long uncounted tail: the prefix is read, not tallied
        first.transcript.inject_many(messages)
        first.trim(3)
        assert first.transcript.request_messages()[0].text == "old rules"
        client.sessions.erase(first.id)
        again = client.sessions.create(
            [{"role": "system", "content": "new rules"}], session_id=first.id
        )
        again.transcript.inject_many(messages)
        again.trim(3)
        assert again.transcript.request_messages() == _reference(again)
        assert again.transcript.request_messages()[0].text == "new rules"
