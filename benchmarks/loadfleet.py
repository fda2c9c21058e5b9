"""The fleet half of ``benchmarks/loadtest.py``: N replicas of ``plait serve`` on one store.

``loadtest.py --replicas N`` (N > 1) comes here. N server processes (the same child
as the one-server test: the real application under uvicorn, the endless scripted
model, the loop-lag probe) start on one fresh PostgreSQL schema, each on its own
loopback port with its own replica id and advertised URL, as ``plait serve
--replica-id rI --advertise-url http://127.0.0.1:PORT --lease L`` runs them. Then:

* writers run requests through the replicas: ``--route rotate`` (each request to
  the next replica, as a round-robin load balancer sends them), ``spread`` (writer
  i always to replica i mod N) or ``one`` (all to replica 0);
* observers are spread over the replicas: a session's k-th observer reads it on
  replica (session + k) mod N, so each session is watched on the replica that runs
  its run and on the others.

A record's delivery is "same replica" when the observer reads the replica that
wrote it (known from which replica each writer's request went to, and for a run
taken over from the registry), else "other replica". Every other event kind is
counted as it arrives, on the same replica and on the others, beside how many the
writers' own streams saw (each observer of the session should see as many).

With ``--kill`` (implies ``--tool-calls``: each run's model asks for a ``shell`` call
appending a line of its own to one file, replicas serve with the built-in tools and
``--approval-default allow``), halfway through the replica with the most runs in
progress is SIGKILLed. The load balancer drops it at once: its writers' streams
break and they go to a survivor, wait there until their run is over (taken over or
not) and go on; its observers reconnect to a survivor with ``Last-Event-ID``.
Reported: the takeover time (kill to the ``run_takeover`` event seen by an observer,
and kill to ``GET .../runs/current`` on a survivor naming the new replica), the runs
in progress on the killed replica and how many of them did not complete, and the
tool calls executed twice (target 0).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtest import KEY, LAG_PATH, PG_ENV, free_port, percentile, wait_for_port

SCRIPT = Path(__file__).resolve().parent / "loadtest.py"
AUTH = {"Authorization": f"Bearer {KEY}"}


def now_us() -> int:
    return time.time_ns() // 1000


def name_of(index: int) -> str:
    return f"r{index}"


@dataclass
class Replica:
    index: int
    port: int
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@dataclass
class Observer:
    session_id: str
    home: int
    """The replica it reads (until that one dies: then the next live one)."""
    replica: int = -1
    moves: list[tuple[int, int]] = field(default_factory=list)
    """(since µs, replica index): where it read from when."""
    seqs: set[int] = field(default_factory=set)
    connected: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Load:
    """Everything the parent counts while the fleet runs."""

    replicas: list[Replica]
    down: set[int] = field(default_factory=set)
    owners: dict[str, list[tuple[int, int]]] = field(default_factory=lambda: defaultdict(list))
    """Per session: (since µs, replica index) as the writer sent its requests."""
    run_replica: dict[str, int] = field(default_factory=dict)
    writer_events: list[tuple[str, int, str, int]] = field(default_factory=list)
    """(session, replica, kind, µs): events the writers' own streams carried."""
    deliveries: list[tuple[str, int, int, int]] = field(default_factory=list)
    """Records: (session, created µs, latency µs, observer's replica)."""
    events: list[tuple[str, str, int, int, str | None]] = field(default_factory=list)
    """Other events: (kind, session, received µs, observer's replica, run id)."""
    takeovers: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    polled_takeovers: dict[str, int] = field(default_factory=dict)
    """Run id: when ``runs/current`` on a survivor first named another replica (µs)."""
    duplicates: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    kill_breaks: Counter[str] = field(default_factory=Counter)
    """Streams and requests the kill broke (expected; not errors)."""
    busy: int = 0
    steers: Counter[str] = field(default_factory=Counter)
    """Steers sent through another replica than the run's, by answer."""
    steer_us: list[int] = field(default_factory=list)
    """How long each answered steer took (µs)."""
    messages: list[str] = field(default_factory=list)
    kill_us: int | None = None
    victim: int | None = None
    orphans: list[str] = field(default_factory=list)
    """The runs in progress on the killed replica right after the kill."""

    def pick(self, wanted: int) -> int:
        """The load balancer: the wanted replica if it is up, else the next one that is."""
        n = len(self.replicas)
        for k in range(n):
            i = (wanted + k) % n
            if i not in self.down:
                return i
        raise RuntimeError("every replica is down")

    def url(self, index: int) -> str:
        return self.replicas[index].url

    def error(self, kind: str, text: str) -> None:
        self.errors[kind] += 1
        if len(self.messages) < 10:
            self.messages.append(text)


