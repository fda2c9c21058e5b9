"""Streamed reads: ``iter_history`` / ``iter_records`` read a batch of positions at a time.

Counted, not timed: a wrapper counts the store's reads while an iteration runs.
(That they yield what ``history`` / ``records`` return, on every store, is the
conformance kit's ``test_streamed_reads_are_the_reads``.)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from plait import Client
from plait.errors import InvalidArgumentError, SessionNotFoundError
from plait.store.sqlite import SQLiteStore


def _counted(store: Any, *names: str) -> Counter[str]:
    calls: Counter[str] = Counter()
    for name in names:
        method = getattr(store, name)

        def counted(*args: Any, _m: Callable[..., Any] = method, _n: str = name) -> Any:
            calls[_n] += 1
            return _m(*args)

        setattr(store, name, counted)
    return calls


def _talk(n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(n)]


def test_a_streamed_history_reads_one_batch_at_a_time(tmp_path: Path) -> None:
    with Client(tmp_path, store=tmp_path / "s.db") as client:
        s = client.sessions.create(_talk(100))
        calls = _counted(client.store, "read", "read_view")
        stream = s.transcript.iter_history(full=True, batch=10)
        assert calls["read_view"] == 0  # nothing is read before the first message is asked for
        assert next(stream).text == "m0"
        assert calls["read_view"] == 1
        assert [m.text for m in stream] == [f"m{i}" for i in range(1, 100)]
        assert calls["read_view"] == 10 and calls["read"] == 0
        assert [m.text for m in s.transcript.iter_history(batch=30)] == [
            f"m{i}" for i in range(100)
        ]
        assert calls["read_view"] == 14


def test_streamed_records_read_one_batch_at_a_time(tmp_path: Path) -> None:
    with Client(tmp_path, store=tmp_path / "s.db") as client:
        s = client.sessions.create(_talk(50))
        calls = _counted(client.store, "read")
        got = list(s.transcript.iter_records(batch=7))
        assert (
            got == s.transcript.records and calls["read"] == 8 + 1
        )  # 8 batches, then records itself


def test_a_stream_yields_the_session_as_it_was_asked_for(tmp_path: Path) -> None:
    with Client(tmp_path, store=tmp_path / "s.db") as client:
        s = client.sessions.create(_talk(20))
        stream = s.transcript.iter_history(full=True, batch=5)
        s.inject({"role": "user", "content": "later"})
        assert [m.text for m in stream] == [f"m{i}" for i in range(20)]


def test_a_session_erased_during_a_stream_ends_it_as_not_found(tmp_path: Path) -> None:
    with Client(tmp_path, store=tmp_path / "s.db") as client:
        s = client.sessions.create(_talk(20))
        stream = s.transcript.iter_records(batch=5)
        assert next(stream).text == "m0"
        client.sessions.erase(s.id)
        with pytest.raises(SessionNotFoundError):
            list(stream)


def test_an_uncounted_import_streams_from_its_newest_summary(tmp_path: Path) -> None:
    """Without stored tallies (an import), the stream finds the newest summary itself."""
    talk = [
        *_talk(300),
        {"role": "summary", "content": "old", "folds": [0, 100]},
        {"role": "summary", "content": "new", "folds": [0, 290]},
        *_talk(3),
    ]
    with Client(tmp_path, store=tmp_path / "s.db") as client:
        s = client.sessions.create(talk)
        assert client.store.counted_end(s._head.fresh()) == 0  # no tallies to ask
        got = list(s.transcript.iter_history(batch=64))
        assert got == s.history()
        assert [m.text for m in got][:3] == ["new", "m290", "m291"]
        assert list(s.transcript.iter_history(full=True, batch=64)) == s.history(full=True)
        s.transcript.uncompact()
        assert [m.text for m in s.transcript.iter_history(batch=64)][:2] == ["old", "m100"]
        assert list(s.transcript.iter_history(batch=64)) == s.history()
        assert list(s.transcript.iter_history(full=True, batch=7)) == s.history(full=True)


class _NoViewRead(SQLiteStore):
    read_view = None  # a store that offers no view read: its records serve


def test_a_store_without_a_view_read_serves_histories_from_its_records(tmp_path: Path) -> None:
    store = _NoViewRead(tmp_path / "s.db")
    with Client(tmp_path, store=store) as client:
        summary = {"role": "summary", "content": "S", "folds": [0, 8]}
        s = client.sessions.create([*_talk(10), summary])
        calls = _counted(store, "read")
        assert [m.text for m in s.history()] == ["S", "m8", "m9"]
        assert [m.text for m in s.transcript.iter_history(full=True, batch=4)][-3:] == [
            "m8",
            "m9",
            "S",
        ]
        assert calls["read"] >= 2
    store.close()


def test_a_batch_must_be_a_positive_int(tmp_path: Path) -> None:
    with Client(tmp_path, store=tmp_path / "s.db") as client:
        s = client.sessions.create(_talk(2))
        for bad in (0, -1, True, 1.5, "3"):
            with pytest.raises(InvalidArgumentError):
                s.transcript.iter_history(batch=bad)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgumentError):
                s.transcript.iter_records(batch=bad)  # type: ignore[arg-type]
