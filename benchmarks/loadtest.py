"""Load test of ``plait serve``: SSE observers and writers on one server, loopback only.

``make loadtest`` runs it against SQLite and PostgreSQL (PostgreSQL when
``PLAIT_TEST_POSTGRES_URL`` is set, else it says why it skips). For each store:

1. a server (the real application, under uvicorn as ``plait serve`` runs it) starts
   in a child process on a loopback port, on a fresh store, with an endless scripted
   model (each reply streams in a few text deltas) and no tools;
2. ``--writers`` sessions are created; ``--observers`` event streams
   (``GET /sessions/{id}/events?after=-1``) are spread over them;
3. each writer runs requests on its session back to back for ``--seconds``
   (``POST /sessions/{id}/runs`` with ``stream: true``, read to its ``run_end``);
4. then every observer must receive every record of its session (checked against
   ``end_seq`` from the store) within ``--drain`` seconds.

Reported per store: runs, records and events delivered, p50/p99 delivery latency
(a record's ``created_at`` in the server to its arrival at the observer; both
processes read the same clock), the server's event-loop lag while the writers run
(a task in the server sleeps 10 ms again and again; lag is how much later than asked
it wakes: p50, p99, max), errors (failed requests, failed runs, broken streams) and
lost records (expected minus received, over all observers), and duplicates. The
target is 0 errors, 0 lost.

**A fleet** (``--replicas N``, N > 1; PostgreSQL only, :mod:`loadfleet`): N such
servers on one fresh PostgreSQL schema, each a replica with its own loopback port,
``--replica-id`` and ``--advertise-url``. Writers send their requests through the
replicas (``--route rotate``: each request to the next, as a round-robin load
balancer does; ``spread``: writer i to replica i mod N; ``one``: all to replica 0);
a session's observers are spread over the replicas. Reported besides the above:
delivery of records to observers on the replica that wrote them and on the others
(p50/p99 each), and every event kind as it arrived on each side beside what the
writers' streams saw. ``--kill`` (N >= 2) gives each run a ``shell`` tool call that
appends its own line to one file (the replicas serve with the built-in tools and
``--approval-default allow``) and SIGKILLs, halfway through, the replica with the
most runs in progress: reported are the takeover time (kill to the ``run_takeover``
event at an observer, and kill to ``GET .../runs/current`` on a survivor showing the
run moved or over), the runs in progress on it that never completed and the tool
calls executed twice (targets 0 and 0). ``--lease`` is the replicas' lease (6 s as
``plait serve``'s default), ``--keep-logs DIR`` keeps their logs. ``--steer`` (with
tool calls) steers each run through another replica while its tool runs, so the
replica forwards the write to the run's: reported by answer, with p50/p99.

Usage::

    python benchmarks/loadtest.py [--store sqlite|postgres|both] [--seconds 60]
        [--observers 200] [--writers 20] [--think 0.05] [--json]
        [--replicas N [--route rotate|spread|one] [--kill] [--tool-calls] [--steer]
         [--tool-seconds 0.2] [--lease 6] [--keep-logs DIR]]

    make loadtest                                        # one server, both stores
    make loadtest LOADTEST_ARGS="--replicas 3 --kill"    # a fleet of 3, one killed
    make loadtest-fleet                                  # the same, --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The child inherits the key through the environment.
KEY = os.environ.setdefault("PLAIT_LOADTEST_KEY", "loadtest-key-" + uuid.uuid4().hex)
PG_ENV = "PLAIT_TEST_POSTGRES_URL"


# -- the server (child process) ---------------------------------------------------------


class EndlessModel:
    """A scripted model that never runs out: each reply is a few text deltas.

    With ``tool_log`` (a fleet with ``--kill``), each reply to a user message ends
    with a ``shell`` tool call appending a line of its own (a new id) to that file
    (then sleeping ``tool_seconds``), and a reply to a tool result is one line of
    text: the file counts every tool call's executions.
    """

    def __init__(
        self, deltas: int = 5, tool_log: str | None = None, tool_seconds: float = 0.0
    ) -> None:
        self.deltas = deltas
        self.tool_log = tool_log
        self.tool_seconds = tool_seconds
        self.calls = 0

    @property
    def name(self) -> str:
        return "scripted"

    @property
    def model(self) -> str:
        return "endless"

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        from plait.providers import Finish, TextDelta, ToolCallDelta, Usage

        self.calls += 1
        last = request.messages[-1] if request.messages else None
        if self.tool_log is not None and getattr(last, "role", None) == "tool":
            yield TextDelta(f"done with reply {self.calls}.")
            yield Usage(input_tokens=10, output_tokens=5)
            yield Finish("stop")
            return
        for i in range(self.deltas):
            yield TextDelta(f"piece {i} of reply {self.calls}. ")
        yield Usage(input_tokens=10, output_tokens=self.deltas * 5)
        if self.tool_log is not None and request.tools:
            call = uuid.uuid4().hex
            command = f"echo {call} >> {shlex.quote(self.tool_log)}"
            if self.tool_seconds > 0:  # a kill then mostly finds runs inside their tool call
                command += f"; sleep {self.tool_seconds}"
            yield ToolCallDelta(0, f"call_{call}", "shell", json.dumps({"command": command}))
            yield Finish("tool_calls")
            return
        yield Finish("stop")


LAG_PATH = "/_loadtest/lag"
LAG_TICK = 0.010


class LagProbe:
    """ASGI wrapper: a task measuring the event loop's oversleep, read at ``LAG_PATH``.

    A GET there answers the lags (ms) seen since the previous GET and starts over.
    """

    def __init__(self, app: Any) -> None:
        self.app = app
        self.state = app.state  # what plait's serving reads (the hub, to end its streams)
        self.lags: list[float] = []
        self.task: asyncio.Task[None] | None = None

    async def probe(self) -> None:
        while True:
            before = time.perf_counter()
            await asyncio.sleep(LAG_TICK)
            self.lags.append((time.perf_counter() - before - LAG_TICK) * 1000.0)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self.task is None and scope["type"] in ("http", "lifespan"):
            self.task = asyncio.get_running_loop().create_task(self.probe())
        if scope["type"] == "http" and scope["path"] == LAG_PATH:
            lags, self.lags = self.lags, []
            body = json.dumps(lags).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def serve(args: argparse.Namespace) -> None:
    from plait import Client
    from plait.server import create_app
    from plait.server.serving import serve_app

    if args.kind == "postgres":
        from plait.store.postgres import PostgresStore

        store: Any = PostgresStore(args.target, schema=args.schema)
    else:
        from plait.store import SQLiteStore

        store = SQLiteStore(args.target)
    client = Client(args.workspace, store=store)
    model = EndlessModel(tool_log=args.tool_log, tool_seconds=args.tool_seconds)
    fleet: dict[str, Any] = {}
    if args.replica_id:  # one replica of a fleet, as `plait serve --replica-id ... ` runs it
        fleet = {
            "replica_id": args.replica_id,
            "replica_url": f"http://127.0.0.1:{args.port}",  # its --advertise-url
            "lease": args.lease,
            "drain_grace": 1.0,
        }
    if args.tool_log:  # `--builtin-tools --approval-default allow`
        from plait.tools import BUILTIN_TOOLS

        fleet.update(tools=BUILTIN_TOOLS, approval_default="allow")
    app = create_app(
        client,
        api_keys={KEY: "loadtest"},
        provider=model,
        ping_interval=1.0,
        max_queue=100_000,
        **fleet,
    )
    # As `plait serve` runs it (its connection limits, its process settings).
    serve_app(LagProbe(app), host="127.0.0.1", port=args.port, log_level="warning")


# -- the load (parent process) ----------------------------------------------------------


@dataclass
class Tally:
    runs: int = 0
    run_errors: int = 0
    request_errors: int = 0
    stream_errors: int = 0
    events: int = 0
    records: int = 0
    duplicates: int = 0
    latencies_us: list[int] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    def error(self, kind: str, text: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        if len(self.messages) < 10:
            self.messages.append(text)


@dataclass
class Observer:
    session_id: str
    seqs: set[int] = field(default_factory=set)
    connected: asyncio.Event = field(default_factory=asyncio.Event)
    done: bool = False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def observe(http: Any, obs: Observer, tally: Tally, stop: asyncio.Event) -> None:
    last = "-1"
    while not stop.is_set():
        try:
            async with http.stream(
                "GET",
                f"/sessions/{obs.session_id}/events",
                headers={"Last-Event-ID": last},
            ) as response:
                if response.status_code != 200:
                    tally.error("stream_errors", f"events {response.status_code}")
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
                        tally.events += 1
                        if event == "record":
                            now = time.time_ns() // 1000
                            data = json.loads(line[6:])
                            seq = data["seq"]
                            if seq in obs.seqs:
                                tally.duplicates += 1
                            else:
                                obs.seqs.add(seq)
                                tally.records += 1
                                tally.latencies_us.append(now - data["record"]["created_at_us"])
                    if stop.is_set():
                        return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken stream: counted, then reconnect with Last-Event-ID
            if stop.is_set():
                return
            tally.error("stream_errors", f"stream broke: {exc!r}")
            await asyncio.sleep(0.2)


async def write(http: Any, sid: str, tally: Tally, until: float, think: float) -> None:
    n = 0
    while time.monotonic() < until:
        n += 1
        try:
            async with http.stream(
                "POST", f"/sessions/{sid}/runs", json={"text": f"request {n}", "stream": True}
            ) as response:
                if response.status_code != 200:
                    body = (await response.aread()).decode(errors="replace")
                    tally.error("request_errors", f"run {response.status_code}: {body[:200]}")
                    await asyncio.sleep(0.1)
                    continue
                event = ""
                async for line in response.aiter_lines():
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: ") and event == "run_end":
                        data = json.loads(line[6:])
                        tally.runs += 1
                        if not data.get("ok"):
                            tally.error("run_errors", f"run failed: {data}")
                        break
        except Exception as exc:
            tally.error("request_errors", f"run request failed: {exc!r}")
        if think:
            await asyncio.sleep(think)


def percentile(values: list[int], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k] / 1000.0


async def drive(base: str, args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    tally = Tally()
    limits = httpx.Limits(max_connections=args.observers + args.writers + 20)
    timeout = httpx.Timeout(60.0, connect=10.0)
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(
        base_url=base, headers=headers, limits=limits, timeout=timeout
    ) as http:
        sids = []
        for i in range(args.writers):
            r = await http.post("/sessions", json={"title": f"load {i}"})
            r.raise_for_status()
            sids.append(r.json()["id"])
        observers = [Observer(sids[i % len(sids)]) for i in range(args.observers)]
        stop = asyncio.Event()
        watchers = [asyncio.create_task(observe(http, o, tally, stop)) for o in observers]
        await asyncio.wait_for(asyncio.gather(*(o.connected.wait() for o in observers)), timeout=60)
        (await http.get(LAG_PATH)).raise_for_status()  # the lags from here on
        started = time.monotonic()
        until = started + args.seconds
        await asyncio.gather(*(write(http, sid, tally, until, args.think) for sid in sids))
        elapsed = time.monotonic() - started
        lags = [int(x * 1000) for x in (await http.get(LAG_PATH)).json()]
        expected: dict[str, int] = {}
        for sid in sids:
            r = await http.get(f"/sessions/{sid}/records", params={"limit": 1})
            expected[sid] = r.json()["end_seq"]
        deadline = time.monotonic() + args.drain
        while time.monotonic() < deadline:
            if all(len(o.seqs) >= expected[o.session_id] for o in observers):
                break
            await asyncio.sleep(0.1)
        stop.set()
        for w in watchers:
            w.cancel()
        await asyncio.gather(*watchers, return_exceptions=True)
    lost = sum(len(set(range(expected[o.session_id])) - o.seqs) for o in observers)
    errors = tally.run_errors + tally.request_errors + tally.stream_errors
    lat = tally.latencies_us
    return {
        "seconds": round(elapsed, 1),
        "observers": args.observers,
        "writers": args.writers,
        "runs": tally.runs,
        "runs_per_s": round(tally.runs / elapsed, 1) if elapsed else 0.0,
        "records_written": sum(expected.values()),
        "records_delivered": tally.records,
        "events_delivered": tally.events,
        "p50_ms": round(percentile(lat, 0.50), 2),
        "p99_ms": round(percentile(lat, 0.99), 2),
        "max_ms": round(max(lat) / 1000.0, 2) if lat else float("nan"),
        "mean_ms": round(statistics.fmean(lat) / 1000.0, 2) if lat else float("nan"),
        "lag_p50_ms": round(percentile(lags, 0.50), 2),
        "lag_p99_ms": round(percentile(lags, 0.99), 2),
        "lag_max_ms": round(max(lags) / 1000.0, 2) if lags else float("nan"),
        "errors": errors,
        "lost": lost,
        "duplicates": tally.duplicates,
        "error_samples": tally.messages,
    }


def wait_for_port(port: int, proc: subprocess.Popen[bytes], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the server did not start")


def run_one(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="plait-load-") as tmp:
        schema = None
        if kind == "postgres":
            target = os.environ[PG_ENV]
            schema = f"plait_load_{uuid.uuid4().hex[:10]}"
        else:
            target = str(Path(tmp) / "load.db")
        child = [
            sys.executable,
            __file__,
            "--serve",
            "--kind",
            kind,
            "--target",
            target,
            "--port",
            str(port),
            "--workspace",
            tmp,
        ]
        if schema:
            child += ["--schema", schema]
        proc = subprocess.Popen(child)
        try:
            wait_for_port(port, proc)
            result = asyncio.run(drive(f"http://127.0.0.1:{port}", args))
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
            if schema:
                import psycopg
                from psycopg import sql

                with psycopg.connect(target, autocommit=True) as conn:
                    conn.execute(
                        sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                    )
    result["store"] = kind
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--store", choices=["sqlite", "postgres", "both"], default="both")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--observers", type=int, default=200)
    p.add_argument("--writers", type=int, default=20)
    p.add_argument("--think", type=float, default=0.05, help="pause between a writer's runs (s)")
    p.add_argument(
        "--drain", type=float, default=30.0, help="seconds observers may take to catch up"
    )
    p.add_argument("--json", action="store_true", help="print one JSON line per store")
    p.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="plait serve processes on one PostgreSQL schema (more than 1: a fleet)",
    )
    p.add_argument(
        "--route",
        choices=["rotate", "spread", "one"],
        default="rotate",
        help="fleet writers: each request to the next replica; writer i to replica i mod N; "
        "all to replica 0",
    )
    p.add_argument(
        "--kill",
        action="store_true",
        help="fleet: SIGKILL the replica with the most runs in progress halfway through",
    )
    p.add_argument(
        "--tool-calls",
        action="store_true",
        help="fleet: each run calls a shell tool that appends a line (implied by --kill)",
    )
    p.add_argument(
        "--steer",
        action="store_true",
        help="fleet: steer each run through another replica during its tool call "
        "(implies --tool-calls)",
    )
    p.add_argument(
        "--tool-seconds",
        type=float,
        default=0.2,
        help="fleet tool calls: how long each takes after it writes its line",
    )
    p.add_argument("--lease", type=float, default=6.0, help="fleet: each replica's --lease (s)")
    p.add_argument("--keep-logs", metavar="DIR", help="fleet: copy the replicas' logs here")
    p.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--kind", help=argparse.SUPPRESS)
    p.add_argument("--target", help=argparse.SUPPRESS)
    p.add_argument("--schema", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--workspace", help=argparse.SUPPRESS)
    p.add_argument("--replica-id", help=argparse.SUPPRESS)
    p.add_argument("--tool-log", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        serve(args)
        return
    if args.seconds <= 0 or args.observers < 1 or args.writers < 1 or args.replicas < 1:
        p.error("--seconds, --observers, --writers and --replicas must be positive")
    if args.kill and args.replicas < 2:
        p.error("--kill needs a fleet to survive it: --replicas 2 or more")
    if args.replicas > 1:
        from loadfleet import fleet_main  # this script's folder is on the path

        sys.exit(fleet_main(args))
    kinds = ["sqlite", "postgres"] if args.store == "both" else [args.store]
    failed = False
    for kind in kinds:
        if kind == "postgres" and not os.environ.get(PG_ENV):
            print(f"postgres: skipped (set {PG_ENV}=postgresql://postgres@127.0.0.1:5432/test)")
            continue
        r = run_one(kind, args)
        if args.json:
            print(json.dumps(r))
        else:
            print(
                f"{kind}: {r['observers']} observers, {r['writers']} writers, {r['seconds']} s: "
                f"{r['runs']} runs ({r['runs_per_s']}/s), {r['records_written']} records written, "
                f"{r['records_delivered']} delivered ({r['events_delivered']} events); "
                f"latency p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, max {r['max_ms']} ms; "
                f"loop lag p50 {r['lag_p50_ms']} ms, p99 {r['lag_p99_ms']} ms, "
                f"max {r['lag_max_ms']} ms; "
                f"errors {r['errors']}, lost {r['lost']}, duplicates {r['duplicates']}"
            )
            for sample in r["error_samples"]:
                print(f"  error: {sample}")
        failed = failed or r["errors"] > 0 or r["lost"] > 0
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
