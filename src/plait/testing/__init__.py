"""The store conformance kit: a backend is done when this passes against it.

``plait.testing`` is the suite every store plait ships passes (SQLite, in-memory,
PostgreSQL), packaged for a third-party backend to run in its own tests. It talks
to the store protocols of :mod:`plait.store.base` directly, below the Session
API, one class of tests per protocol:

* :class:`TranscriptConformance`: rows and records, compare-and-set appends and
  writes, copy-on-write reads across forks, listing, lineage, probes, stamps,
  scratchpad history, deletion that keeps shared rows, the integrity check.
* :class:`LineageConformance`: the chain of first parents, walked by the store.
* :class:`ListingConformance`: sessions listed by id prefix, exactly the ids
  that start with it, in ``recent``'s order.
* :class:`HeadConformance`: moving a session's head (a rewind and its undo) and
  erasing a session, on the store itself.
* :class:`SessionVerbConformance`: the public verbs over this store: ``rewind`` /
  ``undo_rewind``, opaque items, ``tail`` counting messages, ``erase``.
* :class:`TallyConformance`: stored token counts and running tallies.
* :class:`BearerConformance`: durable bearer sessions.
* :class:`LiveClientConformance`: live clients and the one controller.
* :class:`ObjectConformance`: the object space workspace checkpoints live in
  (write-once objects in parts, use times, deletion, many digests at once).
* :class:`WriterLockConformance`: the writer lock is held, released, shared by
  the stores of one process, dropped when its holder dies (a subprocess that
  takes it is killed with SIGKILL), never blocks a reader, passes between
  processes in turn as often as they ask, is one lock per id whatever the id
  holds (``user/123`` is not ``user``), lets the ``writer_lock="write"``
  clients of two processes append to one session by turns, losing nothing, and,
  where a lock can be lost while its holder lives (``StoreFactory.lose_lock``),
  refuses every write of a holder whose lock was lost and taken by another process
  (:class:`~plait.errors.WriterLockLostError`, nothing written).
* :class:`RetentionConformance`: the optional retention verbs (idle sessions, what an
  erase would remove, the footprint, giving space back) and ``client.sessions.retain``
  over forks, rewinds and checkpoints: every kept session reads byte for byte as
  before and resumes; a dry run changes nothing; a session in use is kept; two passes
  at once remove each session once.
* :class:`SearchConformance`: full-text search across sessions: every message role,
  newest first, a shared row found in each live fork, none in a deleted session,
  a hidden head or a trimmed position, by workspace, after a rebuild.
* :class:`SessionIdConformance`: any id :func:`plait._ids.is_session_id` accepts
  (``user/123``, ``../x``, 200 characters, Unicode) is a key, compared exactly.
* :class:`EncryptionConformance`: on a factory that opens an encrypted store
  (``encrypted = True``, e.g. with the opener :func:`open_encrypted_store`): a missing
  or wrong key refused before anything is written, everything a session holds read
  back through the key, a fork reading what it shares after its source is erased,
  rotation of the master key, sealed checkpoint objects. Skipped on a plain store.

:class:`StoreConformance` is all of them. A test of a protocol the store does not
implement is skipped and says so, naming the part (a key of :data:`plait.store.PARTS`),
so a backend that offers only a transcript runs the whole class and passes what it
offers; :func:`parts_supported` lists the parts a store offers. The session verbs run
over any transcript store: :func:`plait.store.open_store` serves the parts it lacks
(writer locks in this process, tallies counted in memory, the lineage walked) or
refuses the verbs that need them (:class:`~plait.errors.StorePartMissingError`).

The kit opens stores through a :class:`StoreFactory`: a fresh *target* (a
string: a path, a URL) per test, and an *opener* named by import path, so that
another process can open the same target (the lock tests need one).

Example: the tests of a third-party backend ``mystore`` (the opener is any
callable that takes the target string and returns an open store)::

    # tests/test_plait_conformance.py
    from pathlib import Path

    from plait.testing import StoreConformance, StoreFactory


    class MyFactory(StoreFactory):
        opener = "mystore:MyStore"          # MyStore(target) opens a store

        def new_target(self, tmp_path: Path) -> str:
            return f"mystore://{tmp_path}/db"


    class TestMyStore(StoreConformance):
        factory = MyFactory()

Run it with ``pytest``; the lock tests start subprocesses and are marked
``slow`` (``-m "not slow"`` leaves them out). The kit needs pytest:
``pip install 'plait[testing]'``.
"""

from __future__ import annotations

from plait.errors import MissingDependencyError

try:
    import pytest
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise MissingDependencyError("plait.testing (the store conformance kit)", "testing") from exc

# The suites' asserts are in this package, not in the test module that runs them:
# rewriting them makes a failure show the values compared, as in any test file.
pytest.register_assert_rewrite(
    "plait.testing._transcript",
    "plait.testing._services",
    "plait.testing._locks",
    "plait.testing._objects",
    "plait.testing._heads",
    "plait.testing._ids",
    "plait.testing._retention",
    "plait.testing._search",
    "plait.testing._crypto",
)

from plait.testing._crypto import (  # noqa: E402
    KIT_KEY,
    EncryptionConformance,
    open_encrypted_store,
)
from plait.testing._factory import StoreFactory, parts_supported  # noqa: E402
from plait.testing._heads import HeadConformance, SessionVerbConformance  # noqa: E402
from plait.testing._ids import SessionIdConformance  # noqa: E402
from plait.testing._listing import ListingConformance  # noqa: E402
from plait.testing._locks import WriterLockConformance  # noqa: E402
from plait.testing._objects import ObjectConformance  # noqa: E402
from plait.testing._retention import RetentionConformance  # noqa: E402
from plait.testing._search import SearchConformance  # noqa: E402
from plait.testing._services import (  # noqa: E402
    BearerConformance,
    LiveClientConformance,
    TallyConformance,
)
from plait.testing._transcript import LineageConformance, TranscriptConformance  # noqa: E402

__all__ = [
    "KIT_KEY",
    "BearerConformance",
    "EncryptionConformance",
    "HeadConformance",
    "LineageConformance",
    "LiveClientConformance",
    "ObjectConformance",
    "SearchConformance",
    "ListingConformance",
    "RetentionConformance",
    "SessionIdConformance",
    "StoreConformance",
    "SessionVerbConformance",
    "StoreFactory",
    "TallyConformance",
    "TranscriptConformance",
    "WriterLockConformance",
    "open_encrypted_store",
    "parts_supported",
]


class StoreConformance(
    TranscriptConformance,
    LineageConformance,
    ListingConformance,
    HeadConformance,
    SessionVerbConformance,
    TallyConformance,
    BearerConformance,
    LiveClientConformance,
    ObjectConformance,
    RetentionConformance,
    SearchConformance,
    WriterLockConformance,
    SessionIdConformance,
    EncryptionConformance,
):
    """Every conformance test: subclass it in a test module and set ``factory``.

    Tests of a protocol the store does not implement skip, saying which.
    """
