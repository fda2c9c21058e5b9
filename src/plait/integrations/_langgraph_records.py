"""How the LangGraph saver lays a thread out in a plait session (D344).

A checkpoint is a ``langgraph.checkpoint`` event, a task's writes a
``langgraph.writes`` event, and each message of the ``messages`` channel one
plait message carrying LangGraph's serialized form in ``meta["langgraph"]``.
:class:`Thread` is what a session holds, read incrementally. Nothing here
imports LangGraph: messages are read by their attributes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from plait.records import EventRecord, Record
from plait.session.checkpoints import HELD

__all__ = [
    "CHECKPOINT",
    "MARK",
    "WRITES",
    "BY_DIGEST",
    "Branches",
    "DROP",
    "held",
    "Thread",
    "b64",
    "expand",
    "kept_records",
    "plait_message",
    "ranges",
    "unb64",
    "version_key",
]

MARK: Final = "langgraph"
"""The key of the saver's marks: a session's metadata ``{thread, ns}``, a message's meta."""
CHECKPOINT: Final = "langgraph.checkpoint"
"""The event a checkpoint is."""
WRITES: Final = "langgraph.writes"
"""The event a task's pending writes are."""
BY_DIGEST: Final = "@object"
"""In place of a serializer's type name: the value is the object this digest names."""
DROP: Final = "langgraph.drop"
"""A session's metadata: the hidden heads its last rewrite left to erase (D341).

A rewrite (prune, delete_for_runs) moves the session's id to a new head and names
the heads it replaces here, in the same transaction: from then on they are read
by no saver, whether or not they are erased yet, and the next write erases what
a crash left."""
_ROLES: Final = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}


def b64(data: bytes) -> str:
    """Bytes as base64 text (event data and meta are JSON)."""
    return base64.b64encode(data).decode("ascii")


def unb64(text: str) -> bytes:
    """The bytes :func:`b64` wrote."""
    return base64.b64decode(text.encode("ascii"))


def version_key(version: object) -> str:
    """A channel version as a dict key: its JSON, so ``1`` and ``"1"`` stay apart."""
    return json.dumps(version)


def ranges(seqs: Sequence[int]) -> list[list[int]]:
    """``seqs`` as ``[first, last]`` runs: a growing conversation is one run, not n numbers."""
    runs: list[list[int]] = []
    for seq in seqs:
        if runs and runs[-1][1] + 1 == seq:
            runs[-1][1] = seq
        else:
            runs.append([seq, seq])
    return runs


def expand(runs: Sequence[Sequence[int]]) -> list[int]:
    """The positions :func:`ranges` ran together."""
    return [seq for first, last in runs for seq in range(first, last + 1)]


def held(data: Any) -> list[str]:
    """The objects a checkpoint's or writes' event data, or a message's mark, names.

    A channel value's digest (a checkpoint's ``d``) and every packed value stored
    by digest (``[BY_DIGEST, digest]``, also inside a write's row): what the record
    holds in the object space, so plait's object collection keeps them (D342).
    """
    found: dict[str, None] = {}
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            digest = item.get("d")
            if isinstance(digest, str):
                found[digest] = None
            stack.extend(item.values())
        elif isinstance(item, list):
            for i, part in enumerate(item):
                if part == BY_DIGEST and i + 1 < len(item) and isinstance(item[i + 1], str):
                    found[item[i + 1]] = None
                elif isinstance(part, (dict, list)):
                    stack.append(part)
    return sorted(found)