# -- the store's registry, read by the parent ------------------------------------------


class Registry:
    """The fleet's run registry, read straight from its PostgreSQL schema."""

    def __init__(self, url: str, schema: str) -> None:
        import psycopg
        from psycopg import sql

        self.conn = psycopg.connect(url, autocommit=True)
        self.runs = sql.SQL("SELECT run_id, session_id, replica_id, state, epoch FROM {}.runs")
        self.runs = self.runs.format(sql.Identifier(schema))

    def rows(self) -> list[tuple[str, str, str, str, int]]:
        return [tuple(r) for r in self.conn.execute(self.runs).fetchall()]  # type: ignore[misc]

    def close(self) -> None:
        self.conn.close()


# -- the load ----------------------------------------------------------------------------


async def observe(http: Any, load: Load, obs: Observer, stop: asyncio.Event) -> None:
    last = "-1"
    while not stop.is_set():
        index = load.pick(obs.home)
        if index != obs.replica:
            obs.replica = index
            obs.moves.append((now_us(), index))
        try:
            async with http.stream(
                "GET",
                f"{load.url(index)}/sessions/{obs.session_id}/events",
                headers={"Last-Event-ID": last},
            ) as response:
                if response.status_code != 200:
                    load.error("stream_errors", f"events {response.status_code} on r{index}")
                    await asyncio.sleep(0.5)
                    continue
                obs.connected.set()
                event = ""
                async for line in response.aiter_lines():
                    if line.startswith("id: "):
                        last = line[4:]
                    elif line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: "):
                        now = now_us()
                        data = json.loads(line[6:])
                        if event == "record":
                            seq = data["seq"]
                            if seq in obs.seqs:
                                load.duplicates += 1
                            else:
                                obs.seqs.add(seq)
                                created = data["record"]["created_at_us"]
                                load.deliveries.append(
                                    (obs.session_id, created, now - created, index)
                                )
                        else:
                            run_id = data.get("run_id") if isinstance(data, dict) else None
                            load.events.append((event, obs.session_id, now, index, run_id))
                            if event == "run_takeover":
                                load.takeovers.append((now, data))
                    if stop.is_set():
                        return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken stream: counted, then reconnect with Last-Event-ID
            if stop.is_set():
                return
            if index in load.down:
                load.kill_breaks["observer streams"] += 1
            else:
                load.error("stream_errors", f"stream on r{index} broke: {exc!r}")
            await asyncio.sleep(0.2)


