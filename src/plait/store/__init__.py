"""Stores: where sessions live. Narrow protocols, one conformance kit, several backends."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from plait._files import usable_path
from plait._lazy import lazy_names
from plait.store._bus import BusMessage, EventBus
from plait.store._parts import (
    PARTS,
    TRANSCRIPT_MEMBERS,
    Part,
    PartialStore,
    missing_members,
    parts_of,
)
from plait.store._protocols import (
    ErasePlan,
    Footprint,
    MessageReader,
    ReplicaRow,
    ReplicaState,
    RetentionStore,
    RunRegistry,
    RunRow,
    TallyBatches,
)
from plait.store.base import (
    BearerStore,
    BreakableLocks,
    LiveClientStore,
    ObjectStore,
    ScratchpadEntry,
    SessionRow,
    Store,
    TallyStore,
    TranscriptStore,
    WriterLocks,
)
from plait.store.search import SearchHit, SearchStore
from plait.store.sql._check import Problem
from plait.store.sql._sealing import generate_key as new_encryption_key
from plait.store.sqlite._salvage import Salvaged, salvage

if TYPE_CHECKING:
    from plait.store.postgres import PostgresStore
    from plait.store.sqlite import MemoryStore, SQLiteStore, default_path

# The engines load on first use: a program on SQLite never loads the PostgreSQL store.
if not TYPE_CHECKING:  # type checkers see the imports above, and no catch-all __getattr__
    __getattr__, __dir__ = lazy_names(
        __name__,
        globals(),
        {
            "PostgresStore": "plait.store.postgres",
            "MemoryStore": "plait.store.sqlite",
            "SQLiteStore": "plait.store.sqlite",
            "default_path": "plait.store.sqlite",
        },
    )

__all__ = [
    "BusMessage",
    "EventBus",
    "BearerStore",
    "BreakableLocks",
    "ErasePlan",
    "Footprint",
    "LiveClientStore",
    "MemoryStore",
    "MessageReader",
    "ObjectStore",
    "PARTS",
    "Part",
    "PartialStore",
    "PostgresStore",
    "Problem",
    "ReplicaRow",
    "ReplicaState",
    "RetentionStore",
    "RunRegistry",
    "TallyBatches",
    "RunRow",
    "SQLiteStore",
    "Salvaged",
    "SearchHit",
    "SearchStore",
    "ScratchpadEntry",
    "SessionRow",
    "Store",
    "TallyStore",
    "TranscriptStore",
    "WriterLocks",
    "default_path",
    "new_encryption_key",
    "open_store",
    "parts_of",
    "salvage",
]


def open_store(
    target: str | os.PathLike[str] | TranscriptStore | None = None,
    *,
    encryption_key: str | bytes | None = None,
) -> Store:
    """Open the store a user named.

    Args:
        target: a :class:`Store` (returned as is), or a store that offers only some
            of its parts (every :class:`TranscriptStore` member at least), returned
            as a :class:`PartialStore` around it; ``":memory:"`` for an
            ephemeral in-memory store; a ``sqlite:///path`` URL or a file path;
            a ``postgresql://`` (or ``postgres://``) URL for a
            :class:`PostgresStore` (``?schema=name`` picks a schema);
            ``None`` for ``$PLAIT_STORE`` if set, else the default SQLite file
            (see :func:`default_path`).
        encryption_key: the master key of an encrypted store (``plait db keygen``;
            D320); None for ``$PLAIT_ENCRYPTION_KEY``'s, if set. Refused with a
            store given as is (it was opened with its own).

    Returns:
        An open store.

    Raises:
        InvalidArgumentError: a URL scheme plait has no store for, or ``target``
            is none of these (a path the file system cannot name included; an object
            without every transcript member, which the message names).
        MissingDependencyError: a PostgreSQL URL without ``plait[postgres]`` installed.
        StoreError: the store cannot be opened (a bad URL, an unreachable server, ...).
        EncryptionKeyError: an encrypted store without its key, or with another.
    """
    from plait.errors import InvalidArgumentError, shown
    from plait.store.sqlite import MemoryStore, SQLiteStore, default_path

    if target is not None and not isinstance(target, str | os.PathLike):
        if isinstance(target, TranscriptStore):
            if encryption_key is not None:
                raise InvalidArgumentError(
                    "an encryption key is given with a store's path or URL, not with an "
                    "open store (it was opened with its own key, or without one)"
                )
            # A transcript store alone is a store: the parts it lacks are served (D420).
            return target if isinstance(target, Store) else PartialStore(target)
        lacks = missing_members(target)
        if len(lacks) < len(TRANSCRIPT_MEMBERS):  # some of them: meant as a store
            raise InvalidArgumentError(
                f"not a store: {shown(target)} lacks the transcript members {', '.join(lacks)}"
            )
        raise InvalidArgumentError(f"not a store, a path or a URL: {shown(target)}")
    if target is None:
        target = os.environ.get("PLAIT_STORE") or None
    if target is None:
        return SQLiteStore(default_path(), encryption_key=encryption_key)
    text = usable_path(os.fspath(target), target)
    if text == ":memory:":
        return MemoryStore(encryption_key=encryption_key)
    if text.startswith("sqlite://"):
        return SQLiteStore(Path(text.removeprefix("sqlite://")), encryption_key=encryption_key)
    if text.startswith(("postgresql://", "postgres://")):
        from plait.store.postgres import PostgresStore

        return PostgresStore(text, encryption_key=encryption_key)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise InvalidArgumentError(
            f"no store for {scheme!r} URLs (known: sqlite, postgresql, :memory:)"
        )
    return SQLiteStore(Path(text), encryption_key=encryption_key)