class Thread:
    """What one namespace's session holds, read from its first record, kept between calls.

    A session only grows under the saver (records are appended, never changed), so
    a later call reads the records past :attr:`end` alone. ``key`` and ``last`` say
    whether that holds still: a session erased and made again, or rewound through
    plait's API, is read again from the start.
    """

    def __init__(self, key: tuple[object, ...], row: Any = None) -> None:
        self.key = key
        self.row = row  # the head's SessionRow as last read
        self.end = 0
        self.last: Record | None = None
        self.checkpoints: dict[str, dict[str, Any]] = {}
        self.writes: dict[str, list[dict[str, Any]]] = {}
        self.blobs: dict[tuple[str, str], dict[str, Any]] = {}
        # Messages by ordinal (the n-th message the saver stored in this session): a
        # conversation that only grew is one run of ordinals whatever events lie between.
        self.messages: list[dict[str, Any]] = []
        self.index: dict[tuple[str, str], int] = {}
        self.by_id: dict[str, int] = {}  # a message id -> the ordinal of its newest form
        # Where each checkpoint's event ends: (position after it, messages before that),
        # the cut a branch from it shares; the checkpoint of the newest event is the tip.
        self.cuts: dict[str, tuple[int, int]] = {}
        self.tip: str | None = None
        self.msgs = 0  # message records (of any kind) read so far
        self.first_write: dict[str, int] = {}  # checkpoint id -> position of its first write
        self.children: dict[str | None, set[str]] = {}  # a checkpoint id -> those continuing it
        # Events before this position were not read (only its tip is served, D345).
        self.partial_from = 0

    def add(self, records: Sequence[Record]) -> None:
        """Take in records appended since the last read."""
        for record in records:
            if isinstance(record, EventRecord):
                data = dict(record.data)
                if record.name == CHECKPOINT:
                    self.checkpoints[str(data["id"])] = data
                    self.cuts[str(data["id"])] = (record.seq + 1, self.msgs)
                    self.tip = str(data["id"])
                    parent = data.get("parent")
                    self.children.setdefault(parent if isinstance(parent, str) else None, set())
                    self.children[parent if isinstance(parent, str) else None].add(self.tip)
                    blobs = data.get("blobs")
                    for channel, entry in blobs.items() if isinstance(blobs, dict) else ():
                        if isinstance(entry, dict):
                            self.blobs[(channel, str(entry["v"]))] = entry
                elif record.name == WRITES:
                    self.writes.setdefault(str(data["checkpoint"]), []).append(data)
                    self.first_write.setdefault(str(data["checkpoint"]), record.seq)
            else:
                self.msgs += 1
                if isinstance(mark := record.meta.get(MARK), dict):
                    # Each stored message's (id, digest of its form) -> its newest ordinal.
                    self.index[(str(mark["id"]), str(mark["digest"]))] = len(self.messages)
                    self.by_id[str(mark["id"])] = len(self.messages)
                    self.messages.append(dict(mark))
        if records:
            self.end = records[-1].seq + 1
            self.last = records[-1]


class Branches:
    """What a namespace holds across its heads: the session's own, then its hidden ones.

    A branch from an older checkpoint moves the session's id to a new head that
    shares the records up to that checkpoint (D340); the checkpoints past it stay on
    the head it left, now hidden, and LangGraph still lists them. Each checkpoint is
    read from the first head that holds it (a shared prefix holds the same records),
    its values against that head's own messages; pending writes are gathered from
    every head (one written twice by a shared prefix reads the same).
    """

    def __init__(self, heads: Sequence[Thread], leftover: Sequence[str] = ()) -> None:
        self.heads = list(heads)
        self.leftover = list(leftover)  # dropped heads not erased yet (a crash between)
        self.current = self.heads[0]
        self.checkpoints: dict[str, dict[str, Any]]
        self.home: Mapping[str, Thread]
        self._children: dict[str | None, set[str]]
        if len(self.heads) == 1:
            # One head (a thread that never branched): its own maps, kept as it is read,
            # so a call costs the records appended since, not the checkpoints held.
            self.checkpoints = self.current.checkpoints
            self.home = _OneHead(self.current)
            self._children = self.current.children
            return
        self.checkpoints, home, self._children = {}, {}, {}
        for head in self.heads:
            for cid, data in head.checkpoints.items():
                if cid not in home:
                    home[cid] = head
                    self.checkpoints[cid] = data
                    parent = data.get("parent")
                    self._children.setdefault(parent if isinstance(parent, str) else None, set())
                    self._children[parent if isinstance(parent, str) else None].add(cid)
        self.home = home

    def entry(self, channel: str, version: str) -> dict[str, Any] | None:
        """What stores a channel's version (its ``version_key``), on any head; None if none."""
        for head in self.heads:
            found = head.blobs.get((channel, version))
            if found is not None:
                return found
        return None

    def writes(self, checkpoint_id: str) -> list[dict[str, Any]]:
        """Every ``langgraph.writes`` event stored against the checkpoint, on any head."""
        found: list[dict[str, Any]] = []
        for head in self.heads:
            found.extend(head.writes.get(checkpoint_id, ()))
        return found

    def continued(self, checkpoint_id: str | None, by: str) -> bool:
        """Whether a checkpoint other than ``by`` continues ``checkpoint_id``.

        None is the thread's start: any checkpoint of a thread continues it, since a
        thread is started once.
        """
        if checkpoint_id is None:
            return bool(set(self.checkpoints) - {by})
        return bool(self._children.get(checkpoint_id, set()) - {by})

    def continued_by_other(self, checkpoint_id: str, writer: str) -> bool:
        """Whether a checkpoint another saver wrote continues ``checkpoint_id``."""
        return any(
            self.checkpoints[child].get("writer", writer) != writer
            for child in self._children.get(checkpoint_id, ())
        )


class _OneHead(Mapping[str, Thread]):
    """Every checkpoint of a single head -> that head (:attr:`Branches.home`)."""

    def __init__(self, head: Thread) -> None:
        self._head = head

    def __getitem__(self, checkpoint_id: str) -> Thread:
        if checkpoint_id not in self._head.checkpoints:
            raise KeyError(checkpoint_id)
        return self._head

    def __iter__(self) -> Iterator[str]:
        return iter(self._head.checkpoints)

    def __len__(self) -> int:
        return len(self._head.checkpoints)


