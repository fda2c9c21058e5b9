"""The PostgreSQL store: for sessions shared by several machines or users.

The engine's modules live beside this one (``_store.py`` the store, ``_conn.py`` its
connections, ``_locks.py`` its writer locks, ``_feed.py`` / ``_bus.py`` its change feed
and event bus, ...); this package names what users import. Loading it needs
``plait[postgres]``.
"""

from __future__ import annotations

from plait.store.postgres._store import MIGRATIONS, PostgresStore

__all__ = ["MIGRATIONS", "PostgresStore"]
