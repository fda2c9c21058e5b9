"""Runs this server drives: started for a request, or taken over from a replica that died.

A run started through the API is checked, registered in the fleet's registry and
started in one store call (:func:`start_checked`), then followed to its end
(:func:`follow`), which publishes ``run_end`` once every record is out and marks
the run ended in the registry. :func:`take_over` continues a run whose replica
died or stopped: it claims the run, takes the session's writer lock, tells every
observer (``run_takeover``, naming the old and the new replica) and goes on with
``resume()``'s rules: what was written stays, a tool call without a result is
recorded as interrupted and not run again (unless its tool is idempotent), and a
call whose approval was asked and never answered is asked again (D256).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import Final

from plait.auth import entered
from plait.errors import (
    PlaitError,
    SessionLockedError,
    SessionNotFoundError,
    WriterLockLostError,
)
from plait.providers import ModelSettings
from plait.records import JSONValue, Record
from plait.run import Run
from plait.server.approvals import approver
from plait.server.errors import ApiError, error_body, status_and_code
from plait.server.state import ServerState
from plait.session import Session, host_of
from plait.store import BreakableLocks, RunRow

__all__ = [
    "TAKEOVER_EVENT",
    "drain",
    "follow",
    "keep_beating",
    "launch",
    "run_options",
    "start_checked",
    "take_over",
]

TAKEOVER_EVENT: Final = "run_takeover"
"""The event every observer gets when a replica continues another's run."""
_LOCK_TRIES: Final = 40  # a takeover waits this many times LOCK_PAUSE for the old lock to go
_LOCK_PAUSE: Final = 0.25
_BREAK_AFTER: Final = 8  # tries (2 s) before a holder whose lease ran out is fenced off

_log = logging.getLogger("plait.server")


def run_options(
    *,
    max_steps: int,
    timeout: float | None,
    model_settings: ModelSettings | dict[str, JSONValue] | None,
) -> dict[str, JSONValue]:
    """What the registry keeps of a run: what a replica taking it over continues it with."""
    settings: JSONValue = None
    if isinstance(model_settings, ModelSettings):
        settings = dict(model_settings.to_json())
    elif model_settings is not None:
        settings = dict(model_settings)
    return {"max_steps": max_steps, "timeout": timeout, "model_settings": settings}


def _end_state(data: dict[str, JSONValue]) -> str:
    if data.get("ok") is True:
        return "done"
    error = data.get("error")
    inner = error.get("error") if isinstance(error, dict) else None
    code = inner.get("code") if isinstance(inner, dict) else None
    return "cancelled" if code == "run_interrupted" else "failed"


async def follow(state: ServerState, run: Run, run_id: str, session_id: str) -> None:
    """Wait for a run to end; publish ``run_end`` (with the error's code if it failed).

    A run this replica handed over as it stopped ends here without a word: the
    replica that takes it over speaks for it.
    """
    data: dict[str, JSONValue] = {"run_id": run_id}
    written: tuple[Record, ...] = ()
    try:
        await state.hub.announced()  # other replicas hear of the run before its first write
        result = await run.result()
    except Exception as exc:  # the run's own failure: reported to observers, never raised
        if isinstance(exc, WriterLockLostError) and await state.call(
            lambda: state.fleet.taken_from_here(run_id)
        ):
            # Fenced: this replica's lease ran out and another took the run over (D256);
            # that one speaks for the run from now on, and this one says nothing more.
            state.handed_over.add(run_id)
        status, code = status_and_code(exc)
        if status >= 500 and code == "internal_error":
            _log.exception("run %s on session %s failed", run_id, session_id)
        data.update(ok=False, status=status, error=error_body(code, str(exc)))
    else:
        written = result.records
        data.update(
            ok=True, finish_reason=result.finish_reason, steps=result.steps, text=result.text
        )
    finally:
        state.follows.pop(run_id, None)
    handed = run_id in state.handed_over

    def ended() -> None:
        if handed:
            state.fleet.handed_over(run_id)
        else:
            state.fleet.end(run_id, _end_state(data))
        state.client.host.release_idle()  # the run is over: its session's lock goes (D94)

    try:
        await state.call(ended)
    except PlaitError:
        _log.exception("could not record the end of run %s", run_id)
    try:
        if handed:
            return  # the replica that takes it over speaks for it
        await state.hub.published(session_id, written)  # every record is out before run_end
        state.hub.publish(session_id, "run_end", data)
    finally:
        state.hub.unbroadcast(session_id)


