"""``/replicas``: the servers on this store, as the registry knows them (D256)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from plait._time import from_micros
from plait.server.state import Caller, server_state
from plait.store import ReplicaRow

__all__ = ["ReplicaOut", "ReplicasOut", "router"]

router = APIRouter(tags=["fleet"])


class ReplicaOut(BaseModel):
    """One server on the store."""

    model_config = ConfigDict(extra="forbid")

    replica_id: str
    url: str | None = Field(description="Where its peers forward a session's writes to it.")
    state: str = Field(description="serving, draining or gone.")
    started_at: str
    seen_at: str = Field(description="Its last heartbeat (RFC 3339).")
    alive: bool = Field(description="Whether its lease holds: seen within it, and not gone.")
    this: bool = Field(description="Whether it is the server that answers.")


class ReplicasOut(BaseModel):
    """``GET /replicas``."""

    model_config = ConfigDict(extra="forbid")

    replica_id: str = Field(description="The server that answers.")
    lease_seconds: float
    replicas: list[ReplicaOut]


@router.get("/replicas", response_model=ReplicasOut, summary="The servers on the store")
async def list_replicas(request: Request, who: Caller) -> ReplicasOut:
    """Every server on this store with its heartbeat, most recently seen first.

    A store without a registry lists this server alone.
    """
    state = server_state(request)
    fleet = state.fleet
    registry = fleet.registry
    rows: list[ReplicaRow] = await state.call(registry.replicas) if registry is not None else []
    lease_us = int(fleet.lease * 1_000_000)

    def alive(r: ReplicaRow) -> bool:
        return r.state != "gone" and r.age_us < lease_us

    # What it read is fresher than the last heartbeat's: forwarding uses it at once.
    fleet.peers = {r.replica_id: r for r in rows if r.replica_id != fleet.replica_id and alive(r)}
    return ReplicasOut(
        replica_id=fleet.replica_id,
        lease_seconds=fleet.lease,
        replicas=[
            ReplicaOut(
                replica_id=r.replica_id,
                url=r.url,
                state=r.state,
                started_at=from_micros(r.started_at_us).isoformat(),
                seen_at=from_micros(r.seen_at_us).isoformat(),
                alive=alive(r),
                this=r.replica_id == fleet.replica_id,
            )
            for r in rows
        ],
    )
