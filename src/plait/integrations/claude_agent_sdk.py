"""The Claude Agent SDK's transcripts kept in plait: :class:`PlaitSessionStore`.

``ClaudeAgentOptions(session_store=PlaitSessionStore("sessions.db"))`` mirrors
every transcript the SDK writes into a plait store, and resumes from it on any
host that opens the same store (a file, ``:memory:``, a ``postgresql://`` URL).

Each transcript is a plait session at the same time:

* The main transcript of ``{project_key, session_id}`` is the session
  ``<project_key>/<session_id>``; a sub-agent's transcript (its ``subpath``,
  ``subagents/agent-<id>``) is ``<project_key>/<session_id>/<subpath>``, a
  child of the main session in the lineage (a branch that kept none of its
  messages). ``/`` and ``%`` inside a part are escaped (``%2F``, ``%25``); a
  part too long for its share of the 200 characters of an id ends in a hash.
* Every entry is kept verbatim: on the plait message built from it
  (``meta["claude_agent_sdk"]["entries"]``), or as an opaque item of format
  ``claude-code`` when no message is (bookkeeping, titles, an abandoned
  branch). :meth:`PlaitSessionStore.load` returns them in append order.
* The messages are the ``claude-code`` importer's, batch by batch
  (:func:`plait.interop.map_claude_code_entries`), so ``history()``, the
  context report, compaction, fork, export and the web page read the
  conversation as they read an imported Claude Code session, however the
  lines are cut into batches: a batch that continues a turn (the rest of a
  response, its results, an attachment waiting for them) is mapped again with
  the turn's earlier lines, and the turn's messages are written again in place.
* A rewind in Claude Code (a prompt hanging off an earlier line) is a
  :meth:`~plait.session.Session.rewind`: the view follows the branch Claude
  Code continues, the cut turns stay in a hidden head, and ``load`` still
  returns every line.

The SDK's session summaries are folded on every append
(:func:`claude_agent_sdk.fold_session_summary`) and kept with the main
session's metadata, stamped with the store's write time in ms; a summary
found behind its transcript (a writer stopped between its two writes) is
folded again from the entries.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

from plait.client import Client
from plait.errors import (
    MissingDependencyError,
    SessionExistsError,
    SessionNotFoundError,
    StaleSessionError,
)
from plait.integrations._keys import MAX_ID, id_part, scan, unescape
from plait.integrations._offload import in_thread, settled
from plait.interop import map_claude_code_entries
from plait.records import JSONValue, Record
from plait.session import Session
from plait.store import Store
from plait.store.base import SessionRow

try:
    from claude_agent_sdk import fold_session_summary
    from claude_agent_sdk.types import (
        SessionKey,
        SessionListSubkeysKey,
        SessionStore,
        SessionStoreEntry,
        SessionStoreListEntry,
        SessionSummaryEntry,
    )
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("plait.integrations.claude_agent_sdk", "claude-agent-sdk") from exc

__all__ = ["ENTRY_FORMAT", "PlaitSessionStore", "session_id_for"]

ENTRY_FORMAT: Final = "claude-code"
"""The ``format`` of the opaque items that hold entries no message is built from."""
_NS: Final = "claude_agent_sdk"  # the metadata and meta key of everything this module keeps
_PROJECT_BUDGET: Final = 80
_SESSION_BUDGET: Final = 60
_RETRIES: Final = 16
_FORKS: Final = ("Session.fork", "Session.fork_at")  # plait's own forks of a transcript


def session_id_for(key: Mapping[str, object]) -> str:
    """The plait session id of a store key (``project_key``, ``session_id``, ``subpath``)."""
    main = (
        f"{id_part(str(key['project_key']), _PROJECT_BUDGET)}/"
        f"{id_part(str(key['session_id']), _SESSION_BUDGET)}"
    )
    subpath = key.get("subpath")
    if not isinstance(subpath, str) or not subpath:
        return main
    # A subpath keeps its own "/" (it mirrors the SDK's folders); only "%" is escaped.
    budget = MAX_ID - len(main) - 1
    parts = [id_part(p, budget) for p in subpath.split("/")]
    tail = "/".join(parts)
    if len(tail) > budget:
        tail = id_part(subpath, budget)
    return f"{main}/{tail}"


def _now_ms(after: int = 0) -> int:
    # Storage write time on one clock for list_sessions and the summaries, never going back.
    return max(time.time_ns() // 1_000_000, after + 1)


def _info(row: SessionRow) -> dict[str, Any]:
    value = row.metadata.get(_NS)
    return dict(value) if isinstance(value, Mapping) else {}


def _entries_of(records: Sequence[Record]) -> dict[tuple[int, ...], SessionStoreEntry]:
    """The entries kept on ``records``, by the key that orders them (see D180)."""
    found: dict[tuple[int, ...], SessionStoreEntry] = {}
    for record in records:
        kept = record.meta.get(_NS)
        if not isinstance(kept, Mapping):
            continue
        for pair in cast(list[Any], kept.get("entries") or ()):
            found[tuple(pair["at"])] = cast(SessionStoreEntry, pair["entry"])
    return found


def _uuids(record: Record) -> set[str]:
    """The uuids of the entries a record keeps."""
    kept = record.meta.get(_NS)
    pairs = cast(list[Any], kept.get("entries") or ()) if isinstance(kept, Mapping) else ()
    return {p["entry"]["uuid"] for p in pairs if isinstance(p["entry"].get("uuid"), str)}


def _tip(entries: Sequence[SessionStoreEntry], before: object) -> JSONValue:
    """The uuid of the newest entry that has one: where the next line should hang."""
    for entry in reversed(entries):
        uuid = entry.get("uuid")
        if isinstance(uuid, str):
            return uuid
    return before if isinstance(before, str) else None


def _prompt_parent(entries: Sequence[SessionStoreEntry]) -> str | None:
    """The line the batch's first typed prompt hangs off, if it names one."""
    for raw in entries:
        if not _typed(raw):
            continue  # tool results hang off their call, wherever it is
        entry = cast(dict[str, Any], raw)
        parent = entry.get("parentUuid") or entry.get("logicalParentUuid")
        return parent if isinstance(parent, str) else None
    return None