def plait_message(message: Any, value: list[str], digest: str) -> dict[str, Any]:
    """A LangChain message as a plait message, its serialized form kept in ``meta``.

    ``value`` is that form as the saver packs it (inline, or an object's digest when
    large); ``digest`` names the form, so the same message is not stored twice.

    Human, AI, system and tool messages become user, assistant, system and tool
    messages (an AI message's tool calls as plait tool calls); any other kind is an
    opaque item. What LangGraph reads back is always the serialized form.
    """
    mark = {"id": str(message.id), "digest": digest, "value": value}
    role = _ROLES.get(str(message.type))
    text = message.text if isinstance(message.text, str) else str(message.text)
    meta: dict[str, Any] = {MARK: mark}
    if objects := held(mark):
        meta[HELD] = objects
    if role == "tool" and isinstance(getattr(message, "tool_call_id", None), str):
        tool: dict[str, Any] = {
            "role": "tool",
            "content": text,
            "tool_call_id": message.tool_call_id,
            "ok": getattr(message, "status", "success") != "error",
            "meta": meta,
        }
        if isinstance(getattr(message, "name", None), str):
            tool["tool_name"] = message.name
        return tool
    if role == "assistant":
        calls = [c for c in (_call(raw) for raw in getattr(message, "tool_calls", [])) if c]
        return {"role": role, "content": text, "tool_calls": calls, "meta": meta}
    if role in ("user", "system"):
        return {"role": role, "content": text, "meta": meta}
    return {
        "role": "opaque",
        "format": "langgraph",
        "item": {"type": str(message.type)},
        "meta": meta,
    }


def _call(raw: Any) -> dict[str, Any] | None:
    """A LangChain tool call as plait's ``{id, name, arguments}``; None if it has no JSON form."""
    call_id, name, args = raw.get("id"), raw.get("name"), raw.get("args", {})
    if not (isinstance(call_id, str) and call_id and isinstance(name, str) and name):
        return None
    try:
        json.dumps(args, allow_nan=False)
    except (TypeError, ValueError):
        return None  # kept only in the serialized form LangGraph reads back
    return {"id": call_id, "name": name, "arguments": args if isinstance(args, dict) else {}}


def kept_records(
    old: Sequence[Record], thread: Thread, versions: Mapping[str, Mapping[str, Any]]
) -> list[Record]:
    """A session's records rewritten to hold only some checkpoints, from position 0.

    Args:
        old: the session's records, from its first.
        thread: what they hold.
        versions: each kept checkpoint's id -> its ``channel_versions``.

    Returns:
        The kept checkpoints' events (each naming every value it reads itself, since
        the checkpoints whose entries it shared go), their writes, and the messages
        they hold, in their old order, with message runs naming their new ordinals.
    """
    wanted: set[int] = set()
    blobs: dict[str, dict[str, Any]] = {}
    for cid, channels in versions.items():
        entries: dict[str, Any] = {}
        for channel, version in channels.items():
            entry = thread.blobs.get((channel, version_key(version)))
            if entry is not None:
                entries[channel] = dict(entry)
                wanted.update(expand(entry.get("messages", ())))
        blobs[cid] = entries
    moved: dict[int, int] = {}
    out: list[Record] = []
    ordinal = -1
    # A task's writes stored before their checkpoint's event (a background put) follow
    # it in the rewrite, in their order: the event needs no pointer back to them.
    early: dict[str, list[dict[str, Any]]] = {}
    written: set[str] = set()
    for record in old:
        if not isinstance(record, EventRecord) and isinstance(record.meta.get(MARK), dict):
            ordinal += 1
        if isinstance(record, EventRecord):
            data = dict(record.data)
            if record.name == CHECKPOINT and data["id"] in versions:
                kept = data["blobs"] = blobs[str(data["id"])]
                data["all"] = set(kept) == set(versions[str(data["id"])])
                data.pop("early", None)
                data[HELD] = list(held(data))  # it now names values its ancestors stored
                out.append(EventRecord(seq=len(out), name=CHECKPOINT, data=data))
                written.add(str(data["id"]))
                for writes in early.pop(str(data["id"]), []):
                    out.append(EventRecord(seq=len(out), name=WRITES, data=writes))
            elif record.name == WRITES and data["checkpoint"] in versions:
                if data["checkpoint"] in written:
                    out.append(EventRecord(seq=len(out), name=WRITES, data=data))
                else:
                    early.setdefault(str(data["checkpoint"]), []).append(data)
        elif ordinal in wanted and isinstance(record.meta.get(MARK), dict):
            moved[ordinal] = len(moved)
            out.append(replace(record, seq=len(out)))
    for entries in blobs.values():
        for entry in entries.values():
            if "messages" in entry:
                entry["messages"] = ranges([moved[s] for s in expand(entry["messages"])])
    return out