async def write(
    http: Any, load: Load, i: int, sid: str, until: float, args: argparse.Namespace
) -> None:
    n = 0
    while time.monotonic() < until:
        n += 1
        wanted = {"rotate": i + n, "spread": i, "one": 0}[args.route]
        index = load.pick(wanted % len(load.replicas))
        bisect.insort(load.owners[sid], (now_us(), index))
        run_id: str | None = None
        ended = False
        steering: asyncio.Task[None] | None = None
        try:
            async with http.stream(
                "POST",
                f"{load.url(index)}/sessions/{sid}/runs",
                json={"text": f"request {n}", "stream": True},
            ) as response:
                if response.status_code == 409:
                    load.busy += 1
                    await response.aread()
                    await asyncio.sleep(0.05)
                    continue
                if response.status_code != 200:
                    body = (await response.aread()).decode(errors="replace")
                    load.error("request_errors", f"run {response.status_code}: {body[:200]}")
                    await asyncio.sleep(0.1)
                    continue
                event = ""
                async for line in response.aiter_lines():
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: "):
                        load.writer_events.append((sid, index, event, now_us()))
                        if event == "run_start":
                            run_id = json.loads(line[6:])["run_id"]
                            load.run_replica[run_id] = index
                        elif event == "tool_start" and args.steer and steering is None:
                            # Control through another replica: forwarded to this one.
                            steering = asyncio.create_task(
                                steer(http, load, sid, load.pick(index + 1), n)
                            )
                        elif event == "run_end":
                            ended = True
                            data = json.loads(line[6:])
                            if not data.get("ok"):
                                load.error("run_errors", f"run failed: {data}")
                            break
        except Exception as exc:
            if index not in load.down:
                load.error("request_errors", f"run request on r{index} failed: {exc!r}")
        if steering is not None:
            await steering
        if not ended and index in load.down:
            # Its replica died under it: a client goes to a survivor and waits for its
            # run (taken over there) to be over before it sends the next.
            load.kill_breaks["writer streams"] += 1
            await wait_idle(http, load, sid, index, run_id)
        elif args.think:
            await asyncio.sleep(args.think)


async def steer(http: Any, load: Load, sid: str, index: int, n: int) -> None:
    before = time.perf_counter()
    try:
        r = await http.post(
            f"{load.url(index)}/sessions/{sid}/runs/current/steer",
            json={"message": f"steer {n}"},
        )
    except Exception as exc:
        key = "failed (its replica killed)" if index in load.down else "failed"
        load.steers[key] += 1
        if index not in load.down:
            load.error("request_errors", f"steer through r{index} failed: {exc!r}")
        return
    load.steer_us.append(int((time.perf_counter() - before) * 1e6))
    code = r.json().get("error", {}).get("code", "") if r.status_code != 200 else ""
    load.steers[f"{r.status_code} {code}".strip()] += 1
    if r.status_code not in (200, 409):  # 409: the run ended before the steer came
        load.error("request_errors", f"steer through r{index}: {r.status_code} {r.text[:200]}")


async def wait_idle(http: Any, load: Load, sid: str, dead: int, run_id: str | None) -> None:
    deadline = time.monotonic() + 120.0
    index = load.pick(dead + 1)
    while time.monotonic() < deadline:
        try:
            r = await http.get(f"{load.url(index)}/sessions/{sid}/runs/current")
            state = r.json()
        except Exception as exc:
            load.error("request_errors", f"runs/current on r{index} failed: {exc!r}")
            index = load.pick(index + 1)
            await asyncio.sleep(0.2)
            continue
        # Taken over: a survivor names another replica, or the run is already over (a
        # taken-over run often has little left to do).
        if run_id is None and state.get("replica_id") == name_of(dead):
            run_id = state.get("run_id")  # it broke before it said its run's id
        moved = not state.get("running") or state.get("replica_id") != name_of(dead)
        if moved and run_id is not None and run_id not in load.polled_takeovers:
            load.polled_takeovers[run_id] = now_us()
        if not state.get("running"):
            return
        await asyncio.sleep(0.05)
    load.error("run_errors", f"session {sid}: its run on r{dead} was still in progress at 120 s")


async def kill_one(load: Load, registry: Registry, at: float) -> None:
    """SIGKILL the replica with the most runs in progress, once ``at`` comes."""
    await asyncio.sleep(max(0.0, at - time.monotonic()))
    for _ in range(200):
        rows = await asyncio.to_thread(registry.rows)
        running = Counter(r[2] for r in rows if r[3] == "running")
        busiest = [(n, rid) for rid, n in running.items() if int(rid[1:]) not in load.down]
        if busiest:
            victim = int(max(busiest)[1][1:])
            break
        await asyncio.sleep(0.02)
    else:
        load.error("run_errors", "no replica had a run in progress to kill")
        return
    load.down.add(victim)  # the load balancer drops it as it dies
    load.victim = victim
    load.kill_us = now_us()
    load.replicas[victim].proc.send_signal(signal.SIGKILL)
    rows = await asyncio.to_thread(registry.rows)
    load.orphans = [r[0] for r in rows if r[2] == name_of(victim) and r[3] == "running"]


