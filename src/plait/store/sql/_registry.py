"""The fleet's registry: the replicas serving a store and the runs in progress on it.

A run belongs to the store, not to the process that started it (D256). Every
``plait serve`` replica on one store writes a row in ``replicas`` and moves its
``seen_at`` forward every few seconds; every run a replica starts is a row in
``runs`` naming its session, its replica and a fencing ``epoch``. A partial
unique index lets a session have one run in progress in the whole fleet, so a
second run (or resume) from any replica is refused while one is registered,
whatever the writer locks say (an approval wait included).

A replica whose ``seen_at`` is older than a lease, or that said it is gone,
leaves its runs orphaned: any other replica may claim one
(:meth:`SQLRegistry.run_claim`), a compare-and-set on the run's epoch, so of two
claimers one wins, and the loser's later writes to the run's row are refused.

Times are the database's own clock where it has one (PostgreSQL), so replicas
on machines whose clocks differ agree on whose lease ran out; SQLite, which is
one machine, uses this process's clock.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Final

from plait._time import now_micros
from plait.errors import SessionBusyError
from plait.records import JSONValue, dumps
from plait.store._protocols import RUNNING, ReplicaRow, ReplicaState, RunRow
from plait.store.sql._dialect import Connection, Dialect

__all__ = ["SQLRegistry"]


def _options(text: object) -> dict[str, JSONValue]:
    try:
        found = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


_RUN_COLUMNS: Final = (
    "r.run_id, r.session_id, r.replica_id, r.state, r.epoch, r.started_at, r.updated_at, "
    "r.options, p.url, p.seen_at, p.state"
)


class SQLRegistry:
    """:class:`RunRegistry` in the SQL both stores share (a mixin of ``SQLStore``)."""

    dialect: Dialect

    @abstractmethod
    def _one(self, query: str, params: Sequence[Any], what: str, subject: object = None) -> Any:
        """Run one read statement; return its first row or None."""

    @abstractmethod
    def _all(
        self, query: str, params: Sequence[Any], what: str, subject: object = None
    ) -> list[Any]:
        """Run one read statement; return all its rows."""

    @abstractmethod
    def _write(self, what: str) -> AbstractContextManager[Connection]:
        """A connection for one write statement, committed when the block ends."""

    def _now(self) -> str:
        """The store's clock in microseconds, as SQL: the server's where there is one."""
        if self.dialect.param == "%s":
            return "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000)::bigint"
        return str(now_micros())

    def _run_row(self, r: Sequence[Any], now_us: int) -> RunRow:
        seen = r[9]
        return RunRow(
            run_id=str(r[0]),
            session_id=str(r[1]),
            replica_id=str(r[2]),
            state=str(r[3]),
            epoch=int(r[4]),
            started_at_us=int(r[5]),
            updated_at_us=int(r[6]),
            options=_options(r[7]),
            replica_url=None if r[8] is None else str(r[8]),
            replica_age_us=None if seen is None else max(0, now_us - int(seen)),
            replica_state=None if r[10] is None else str(r[10]),
        )

    def _runs(self, where: str, params: Sequence[Any], what: str) -> list[RunRow]:
        sql = self.dialect.sql(
            f"SELECT {_RUN_COLUMNS}, {self._now()} FROM runs r "
            f"LEFT JOIN replicas p ON p.replica_id = r.replica_id WHERE {where}"
        )
        rows = self._all(sql, params, what)
        return [self._run_row(r, int(r[11])) for r in rows]

    def replica_seen(
        self, replica_id: str, url: str | None, state: ReplicaState, *, started: bool = False
    ) -> None:
        """Write the replica's heartbeat (creating its row the first time) and its state."""
        now = self._now()
        restart = ", started_at = excluded.started_at" if started else ""
        sql = self.dialect.sql(
            "INSERT INTO replicas (replica_id, url, state, started_at, seen_at) "
            f"VALUES (?, ?, ?, {now}, {now}) ON CONFLICT (replica_id) DO UPDATE "
            "SET url = excluded.url, state = excluded.state, seen_at = excluded.seen_at"
            + restart
        )
        with self._write(f"heartbeat of replica {replica_id!r}") as conn:
            conn.execute(sql, (replica_id, url, state))

    def replicas(self) -> list[ReplicaRow]:
        """Every replica with a row, the most recently seen first."""
        sql = self.dialect.sql(
            f"SELECT replica_id, url, state, started_at, seen_at, {self._now()} "
            "FROM replicas ORDER BY seen_at DESC"
        )
        rows = self._all(sql, (), "list replicas")
        return [
            ReplicaRow(
                str(r[0]),
                None if r[1] is None else str(r[1]),
                str(r[2]),
                int(r[3]),
                int(r[4]),
                max(0, int(r[5]) - int(r[4])),
            )
            for r in rows
        ]

    def run_begin(
        self, run_id: str, session_id: str, replica_id: str, options: Mapping[str, JSONValue]
    ) -> RunRow:
        """Register a run in progress on a session (epoch 1).

        Raises:
            SessionBusyError: a run is already registered in progress on the session.
        """
        now = self._now()
        sql = self.dialect.sql(
            "INSERT INTO runs (run_id, session_id, replica_id, state, epoch, started_at, "
            f"updated_at, options) VALUES (?, ?, ?, '{RUNNING}', 1, {now}, {now}, ?) "
            "ON CONFLICT DO NOTHING"
        )
        with self._write(f"register run {run_id!r}") as conn:
            added = conn.execute(sql, (run_id, session_id, replica_id, dumps(dict(options))))
            if added.rowcount != 1:
                raise SessionBusyError(session_id)
        found = self.run_get(run_id)
        assert found is not None
        return found

    def run_end(self, run_id: str, replica_id: str, epoch: int, state: str) -> bool:
        """Mark the run ended, if ``replica_id`` still drives it at ``epoch``; else False."""
        sql = self.dialect.sql(
            f"UPDATE runs SET state = ?, updated_at = {self._now()} "
            f"WHERE run_id = ? AND replica_id = ? AND epoch = ? AND state = '{RUNNING}'"
        )
        with self._write(f"end run {run_id!r}") as conn:
            return conn.execute(sql, (state, run_id, replica_id, epoch)).rowcount == 1

    def run_of(self, session_id: str) -> RunRow | None:
        """The run in progress on the session, with its replica's liveness, or None."""
        found = self._runs(
            f"r.session_id = ? AND r.state = '{RUNNING}'", (session_id,), "read the run of"
        )
        return found[0] if found else None

    def run_get(self, run_id: str) -> RunRow | None:
        """The run with this id, ended or not, or None."""
        found = self._runs("r.run_id = ?", (run_id,), "read run")
        return found[0] if found else None

    def runs_orphaned(self, lease_us: int) -> list[RunRow]:
        """Runs in progress whose replica is gone, unknown, or unseen for ``lease_us``."""
        return self._runs(
            f"r.state = '{RUNNING}' AND (p.replica_id IS NULL OR p.state = 'gone' "
            f"OR p.seen_at < {self._now()} - ?)",
            (int(lease_us),),
            "list orphaned runs",
        )

    def run_claim(self, run_id: str, epoch: int, replica_id: str) -> RunRow | None:
        """Take a run over: the replica and epoch + 1, if its epoch is still ``epoch``."""
        sql = self.dialect.sql(
            f"UPDATE runs SET replica_id = ?, epoch = epoch + 1, updated_at = {self._now()} "
            f"WHERE run_id = ? AND epoch = ? AND state = '{RUNNING}'"
        )
        with self._write(f"take over run {run_id!r}") as conn:
            if conn.execute(sql, (replica_id, run_id, epoch)).rowcount != 1:
                return None
        return self.run_get(run_id)

    def runs_driven_by(self, replica_id: str) -> list[RunRow]:
        """The runs in progress registered under a replica (its previous life's, at a start)."""
        return self._runs(
            f"r.replica_id = ? AND r.state = '{RUNNING}'", (replica_id,), "list the runs of"
        )

    def streams_set(self, replica_id: str, session_id: str, client_id: str, count: int) -> None:
        """Say how many event streams naming a live client the replica has open now."""
        if count > 0:
            sql = self.dialect.sql(
                "INSERT INTO live_streams (session_id, client_id, replica_id, streams) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (session_id, client_id, replica_id) "
                "DO UPDATE SET streams = excluded.streams"
            )
            params: tuple[Any, ...] = (session_id, client_id, replica_id, int(count))
        else:
            sql = self.dialect.sql(
                "DELETE FROM live_streams WHERE session_id = ? AND client_id = ? "
                "AND replica_id = ?"
            )
            params = (session_id, client_id, replica_id)
        with self._write(f"streams of {client_id!r} on {session_id!r}") as conn:
            conn.execute(sql, params)

    def streams_elsewhere(
        self, session_id: str, client_id: str, replica_id: str, lease_us: int
    ) -> int:
        """The streams naming the client open on other live replicas (seen within the lease)."""
        sql = self.dialect.sql(
            "SELECT COALESCE(SUM(s.streams), 0) FROM live_streams s "
            "JOIN replicas p ON p.replica_id = s.replica_id "
            "WHERE s.session_id = ? AND s.client_id = ? AND s.replica_id <> ? "
            f"AND p.state <> 'gone' AND p.seen_at >= {self._now()} - ?"
        )
        found = self._one(sql, (session_id, client_id, replica_id, int(lease_us)), "streams of")
        return int(found[0]) if found is not None else 0

    def runs_prune(self, ended_before_us: int) -> int:
        """Delete the rows of runs that ended before this time; return how many."""
        sql = self.dialect.sql(f"DELETE FROM runs WHERE state <> '{RUNNING}' AND updated_at < ?")
        with self._write("prune ended runs") as conn:
            return conn.execute(sql, (int(ended_before_us),)).rowcount

