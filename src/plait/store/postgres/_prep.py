"""Statements run straight through libpq: prepared once per connection, text in, text out.

An append is the store's hottest call, and psycopg's cursor is most of what it costs
the client: its query conversion, its prepared-statement bookkeeping, its adaptation of
every parameter and its result set (~100,000 instructions a call, against ~50,000 for
the same statement sent here). A statement whose parameters are text and integers and
whose result is read as text needs none of that: it is prepared on the connection the
first time it runs there and sent with ``PQsendQueryPrepared``, the wait for the result
being psycopg's own (the interpreter lock released, an interrupt cancelling the query).
Errors are psycopg's, raised as a cursor would raise them.

That wait and the error mapping are psycopg's own parts below its documented API
(``generators.execute``, ``Connection.wait``, ``errors.error_from_result``, all there
since 3.0). A psycopg without them is not an error: the statement then runs through a
cursor, as before, and reads the cursor's result the same way.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple

if TYPE_CHECKING:
    import psycopg
    from psycopg.pq.abc import PGresult

__all__ = ["Prepared", "int_array", "prepare", "run_prepared", "text_array"]

_READY: Final = "_plait_prepared"
"""The attribute of a connection: the names prepared on it, and its client encoding."""

_MISSING: Final = "26000"
"""SQLSTATE ``invalid_sql_statement_name``: the server no longer has the statement."""

_PLACEHOLDER: Final = re.compile(r"%\((\w+)\)s")


class Prepared(NamedTuple):
    """A statement to prepare under ``name``, its ``%(key)s`` placeholders numbered."""

    name: bytes
    """The prepared statement's name on every connection (``plait_`` and a word)."""
    sql: bytes
    """The statement text, with ``$1`` ... in place of the named placeholders."""
    keys: tuple[str, ...]
    """The parameter of each number, in order (what ``$1`` ... stand for)."""
    source: str
    """The statement as written, for a cursor (when psycopg lacks the parts used here)."""


def prepare(name: str, sql: str) -> Prepared:
    """Number the named placeholders of ``sql`` (repeats share a number)."""
    keys: dict[str, int] = {}

    def number(m: re.Match[str]) -> str:
        return f"${keys.setdefault(m.group(1), len(keys) + 1)}"

    text = _PLACEHOLDER.sub(number, sql)
    return Prepared(f"plait_{name}".encode(), text.encode(), tuple(keys), sql)


def run_prepared(
    conn: psycopg.Connection[tuple[Any, ...]], stmt: Prepared, params: Sequence[Any]
) -> PGresult:
    """Run ``stmt`` on ``conn`` with ``params`` (text, integers or None, in ``keys`` order).

    Returns:
        The statement's result, its values text (``get_value``), or None for NULL.

    Raises:
        psycopg.Error: the server refused or the connection failed (psycopg's class
            for the SQLSTATE, as a cursor raises); ``DataError`` for text holding NUL.
        UnicodeEncodeError: text the connection's encoding cannot hold.
    """
    execute = _execute or _load()
    if execute is _CURSOR:
        return _through_cursor(conn, stmt, params)
    state: tuple[set[bytes], str] | None = conn.__dict__.get(_READY)
    if state is None:
        state = (set(), conn.info.encoding)
        conn.__dict__[_READY] = state
    ready, encoding = state
    values: list[bytes | None] = []
    for v in params:
        if v is None:
            values.append(None)
        elif type(v) is int:
            values.append(b"%d" % v)
        elif "\x00" in v:  # libpq would cut text parameters short at a NUL
            raise _nul()
        else:
            values.append(v.encode(encoding))
    pgconn = conn.pgconn
    for attempt in (1, 2):
        if stmt.name not in ready:
            pgconn.send_prepare(stmt.name, stmt.sql)
            _checked(conn.wait(execute(pgconn)), encoding)
            ready.add(stmt.name)
        pgconn.send_query_prepared(stmt.name, values)
        results = conn.wait(execute(pgconn))
        if attempt == 1 and results[-1].status == _fatal and _state(results[-1]) == _MISSING:
            ready.discard(stmt.name)  # dropped on the server (DISCARD ALL): once more
            continue
        break
    return _checked(results, encoding)


def int_array(items: Sequence[int]) -> str:
    """``items`` as a PostgreSQL array literal (``{1,2,3}``), for a ``bigint[]`` parameter."""
    return "{" + ",".join(map(str, items)) + "}"


def text_array(items: Sequence[str]) -> str:
    """``items`` as a PostgreSQL array literal for a ``text[]`` parameter (each quoted)."""
    quoted = (i.replace("\\", "\\\\").replace('"', '\\"') for i in items)
    return "{" + ",".join(f'"{q}"' for q in quoted) + "}"


_execute: Any = None
"""psycopg's generator that sends what is queued and collects the results (its C one)."""
_data_error: Any = None
_fatal = _tuples = _command = -1  # libpq's result statuses, once psycopg is imported


_CURSOR: Final = object()
"""``_execute`` when psycopg lacks the parts used here: statements go through a cursor."""


def _load() -> Any:
    # psycopg is imported on first use (the [postgres] extra), as everywhere in the store.
    global _execute, _data_error, _fatal, _tuples, _command
    import psycopg
    from psycopg import DataError, pq

    _data_error = DataError
    _fatal = pq.ExecStatus.FATAL_ERROR
    _tuples = pq.ExecStatus.TUPLES_OK
    _command = pq.ExecStatus.COMMAND_OK
    try:
        # Submodules by import, not as attributes of the package: a package imported again
        # (a test that hid it from sys.modules) finds its submodules there but not as
        # its attributes.
        from psycopg import errors, generators

        found = generators.execute
        errors.error_from_result  # noqa: B018  (there, or the cursor is used)
        psycopg.Connection.wait  # noqa: B018
    except (ImportError, AttributeError):
        found = _CURSOR
    _execute = found
    return _execute


def _through_cursor(
    conn: psycopg.Connection[tuple[Any, ...]], stmt: Prepared, params: Sequence[Any]
) -> PGresult:
    """The statement through a cursor, its result read as :func:`run_prepared`'s is."""
    for v in params:
        if isinstance(v, str) and "\x00" in v:  # refused as run_prepared refuses it
            raise _nul()
    cur = conn.cursor()
    cur.execute(stmt.source, dict(zip(stmt.keys, params, strict=True)))
    result = cur.pgresult
    if result is None:  # a cursor that ran a statement has its result
        raise _data_error("the statement returned no result")
    return result


def _nul() -> Exception:
    """The error (psycopg's class) for text holding NUL, which PostgreSQL text cannot hold."""
    error: Exception = _data_error("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    return error


def _state(result: PGresult) -> str | None:
    """The SQLSTATE of a failed result, None for one that did not fail."""
    from psycopg import pq

    if result.status != _fatal:
        return None
    sqlstate = result.error_field(pq.DiagnosticField.SQLSTATE)
    return sqlstate.decode() if sqlstate else None


def _checked(results: list[PGresult], encoding: str) -> PGresult:
    """The last result, or the error it reports raised as psycopg's class for it."""
    result = results[-1]
    status = result.status
    if status in (_tuples, _command):
        return result
    from psycopg import errors, pq

    if status == _fatal:
        raise errors.error_from_result(result, encoding=encoding)
    raise errors.InternalError(f"unexpected result status {pq.ExecStatus(status).name}")
