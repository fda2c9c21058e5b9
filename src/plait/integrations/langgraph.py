"""plait as LangGraph's checkpointer (``pip install 'plait[langgraph]'``).

A drop-in where ``SqliteSaver`` or ``PostgresSaver`` stood::

    from plait.integrations.langgraph import PlaitSaver

    with PlaitSaver.from_conn_string("chats.db") as saver:
        graph = builder.compile(checkpointer=saver)
        graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t1"}})

A thread is a plait session (the root namespace of thread ``T`` is the session
``T``; a subgraph's namespace is a session of its own, marked with its thread),
so plait's API reads it: ``client.open("t1").history()`` shows the
conversation.
A checkpoint costs what changed (D344):

- the ``messages`` channel (a list of LangChain messages, as ``add_messages``
  keeps it) is plait records, each message appended once: a later checkpoint
  that holds it again names its position, it does not store it again;
- every other channel value is stored once per distinct value, content-addressed
  in the store's object space (:class:`plait.store.ObjectStore`);
- the checkpoint itself is one small event record naming, for each channel
  version it introduced, a digest or the message positions; pending writes are
  event records too.

Time travel (invoking from an older checkpoint, ``update_state`` on one) is a
plait branch: the session's id moves to a head sharing the records up to that
checkpoint, and the abandoned branch stays a hidden head that LangGraph still
lists (D340). ``copy_thread`` forks a thread's sessions; ``prune`` and
``delete_for_runs`` rewrite a namespace's session into new heads and erase the
old ones (D341); the channel values no live record holds go (D342).

One writer per thread (D343): each write holds the thread's writer lock
(``writer_lock="write"``), and a run that continues a checkpoint another run
continued first is refused with :class:`~plait.errors.ThreadConflictError`;
``with saver.turn(thread_id):`` around a run makes another process's run wait
its turn instead. The store is plain (synchronous) calls, so
:class:`AsyncPlaitSaver` and the async methods run each call on the client's
store worker (D219).
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import os
import threading
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any, Final, ParamSpec, Self, TypeVar, cast

from plait.client import Client
from plait.errors import InvalidArgumentError, MissingDependencyError, ThreadConflictError
from plait.integrations._langgraph_records import (
    CHECKPOINT,
    WRITES,
    Branches,
    Thread,
    expand,
    held,
    ranges,
    version_key,
)
from plait.integrations._langgraph_retention import Retention
from plait.integrations._offload import in_thread
from plait.session.checkpoints import HELD
from plait.store import ObjectStore, SessionRow, Store

try:
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        DeltaChannelHistory,
        get_checkpoint_id,
        get_checkpoint_metadata,
        writes_sort_key,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise MissingDependencyError("plait's LangGraph checkpointer", "langgraph") from exc

__all__ = ["AsyncPlaitSaver", "PlaitSaver"]

_T = TypeVar("_T")
_P = ParamSpec("_P")
_OPERATOR: Final = "langgraph"
_MESSAGES: Final = "messages"


def _one_at_a_time(method: Callable[_P, _T]) -> Callable[_P, _T]:
    """Run a saver method under the saver's lock (its client's handles are not shared)."""

    @functools.wraps(method)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _T:
        with args[0]._lock:  # type: ignore[attr-defined]
            return method(*args, **kwargs)

    return run


class _SaverCore(Retention, BaseCheckpointSaver[str]):
    """The checkpointer over a plait client: sync methods, async ones on its store worker."""

    def __init__(
        self,
        store: Client | Store | str | os.PathLike[str] | None = None,
        *,
        workspace: str | os.PathLike[str] = ".",
        lock_timeout: float | None = None,
        serde: SerializerProtocol | None = None,
        object_grace: float = 60.0,
    ) -> None:
        super().__init__(serde=serde)
        if (
            isinstance(object_grace, bool)
            or not isinstance(object_grace, int | float)
            or not 0 <= object_grace < float("inf")
        ):
            raise InvalidArgumentError(
                f"object_grace is a number of seconds >= 0, not {object_grace!r}"
            )
        self._object_grace = float(object_grace)
        if isinstance(store, Client):
            self._client, self._owns = store, False
        else:
            options: dict[str, Any] = {"store": store, "writer_lock": "write"}
            if lock_timeout is not None:
                options["lock_timeout"] = lock_timeout
            self._client, self._owns = Client(workspace, **options), True
        objects = self._client.store
        if not isinstance(objects, ObjectStore):
            raise InvalidArgumentError("PlaitSaver needs a store with an object space")
        self._objects: ObjectStore = objects
        # Sync graphs write a step's parallel tasks from several threads: one call at a time.
        self._lock = threading.RLock()
        self._cache: OrderedDict[str, Thread] = OrderedDict()  # the newest used last
        self._hidden: dict[str, tuple[int, list[SessionRow], list[str]]] = {}
        self._decoded: OrderedDict[str, Any] = OrderedDict()
        # Names the checkpoints this saver writes: another saver's child of a checkpoint
        # tells a task's late writes to it from another process's race (D343).
        self._writer = uuid.uuid4().hex

    @property
    def client(self) -> Client:
        """The plait client the threads are read and written through."""
        return self._client

    def close(self) -> None:
        """Close the store if this saver opened it."""
        if self._owns:
            self._client.close()

    def __enter__(self) -> Self:
        """The saver itself; leaving the block closes a store it opened."""
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        """The saver itself; leaving the block closes a store it opened."""
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _is_messages(channel: str, value: Any) -> bool:
        return (
            channel == _MESSAGES
            and isinstance(value, list)
            and all(isinstance(m, BaseMessage) and m.id for m in value)
        )

    # -- the saver --------------------------------------------------------------------------

    @_one_at_a_time
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint: new message records, new channel objects, one event.

        Args:
            config: names the thread, namespace and (as ``checkpoint_id``) the parent.
            checkpoint: the checkpoint; only channels in ``new_versions`` are written.
            metadata: its metadata (merged with the config's, as LangGraph's savers do).
            new_versions: the channel versions this checkpoint introduced.

        Returns:
            The config naming the stored checkpoint.

        Raises:
            InvalidArgumentError: a thread id plait cannot use as a session id.
        """
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        session_id = self._session_id(thread_id, ns)
        values = checkpoint["channel_values"]
        skeleton = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        parent = conf.get("checkpoint_id")
        parent = str(parent) if parent else None
        with self._client.host.locked(session_id):
            session = self._session(thread_id, ns, create=True)
            space = self._read(thread_id, ns, whole=False)
            assert session is not None and space is not None
            if parent != space.current.tip and space.current.partial_from:
                space = self._read(thread_id, ns)  # not a run continuing the tip: every record
                assert space is not None
            self._finish_rewrite(session_id, space)
            # A checkpoint continues one chain: after one another run already continued,
            # only a branch LangGraph asks for (time travel: an update or a fork) is
            # taken; any other run lost the race and writes nothing (D343).
            branching = metadata.get("source") in ("update", "fork") or _addressed(config) == parent
            if space.continued(parent, checkpoint["id"]) and not branching:
                raise ThreadConflictError(session_id, thread_id, parent)
            if parent in space.checkpoints and space.current.tip != parent:
                self._branch_at(space, parent)
                session = self._session(thread_id, ns, create=False)
                space = self._read(thread_id, ns)
                assert session is not None and space is not None
            blobs: dict[str, dict[str, Any]] = {}
            for channel, version in new_versions.items():
                entry: dict[str, Any] = {"v": version_key(version)}
                if channel not in values:
                    entry["empty"] = True
                elif self._is_messages(channel, values[channel]):
                    found = self._message_ordinals(thread_id, ns, session, values[channel])
                    entry["messages"] = ranges(found)
                else:
                    entry["d"] = self._put_object(values[channel])
                blobs[channel] = entry
            # The event names every value it holds, not only the new ones, so the newest
            # checkpoint is read from its own event (D345).
            whole = True
            for channel, version in checkpoint["channel_versions"].items():
                if channel not in blobs:
                    kept = space.entry(channel, version_key(version))
                    if kept is None:
                        whole = False
                    else:
                        blobs[channel] = dict(kept)
            data: dict[str, Any] = {
                "id": checkpoint["id"],
                "parent": parent,
                "checkpoint": self._dump(skeleton),
                "metadata": self._dump(get_checkpoint_metadata(config, metadata)),
                "blobs": blobs,
                "writer": self._writer,
                "all": whole,
            }
            early = space.current.first_write.get(str(checkpoint["id"]))
            if early is not None:  # a task's writes stored before the checkpoint itself
                data["early"] = early
            data[HELD] = held(data)
            session.transcript.log_event(CHECKPOINT, data)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    @_one_at_a_time
    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's writes against a checkpoint, as one event record.

        A write already stored under the same task and index is kept, except the
        special channels (errors, interrupts, ...), which the newest replaces.
        """
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        rows = [[WRITES_IDX_MAP.get(c, i), c, *self._dump(v)] for i, (c, v) in enumerate(writes)]
        if not rows:
            return
        session_id = self._session_id(thread_id, ns)
        checkpoint_id = str(conf["checkpoint_id"])
        data: dict[str, Any] = {
            "checkpoint": checkpoint_id,
            "task": task_id,
            "path": task_path,
            "writes": rows,
        }
        data[HELD] = held(data)
        with self._client.host.locked(session_id):
            session = self._session(thread_id, ns, create=True)
            space = self._read(thread_id, ns, whole=False)
            assert session is not None and space is not None
            if checkpoint_id not in space.checkpoints and space.current.partial_from:
                space = self._read(thread_id, ns)  # writes to an older checkpoint
                assert space is not None
            # A task's writes after another saver (another process) continued their
            # checkpoint lost the race: refused as their checkpoint would be (D343).
            if (
                space.continued_by_other(checkpoint_id, self._writer)
                and _addressed(config) != checkpoint_id
            ):
                raise ThreadConflictError(session_id, thread_id, checkpoint_id)
            session.transcript.log_event(WRITES, data)

    def _tuple(
        self, thread_id: str, ns: str, space: Branches, checkpoint_id: str
    ) -> CheckpointTuple:
        data = space.checkpoints[checkpoint_id]
        thread = space.home[checkpoint_id]  # its head: its values name that head's messages
        skeleton = self._load(data["checkpoint"])
        values: dict[str, Any] = {}
        for channel, version in skeleton["channel_versions"].items():
            entry = thread.blobs.get((channel, version_key(version)))
            if entry is not None and not entry.get("empty"):
                values[channel] = self._value(thread, entry)
        return CheckpointTuple(
            config=_config(thread_id, ns, checkpoint_id),
            checkpoint=cast("Checkpoint", {**skeleton, "channel_values": values}),
            metadata=self._load(data["metadata"]),
            parent_config=_config(thread_id, ns, data["parent"]) if data.get("parent") else None,
            pending_writes=self._pending(space, checkpoint_id),
        )

    def _value(self, thread: Thread, entry: dict[str, Any]) -> Any:
        """A channel's stored value: its messages in order, or the object it names."""
        if "messages" in entry:
            return [self._message(thread.messages[n]) for n in expand(entry["messages"])]
        return self._get_object(str(entry["d"]))

    def _pending(self, space: Branches, checkpoint_id: str) -> list[tuple[str, str, Any]]:
        kept: dict[tuple[str, int], tuple[str, str, list[str], str]] = {}
        for event in space.writes(checkpoint_id):
            task, path = str(event["task"]), str(event["path"])
            for idx, channel, kind, data in event["writes"]:
                key = (task, int(idx))
                if key[1] >= 0 and key in kept:
                    continue
                kept[key] = (task, str(channel), [kind, data], path)
        order = sorted(kept, key=lambda k: writes_sort_key(kept[k][3], *k))
        return [(kept[k][0], kept[k][1], self._load(kept[k][2])) for k in order]

    @_one_at_a_time
    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """What ``channels`` (``DeltaChannel`` ones) gathered along the checkpoint's parents.

        LangGraph's contract: per channel, the writes stored at each ancestor (oldest
        first, the target's own excluded) back to the nearest ancestor that stores a
        value, which is the ``seed``. Read from the session once, not one
        ``get_tuple`` (every channel decoded) per ancestor.
        """
        history: dict[str, list[tuple[str, str, Any]]] = {c: [] for c in channels}
        seeds: dict[str, Any] = {}
        conf = config["configurable"]
        space = self._read(str(conf["thread_id"]), str(conf.get("checkpoint_ns", "")))
        if channels and space is not None and space.checkpoints:
            target = space.checkpoints.get(get_checkpoint_id(config) or max(space.checkpoints))
            current = target.get("parent") if target else None
            remaining = set(channels)
            while remaining and isinstance(current, str) and current in space.checkpoints:
                data, home = space.checkpoints[current], space.home[current]
                versions = self._load(data["checkpoint"])["channel_versions"]
                for write in reversed(self._pending(space, current)):
                    if write[1] in remaining:
                        history[write[1]].append(write)
                for channel in sorted(remaining):
                    entry = home.blobs.get((channel, version_key(versions.get(channel))))
                    if channel in versions and entry is not None and not entry.get("empty"):
                        seeds[channel] = self._value(home, entry)
                        remaining.discard(channel)
                current = data.get("parent")
        result: dict[str, DeltaChannelHistory] = {}
        for channel in channels:
            result[channel] = {"writes": history[channel][::-1]}
            if channel in seeds:
                result[channel]["seed"] = seeds[channel]
        return result

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        """:meth:`get_delta_channel_history` on the store worker."""
        return await self._off(
            lambda: self.get_delta_channel_history(config=config, channels=channels)
        )

    @_one_at_a_time
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names, or the thread's newest; None when there is none."""
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        asked = get_checkpoint_id(config)
        space = self._read(thread_id, ns, whole=asked is not None)
        if space is None or not space.checkpoints:
            return None
        checkpoint_id = asked or max(space.checkpoints)
        if checkpoint_id not in space.checkpoints:
            return None
        return self._tuple(thread_id, ns, space, checkpoint_id)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The checkpoints matching the criteria, newest first per namespace.

        Args:
            config: a thread (and optionally a namespace or checkpoint id); None for all.
            filter: metadata keys and the values they must have.
            before: only checkpoints older than the one this config names.
            limit: at most this many.

        Returns:
            An iterator of checkpoint tuples.
        """
        return iter(self._list(config, filter, before, limit))

    @_one_at_a_time
    def _list(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> builtins.list[CheckpointTuple]:
        conf = config["configurable"] if config else {}
        threads = [str(conf["thread_id"])] if config else self._threads()
        want_ns = conf.get("checkpoint_ns")
        want_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        found: builtins.list[CheckpointTuple] = []
        for thread_id in threads:
            for ns in self._sessions(thread_id):
                if want_ns is not None and ns != want_ns:
                    continue
                space = self._read(thread_id, ns)
                if space is None:
                    continue
                for checkpoint_id in sorted(space.checkpoints, reverse=True):
                    if want_id and checkpoint_id != want_id:
                        continue
                    if before_id and checkpoint_id >= before_id:
                        continue
                    if filter:
                        meta = self._load(space.checkpoints[checkpoint_id]["metadata"])
                        if not all(meta.get(k) == v for k, v in filter.items()):
                            continue
                    if limit is not None and len(found) >= limit:
                        return found
                    found.append(self._tuple(thread_id, ns, space, checkpoint_id))
        return found

    # -- async twins: the same calls on the client's store worker ----------------------------

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """:meth:`delete_for_runs` on the store worker."""
        await self._off(lambda: self.delete_for_runs(run_ids))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """:meth:`prune` on the store worker."""
        await self._off(lambda: self.prune(thread_ids, strategy=strategy))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """:meth:`copy_thread` on the store worker."""
        await self._off(lambda: self.copy_thread(source_thread_id, target_thread_id))

    async def _off(self, fn: Callable[[], _T]) -> _T:
        return await in_thread(self._client, fn)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """:meth:`get_tuple` on the store worker."""
        return await self._off(lambda: self.get_tuple(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """:meth:`list` on the store worker."""
        for item in await self._off(lambda: self._list(config, filter, before, limit)):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """:meth:`put` on the store worker."""
        return await self._off(lambda: self.put(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """:meth:`put_writes` on the store worker."""
        await self._off(lambda: self.put_writes(config, writes, task_id, task_path))

    @contextlib.asynccontextmanager
    async def aturn(self, thread_id: str) -> AsyncIterator[None]:
        """:meth:`turn` for async graphs: the wait for the lock runs off the event loop."""
        session_id = self._session_id(thread_id, "")
        hold = self._client.host.locked(session_id)
        await self._off(hold.__enter__)
        try:
            yield
        finally:
            await self._off(lambda: hold.__exit__(None, None, None))

    async def adelete_thread(self, thread_id: str) -> None:
        """:meth:`delete_thread` on the store worker."""
        await self._off(lambda: self.delete_thread(thread_id))

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The next channel version: a zero-padded counter and a random tail.

        The form LangGraph's own savers use, so versions compare as strings.
        """
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:032}.{int.from_bytes(os.urandom(8), 'big') / 2**64:016}"