def _continues(entries: Sequence[SessionStoreEntry]) -> bool:
    """Whether a batch may change the messages of the turn before it.

    A batch that starts with a typed prompt starts a turn; one of bookkeeping lines alone
    builds no message. Any other (the rest of a response, its results, an attachment
    waiting for them) is mapped again with the lines of the turn it continues.
    """
    for raw in entries:
        kind = cast(dict[str, Any], raw).get("type")
        if kind in _MAPPED:
            return not _typed(raw)
    return False


def _typed(raw: SessionStoreEntry) -> bool:
    """Whether an entry is a prompt the person typed: a turn starts with it."""
    entry = cast(dict[str, Any], raw)
    message = entry.get("message")
    if entry.get("type") != "user" or entry.get("isSidechain") is True:
        return False
    if not isinstance(message, dict):
        return False
    content = message.get("content")
    blocks = [content] if isinstance(content, str) else content or []
    return any(
        isinstance(b, str) or (isinstance(b, dict) and b.get("type") in ("text", "image"))
        for b in blocks
    )


_MAPPED: Final = frozenset({"user", "assistant", "attachment"})
"""The entry types a message is built from, or placed by (an attachment waits for results)."""


def _messages(
    entries: Sequence[SessionStoreEntry], batch: int | Sequence[list[int]]
) -> tuple[list[dict[str, JSONValue]], str | None]:
    """The plait messages of entries, each entry kept on its carrier (see the module doc).

    ``batch`` is the batch the entries arrived in (each is keyed ``[batch, i]``), or each
    entry's own key (a turn mapped again with the batch that continues it).
    """
    ats = [[batch, i] for i in range(len(entries))] if isinstance(batch, int) else list(batch)
    plain = [cast(dict[str, JSONValue], dict(e)) for e in entries]
    mapping = map_claude_code_entries(plain)
    messages = [dict(m) for m in mapping.messages]
    carried: list[list[JSONValue]] = [[] for _ in messages]
    # An entry no message carries is an opaque item placed after the message that carries
    # the entry before it, so the plait transcript follows the file's order.
    after: dict[int, list[dict[str, JSONValue]]] = {}
    last = -1
    for i, entry in enumerate(plain):
        kept: JSONValue = {"at": cast(JSONValue, ats[i]), "entry": entry}
        carrier = mapping.carriers[i]
        if carrier is not None:
            carried[carrier].append(kept)
            last = max(last, carrier)
            continue
        opaque: dict[str, JSONValue] = {
            "role": "opaque",
            "format": ENTRY_FORMAT,
            "item": entry,
            "meta": {_NS: {"entries": [kept]}},
        }
        after.setdefault(last, []).append(opaque)
    out: list[dict[str, JSONValue]] = list(after.get(-1, ()))
    for k, message in enumerate(messages):
        meta = message.get("meta")
        meta = dict(meta) if isinstance(meta, Mapping) else {}
        meta[_NS] = {"entries": carried[k]}
        message["meta"] = meta
        out.append(message)
        out.extend(after.get(k, ()))
    return out, mapping.title


