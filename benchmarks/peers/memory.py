"""Peak memory of one full load, each in a fresh subprocess: plait beside SQLiteSession.

The parent builds one store per reader (the same synthetic transcript), then starts a
child per load. The child imports its library and opens the store, notes its resident
set as the baseline, resets the kernel's high-water mark (``/proc/self/clear_refs``),
loads the whole transcript, and prints the high-water mark (``VmHWM``) with the load's
seconds. The peak is the whole process's (Python objects, the driver's buffers, the
fetched rows), what a server would need; ``above baseline`` is the load's own share.
Where the mark cannot be reset, ``getrusage(RUSAGE_SELF).ru_maxrss`` is the peak.

Usage (the child side): python memory.py child READER DB SESSION_ID
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

METHOD = "the child's VmHWM, reset after opening the store (clear_refs)"
CHUNK = 10_000

__all__ = ["METHOD", "build_stores", "measure_memory"]


def _status_mb(field: str) -> float | None:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return None


def _baseline_mb() -> float:
    """The resident set now, then the high-water mark reset to it (where Linux allows)."""
    now = _status_mb("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")
    except OSError:
        now = None
    return now if now is not None else _peak_mb()


def _peak_mb() -> float:
    hwm = _status_mb("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_stores(tmp: Path, size: int, with_agents: bool) -> dict[str, tuple[str, str]]:
    """Build the stores; return reader name -> (database path, session id)."""
    from peer_plait import plait_item
    from transcript import step

    import plait

    out: dict[str, tuple[str, str]] = {}
    db = tmp / "memory-plait.db"
    with plait.Client(tmp, store=db) as client:
        s = client.session
        for start in range(0, size, CHUNK):
            s.transcript.inject_many(
                [plait_item(step(i)) for i in range(start, min(size, start + CHUNK))]
            )
        sid = s.id
    out["plait history(full=True)"] = (str(db), sid)
    if hasattr(plait.Session, "iter_history"):
        out["plait iter_history()"] = (str(db), sid)
    if with_agents:
        from agents import SQLiteSession
        from peer_openai_agents import agents_item

        db = tmp / "memory-agents.db"
        session = SQLiteSession("memory", db)

        async def fill() -> None:
            for start in range(0, size, CHUNK):
                end = min(size, start + CHUNK)
                await session.add_items([agents_item(step(i)) for i in range(start, end)])

        asyncio.run(fill())
        session.close()
        out["SQLiteSession.get_items()"] = (str(db), "memory")
    return out


def measure_memory(
    stores: dict[str, tuple[str, str]], rounds: int, log: Any
) -> dict[str, list[dict[str, float]]]:
    """Run every reader ``rounds`` times, interleaved; return their children's reports."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in stores}
    for r in range(rounds):
        for name, (db, sid) in stores.items():
            done = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "child", name, db, sid],
                capture_output=True,
                text=True,
                check=True,
            )
            report = json.loads(done.stdout.strip().splitlines()[-1])
            runs[name].append(report)
            log(
                f"  round {r + 1}: {name}: peak {report['peak_mb']:,.0f} MB "
                f"({report['seconds']:.1f} s, {report['count']:,} items)"
            )
    return runs


def _child(reader: str, db: str, sid: str) -> dict[str, float]:
    if reader.startswith("plait"):
        import plait

        client = plait.Client(Path(db).parent, store=db)
        session = client.open(sid)
        baseline = _baseline_mb()
        start = time.perf_counter()
        if reader == "plait iter_history()":
            count = sum(1 for _ in session.transcript.iter_history())  # type: ignore[attr-defined]
        else:
            count = len(session.history(full=True))
    else:
        from agents import SQLiteSession

        agents_session = SQLiteSession(sid, db)
        baseline = _baseline_mb()
        start = time.perf_counter()
        count = len(asyncio.run(agents_session.get_items()))
    seconds = time.perf_counter() - start
    return {"baseline_mb": baseline, "peak_mb": _peak_mb(), "seconds": seconds, "count": count}


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "child":
        sys.exit(__doc__)
    print(json.dumps(_child(sys.argv[2], sys.argv[3], sys.argv[4])))