class PlaitSaver(_SaverCore):
    """LangGraph's checkpointer over a plait store (sync and async methods).

    Args:
        store: anything :func:`plait.store.open_store` takes (a path, ``":memory:"``, a
            ``postgresql://`` URL, a Store; None for ``$PLAIT_STORE`` or the default
            file), or a :class:`plait.Client` (used as it is and never closed here).
        workspace: the workspace of the sessions it creates.
        lock_timeout: seconds a write (or a :meth:`turn`) waits for another writer of
            the same thread.
        serde: LangGraph's serializer for channel values (its default otherwise).
        object_grace: seconds a channel value no live checkpoint reads any more is
            kept after its last use, since a ``put`` in another process may be naming
            it (default 60); the next delete or prune collects it.

    Raises:
        MissingDependencyError: langgraph is not installed.
        InvalidArgumentError: a store without an object space, or a bad ``object_grace``.
    """

    @classmethod
    @contextlib.contextmanager
    def from_conn_string(cls, conn_string: str, **options: Any) -> Iterator[PlaitSaver]:
        """A saver over ``conn_string`` (a path, ``:memory:`` or a URL), closed on exit."""
        saver = cls(conn_string, **options)
        try:
            yield saver
        finally:
            saver.close()


class AsyncPlaitSaver(_SaverCore):
    """:class:`PlaitSaver` for async graphs: every store call runs off the event loop.

    Takes the same arguments as :class:`PlaitSaver`.
    """

    @classmethod
    @contextlib.asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, **options: Any
    ) -> AsyncIterator[AsyncPlaitSaver]:
        """A saver over ``conn_string``, closed on exit (``async with``)."""
        saver = cls(conn_string, **options)
        try:
            yield saver
        finally:
            saver.close()


def _addressed(config: RunnableConfig) -> str | None:
    """The checkpoint a run was invoked at (time travel), as LangGraph passes it on.

    LangGraph copies the caller's ``configurable`` into the run's metadata, so a run
    invoked with a ``checkpoint_id`` carries it in every write; a run that continued
    the thread's newest checkpoint carries none.
    """
    found = (config.get("metadata") or {}).get("checkpoint_id")
    return str(found) if found else None


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }
