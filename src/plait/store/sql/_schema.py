"""The schema both SQL stores keep, written once, and the migration runner they share.

:func:`migrations` spells the schema for one engine from a :class:`DDL` (its
column types and table options): the same tables, keys and indexes on SQLite and
PostgreSQL. The runner applies numbered migrations, each in one transaction,
refuses a schema newer than the code, and names ``plait db migrate`` for an older
one when the store does not upgrade by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from plait.errors import InvalidArgumentError, SchemaOutdatedError, SchemaTooNewError, shown

__all__ = [
    "DDL",
    "Migration",
    "apply_migrations",
    "check_schema",
    "checked_migrations",
    "migrations",
    "schema_table",
    "too_new",
]

Migration = tuple[int, str, tuple[str, ...]]
"""``(version, name, statements)``: one step of a store's schema, applied in one transaction."""


@dataclass(frozen=True, slots=True)
class DDL:
    """How one SQL engine spells the schema's column types and table options."""

    pk: str
    """The ``sessions.pk`` column: a key never handed out twice, that fits ``pk << 32``."""
    big: str
    """A 64-bit integer column (times in microseconds, positions, versions)."""
    flag: str
    """The ``deleted`` column: a boolean, false by default."""
    id_unique: str
    """``UNIQUE`` for ``sessions.id``, with the constraint name the engine reports."""
    recent: str
    """The columns after ``workspace`` of the "most recently active first" indexes."""
    live: str
    """The partial indexes' condition: a live session."""
    rowid: str
    """After a table whose primary key is its whole identity (SQLite: no rowid)."""
    blob: str
    """A column of bytes (``BLOB``, ``BYTEA``)."""
    tombstone: str
    """What a deleted row's id becomes, ``<it> || pk``: it starts with a control character,
    which no session id holds (D170), so the id is free again and never met."""
    last_owner: str
    """The owner of the last segment of the JSON ``bases`` column, as an integer."""
    id_bytes_index: str = ""
    """An index of live ids in byte order, where the id's own index may not be in it
    (PostgreSQL's follows the database's collation); empty where it is (SQLite)."""
    plain_layouts: str = ""
    """The statement that keeps ``sessions.bases`` uncompressed, where the engine would
    compress a long one on every write and expand it on every read (PostgreSQL's
    TOAST); empty where it stores text as it is (SQLite)."""
    serial: str = "INTEGER PRIMARY KEY AUTOINCREMENT"
    """A 64-bit key each insert takes from a counter that only goes up (the event bus's)."""
    unlogged: str = ""
    """``UNLOGGED `` where a table may skip the write-ahead log (PostgreSQL): its rows
    are lost in a crash, which a table of passing messages can afford."""
    text_index: tuple[str, ...] = ()
    """The statements that make the full-text index of the records' text (SQLite: FTS5
    shards brought up to the records past each session's mark before a search, D300;
    PostgreSQL: an expression index): each engine spells its own."""
    sealed_text: tuple[str, ...] = ()
    """The statements that make an encrypted store's index of hashed terms, where the
    engine cannot keep one itself (PostgreSQL: a token table its processes feed past each
    session's mark, D326); none where ``text_index`` serves both (SQLite's FTS5 shards)."""
    keys_follow: str = (
        "CREATE TRIGGER data_keys_follow AFTER DELETE ON sessions "
        "BEGIN DELETE FROM data_keys WHERE owner_pk = OLD.pk; END"
    )
    """What deletes a session's data keys with its ``sessions`` row (SQLite: a trigger)."""


