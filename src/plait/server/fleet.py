"""A server's place in a fleet: replicas of ``plait serve`` on one store (D256).

A run is the store's, not the process's. Each replica has an id and, when its
peers can reach it, a URL; it writes a heartbeat to the store's registry
(:class:`plait.store.RunRegistry`) every ``beat`` seconds and registers every
run it starts there, with the options a takeover continues it with. Then:

* **Control from any replica.** While a session's run is on another live
  replica, every write to that session (steer, cancel, an approval, attach,
  heartbeat, an injected message ...) is forwarded to that replica, which holds
  the session's writer lock, and its answer is the answer
  (:mod:`plait.server.forward`). ``GET .../runs/current`` answers from the
  registry: whether a run is in progress anywhere, since when, on which replica.
* **Runs outlive their process.** A replica unseen for ``lease`` seconds (killed,
  out of memory, cut off), or one that said it is gone, leaves its runs orphaned;
  each run goes to the survivor that ranks first for it (:func:`first_choice`;
  any survivor after a further lease), which claims it (compare-and-set on the
  run's epoch: one claimer wins), takes the session's writer lock and
  continues the run with ``resume()``'s rules (:mod:`plait.server.running`).
* A replica stopping (SIGTERM) takes no new runs, lets its runs finish for a grace
  period, and hands the rest over: they stop here (what they wrote stays, a
  tool call without a result is recorded as interrupted), it says it is gone, and
  a peer takes them over at once.

A store without a registry (a third-party backend) serves as one process did
before: runs are this process's alone.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Final

from plait._ids import new_id
from plait._time import now_micros
from plait.errors import InvalidArgumentError
from plait.records import JSONValue
from plait.server import DEFAULT_LEASE
from plait.store import ReplicaRow, ReplicaState, RunRegistry, RunRow, Store

__all__ = ["FORWARDED_BY", "Fleet", "first_choice"]

FORWARDED_BY: Final = "x-plait-forwarded-by"
"""The header a forwarded request carries: the replica that forwarded it (never forwarded again)."""
_PRUNE_EVERY: Final = 300  # heartbeats between prunes of ended runs' rows
_KEEP_ENDED_US: Final = 24 * 3600 * 1_000_000  # how long an ended run's row is kept

_log = logging.getLogger("plait.server")


def first_choice(run_id: str, replicas: Sequence[str]) -> str:
    """The replica among ``replicas`` that takes over ``run_id`` first (rendezvous hashing).

    Removing a replica moves only the runs it was first for; the others keep their choice.
    """
    if not replicas:
        raise InvalidArgumentError("no replica to choose from")
    return max(replicas, key=lambda rid: _rank(run_id, rid))


def _rank(run_id: str, replica_id: str) -> bytes:
    return hashlib.blake2b(f"{run_id}\0{replica_id}".encode(), digest_size=8).digest()


class Fleet:
    """One replica's view of the fleet: its heartbeat, its runs, its peers.

    Every method but the properties is a store call (run it on the store worker).

    Args:
        store: the store; a fleet needs one that offers :class:`RunRegistry`.
        replica_id: this replica's id (default: a new one each start).
        url: where peers reach this replica (forwarded writes); None: they cannot.
        lease: seconds without a heartbeat after which this replica's runs are
            taken over by another.

    Raises:
        InvalidArgumentError: a lease that is not a positive number of seconds.
    """

    def __init__(
        self,
        store: Store,
        *,
        replica_id: str | None = None,
        url: str | None = None,
        lease: float = DEFAULT_LEASE,
    ) -> None:
        if isinstance(lease, bool) or not isinstance(lease, int | float) or not 0 < lease < 1e6:
            raise InvalidArgumentError(f"lease must be a positive number of seconds: {lease!r}")
        self.registry: RunRegistry | None = store if isinstance(store, RunRegistry) else None
        self.replica_id = replica_id or new_id()
        self.url = url.rstrip("/") if url else None
        self.lease = float(lease)
        self.beat = self.lease / 3
        """Seconds between heartbeats: three go by before a lease runs out."""
        self.mode: ReplicaState = "serving"
        self.peers: dict[str, ReplicaRow] = {}
        """The other replicas alive at the last heartbeat."""
        self.epochs: dict[str, int] = {}
        """The runs this replica drives, by run id: the epoch it drives each at."""
        self._beats = 0
        self._orphaned_since: dict[str, float] = {}
        """Orphaned runs seen at the last heartbeat: when this replica first saw each."""

    @property
    def enabled(self) -> bool:
        """Whether the store keeps a registry (else runs are this process's alone)."""
        return self.registry is not None

    @property
    def forwards(self) -> bool:
        """Whether another live replica may run a session (so a write may go to it)."""
        return bool(self.peers)

    def begin(self, run_id: str, session_id: str, options: Mapping[str, JSONValue]) -> None:
        """Register a run this replica starts.

        Raises:
            SessionBusyError: a run is in progress on the session somewhere in the fleet.
        """
        if self.registry is None:
            return
        self.registry.run_begin(run_id, session_id, self.replica_id, options)
        self.epochs[run_id] = 1

    def end(self, run_id: str, state: str) -> None:
        """Mark a run of this replica ended (nothing if another replica took it over)."""
        epoch = self.epochs.pop(run_id, None)
        registry = self.registry
        if registry is not None and epoch is not None and not registry.run_end(
            run_id, self.replica_id, epoch, state
        ):
            _log.warning("run %s was taken over by another replica before it ended", run_id)

    def taken_from_here(self, run_id: str) -> bool:
        """Whether another replica took over a run this one drives (its epoch moved on)."""
        epoch = self.epochs.get(run_id)
        if self.registry is None or epoch is None:
            return False
        row = self.registry.run_get(run_id)
        return row is not None and (row.replica_id != self.replica_id or row.epoch != epoch)

    def handed_over(self, run_id: str) -> None:
        """Stop driving the run (this replica stopped it to hand it over)."""
        self.epochs.pop(run_id, None)

    def adopted(self, row: RunRow) -> None:
        """Drive ``row`` (a run this replica claimed) from now on."""
        self.epochs[row.run_id] = row.epoch

    def heartbeat(self) -> list[RunRow]:
        """Write this replica's heartbeat, see its peers, and return the runs it may adopt.

        A draining or stopped replica adopts nothing.
        """
        registry = self.registry
        if registry is None:
            return []
        registry.replica_seen(self.replica_id, self.url, self.mode, started=self._beats == 0)
        lease_us = int(self.lease * 1_000_000)
        self.peers = {
            r.replica_id: r
            for r in registry.replicas()
            if r.replica_id != self.replica_id and r.state != "gone" and r.age_us < lease_us
        }
        self._beats += 1
        if self._beats % _PRUNE_EVERY == 1:
            registry.runs_prune(now_micros() - _KEEP_ENDED_US)
        if self.mode != "serving":
            return []
        found = self._ours([r for r in registry.runs_orphaned(lease_us)
                            if r.replica_id != self.replica_id])  # fmt: skip
        if self._beats == 1:  # started again under the same id: what it ran before is orphaned
            found += [
                r for r in registry.runs_driven_by(self.replica_id) if r.run_id not in self.epochs
            ]
        return found

    def _ours(self, orphans: list[RunRow]) -> list[RunRow]:
        """The orphaned runs this replica adopts now: its share, and any left for a lease.

        Each run goes to the serving replica that ranks first for it (rendezvous hashing
        over the run id), so the runs of a dead replica spread over the survivors rather
        than all landing on whichever beats first; every survivor computes the same
        choice from the same peers. A run its first choice has not claimed within a lease
        (that replica died too, or its view of the fleet differs) is anyone's.
        """
        serving = [self.replica_id]
        serving += [rid for rid, row in self.peers.items() if row.state == "serving"]
        now = time.monotonic()
        since = {r.run_id: self._orphaned_since.get(r.run_id, now) for r in orphans}
        self._orphaned_since = since
        return [
            r
            for r in orphans
            if first_choice(r.run_id, serving) == self.replica_id
            or now - since[r.run_id] >= self.lease
        ]

    def claim(self, row: RunRow) -> RunRow | None:
        """Claim an orphaned run for this replica; None if another replica was first."""
        if self.registry is None:
            return None
        claimed = self.registry.run_claim(row.run_id, row.epoch, self.replica_id)
        if claimed is not None:
            self.adopted(claimed)
        return claimed

    def run_of(self, session_id: str) -> RunRow | None:
        """The run in progress on the session anywhere in the fleet, or None."""
        return None if self.registry is None else self.registry.run_of(session_id)

    def runner(self, session_id: str) -> RunRow | None:
        """The session's run if another live replica that peers can reach drives it."""
        row = self.run_of(session_id)
        if row is None or row.replica_id == self.replica_id or not row.replica_url:
            return None
        alive = row.replica_age_us is not None and row.replica_age_us < self.lease * 1_000_000
        return row if alive and row.replica_state != "gone" else None

    def streams(self, session_id: str, client_id: str, count: int) -> None:
        """Say how many event streams naming a live client this replica has open."""
        if self.registry is not None:
            self.registry.streams_set(self.replica_id, session_id, client_id, count)

    def present_elsewhere(self, session_id: str, client_id: str) -> bool:
        """Whether another live replica has an event stream open that names the client."""
        if self.registry is None:
            return False
        lease_us = int(self.lease * 1_000_000)
        found = self.registry.streams_elsewhere(session_id, client_id, self.replica_id, lease_us)
        return found > 0

    def say_state(self) -> None:
        """Write this replica's heartbeat with its state now (``draining`` as it stops)."""
        if self.registry is not None:
            self.registry.replica_seen(self.replica_id, self.url, self.mode)

    def restarted(self) -> None:
        """Serve again (an application started again): its next heartbeat is a first one."""
        self.mode = "serving"
        self._beats = 0

    def stopped(self) -> None:
        """Say this replica is gone: its runs still registered are its peers' now."""
        self.mode = "gone"
        if self.registry is not None:
            self.registry.replica_seen(self.replica_id, self.url, "gone")
