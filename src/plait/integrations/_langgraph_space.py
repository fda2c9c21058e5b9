"""Where the LangGraph saver keeps a thread: its plait sessions and its values (D344).

:class:`ThreadSpace` is the saver's half that knows plait: which session a
thread's namespace is, reading what a session holds (from its first record,
incrementally, kept for the most recently used namespaces), channel values as
content-addressed objects, messages appended once. The LangGraph half
(:mod:`plait.integrations.langgraph`) builds on it.
"""

from __future__ import annotations

import builtins
import copy
import hashlib
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from plait.client import Client
from plait.errors import InvalidArgumentError, SessionExistsError, SessionNotFoundError
from plait.integrations._keys import MAX_ID, id_part, scan
from plait.integrations._langgraph_records import (
    BY_DIGEST,
    CHECKPOINT,
    DROP,
    MARK,
    Branches,
    Thread,
    b64,
    plait_message,
    unb64,
)
from plait.layout import branch
from plait.records import EventRecord
from plait.session import Session as PlaitConversation
from plait.store import MessageReader, ObjectStore, SessionRow
from plait.store.base import HIDDEN_OPERATOR

__all__ = ["ThreadSpace"]

_OPERATOR: Final = "langgraph"
_CACHED: Final = 64  # namespaces whose reads a saver keeps (the most recently used)
_TIP_FROM: Final = 256  # records: a shorter head is read whole, as cheap as its tip
_TIP_SPAN: Final = 64  # records read back from the end for the newest checkpoint, then x4
_PART: Final = 1 << 20  # the object space's largest part
_INLINE: Final = 16 * 1024  # a serialized value up to this many bytes stays in its record
_DECODED: Final = 8192  # decoded messages a saver keeps (the most recently used)


def _dropped(row: SessionRow) -> list[str]:
    """The hidden heads a rewrite of the session left to erase (see :data:`DROP`)."""
    found = row.metadata.get(DROP)
    return [str(i) for i in found] if isinstance(found, list) else []


