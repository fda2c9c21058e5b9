"""Opening a PostgreSQL store: naming it (URL, schema, a location to show), its schema.

A fresh database or schema is always set up; an older schema is migrated only
when the store is asked to (a shared server is not one user's file), and two
processes opening a fresh schema at once take turns under an advisory lock.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from plait._time import now_micros
from plait.errors import InvalidArgumentError, StoreError
from plait.store.postgres._locks import signed
from plait.store.postgres._text import PG_SEALED_TEXT
from plait.store.sql._schema import (
    DDL,
    Migration,
    apply_migrations,
    check_schema,
    schema_table,
    too_new,
)
from plait.store.sql._search import PG_TEXT_INDEX

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "PG_DDL",
    "apply_schema",
    "current_version",
    "location_of",
    "open_schema",
    "parse_target",
]

PG_DDL: Final = DDL(
    # An identity never hands out a value twice; capped so that pk << 32 | seq fits a BIGINT.
    pk="BIGINT GENERATED ALWAYS AS IDENTITY (MAXVALUE 2147483647) PRIMARY KEY",
    big="BIGINT",
    flag="BOOLEAN NOT NULL DEFAULT false",
    id_unique="CONSTRAINT sessions_id_key UNIQUE",  # create() names it in its error
    recent="updated_at DESC, pk DESC",
    live="NOT deleted",
    rowid="",
    blob="BYTEA",
    # A data key goes with its session's row (D322).
    keys_follow="ALTER TABLE data_keys ADD CONSTRAINT data_keys_owner_fk FOREIGN KEY (owner_pk) "
    "REFERENCES sessions (pk) ON DELETE CASCADE",
    tombstone="chr(1) || pk",  # a text value cannot hold NUL
    last_owner="(bases::jsonb -> -1 ->> 0)::bigint",
    # The id's own index follows the database's collation, which need not be code point
    # order; a prefix is a range only in that order.
    id_bytes_index='CREATE INDEX sessions_id_bytes ON sessions (id COLLATE "C") WHERE NOT deleted',
    # Out of line but not compressed: pglz costs more to write and read back than the
    # bytes it saves (about 670 us a branch and 25 us a read at 12 KB).
    plain_layouts="ALTER TABLE sessions ALTER COLUMN bases SET STORAGE EXTERNAL",
    serial="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    unlogged="UNLOGGED ",
    text_index=PG_TEXT_INDEX,
    sealed_text=PG_SEALED_TEXT,
)
"""How PostgreSQL spells the schema of ``_schema.py``."""

_MIGRATE_LOCK_CLASS: Final = 0x706C6169  # "plai": the first key of the migration lock
_SETUP_LOCK_CLASS: Final = 0x706C6173  # "plas": held by a process for all of its migrations

_SCHEMA_NAME: Final = re.compile(r"[a-z_][a-z0-9_]{0,47}")


def parse_target(url: str, schema: str | None) -> tuple[str, str | None, dict[str, Any]]:
    """Split a URL or conninfo into (conninfo, schema, its parameters); validate both.

    A URL may name the schema as ``?schema=name`` (libpq knows no such
    parameter, so it is taken out here).
    """
    from psycopg import conninfo as pgconninfo

    if url.startswith(("postgresql://", "postgres://")):
        try:
            parts = urlsplit(url)
        except ValueError as exc:
            raise StoreError(f"invalid PostgreSQL URL: {exc}") from None
        query = parse_qsl(parts.query, keep_blank_values=True)
        named = [v for k, v in query if k == "schema"]
        if named:
            if schema is not None and named[-1] != schema:
                raise InvalidArgumentError(
                    f"the URL names schema {named[-1]!r} and schema= names {schema!r}"
                )
            schema = named[-1]
            query = [(k, v) for k, v in query if k != "schema"]
            # %20, not '+', for spaces: libpq decodes percent escapes only.
            url = urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))
    if schema is not None and not _SCHEMA_NAME.fullmatch(schema):
        raise InvalidArgumentError(
            f"schema {schema!r}: use lower-case letters, digits and '_' (at most 48, "
            "not starting with a digit)"
        )
    try:
        params = pgconninfo.conninfo_to_dict(url)
    except Exception as exc:  # psycopg.ProgrammingError; its text names no password
        raise StoreError(f"invalid PostgreSQL URL: {exc}") from None
    return url, schema, params


def location_of(params: dict[str, Any], schema: str | None) -> str:
    """A URL naming the server, database and schema, never the password."""
    user = params.get("user")
    host = str(params.get("host") or "localhost")
    port = params.get("port")
    dbname = params.get("dbname") or user or ""
    netloc = quote(host, safe=":[]") if "/" not in host else quote(host, safe="")
    if port:
        netloc += f":{port}"
    if user:
        netloc = f"{quote(str(user), safe='')}@{netloc}"
    text = f"postgresql://{netloc}/{quote(str(dbname), safe='')}"
    return f"{text}?schema={schema}" if schema else text


def current_version(conn: psycopg.Connection[tuple[Any, ...]]) -> int:
    """The schema version applied (0 when ``plait_schema`` does not exist)."""
    found = conn.execute("SELECT to_regclass('plait_schema') IS NOT NULL").fetchone()
    if not found or not found[0]:
        return 0
    row = conn.execute("SELECT max(version) FROM plait_schema").fetchone()
    return int(row[0] or 0) if row else 0


def open_schema(
    conn: psycopg.Connection[tuple[Any, ...]],
    schema: str | None,
    location: str,
    steps: Sequence[Migration],
    *,
    auto: bool,
    refuse: Callable[[bytes], None] | None = None,
) -> str:
    """Check the schema version; set up a fresh one. Returns the namespace.

    ``refuse`` is given an encrypted schema's key check value before any migration is
    applied, and raises to refuse a missing or wrong key (D321).

    Raises:
        StoreError: the connection names no schema to keep plait's tables in.
        SchemaTooNewError: the schema was written by a newer plait.
        SchemaOutdatedError: the schema is older and ``auto`` is False.
    """
    found = conn.execute("SELECT current_schema()").fetchone()
    namespace = schema or (found[0] if found else None)
    if not namespace:
        raise StoreError(
            f"{location}: no schema to keep plait's tables in "
            "(the search_path names none that exists); pass schema="
        )
    current = current_version(conn) if found and found[0] else 0
    newest = max((m[0] for m in steps), default=0)
    if 0 < current < newest and not auto:
        # Another process may be setting the schema up, one migration at a time: what
        # it has applied so far is no outdated schema. Once it is done, read again.
        with _setup_lock(conn, namespace):
            current = current_version(conn)
    if refuse is not None and current > 0:
        keys = conn.execute("SELECT to_regclass('data_keys')").fetchone()
        if keys is not None and keys[0] is not None:
            check = conn.execute("SELECT wrapped FROM data_keys WHERE kid = 0").fetchone()
            if check is not None:
                refuse(bytes(check[0]))
    if check_schema(location, current, newest, auto=auto):
        apply_schema(conn, namespace, schema, location, steps)
    return namespace


def apply_schema(
    conn: psycopg.Connection[tuple[Any, ...]],
    namespace: str,
    schema: str | None,
    location: str,
    steps: Sequence[Migration],
) -> list[int]:
    """Apply pending migrations, each in one transaction under the migration lock.

    Args:
        conn: an autocommit connection.
        namespace: the schema the tables are in (the lock's key).
        schema: the schema to create first, if the store names one.
        location: the store's location, for errors.
        steps: the migrations.

    Returns:
        The versions applied.
    """
    from psycopg import sql

    key = _lock_key(namespace)
    newest = max((m[0] for m in steps), default=0)

    @contextmanager
    def transaction() -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        with conn.transaction():
            # Transaction-scoped: two processes opening a fresh schema at once take
            # turns, and the second sees what the first applied.
            conn.execute(
                "SELECT pg_advisory_xact_lock(%s::integer, %s::integer)",
                (_MIGRATE_LOCK_CLASS, key),
            )
            if schema is not None:
                conn.execute(
                    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
                )
            conn.execute(schema_table(PG_DDL))
            yield conn

    def current(_: object) -> int:
        version = current_version(conn)
        if version > newest:
            raise too_new(location, version, newest)
        return version

    with _setup_lock(conn, namespace):
        return apply_migrations(steps, transaction, current, param="%s", now_us=now_micros)


def _lock_key(namespace: str) -> int:
    """The second key of the schema's migration and setup locks."""
    return signed(hashlib.blake2b(namespace.encode(), digest_size=4).digest())


@contextmanager
def _setup_lock(conn: psycopg.Connection[tuple[Any, ...]], namespace: str) -> Iterator[None]:
    """Hold the schema's setup lock: one process applies all of its migrations at a time.

    A session lock on the autocommit connection, not a transaction's: each migration
    commits on its own, and a process opening the schema meanwhile waits for the last.
    """
    key = _lock_key(namespace)
    conn.execute("SELECT pg_advisory_lock(%s::integer, %s::integer)", (_SETUP_LOCK_CLASS, key))
    try:
        yield
    finally:
        conn.execute(
            "SELECT pg_advisory_unlock(%s::integer, %s::integer)", (_SETUP_LOCK_CLASS, key)
        )