def migrations(ddl: DDL) -> tuple[Migration, ...]:
    """Return the schema's migrations in one engine's spelling.

    Numbered, ordered, each applied in one transaction. Never edit a shipped
    one: add the next number. JSON columns are TEXT: plait's codec writes them
    and reads them back byte for byte (its fast path reads ``{"content":"..."}``
    as written), and PostgreSQL's JSONB would reject the NUL escape any
    user string may carry.
    """
    d = ddl
    return (
        (
            1,
            "initial schema",
            (
                f"""
                CREATE TABLE sessions (
                    -- Owner key of the session's own rows, never handed out twice: no
                    -- stray row can ever join another session's transcript.
                    pk {d.pk},
                    -- Public id. A deleted row gives it up (SQLite: NUL || pk, PostgreSQL:
                    -- '/' || pk; no session id holds either) so the id can be reused
                    -- while other branches still read the tombstone's rows.
                    id TEXT NOT NULL {d.id_unique},
                    workspace TEXT NOT NULL,
                    title TEXT,
                    created_at {d.big} NOT NULL,     -- microseconds since the epoch, UTC
                    updated_at {d.big} NOT NULL,     -- orders "most recently active first"
                    version {d.big} NOT NULL,        -- row version, for compare-and-set
                    bases TEXT NOT NULL,             -- JSON [[owner pk, hi], ...]: inherited
                    end_seq {d.big} NOT NULL,        -- head when the row was last written;
                    end_msgs {d.big} NOT NULL,       -- appends do not write it (the newest
                                                     -- own record is the head)
                    view_start {d.big} NOT NULL,     -- trim/reset hide positions before this
                    view_msgs {d.big} NOT NULL,      -- messages before view_start
                    parent_ids TEXT NOT NULL,        -- JSON list, in parent order
                    lineage_operator TEXT,
                    branched_at {d.big},
                    status TEXT NOT NULL,
                    scratchpad TEXT,
                    scratchpad_version {d.big} NOT NULL,
                    metadata TEXT NOT NULL,
                    deleted {d.flag}                 -- tombstone while branches share rows
                )
                """,
                # "Most recently active first" for one workspace, or for all of them (an
                # append also reads the first entry of the second to know if it is ahead).
                f"CREATE INDEX sessions_recent ON sessions (workspace, {d.recent}) WHERE {d.live}",
                f"CREATE INDEX sessions_recent_all ON sessions ({d.recent}) WHERE {d.live}",
                f"""
                CREATE TABLE records (
                    -- owner pk << 32 | seq: a session's rows are one contiguous range of
                    -- the primary key, so an append inserts at the end of that range and
                    -- reading any slice is one range scan, with no second index.
                    key {d.big} PRIMARY KEY,
                    mpos {d.big} NOT NULL,           -- messages before this position
                    id TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    payload TEXT NOT NULL,           -- JSON, through plait.records' codec
                    meta TEXT,                       -- JSON, NULL when empty
                    created_at {d.big} NOT NULL,
                    tokens INTEGER                   -- counted once, when written
                )
                """,
                f"""
                CREATE TABLE lineage (
                    parent_id TEXT NOT NULL,
                    child_id TEXT NOT NULL,
                    ord INTEGER NOT NULL,            -- the parent's place among the parents
                    PRIMARY KEY (parent_id, child_id)
                ){d.rowid}
                """,
                "CREATE INDEX lineage_child ON lineage (child_id)",
                f"""
                CREATE TABLE scratchpads (
                    session_pk {d.big} NOT NULL,
                    version {d.big} NOT NULL,
                    scratchpad TEXT,
                    source TEXT,
                    reason TEXT,
                    metadata TEXT NOT NULL,
                    created_at {d.big} NOT NULL,
                    PRIMARY KEY (session_pk, version)
                ){d.rowid}
                """,
            ),
        ),
        (
            2,
            "running tallies beside token counts",
            (
                # Counted once: the JSON array of plait.context.Tally for the lineage at
                # positions [0, seq], written with the row's token count by the session's
                # writer, in one batch before the next model call (never by the append
                # fast path). NULL until counted; counted rows form a prefix.
                "ALTER TABLE records ADD COLUMN running TEXT",
            ),
        ),
        (
            3,
            "durable bearer sessions and live clients",
            (
                # The bearer token itself is never stored: only its SHA-256, so a dump or
                # backup of this table holds no credential (plait.auth).
                f"""
                CREATE TABLE durable_sessions (
                    token_hash TEXT PRIMARY KEY,     -- hex SHA-256 of the bearer token
                    principal TEXT NOT NULL,
                    scopes TEXT NOT NULL,            -- JSON list of scope strings
                    attributes TEXT NOT NULL,        -- JSON object, caller-owned
                    created_at {d.big} NOT NULL,     -- microseconds since the epoch, UTC
                    last_seen_at {d.big} NOT NULL,   -- moved by touch, never past expires_at
                    expires_at {d.big} NOT NULL      -- absolute; touch never moves it
                ){d.rowid}
                """,
                "CREATE INDEX durable_sessions_expiry ON durable_sessions (expires_at)",
                # Keyed by the session's pk, never reused: a session deleted and re-created
                # under the same id starts with no clients attached.
                f"""
                CREATE TABLE live_clients (
                    session_pk {d.big} NOT NULL,
                    client_id TEXT NOT NULL,
                    mode TEXT NOT NULL,              -- 'observer' or 'controller'
                    attached_at {d.big} NOT NULL,
                    last_seen_at {d.big} NOT NULL,   -- attach, takeover or heartbeat
                    metadata TEXT NOT NULL,          -- JSON object
                    PRIMARY KEY (session_pk, client_id)
                ){d.rowid}
                """,
                # At most one controller per session, whatever process writes.
                "CREATE UNIQUE INDEX live_clients_controller ON live_clients (session_pk) "
                "WHERE mode = 'controller'",
            ),
        ),
        (
            4,
            "workspace checkpoint objects",
            (
                # Write-once objects named by their SHA-256 (plait.sandbox.checkpoint's
                # blobs and trees): a row per object, its bytes in parts of at most 1 MiB
                # so that neither side holds a large file in memory at once.
                f"""
                CREATE TABLE checkpoint_objects (
                    digest TEXT PRIMARY KEY,         -- hex SHA-256 of the whole object
                    size {d.big} NOT NULL,           -- bytes, the sum of its parts
                    used_at {d.big} NOT NULL         -- written or last used: pruning spares
                                                     -- what was used recently
                ){d.rowid}
                """,
                "CREATE INDEX checkpoint_objects_used ON checkpoint_objects (used_at)",
                # A table with a rowid on SQLite: its rows are large.
                f"""
                CREATE TABLE checkpoint_parts (
                    digest TEXT NOT NULL,
                    part INTEGER NOT NULL,           -- 0, 1, ...: the object is their join
                    data {d.blob} NOT NULL,
                    PRIMARY KEY (digest, part)
                )
                """,
            ),
        ),
        (
            5,
            "deleted rows give up ids no session id holds",
            # A session id may now hold "/" (D170): a PostgreSQL tombstone named "/7"
            # (migration 1's comment) would take the id of a session named so. Control
            # characters are in no id: chr(1) there, NUL in SQLite (no change).
            (f"UPDATE sessions SET id = {d.tombstone} WHERE deleted",),
        ),
        (
            6,
            "the owner each layout branches from",
            (
                # The owner of a layout's last inherited segment: the session it is a
                # branch of, whose own bases are all the segments before that one. A
                # delete then frees what it can by walking up these links (an index
                # lookup each), not by reading every layout. NULL for a root, and for a
                # layout that is not such a branch (then a delete reads every layout).
                f"ALTER TABLE sessions ADD COLUMN base_owner {d.big}",
                f"UPDATE sessions SET base_owner = {d.last_owner} WHERE bases <> '[]'",
                "CREATE INDEX sessions_base_owner ON sessions (base_owner) "
                "WHERE base_owner IS NOT NULL",
                "CREATE INDEX sessions_irregular ON sessions (pk) "
                "WHERE base_owner IS NULL AND bases <> '[]'",
            ),
        ),
        (
            7,
            "live ids in byte order",
            # Listing the ids that start with a prefix is a range of this index
            # ([prefix, its successor) in code point order), whatever the collation.
            tuple(s for s in (d.id_bytes_index,) if s),
        ),
        (
            8,
            "layouts stored uncompressed",
            # A layout deep in a chain of branches is long (12 KB at a thousand), and
            # is written by every branch and read by every row read. Compressing it
            # cost more than storing it whole; values already stored stay compressed
            # until rewritten, and read the same (D217).
            tuple(s for s in (d.plain_layouts,) if s),
        ),
        (
            9,
            "the fleet's replicas and runs",
            (
                # A replica of `plait serve` on this store: its heartbeat is `seen_at`; a
                # replica unseen for a lease (or `gone`) leaves its runs to the others (D256).
                f"""
                CREATE TABLE replicas (
                    replica_id TEXT PRIMARY KEY,
                    url TEXT,                        -- where others forward its sessions' writes
                    state TEXT NOT NULL,             -- serving, draining, gone
                    started_at {d.big} NOT NULL,
                    seen_at {d.big} NOT NULL
                )
                """,
                # A run is the store's, not its process's: a takeover moves `replica_id` and
                # bumps `epoch` with compare-and-set, so of two claimers one wins.
                f"""
                CREATE TABLE runs (
                    run_id TEXT PRIMARY KEY,
                    session_id TEXT NOT NULL,
                    replica_id TEXT NOT NULL,
                    state TEXT NOT NULL,             -- running, done, failed, cancelled
                    epoch {d.big} NOT NULL,
                    started_at {d.big} NOT NULL,
                    updated_at {d.big} NOT NULL,
                    options TEXT NOT NULL            -- JSON: what a takeover continues with
                )
                """,
                # One run in progress per session in the whole fleet.
                "CREATE UNIQUE INDEX runs_one_per_session ON runs (session_id) "
                "WHERE state = 'running'",
                "CREATE INDEX runs_ended ON runs (updated_at) WHERE state <> 'running'",
                # The event streams each replica has open that name a live client: the
                # client is present while any live replica has one (D256).
                f"""
                CREATE TABLE live_streams (
                    session_id TEXT NOT NULL,
                    client_id TEXT NOT NULL,
                    replica_id TEXT NOT NULL,
                    streams {d.big} NOT NULL,
                    PRIMARY KEY (session_id, client_id, replica_id)
                ){d.rowid}
                """,
            ),
        ),
        (
            10,
            "the event bus between server processes",
            (
                # A run's live events, batched by the process that runs it, for the other
                # processes serving the same sessions (plait.server.sse, D235). Rows live
                # seconds: each announces itself by id on LISTEN/NOTIFY, and listeners
                # read it by id (or past the last id they saw, after a reconnect); the
                # publishers delete what is older than a minute. Unused on SQLite (one
                # process) but spelled on both, like every table.
                f"""
                CREATE {d.unlogged}TABLE plait_bus (
                    id {d.serial},
                    session_id TEXT NOT NULL,
                    origin TEXT NOT NULL,            -- the publishing store, random
                    body TEXT NOT NULL               -- JSON array of the batch's events
                )
                """,
            ),
        ),
        (
            11,
            "writer fences",
            (
                # The epoch of each session's writer lock: bumped by whoever takes the
                # lock, and compared by every write a holder makes, in the same
                # statement, so a writer whose lock was lost (a cut connection) and
                # taken by another is refused before it writes (D232). Keyed by the
                # session's id: the lock is. Written only where a lock can be lost
                # while its holder lives (PostgreSQL); SQLite's file lock cannot.
                f"""
                CREATE TABLE writer_fences (
                    session_id TEXT PRIMARY KEY,
                    epoch {d.big} NOT NULL
                ){d.rowid}
                """,
            ),
        ),
        (
            12,
            "full-text index of the records' text",
            # The text of user, assistant, tool and summary records, keyed by the
            # record's row key: on SQLite indexed past each session's mark in one
            # transaction with the marks, so a crash leaves records past a mark, never
            # an index that disagrees with them; rows that forks share are indexed
            # once (D300).
            d.text_index,
        ),
        (
            13,
            "data keys of an encrypted store",
            (
                # Each session's data key, wrapped by the store's master key (D320); the
                # row of kid 0 (no owner) holds the master key's check value. Empty in a
                # store that is not encrypted. A key goes with its session's row, so a
                # tombstone a live fork still reads keeps it, and erasing destroys it.
                f"""
                CREATE TABLE data_keys (
                    kid {d.big} PRIMARY KEY,         -- named in front of each sealed column
                    owner_pk {d.big},                -- sessions.pk; NULL for the check value
                    wrapped {d.blob} NOT NULL        -- nonce + AES-GCM(master key, data key)
                )
                """,
                "CREATE UNIQUE INDEX data_keys_owner ON data_keys (owner_pk)",
                d.keys_follow,
            ),
        ),
        (
            14,
            "hashed terms of an encrypted store's records",
            # Where the engine's own index cannot hold an encrypted store's terms (it has
            # no key): their keyed hashes per record row, fed by the store's processes
            # past each session's mark, in one transaction with the marks (D326).
            d.sealed_text,
        ),
    )