async def wait_fleet(http: Any, load: Load, timeout: float = 60.0) -> None:
    """Wait until every replica sees every other alive (so it forwards to them)."""
    names = {name_of(r.index) for r in load.replicas}
    deadline = time.monotonic() + timeout
    for replica in load.replicas:
        while True:
            rows = (await http.get(f"{replica.url}/replicas")).json()["replicas"]
            if {r["replica_id"] for r in rows if r["alive"]} >= names:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"r{replica.index} never saw the whole fleet: {rows}")
            await asyncio.sleep(0.2)


async def drive(load: Load, registry: Registry, args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    n = len(load.replicas)
    limits = httpx.Limits(max_connections=args.observers + 3 * args.writers + 20)
    timeout = httpx.Timeout(60.0, connect=10.0)
    async with httpx.AsyncClient(headers=AUTH, limits=limits, timeout=timeout) as http:
        await wait_fleet(http, load)
        sids = []
        for i in range(args.writers):
            r = await http.post(f"{load.url(0)}/sessions", json={"title": f"load {i}"})
            r.raise_for_status()
            sids.append(r.json()["id"])
        observers = [
            Observer(sids[j % len(sids)], (j % len(sids) + j // len(sids)) % n)
            for j in range(args.observers)
        ]
        stop = asyncio.Event()
        watchers = [asyncio.create_task(observe(http, load, o, stop)) for o in observers]
        await asyncio.wait_for(asyncio.gather(*(o.connected.wait() for o in observers)), 60)
        for replica in load.replicas:
            (await http.get(f"{replica.url}{LAG_PATH}")).raise_for_status()
        started = time.monotonic()
        until = started + args.seconds
        killer = (
            asyncio.create_task(kill_one(load, registry, started + args.seconds / 2))
            if args.kill
            else None
        )
        await asyncio.gather(
            *(write(http, load, i, sid, until, args) for i, sid in enumerate(sids))
        )
        elapsed = time.monotonic() - started
        if killer is not None:
            await killer
        lags: list[int] = []
        for i in range(n):
            if i not in load.down:
                lags += [int(x * 1000) for x in (await http.get(f"{load.url(i)}{LAG_PATH}")).json()]
        live = load.pick(0)
        expected: dict[str, int] = {}
        for sid in sids:
            r = await http.get(f"{load.url(live)}/sessions/{sid}/records", params={"limit": 1})
            expected[sid] = r.json()["end_seq"]
        deadline = time.monotonic() + args.drain
        while time.monotonic() < deadline:
            if all(len(o.seqs) >= expected[o.session_id] for o in observers):
                break
            await asyncio.sleep(0.1)
        await asyncio.sleep(1.0)  # the last runs' run_end comes after their records
        stop.set()
        for w in watchers:
            w.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
    rows = await asyncio.to_thread(registry.rows)
    return report(load, observers, rows, expected, elapsed, lags, args)


# -- the figures ---------------------------------------------------------------------------


def _ms(values: list[int], q: float) -> float:
    return round(percentile(values, q), 2)


def report(
    load: Load,
    observers: list[Observer],
    rows: list[tuple[str, str, str, str, int]],
    expected: dict[str, int],
    elapsed: float,
    lags: list[int],
    args: argparse.Namespace,
) -> dict[str, Any]:
    lost = sum(len(set(range(expected[o.session_id])) - o.seqs) for o in observers)
    # A run taken over: its records and events from the kill on are the adopter's, and
    # every observer of its session should see its run_takeover and its run_end there.
    taken = [r for r in rows if r[4] > 1]
    adopter = {r[0]: int(r[2][1:]) for r in taken}
    writer_events = list(load.writer_events)
    if load.kill_us is not None:
        seen = {d.get("run_id"): at for at, d in sorted(load.takeovers, reverse=True)}
        for run_id, sid, _replica, _state, _epoch in taken:
            bisect.insort(load.owners[sid], (load.kill_us, adopter[run_id]))
            at = seen.get(run_id, load.kill_us)  # observers have moved off the dead one by then
            for kind in ("run_takeover", "run_end"):
                writer_events.append((sid, adopter[run_id], kind, at))

    def owner(sid: str, at_us: int) -> int | None:
        timeline = load.owners.get(sid, [])
        k = bisect.bisect_right(timeline, (at_us, len(load.replicas))) - 1
        return timeline[k][1] if k >= 0 else None

    same: list[int] = []
    other: list[int] = []
    unattributed = 0
    for sid, created, latency, at in load.deliveries:
        wrote = owner(sid, created)
        if wrote is None:
            unattributed += 1  # written before the first run (the session's own records)
            continue
        (same if wrote == at else other).append(latency)
    every = [d[2] for d in load.deliveries]

    # Other kinds: each observer of the session should get what the writer's stream got.
    watching: dict[str, list[Observer]] = defaultdict(list)
    for o in observers:
        watching[o.session_id].append(o)

    def reading(o: Observer, at_us: int) -> int:
        k = bisect.bisect_right(o.moves, (at_us, len(load.replicas))) - 1
        return o.moves[max(k, 0)][1]

    expect: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for sid, index, kind, at_us in writer_events:
        if kind == "record":
            continue
        for o in watching[sid]:
            expect[kind][0 if reading(o, at_us) == index else 1] += 1
    got: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    kill_us = load.kill_us or 0
    for kind, sid, at_us, index, run_id in load.events:
        wrote = load.run_replica.get(run_id) if run_id else None
        if run_id in adopter and at_us >= kill_us:
            wrote = adopter[run_id]
        if wrote is None:
            wrote = owner(sid, at_us)
        got[kind][0 if wrote == index else 1] += 1
    kinds = {
        kind: {
            "same_got": got[kind][0],
            "same_expected": expect[kind][0],
            "other_got": got[kind][1],
            "other_expected": expect[kind][1],
        }
        for kind in sorted(set(got) | set(expect))
    }
    states = Counter(r[3] for r in rows)
    result: dict[str, Any] = {
        "store": "postgres",
        "replicas": len(load.replicas),
        "route": args.route,
        "seconds": round(elapsed, 1),
        "observers": args.observers,
        "writers": args.writers,
        "runs": states.get("done", 0),
        "runs_per_s": round(states.get("done", 0) / elapsed, 1) if elapsed else 0.0,
        "run_states": dict(states),
        "records_written": sum(expected.values()),
        "records_delivered": len(load.deliveries),
        "events_delivered": len(load.deliveries) + len(load.events),
        "p50_ms": _ms(every, 0.50),
        "p99_ms": _ms(every, 0.99),
        "same_n": len(same),
        "same_p50_ms": _ms(same, 0.50),
        "same_p99_ms": _ms(same, 0.99),
        "other_n": len(other),
        "other_p50_ms": _ms(other, 0.50),
        "other_p99_ms": _ms(other, 0.99),
        "unattributed": unattributed,
        "mean_ms": round(statistics.fmean(every) / 1000.0, 2) if every else float("nan"),
        "lag_p50_ms": _ms(lags, 0.50),
        "lag_p99_ms": _ms(lags, 0.99),
        "lag_max_ms": round(max(lags) / 1000.0, 2) if lags else float("nan"),
        "errors": sum(load.errors.values()),
        "error_kinds": dict(load.errors),
        "busy_refusals": load.busy,
        "steers": dict(load.steers),
        "steer_p50_ms": _ms(load.steer_us, 0.50),
        "steer_p99_ms": _ms(load.steer_us, 0.99),
        "lost": lost,
        "duplicates": load.duplicates,
        "kinds": kinds,
        "error_samples": load.messages,
    }
    if args.kill:
        result.update(kill_figures(load, rows, taken))
    return result


def kill_figures(
    load: Load, rows: list[tuple[str, str, str, str, int]], taken: list[Any]
) -> dict[str, Any]:
    """The takeover's figures: how long, how many runs, how many never completed."""
    kill = load.kill_us
    if kill is None:
        return {"killed": None}
    final = {r[0]: r for r in rows}
    first_event: dict[str, int] = {}
    for at, data in load.takeovers:
        rid = data.get("run_id")
        if data.get("from_replica") == name_of(load.victim or 0) and isinstance(rid, str):
            first_event[rid] = min(at, first_event.get(rid, at))
    event_ms = sorted((t - kill) / 1000.0 for t in first_event.values())
    poll_ms = sorted(
        (t - kill) / 1000.0 for rid, t in load.polled_takeovers.items() if rid in load.orphans
    )
    not_done = [rid for rid in load.orphans if final.get(rid, ("", "", "", "?", 0))[3] != "done"]
    return {
        "killed": name_of(load.victim or 0),
        "kill_breaks": dict(load.kill_breaks),
        "orphaned_runs": len(load.orphans),
        "taken_over": len(taken),
        "takeover_event_runs": len(event_ms),
        "takeover_event_first_ms": round(event_ms[0], 1) if event_ms else None,
        "takeover_event_last_ms": round(event_ms[-1], 1) if event_ms else None,
        "takeover_poll_runs": len(poll_ms),
        "takeover_poll_first_ms": round(poll_ms[0], 1) if poll_ms else None,
        "takeover_poll_last_ms": round(poll_ms[-1], 1) if poll_ms else None,
        "not_completed": len(not_done),
        "not_completed_states": dict(Counter(final[r][3] if r in final else "?" for r in not_done)),
    }


def tool_counts(path: Path) -> tuple[int, int]:
    """Tool calls executed, and how many of them ran more than once."""
    lines = path.read_text().split() if path.exists() else []
    counts = Counter(lines)
    return len(counts), sum(1 for c in counts.values() if c > 1)


def log_lines(replicas: list[Replica], limit: int = 12) -> list[str]:
    """The replicas' warnings and errors (their logs are at ``--log-level warning``)."""
    out: list[str] = []
    for replica in replicas:
        if replica.log.exists():
            for line in replica.log.read_text(errors="replace").splitlines():
                if line.strip() and len(out) < limit:
                    out.append(f"r{replica.index}: {line[:300]}")
    return out


# -- the run -------------------------------------------------------------------------------


def run_fleet(args: argparse.Namespace) -> dict[str, Any]:
    import psycopg
    from psycopg import sql

    from plait.store.postgres import PostgresStore

    target = os.environ[PG_ENV]
    schema = f"plait_fleet_{uuid.uuid4().hex[:10]}"
    PostgresStore(target, schema=schema).close()  # the schema, made once before the replicas
    tools = args.tool_calls or args.kill or args.steer
    with tempfile.TemporaryDirectory(prefix="plait-fleet-") as tmp:
        tool_log = Path(tmp) / "tool-calls.log"
        replicas: list[Replica] = []
        registry: Registry | None = None
        try:
            for i in range(args.replicas):
                port = free_port()
                log = Path(tmp) / f"r{i}.log"
                child = [
                    *(sys.executable, str(SCRIPT), "--serve", "--kind", "postgres"),
                    *("--target", target, "--schema", schema, "--port", str(port)),
                    *("--workspace", tmp, "--replica-id", name_of(i), "--lease", str(args.lease)),
                ]
                if tools:
                    child += ["--tool-log", str(tool_log), "--tool-seconds", str(args.tool_seconds)]
                with open(log, "wb") as out:
                    proc = subprocess.Popen(child, stdout=out, stderr=subprocess.STDOUT)
                replicas.append(Replica(i, port, proc, log))
            for replica in replicas:
                wait_for_port(replica.port, replica.proc)
            registry = Registry(target, schema)
            load = Load(replicas)
            result = asyncio.run(drive(load, registry, args))
            if tools:
                result["tool_calls"], result["tool_calls_run_twice"] = tool_counts(tool_log)
        finally:
            for replica in replicas:
                if replica.proc.poll() is None:
                    replica.proc.terminate()
            for replica in replicas:
                try:
                    replica.proc.wait(15)
                except subprocess.TimeoutExpired:
                    replica.proc.kill()
            if registry is not None:
                registry.close()
            if args.keep_logs:
                Path(args.keep_logs).mkdir(parents=True, exist_ok=True)
                for replica in replicas:
                    if replica.log.exists():
                        shutil.copy(replica.log, Path(args.keep_logs) / replica.log.name)
            result_logs = log_lines(replicas)
            with psycopg.connect(target, autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )
    result["log_samples"] = result_logs
    return result


def show(r: dict[str, Any]) -> None:
    print(
        f"fleet of {r['replicas']} (postgres, route {r['route']}): {r['observers']} observers, "
        f"{r['writers']} writers, {r['seconds']} s: {r['runs']} runs done "
        f"({r['runs_per_s']}/s; states {r['run_states']}), {r['records_delivered']} records "
        f"delivered ({r['events_delivered']} events)"
    )
    print(
        f"  records on the run's replica: {r['same_n']}, p50 {r['same_p50_ms']} ms, "
        f"p99 {r['same_p99_ms']} ms; on another replica: {r['other_n']}, "
        f"p50 {r['other_p50_ms']} ms, p99 {r['other_p99_ms']} ms; all: p50 {r['p50_ms']} ms, "
        f"p99 {r['p99_ms']} ms ({r['unattributed']} written before any run)"
    )
    print(
        f"  loop lag p50 {r['lag_p50_ms']} ms, p99 {r['lag_p99_ms']} ms, max {r['lag_max_ms']} ms;"
        f" errors {r['errors']} {r['error_kinds'] or ''}, lost {r['lost']}, "
        f"duplicates {r['duplicates']}, busy refusals {r['busy_refusals']}"
    )
    if r["steers"]:
        print(
            f"  steers through another replica: {r['steers']}, p50 {r['steer_p50_ms']} ms, "
            f"p99 {r['steer_p99_ms']} ms"
        )
    print("  events per kind (got/expected): on the run's replica | on another replica")
    for kind, k in r["kinds"].items():
        print(
            f"    {kind:<16} {k['same_got']:>7}/{k['same_expected']:<7} | "
            f"{k['other_got']:>7}/{k['other_expected']}"
        )
    if "killed" in r:
        print(
            f"  kill: {r['killed']} SIGKILLed with {r['orphaned_runs']} runs in progress "
            f"({r['kill_breaks']}); {r['taken_over']} taken over; takeover seen by an observer "
            f"for {r['takeover_event_runs']} runs, {r['takeover_event_first_ms']}.."
            f"{r['takeover_event_last_ms']} ms after the kill; on runs/current for "
            f"{r['takeover_poll_runs']} runs, {r['takeover_poll_first_ms']}.."
            f"{r['takeover_poll_last_ms']} ms; not completed {r['not_completed']} "
            f"{r['not_completed_states'] or ''}"
        )
    if "tool_calls" in r:
        print(f"  tool calls run {r['tool_calls']}, run twice {r['tool_calls_run_twice']}")
    for sample in r["error_samples"]:
        print(f"  error: {sample}")
    for line in r["log_samples"]:
        print(f"  log {line}")


def fleet_main(args: argparse.Namespace) -> int:
    """Run the fleet load test (PostgreSQL only); the exit status."""
    if args.store == "sqlite" or not os.environ.get(PG_ENV):
        print(
            f"fleet: skipped (a fleet shares a PostgreSQL store: set "
            f"{PG_ENV}=postgresql://postgres@127.0.0.1:5432/test)"
        )
        return 0 if args.store != "sqlite" else 2
    if args.store == "both":
        print("sqlite: skipped (a fleet shares a PostgreSQL store)")
    r = run_fleet(args)
    if args.json:
        print(json.dumps(r))
    else:
        show(r)
    failed = r["errors"] > 0 or r["lost"] > 0 or r.get("tool_calls_run_twice", 0) > 0
    failed = failed or r.get("not_completed", 0) > 0
    return 1 if failed else 0
