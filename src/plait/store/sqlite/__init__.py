"""The SQLite store: plait's embedded default (one file, WAL), and the in-memory store.

The engine's modules live beside this one (``_store.py`` the store, ``_conn.py`` its
connections, ``_flock.py`` / ``_shardlocks.py`` its writer locks, ``_text.py`` its search
index, ...); this package names what users import.
"""

from __future__ import annotations

from plait.store.sqlite._store import MIGRATIONS, MemoryStore, SQLiteStore, default_path

__all__ = ["MIGRATIONS", "MemoryStore", "SQLiteStore", "default_path"]