def schema_table(ddl: DDL) -> str:
    """The ``plait_schema`` table: the migrations applied, created before the first."""
    return (
        "CREATE TABLE IF NOT EXISTS plait_schema (version INTEGER PRIMARY KEY, "
        f"name TEXT NOT NULL, applied_at {ddl.big} NOT NULL)"
    )


# -- the migration runner --------------------------------------------------------------


def check_schema(location: str, current: int, newest: int, *, auto: bool) -> bool:
    """Decide whether to migrate a schema at version ``current`` to ``newest``.

    Returns:
        True when migrations are pending and may be applied (a fresh schema, or
        ``auto``); False when the schema is current.

    Raises:
        SchemaTooNewError: the schema was written by a newer plait.
        SchemaOutdatedError: the schema is older and ``auto`` is False.
    """
    if current > newest:
        raise too_new(location, current, newest)
    if current == newest:
        return False
    if current > 0 and not auto:
        raise SchemaOutdatedError(
            f"{location}: schema version {current} is older than {newest}; "
            "run `plait db migrate` to upgrade it"
        )
    return True


def too_new(location: str, current: int, newest: int) -> SchemaTooNewError:
    """The error for a schema written by a newer plait."""
    return SchemaTooNewError(
        f"{location}: schema version {current} is newer than this plait "
        f"understands ({newest}); upgrade plait to open it"
    )