def launch(
    state: ServerState, session: Session, run: Run, run_id: str, *, announce: bool = True
) -> None:
    """Follow a started run here; with ``announce``, sequence its events and say ``run_start``.

    A run taken over is sequenced here from its ``run_takeover`` on (:func:`take_over`).
    """
    # The task copies the context entered for the run (who acts, which session), and the
    # run's own task, started by it, copies it in turn.
    state.follows[run_id] = asyncio.get_running_loop().create_task(
        follow(state, run, run_id, session.id)
    )
    if announce:
        state.hub.broadcast(session.id)  # this replica sequences the events until run_end
        state.hub.publish(session.id, "run_start", {"run_id": run_id})


async def start_checked(
    state: ServerState,
    session_id: str,
    client_id: str | None,
    check: Callable[[Session], None],
    start: Callable[[Session, str], Run],
    run_id: str,
    options: dict[str, JSONValue],
) -> Session:
    """Check the caller may drive the session, register the run, start it, and launch it here.

    The checks, the registration and the first writes are one store call; a run made
    there is already on the session's board, so it is launched whatever happens to the
    request meanwhile. A session whose run is registered anywhere in the fleet is
    refused (409 ``session_busy``) and nothing is written.

    Returns:
        The session.
    """
    if state.fleet.mode != "serving":
        raise ApiError(503, "draining", "this server is stopping; send the run to another")

    def made() -> tuple[Session, Run]:
        session = state.session(session_id)
        check(session)
        if host_of(session).writer_lock == "process":
            # The run's lock, taken in this call rather than in a call of the run's own: a
            # session another process writes is refused here (409), and no run starts.
            session.live.acquire()
        state.fleet.begin(run_id, session.id, options)
        try:
            return session, start(session, run_id)
        except BaseException:
            state.fleet.end(run_id, "failed")
            raise

    (session, run), cancelled = await state.client.host.store_calls.run_through(made)
    with entered(session):
        launch(state, session, run, run_id)
    if cancelled is not None:
        raise cancelled
    return session


def _settings(row: RunRow) -> tuple[int, float | None, dict[str, JSONValue] | None]:
    options = row.options
    steps = options.get("max_steps")
    timeout = options.get("timeout")
    settings = options.get("model_settings")
    return (
        steps if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0 else 20,
        float(timeout) if isinstance(timeout, int | float) and not isinstance(timeout, bool)
        else None,
        dict(settings) if isinstance(settings, dict) else None,
    )  # fmt: skip


async def take_over(state: ServerState, orphan: RunRow) -> None:
    """Continue a run whose replica died or stopped, if this replica claims it first."""
    fleet = state.fleet
    claimed = await state.call(lambda: fleet.claim(orphan))
    if claimed is None:
        return  # another replica was first
    run_id, session_id = claimed.run_id, claimed.session_id
    max_steps, timeout, model_settings = _settings(claimed)
    provider = state.provider_for_run()

    def locked() -> Session:
        session = state.session(session_id)
        session.live.acquire()
        return session

    session: Session | None = None
    why = "its session was deleted"
    store = state.client.store
    for attempt in range(_LOCK_TRIES):  # a dead replica's lock goes when its connection drops
        try:
            session = await state.call(locked)
            break
        except SessionLockedError:
            why = "another process still holds its session's writer lock"
            if attempt == _BREAK_AFTER and isinstance(store, BreakableLocks):
                # Its lease ran out but its connection lives (frozen, or cut off from its
                # peers only): end that connection; its writes are fenced from now on.
                broken = await state.call(lambda: store.break_lock(session_id))
                _log.warning("run %s: ended replica %s's hold on session %s (%s)",
                             run_id, orphan.replica_id, session_id, broken)  # fmt: skip
            await asyncio.sleep(_LOCK_PAUSE)
        except SessionNotFoundError:
            why = "its session was deleted"
            break
    if session is None:
        _log.warning("run %s on session %s cannot be taken over: %s", run_id, session_id, why)
        await state.call(lambda: fleet.end(run_id, "failed"))
        return
    await state.hub.watch(session_id)
    state.hub.broadcast(session_id)  # this replica sequences the run's events from here
    # What the old replica wrote as it stopped (a reply cut off) goes out before this one's.
    await state.hub.refresh(session_id)
    state.hub.taken_over(session_id, claimed.epoch)  # its ids follow the old replica's
    state.hub.publish(
        session_id,
        TAKEOVER_EVENT,
        {
            "run_id": run_id,
            "from_replica": orphan.replica_id,
            "to_replica": fleet.replica_id,
            "epoch": claimed.epoch,
        },
    )
    _log.warning(
        "run %s on session %s: taken over from replica %s", run_id, session_id, orphan.replica_id
    )
    held = session

    def resumed() -> Run | None:
        if held.resumable() is None:
            return None  # its last reply was written before its replica died
        return held.resume_stream(
            provider=provider,
            tools=state.tools,
            on_approval=approver(state, held, run_id),
            timeout=timeout,
            max_steps=max_steps,
            model_settings=model_settings,
            run_id=run_id,
        )

    try:
        run = await state.call(resumed)
    except PlaitError as exc:
        await _ended_here(state, run_id, session_id, "failed", str(exc))
        return
    if run is None:
        await _ended_here(state, run_id, session_id, "done", None)
        return
    with entered(held):
        launch(state, held, run, run_id, announce=False)


