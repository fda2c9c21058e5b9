"""What both SQL stores share, written once: statements, dialect, schema, rows and parts.

Not an engine: :mod:`plait.store.sqlite` and :mod:`plait.store.postgres` build on it.
Every module here is private to :mod:`plait.store`.
"""
