"""The PostgreSQL store: for sessions shared by several machines or users.

Same data model as the SQLite store (see ``plait.store.sqlite`` and
``docs/architecture.md``), kept in the same tables:

* ``sessions``: one row per session, with its copy-on-write layout.
* ``records``: one row per record, keyed by ``owner << 32 | seq``, so a session's
  rows are one range of the primary-key index: appending inserts at the end of
  that range and reading any slice is one index range scan.
* ``lineage``: parent -> child edges, so children are found without a scan.
* ``scratchpads``: every version of every scratchpad.
* ``plait_schema``: the migrations applied.

What differs, and why:

* **Round trips dominate.** A statement costs a network round trip, so every
  hot operation is ONE statement in its own (autocommit) transaction: an append
  checks the session is live, inserts its records (the primary key is the
  compare-and-set) and moves ``updated_at`` only when another session is ahead,
  all in one statement built from data-modifying CTEs.
  Records travel as arrays (``unnest``), so the statement's shape does not
  depend on how many there are and the server keeps it prepared; the common
  one-record append sends scalars, cheaper to build and to send, through
  libpq rather than a cursor (``store/postgres/_prep.py``).
* **Concurrency is row locks, not one writer.** An append takes ``FOR KEY
  SHARE`` on its session row, which only a delete (it changes the row's key)
  conflicts with; a row write is a conditional ``UPDATE`` whose ``WHERE`` is the
  compare-and-set; a fork locks the rows of the sessions it shares rows with, and
  a delete locks what it collects before looking again, so a fork and the delete
  of its source never lose rows between them.
* **Writer locks are advisory locks** held on one connection (never a pooled
  one) that the stores of a process on the same database and schema share, as
  the protocol says a lock belongs to the process: they die with the
  connection, so with the process, however it ends. That connection can also
  be cut while the process lives, and nothing tells the holder: so taking a
  lock bumps the session's epoch (``writer_fences``), and every write a holder
  makes on the session checks that epoch in its own statement, refusing with
  :class:`WriterLockLostError` once another writer took the lock (D232).
* **Every committed write notifies** ``plait_session`` with the session's id
  (see :meth:`PostgresStore.changes`), just after its commit and never inside
  it: a ``NOTIFY`` in the write's transaction would make the commits of writers
  on different sessions take turns (see ``store/postgres/_feed.py``).
* **Run events travel between processes** (:meth:`PostgresStore.publish_events`,
  :meth:`PostgresStore.events`): batches in an UNLOGGED table, announced by id on
  ``LISTEN/NOTIFY`` (see ``store/postgres/_bus.py``, D235).
* **Migrations are not applied to an existing schema by default**: a shared
  server is not one user's file. A fresh schema is created.

Like any libpq connection, a store must not be used across ``os.fork()``: open
it in the process that uses it.

psycopg 3 and psycopg-pool are imported lazily: ``pip install 'plait[postgres]'``.

The engine's modules live in this package (``_store.py`` the store, ``_conn.py`` its
connections, ``_locks.py`` its writer locks, ``_feed.py`` / ``_bus.py`` / ``_notify.py`` its
change feed and event bus, ...); this module names what users import.
"""

from __future__ import annotations

from plait.store.postgres._store import MIGRATIONS, PostgresStore

__all__ = ["MIGRATIONS", "PostgresStore"]