class ThreadSpace:
    """The sessions, records and objects of a saver's threads (a mixin of the saver)."""

    _client: Client
    _objects: ObjectStore
    _cache: OrderedDict[str, Thread]
    _hidden: dict[str, tuple[int, list[SessionRow], list[str]]]  # id -> (key, heads, dropped)
    # A stored message's digest -> it decoded from its stored form, never handed out (D346).
    _decoded: OrderedDict[str, Any]
    serde: Any  # LangGraph's SerializerProtocol: dumps_typed / loads_typed

    # -- sessions ---------------------------------------------------------------------------

    @staticmethod
    def _session_id(thread_id: str, ns: str) -> str:
        if not isinstance(thread_id, str) or not thread_id or len(thread_id) > MAX_ID:
            raise InvalidArgumentError(f"{thread_id!r} is not a valid thread id for plait")
        if not ns:
            return thread_id
        budget = max(MAX_ID - len(thread_id) - 1, 24)
        return f"{thread_id}/{id_part(ns, budget)}"

    def _sessions(self, thread_id: str) -> dict[str, str]:
        """Every namespace of a thread that has a session -> that session's id."""
        found: dict[str, str] = {}
        for row in scan(self._client.store, thread_id):
            mark = row.metadata.get(MARK)
            if isinstance(mark, dict) and mark.get("thread") == thread_id:
                found[str(mark.get("ns", ""))] = row.id
        return found

    def _threads(self) -> builtins.list[str]:
        """Every thread of the store (one with only a subgraph's namespace too)."""
        threads: dict[str, None] = {}
        for row in scan(self._client.store, ""):
            mark = row.metadata.get(MARK)
            if isinstance(mark, dict) and isinstance(mark.get("thread"), str):
                threads[str(mark["thread"])] = None
        return builtins.list(threads)

    def _session(self, thread_id: str, ns: str, *, create: bool) -> PlaitConversation | None:
        """The namespace's session (made when ``create``), or None.

        Raises:
            InvalidArgumentError: a plait session of that id exists that is not this
                thread's (a conversation of plait's own is never written into).
        """
        session_id = self._session_id(thread_id, ns)
        try:
            session = self._client.host.get(session_id)
        except SessionNotFoundError:
            if not create:
                return None
        else:
            if session.settings.metadata.get(MARK) != {"thread": thread_id, "ns": ns}:
                raise InvalidArgumentError(
                    f"plait session {session_id!r} exists and is not LangGraph thread "
                    f"{thread_id!r}'s: name the thread otherwise"
                )
            return session
        try:
            return self._client.sessions.create(
                session_id=session_id,
                lineage_operator=_OPERATOR,
                metadata={MARK: {"thread": thread_id, "ns": ns}},
            )
        except SessionExistsError:  # another writer created it first
            return self._session(thread_id, ns, create=False)

    def _read(self, thread_id: str, ns: str, *, whole: bool = True) -> Branches | None:
        """The namespace's checkpoints, writes and messages, on every head; None when none.

        The session's own head comes first, then its hidden heads (the branches time
        travel left, D340) but those a rewrite dropped. Read from the first record,
        not the view: a trim or compaction through plait's API hides records from a
        reader, never from the checkpoints that name them.

        Args:
            thread_id: the LangGraph thread.
            ns: the namespace (``""`` for the root).
            whole: False when only the newest checkpoint is asked for: a long head read
                cold is then read from its tip's records and its messages (D345).
        """
        session_id = self._session_id(thread_id, ns)
        store = self._client.store
        row = store.get(session_id)
        if row is None or row.metadata.get(MARK) != {"thread": thread_id, "ns": ns}:
            self._cache.pop(session_id, None)
            return None  # none, or a session of plait's own that merely has that id
        known = self._hidden.get(session_id)
        if known is None or known[0] != row.pk:
            # A head is hidden only when the id moves to another row (a new key), so the
            # hidden heads are listed again only then (or after this saver erased some).
            dropped = set(_dropped(row))
            rows: list[SessionRow] = []
            leftover: list[str] = []
            for child in store.children(session_id):
                hidden = store.get(child)
                if (
                    hidden is None
                    or hidden.lineage_operator != HIDDEN_OPERATOR
                    or tuple(hidden.parent_ids) != (session_id,)
                ):
                    continue
                if child in dropped:
                    leftover.append(child)
                else:
                    rows.append(hidden)
            known = (row.pk, rows, leftover)
            if len(self._hidden) >= 4 * _CACHED:
                self._hidden.clear()
            self._hidden[session_id] = known
        whole = whole or bool(known[1])  # the newest checkpoint may be on any head
        heads = [self._read_head(row, whole), *(self._read_head(h, True) for h in known[1])]
        return Branches(heads, known[2])

    def _read_head(self, row: SessionRow, whole: bool = True) -> Thread:
        """What one head holds: read once, then only the records appended since."""
        store = self._client.store
        lay = row.layout
        key = (row.pk, lay.bases)
        thread = self._cache.get(row.id)
        if thread is not None and whole and thread.partial_from:
            thread = None  # read from its tip only: now wanted whole
        if thread is None and not whole and (tip := self._read_tip(row)) is not None:
            thread = tip
        elif thread is None or thread.key != key or lay.end_seq < thread.end:
            thread = Thread(key, row)
        if thread.end != lay.end_seq:
            lo = max(thread.end - 1, 0)
            fresh = store.read(row, lo, lay.end_seq)
            if thread.end:
                if not fresh or fresh[0] != thread.last:  # rewound and written again
                    thread = Thread(key, row)
                    fresh = store.read(row, 0, lay.end_seq)
                else:
                    fresh = fresh[1:]
            thread.add(fresh)
        thread.row = row
        self._cache[row.id] = thread
        self._cache.move_to_end(row.id)
        while len(self._cache) > _CACHED:
            self._cache.popitem(last=False)
        return thread

    def _read_tip(self, row: SessionRow) -> Thread | None:
        """A long head read from its newest checkpoint on, and its messages (D345).

        The records from the newest checkpoint event's (or from the first write to
        it, when a write came before its event: ``early``) to the end, found by
        reading the end backwards, and every message before them, without their
        events (:class:`~plait.store.MessageReader`). It serves the newest
        checkpoint when that event names every channel's value itself (``all``);
        None otherwise (an event written before it did), and for a short head.
        """
        store = self._client.store
        end = row.layout.end_seq
        if end < _TIP_FROM:
            return None
        span = _TIP_SPAN
        while True:
            lo = max(end - span, 0)
            tail = store.read(row, lo, end)
            tip = next(
                (r for r in reversed(tail) if isinstance(r, EventRecord) and r.name == CHECKPOINT),
                None,
            )
            if tip is not None or lo == 0:
                break
            span *= 4
        if tip is None or tip.data.get("all") is not True:
            return None
        early = tip.data.get("early")
        start = min(tip.seq, early if isinstance(early, int) else tip.seq)
        if start < lo:
            tail, lo = store.read(row, start, end), start
        if isinstance(store, MessageReader):
            before = store.read_messages(row, 0, lo)
        else:
            before = [r for r in store.read(row, 0, lo) if r.kind != "event"]
        thread = Thread((row.pk, row.layout.bases), row)
        thread.partial_from = lo
        thread.add([*before, *tail])
        return thread

    def _branch_at(self, space: Branches, parent: str) -> None:
        """Move the session's id to a new head sharing the records up to ``parent``.

        What the head held past that checkpoint stays on a hidden head (LangGraph
        still lists it; plait's ``history()`` shows the branch the id is on), so the
        writes of the new branch belong to it alone (D340). One store transaction;
        the caller holds the thread's writer lock.
        """
        home = space.home[parent]
        cut, msgs = home.cuts[parent]
        current = space.current.row
        layout = branch(home.row.layout, home.row.pk, cut, msgs)
        hidden = f"{_OPERATOR}-branch-{uuid.uuid4().hex}"
        self._client.store.move_head(current, replace(current, pk=0, layout=layout), hidden, [])

    # -- values -----------------------------------------------------------------------------

    def _put_object(self, value: Any) -> str:
        """Store a value once, named by the digest of its serialized form; its digest."""
        return self._put_body(*self.serde.dumps_typed(value))

    def _put_body(self, kind: str, data: bytes) -> str:
        body = kind.encode("utf-8") + b"\0" + data
        digest = hashlib.sha256(body).hexdigest()
        parts = (body[i : i + _PART] for i in range(0, max(len(body), 1), _PART))
        self._objects.object_put(digest, parts, time.time_ns() // 1000)
        return digest

    def _get_object(self, digest: str) -> Any:
        chunks: list[bytes] = []
        while (part := self._objects.object_part(digest, len(chunks))) is not None:
            chunks.append(part)
        body = b"".join(chunks)
        kind, _, data = body.partition(b"\0")
        return self.serde.loads_typed((kind.decode("utf-8"), data))

    def _pack(self, kind: str, data: bytes) -> list[str]:
        """A serialized value as JSON: inline when small, else an object's digest.

        Records are JSON of at most 8 MiB (plait's limit), so a large pending write or
        message form goes to the object space and the record names it.
        """
        if len(data) <= _INLINE:
            return [kind, b64(data)]
        return [BY_DIGEST, self._put_body(kind, data)]

    def _dump(self, value: Any) -> list[str]:
        return self._pack(*self.serde.dumps_typed(value))

    def _load(self, pair: Sequence[str]) -> Any:
        if pair[0] == BY_DIGEST:
            return self._get_object(pair[1])
        return self.serde.loads_typed((pair[0], unb64(pair[1])))

    def _message(self, mark: dict[str, Any]) -> Any:
        """A stored message (a mark of :attr:`Thread.messages`) decoded, as a caller's own copy.

        A message's digest names its serialized form, so what it decodes to never
        changes: it is decoded once and kept (the most recently used :data:`_DECODED`),
        and each read hands out a copy, so a graph that changes a message it was given
        changes neither the saver's copy nor what a later read returns (D346).
        """
        return _fresh(self._kept_message(str(mark["digest"]), mark["value"]))

    def _kept_message(self, digest: str, value: Sequence[str]) -> Any:
        found = self._decoded.get(digest)
        if found is None:
            return self._keep(digest, self._load(value))
        self._decoded.move_to_end(digest)
        return found

    def _keep(self, digest: str, decoded: Any) -> Any:
        self._decoded[digest] = decoded
        while len(self._decoded) > _DECODED:
            self._decoded.popitem(last=False)
        return decoded

    def _message_ordinals(
        self, thread_id: str, ns: str, session: PlaitConversation, messages: list[Any]
    ) -> list[int]:
        """The ordinals of ``messages`` in the session, appending only those not stored yet.

        A message whose id the session holds and that equals its newest stored form
        (as decoded, kept by :meth:`_kept_message`) is that form: it is not serialized
        again, so a put costs the messages that changed, not the conversation (D346).
        Any other message is serialized and named by its form's digest, as before.
        """
        found: list[int | tuple[str, str]] = []
        new: list[dict[str, Any]] = []
        space = self._read(thread_id, ns, whole=False)  # every message is read either way
        assert space is not None
        thread = space.current
        for message in messages:
            message_id = str(message.id)
            ordinal = thread.by_id.get(message_id)
            if ordinal is not None:
                kept = self._decoded.get(str(thread.messages[ordinal]["digest"]))
                if kept is not None and type(kept) is type(message) and kept == message:
                    found.append(ordinal)
                    continue
            kind, data = self.serde.dumps_typed(message)
            digest = hashlib.sha256(kind.encode("utf-8") + b"\0" + data).hexdigest()
            key = (message_id, digest)
            known = thread.index.get(key)
            if known is not None:
                found.append(known)
                continue
            found.append(key)
            new.append(plait_message(message, self._pack(kind, data), digest))
            # Kept as its stored form reads back (not the caller's object, which may change).
            self._keep(digest, self.serde.loads_typed((kind, data)))
        if new:
            session.transcript.inject_many(new)
            space = self._read(thread_id, ns, whole=False)
            assert space is not None
            thread = space.current
        return [n if isinstance(n, int) else thread.index[n] for n in found]


def _fresh(value: Any) -> Any:
    """A copy of a decoded message that shares nothing a caller could change in place.

    A pydantic model (a LangChain message) is copied shallow by pydantic, then given
    copies of its JSON-like fields: half the cost of decoding it again, where a deep
    copy costs as much as the decode.
    """
    fields = getattr(value, "__dict__", None)
    if not callable(getattr(value, "model_copy", None)) or not isinstance(fields, dict):
        return copy.deepcopy(value)
    out = copy.copy(value)
    object.__setattr__(
        out, "__dict__", {k: v if type(v) in _ATOMS else _plain(v) for k, v in fields.items()}
    )
    return out


_ATOMS: Final = frozenset({str, int, float, bool, type(None)})


def _plain(value: Any) -> Any:
    """JSON-like data copied (dicts and lists rebuilt, anything else deep-copied)."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _ATOMS else _plain(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _ATOMS else _plain(v) for v in value]
    return value if kind in _ATOMS else copy.deepcopy(value)