def checked_migrations(steps: object) -> tuple[Migration, ...]:
    """Return ``steps`` as a tuple if each is a :data:`Migration`: ``(version, name, statements)``.

    Raises:
        InvalidArgumentError: a step of another shape (a version that is not a
            positive int, a name that is not text, statements that are not texts).
    """
    if not isinstance(steps, list | tuple):
        raise InvalidArgumentError(f"migrations must be a list, not {type(steps).__name__}")
    for step in steps:
        ok = isinstance(step, list | tuple) and len(step) == 3
        if ok:
            version, name, statements = step
            ok = (
                type(version) is int
                and version > 0
                and isinstance(name, str)
                and isinstance(statements, list | tuple)
                and all(isinstance(text, str) for text in statements)
            )
        if not ok:
            raise InvalidArgumentError(
                f"a migration is (version, name, statements), not {shown(step)}"
            )
    return tuple((v, n, tuple(st)) for v, n, st in steps)


def apply_migrations(
    steps: Sequence[Migration],
    transaction: Callable[[], AbstractContextManager[Any]],
    current_version: Callable[[Any], int],
    *,
    param: str,
    now_us: Callable[[], int],
) -> list[int]:
    """Apply every pending migration, each in its own transaction.

    Args:
        steps: the migrations, in any order (applied by number).
        transaction: opens one write transaction; the engine takes whatever lock
            makes two processes migrating at once take turns.
        current_version: reads the applied version inside that transaction
            (creating ``plait_schema`` if needed), so a migration another process
            applied meanwhile is skipped.
        param: the engine's placeholder.
        now_us: the clock for ``applied_at``.

    Returns:
        The versions applied (empty when already current).
    """
    insert = "INSERT INTO plait_schema (version, name, applied_at) VALUES (?, ?, ?)"
    insert = insert.replace("?", param)
    applied: list[int] = []
    for version, name, statements in sorted(steps):
        with transaction() as conn:
            if current_version(conn) >= version:
                continue
            for statement in statements:
                conn.execute(statement)
            conn.execute(insert, (version, name, now_us()))
        applied.append(version)
    return applied