async def _ended_here(
    state: ServerState, run_id: str, session_id: str, end: str, why: str | None
) -> None:
    """End a taken-over run with nothing left to do (or that cannot go on)."""

    def ended() -> None:
        state.fleet.end(run_id, end)
        state.client.host.release_idle()

    await state.call(ended)
    data: dict[str, JSONValue] = {"run_id": run_id, "ok": end == "done"}
    if why is not None:
        data.update(status=409, error=error_body("takeover_failed", why))
    try:
        await state.hub.refresh(session_id)
        state.hub.publish(session_id, "run_end", data)
    finally:
        state.hub.unbroadcast(session_id)


async def keep_beating(state: ServerState) -> None:
    """Write this replica's heartbeat every ``beat`` seconds and adopt orphaned runs."""
    fleet = state.fleet
    if not fleet.enabled:
        return
    adopting: dict[str, asyncio.Task[None]] = {}
    while True:
        try:
            orphans = await state.call(fleet.heartbeat)
        except PlaitError as exc:  # the store is away: the next beat tries again
            _log.warning("replica %s: heartbeat failed: %s", fleet.replica_id, exc)
            orphans = []
        for row in orphans:
            if row.run_id in adopting:
                continue
            task = asyncio.get_running_loop().create_task(_adopt(state, row))
            adopting[row.run_id] = task
            task.add_done_callback(partial(_forget, adopting, row.run_id))
        await asyncio.sleep(fleet.beat)


def _forget(tasks: dict[str, asyncio.Task[None]], run_id: str, _: object) -> None:
    tasks.pop(run_id, None)


async def _adopt(state: ServerState, row: RunRow) -> None:
    try:
        await take_over(state, row)
    except Exception:  # a failed takeover is retried by whichever replica sees it next
        _log.exception("taking over run %s failed", row.run_id)


async def drain(state: ServerState) -> None:
    """Stop as a replica: take no new run, let runs finish for the grace, hand over the rest.

    A run handed over stops here as a cancelled run does (what it wrote stays; a tool
    call without a result is recorded as interrupted) and stays registered, in
    progress, under this replica, which then says it is gone: another replica takes
    it over at its next heartbeat (with none running, the next one to start does).
    On a store without a registry the runs are cancelled, as a single process does.
    """
    fleet = state.fleet
    if fleet.enabled:
        fleet.mode = "draining"
        try:
            await state.call(fleet.say_state)
        except PlaitError as exc:
            _log.warning("replica %s: could not say it is draining: %s", fleet.replica_id, exc)
    following = set(state.follows.values())
    if following and state.drain_grace > 0:
        await asyncio.wait(following, timeout=state.drain_grace)
    left = [run for run in state.client.host.runs.in_progress() if run.id in state.follows]
    if fleet.enabled:
        state.handed_over.update(run.id for run in left)
        fleet.mode = "gone"
    for run in left:
        run.cancel()
    following = set(state.follows.values())
    if following:
        await asyncio.wait(following, timeout=10)
    if fleet.enabled:
        try:
            await state.call(fleet.stopped)
        except PlaitError as exc:  # its heartbeat stops all the same: its lease runs out
            _log.warning("replica %s: could not say it is gone: %s", fleet.replica_id, exc)