class PlaitSessionStore(SessionStore):
    """A Claude Agent SDK ``SessionStore`` whose transcripts are plait sessions.

    Args:
        store: where the sessions live: anything :func:`plait.store.open_store`
            takes (a path, ``":memory:"``, a ``postgresql://`` URL, a Store),
            or None for ``$PLAIT_STORE`` or the default file.
        workspace: the workspace new sessions belong to (default: the working directory).
        lock_timeout: how long a write waits for another process's write, in seconds.

    Several processes may serve one store: the writer lock is taken for one
    write at a time (``writer_lock="write"``).
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str] | None = None,
        *,
        workspace: str | os.PathLike[str] = ".",
        lock_timeout: float = 10.0,
    ) -> None:
        self.client = Client(workspace, store=store, writer_lock="write", lock_timeout=lock_timeout)
        """The plait client the sessions are read and written through."""

    def close(self) -> None:
        """Close the store if this object opened it."""
        self.client.close()

    # -- the required pair ----------------------------------------------------------------

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Keep a batch of entries, in call order (a batch is stored whole or not at all)."""
        await settled(self.client, lambda: self._append_now(key, entries))

    def _append_now(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        if not entries:
            return
        if key.get("subpath"):
            self._append_subagent(key, entries)
        else:
            self._append_main(key, entries)

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """Every entry appended under ``key``, in order; None if none was."""
        return await in_thread(self.client, lambda: self._load_now(key))

    def _load_now(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        row = self._row(session_id_for(key))
        if row is None:
            return None
        entries = self._load_row(row)
        return entries or None

    # -- the optional methods -------------------------------------------------------------

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The project's main transcripts with their last write time (epoch ms)."""
        return await in_thread(self.client, lambda: self._list_sessions_now(project_key))

    def _list_sessions_now(self, project_key: str) -> list[SessionStoreListEntry]:
        return [
            {"session_id": str(info["session_id"]), "mtime": int(info["mtime"])}
            for row, info in self._mains(project_key)
        ]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The SDK's folded summary of each of the project's main transcripts."""
        return await in_thread(self.client, lambda: self._list_session_summaries_now(project_key))

    def _list_session_summaries_now(self, project_key: str) -> list[SessionSummaryEntry]:
        out: list[SessionSummaryEntry] = []
        for row, info in self._mains(project_key):
            summary = info.get("summary")
            if info.get("at_length") != row.layout.length or not isinstance(summary, Mapping):
                summary = self._refold(row, info)
            out.append(cast(SessionSummaryEntry, dict(summary)))
        return out

    async def delete(self, key: SessionKey) -> None:
        """Erase a transcript; a main transcript takes its sub-agents' with it."""
        await settled(self.client, lambda: self._delete_now(key))

    def _delete_now(self, key: SessionKey) -> None:
        sid = session_id_for(key)
        if self._row(sid) is None:
            return
        doomed = [sid]
        if not key.get("subpath"):
            doomed += [row.id for row in scan(self.client.store, sid + "/")]
        for victim in reversed(doomed):
            try:
                self.client.sessions.erase(victim)
            except SessionNotFoundError:
                continue  # erased by another process meanwhile

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths stored under a session (its sub-agents' transcripts)."""
        return await in_thread(self.client, lambda: self._list_subkeys_now(key))

    def _list_subkeys_now(self, key: SessionListSubkeysKey) -> list[str]:
        main = {"project_key": key["project_key"], "session_id": key["session_id"]}
        prefix = session_id_for(main)
        subpaths: list[str] = []
        for row in scan(self.client.store, prefix + "/"):
            subpath = _info(row).get("subpath")
            if isinstance(subpath, str) and row.layout.length:
                subpaths.append(subpath)
        return sorted(subpaths)

    # -- plait's side ---------------------------------------------------------------------

    def session(self, key: Mapping[str, object]) -> Session:
        """The plait session that holds ``key``'s transcript.

        Raises:
            SessionNotFoundError: nothing was appended under ``key``.
        """
        return self.client.host.get(session_id_for(key))

    # -- internals ------------------------------------------------------------------------

    def _row(self, session_id: str) -> SessionRow | None:
        try:
            return self.client.host.lookup(session_id)
        except SessionNotFoundError:
            return None

    def _load_row(self, row: SessionRow) -> list[SessionStoreEntry]:
        # From the first record, not the view: a plait reset or trim hides messages from
        # the model, never from the transcript the SDK resumes. A rewind (Claude Code's,
        # mapped to Session.rewind) left the lines it cut in hidden heads: they are read too.
        store = self.client.store
        found = _entries_of(store.read(row, 0, row.layout.end_seq))
        for hidden in self.client.host.handle(row).transcript.hidden_heads():
            held = self._row(hidden)
            if held is not None:
                found.update(_entries_of(store.read(held, 0, held.layout.end_seq)))
        return [found[at] for at in sorted(found)]

    def _rewind_point(self, row: SessionRow, parent: str) -> int | None:
        """How many messages to keep so the next line hangs off ``parent``.

        None when there is nothing to cut: ``parent`` is not in view, or no message
        built from an entry follows it (only bookkeeping lines do).
        """
        lay = row.layout
        count = 0
        keep: int | None = None
        for record in self.client.store.read(row, lay.view_start, lay.end_seq):
            if record.kind == "event":
                continue  # events are not messages: rewind does not count them
            count += 1
            if keep is None:
                if parent in _uuids(record):
                    keep = count
            elif record.kind != "opaque" and _NS in record.meta:
                return keep
        return None

    def _offset(self, row: SessionRow) -> int:
        """What a session this store never wrote adds to its versions to order its batches.

        A plait fork (``fork_at``) of a transcript starts its version again below the
        batches it kept: its own batches are ordered after the newest of those.
        """
        kept = _entries_of(self.client.store.read(row, 0, row.layout.end_seq))
        return max((at[0] for at in kept), default=-1) + 1

    def _mains(self, project_key: str) -> list[tuple[SessionRow, dict[str, Any]]]:
        prefix = id_part(project_key, _PROJECT_BUDGET) + "/"
        found = []
        for row in scan(self.client.store, prefix):
            info = _info(row)
            rest = row.id[len(prefix) :]
            if not info and row.lineage_operator in _FORKS and row.layout.length:
                # A plait fork of a transcript, not yet appended to: listed as it will be.
                key = {"project_key": project_key, "session_id": unescape(rest)}
                if session_id_for(key) == row.id:
                    info = {**key, "mtime": row.updated_at_us // 1000}
            if "/" not in rest and info.get("project_key") == project_key and "mtime" in info:
                found.append((row, info))
        return found

    def _refold(self, row: SessionRow, info: dict[str, Any]) -> SessionSummaryEntry:
        """Fold the summary again from every entry (it was behind its transcript)."""
        key: SessionKey = {"project_key": info["project_key"], "session_id": info["session_id"]}
        summary = fold_session_summary(None, key, self._load_row(row))
        summary["mtime"] = _now_ms(int(info.get("mtime", 0)))
        return summary

    def _append_main(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        sid = session_id_for(key)
        identity: dict[str, JSONValue] = {
            "project_key": key["project_key"],
            "session_id": key["session_id"],
        }
        last: Exception | None = None
        for _ in range(_RETRIES):
            row = self._row(sid)
            if row is None:
                messages, title = _messages(entries, 0)
                summary = fold_session_summary(None, key, entries)
                summary["mtime"] = _now_ms()
                info = {
                    **identity,
                    "mtime": summary["mtime"],
                    "summary": cast(JSONValue, summary),
                    "at_length": len(messages),
                    "tip": _tip(entries, None),
                }
                try:
                    self.client.sessions.create(
                        messages,
                        session_id=sid,
                        title=title,
                        lineage_operator="claude_agent_sdk.append",
                        metadata={_NS: info},
                    )
                except SessionExistsError as exc:
                    last = exc  # another writer created it first: append to it
                    continue
                return
            session = self.client.host.handle(row)
            old = _info(row)
            offset = old.get("offset", 0) if "mtime" in old else self._offset(row)
            # Batches are ordered by this key; a turn mapped again (below) moves the
            # version back, so the key never goes below the one after the last batch.
            batch = max(session.live.version + offset, int(old.get("next", 0)))
            parent = _prompt_parent(entries)
            keep = None
            if parent is not None and parent != old.get("tip"):
                keep = self._rewind_point(row, parent)
            try:
                if keep is not None:
                    # Claude Code rewound: the prompt hangs off an earlier line. plait's view
                    # follows (the cut lines stay in a hidden head, and in load()).
                    session.transcript.rewind(keep, expect_version=session.live.version)
                    messages, title = _messages(entries, batch)
                    session.transcript.inject_many(messages, expect_version=session.live.version)
                elif _continues(entries):
                    title = self._remap(session, row, entries, batch)
                else:
                    messages, title = _messages(entries, batch)
                    session.transcript.inject_many(messages, expect_version=session.live.version)
            except StaleSessionError as exc:
                last = exc  # another writer appended first: place the batch after it
                continue
            prev = old.get("summary")
            if old.get("at_length") == row.layout.length and isinstance(prev, Mapping):
                summary = fold_session_summary(cast(SessionSummaryEntry, prev), key, entries)
                summary["mtime"] = _now_ms(int(old.get("mtime", 0)))
            else:
                summary = self._refold(self.client.host.lookup(sid), {**old, **identity})
            info = {
                **old,
                **identity,
                "mtime": summary["mtime"],
                "summary": cast(JSONValue, summary),
                "at_length": session.transcript.length,
                "tip": _tip(entries, old.get("tip")),
                "next": batch + 1,
            }
            if offset:
                info["offset"] = offset
            session.settings.set_metadata(_NS, info)
            if title is not None and title != session.title:
                session.rename(title)
            return
        assert last is not None
        raise last

    def _open_turn(self, row: SessionRow) -> tuple[int, list[Record]]:
        """The records of the turn still open at the head, and the messages before them.

        The turn starts at the newest message built from a typed prompt (read back from
        the head a few records at a time); with none in view, the whole view is open.
        """
        lay = row.layout
        store = self.client.store
        hi, tail = lay.end_seq, list[Record]()
        while hi > lay.view_start:
            lo = max(lay.view_start, hi - 64)
            chunk = store.read(row, lo, hi)
            for k in range(len(chunk) - 1, -1, -1):
                record = chunk[k]
                kept = record.meta.get(_NS)
                pairs = (
                    cast(list[Any], kept.get("entries") or ()) if isinstance(kept, Mapping) else ()
                )
                if record.kind != "opaque" and any(_typed(p["entry"]) for p in pairs):
                    tail = chunk[k:] + tail
                    after = sum(1 for r in tail if r.kind != "event")
                    return lay.length - after, tail
            tail = chunk + tail
            hi = lo
        return 0, tail

    def _remap(
        self,
        session: Session,
        row: SessionRow,
        entries: list[SessionStoreEntry],
        batch: int,
    ) -> str | None:
        """Map the open turn again with the batch that continues it, in its place.

        One API response's lines (its text, thinking and calls), its results and the
        attachments that wait for them can fall in different batches; mapped on its own,
        each batch would be a message of its own. So the turn is mapped again whole, as
        the importer maps it: the head moves back to the turn's start and its messages
        are written again, every entry keeping its key; the head that held the turn's
        first mapping holds nothing load() lacks, and goes.
        """
        keep, tail = self._open_turn(row)
        held = _entries_of(tail)
        if not held:
            messages, title = _messages(entries, batch)
            session.transcript.inject_many(messages, expect_version=session.live.version)
            return title
        ats = sorted(held)
        combined = [held[at] for at in ats] + list(entries)
        keys = [list(at) for at in ats] + [[batch, i] for i in range(len(entries))]
        messages, title = _messages(combined, keys)
        taken = not session.live.holds_lock
        if taken:
            session.live.acquire()  # the three writes below are one change to other writers
        try:
            hidden = session.transcript.rewind(keep, expect_version=session.live.version)
            session.transcript.inject_many(messages, expect_version=session.live.version)
            with contextlib.suppress(SessionNotFoundError):
                self.client.sessions.delete(hidden)
        finally:
            if taken:
                session.live.release()
        return title

    def _append_subagent(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        sid = session_id_for(key)
        main_key = {"project_key": key["project_key"], "session_id": key["session_id"]}
        identity: dict[str, JSONValue] = {**main_key, "subpath": key.get("subpath", "")}
        last: Exception | None = None
        for _ in range(_RETRIES):
            row = self._row(sid)
            if row is None:
                self._child(session_id_for(main_key), sid, main_key)
                continue
            session = self.client.host.handle(row)
            if _info(row) != identity:
                session.settings.set_metadata(_NS, identity)
            messages, _ = _messages(entries, session.live.version)
            try:
                session.transcript.inject_many(messages, expect_version=session.live.version)
            except StaleSessionError as exc:
                last = exc
                continue
            return
        assert last is not None
        raise last

    def _child(self, main_id: str, sub_id: str, main_key: dict[str, str]) -> None:
        """Make the sub-agent's session: a branch of the main one that keeps no message."""
        main = self._row(main_id)
        if main is None:
            # A sub-agent written before its main transcript: the main session waits,
            # empty, listed nowhere until an entry of its own arrives.
            with contextlib.suppress(SessionExistsError):
                self.client.sessions.create(
                    session_id=main_id,
                    lineage_operator="claude_agent_sdk.append",
                    metadata={_NS: cast(JSONValue, main_key)},
                )
            main = self.client.host.lookup(main_id)
        with contextlib.suppress(SessionExistsError):  # another writer made it first
            self.client.host.handle(main).fork_at(0, dst=sub_id)
