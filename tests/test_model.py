"""Model-based test: random sequences of verbs against a naive list-copying model.

The model copies lists on every fork, the way the peers do; plait shares rows.
After every step each live session's view must match the model exactly, so
copy-on-write can never change what a branch shows.
"""

from __future__ import annotations

import itertools
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, precondition, rule

from plait import Client, Session
from plait.store import MemoryStore, SQLiteStore, Store, new_encryption_key

pytestmark = pytest.mark.slow

_uid = itertools.count()


@dataclass
class Row:
    """One physical row of the model: its kind and text, and an identity."""

    kind: str
    text: str
    uid: int = field(default_factory=lambda: next(_uid))


@dataclass
class Model:
    full: list[Row]
    view_start: int = 0

    @property
    def view(self) -> list[Row]:
        return self.full[self.view_start:]

    @property
    def messages(self) -> list[Row]:
        return [r for r in self.view if r.kind != "event"]

    def message_positions(self) -> list[int]:
        return [i for i in range(self.view_start, len(self.full)) if self.full[i].kind != "event"]


class SessionMachine(RuleBasedStateMachine):
    """Drive plait and the model side by side."""

    store_factory: type[Store] | None = None
    encryption_key: str | None = None
    """An encrypted store's master key (its content sealed, D320); None: a plain store."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory()
        store: Store
        if self.store_factory is SQLiteStore:
            store = SQLiteStore(Path(self.tmp.name) / "m.db", encryption_key=self.encryption_key)
        else:
            store = MemoryStore(encryption_key=self.encryption_key)
        self.client = Client(self.tmp.name, store=store)
        self.models: dict[str, Model] = {}
        self.handles: dict[str, Session] = {}
        self.undone: dict[str, list[Model]] = {}
        """What each session's hidden heads hold, the newest last (undo_rewind takes it)."""

    def teardown(self) -> None:
        self.client.store.close()
        self.tmp.cleanup()

    sessions = Bundle("sessions")

    def _add(self, s: Session, model: Model) -> str:
        self.models[s.id] = model
        self.handles[s.id] = s
        return s.id

    @rule(target=sessions, text=st.text(max_size=5))
    def create(self, text: str) -> str:
        s = Session.from_user_message(text, client=self.client)
        return self._add(s, Model([Row("user", text)]))

    @rule(sid=sessions, roles=st.lists(st.sampled_from(["user", "assistant", "system"]),
                                       min_size=1, max_size=4), text=st.text(max_size=3))
    def inject(self, sid: str, roles: list[str], text: str) -> None:
        if sid not in self.models:
            return
        self.handles[sid].transcript.inject_many([{"role": r, "content": text} for r in roles])
        self.models[sid].full.extend(Row(r, text) for r in roles)

    @rule(sid=sessions, name=st.sampled_from(["a", "b"]))
    def event(self, sid: str, name: str) -> None:
        if sid not in self.models:
            return
        self.handles[sid].transcript.log_event(name)
        self.models[sid].full.append(Row("event", ""))

    @rule(target=sessions, sid=sessions)
    def fork(self, sid: str) -> str:
        if sid not in self.models:
            return sid
        m = self.models[sid]
        return self._add(self.handles[sid].fork(), Model(list(m.full), m.view_start))

    @rule(target=sessions, sid=sessions)
    def detach(self, sid: str) -> str:
        if sid not in self.models:
            return sid
        m = self.models[sid]
        return self._add(self.handles[sid].detach(), Model(list(m.full), m.view_start))

    @rule(target=sessions, sid=sessions, data=st.data())
    def fork_at(self, sid: str, data: st.DataObject) -> str:
        if sid not in self.models:
            return sid
        m = self.models[sid]
        positions = m.message_positions()
        k = data.draw(st.integers(0, len(positions)))
        cut = positions[k - 1] + 1 if k else m.view_start
        child = self.handles[sid].fork_at(k)
        return self._add(child, Model(m.full[:cut], min(m.view_start, cut)))

    @rule(sid=sessions, data=st.data())
    def rewind(self, sid: str, data: st.DataObject) -> None:
        if sid not in self.models:
            return
        m = self.models[sid]
        positions = m.message_positions()
        k = data.draw(st.integers(0, len(positions)))
        cut = positions[k - 1] + 1 if k else m.view_start
        if cut >= len(m.full):
            return  # nothing past it: a NothingToDoError, checked elsewhere
        self.handles[sid].transcript.rewind(k)
        self.undone.setdefault(sid, []).append(Model(list(m.full), m.view_start))
        self.models[sid] = Model(m.full[:cut], min(m.view_start, cut))

    @rule(sid=sessions)
    def undo_rewind(self, sid: str) -> None:
        if sid not in self.models or not self.undone.get(sid):
            return
        self.handles[sid].transcript.undo_rewind()
        current = self.models[sid]
        self.models[sid] = self.undone[sid].pop()
        self.undone[sid].append(current)  # the undo is itself undoable: the newest head

    @rule(sid=sessions, data=st.data())
    def trim(self, sid: str, data: st.DataObject) -> None:
        if sid not in self.models:
            return
        m = self.models[sid]
        positions = m.message_positions()
        k = data.draw(st.integers(0, len(positions) + 2))
        kept = self.handles[sid].trim(k)
        assert kept == min(k, len(positions))
        if k >= len(positions):
            return
        m.view_start = positions[len(positions) - k] if k else len(m.full)
        m.full.append(Row("event", ""))

    @rule(sid=sessions)
    def reset(self, sid: str) -> None:
        if sid not in self.models:
            return
        self.handles[sid].reset()
        m = self.models[sid]
        m.view_start = len(m.full)
        m.full.append(Row("event", ""))

    @rule(target=sessions, a=sessions, b=sessions)
    def merge(self, a: str, b: str) -> str:
        if a not in self.models or b not in self.models or a == b:
            return a
        ma, mb = self.models[a], self.models[b]
        shared = 0
        for x, y in zip(ma.full, mb.full, strict=False):
            if x.uid != y.uid:
                break
            shared += 1
        start = max(shared, mb.view_start)
        copies = [Row(r.kind, r.text) for r in mb.full[start:]]
        merged = self.handles[a].merge(self.handles[b])
        assert merged.parent_session_ids == (a, b)
        return self._add(merged, Model(list(ma.full) + copies, ma.view_start))

    @precondition(lambda self: len(self.models) > 1)
    @rule(sid=sessions)
    def delete(self, sid: str) -> None:
        if sid not in self.models:
            return
        self.client.sessions.delete(sid)
        del self.models[sid]
        del self.handles[sid]

    @invariant()
    def views_match_the_model(self) -> None:
        for sid, m in self.models.items():
            s = self.handles[sid]
            got = [(r.kind, r.text) for r in s.transcript.records]
            assert got == [(r.kind, r.text) for r in m.view], sid
            assert s.transcript.length == len(m.messages)
            assert [r.seq for r in s.transcript.records] == list(range(m.view_start, len(m.full)))
            tail = s.transcript.tail(3)
            assert [(r.kind, r.text) for r in tail] == [(r.kind, r.text) for r in _tail(m.view, 3)]


class MemoryMachine(SessionMachine):
    store_factory = MemoryStore


class SQLiteMachine(SessionMachine):
    store_factory = SQLiteStore


class EncryptedSQLiteMachine(SessionMachine):
    store_factory = SQLiteStore
    encryption_key = new_encryption_key()


TestMemoryModel = MemoryMachine.TestCase
TestMemoryModel.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
TestSQLiteModel = SQLiteMachine.TestCase
TestSQLiteModel.settings = settings(max_examples=15, stateful_step_count=30, deadline=None)
TestEncryptedSQLiteModel = EncryptedSQLiteMachine.TestCase
TestEncryptedSQLiteModel.settings = settings(
    max_examples=10, stateful_step_count=30, deadline=None
)


def _tail(view: list[Any], n: int) -> list[Any]:
    """The model's tail: from the n-th message from the end (events are not messages)."""
    seen = 0
    for i in range(len(view) - 1, -1, -1):
        if view[i].kind != "event":
            seen += 1
            if seen == n:
                return view[i:]
    return view
