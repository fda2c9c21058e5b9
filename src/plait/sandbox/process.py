"""Run one tool process: bounded output, a timeout, and the whole tree killed at the end.

Both backends start their processes here; they differ only in the argv (the
``isolated`` backend wraps the command in bubblewrap) and in how a tree is
found to kill (a pid namespace there; the process group, its descendants and
every holder of the output pipe here).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CommandResult", "kill_tree", "run_argv"]

_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class CommandResult:
    """What one command did."""

    exit_code: int | None
    """Its exit status; negative for a signal, None when plait stopped it."""
    output: bytes
    """Its stdout and stderr together, cut at the output limit."""
    timed_out: bool = False
    """Whether it was still running at its timeout (and so was killed)."""
    output_limited: bool = False
    """Whether it wrote more than the output limit (and so was stopped)."""


def _pipe_inode(fd: int) -> str | None:
    try:
        return f"pipe:[{os.fstat(fd).st_ino}]"
    except OSError:
        return None


def _processes() -> dict[int, tuple[int, int]]:
    """Every visible process as ``pid -> (ppid, session id)``."""
    table: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        table[int(entry)] = (int(fields[1]), int(fields[3]))
    return table


def _holders(pipe: str) -> set[int]:
    """Processes holding ``pipe`` open (a daemon that left the tree still writes to it)."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{entry}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry}/fd/{fd}") == pipe:
                        found.add(int(entry))
                        break
    return found


def kill_tree(pid: int, pipe: str | None = None) -> None:
    """SIGKILL ``pid``, its process group, its descendants and whoever holds ``pipe``.

    Each found process is stopped first and the search repeated until it
    finds nothing new, so a process forking while it is being killed cannot
    leave a child behind (a ``setsid`` child included: it keeps its parent or
    the output pipe).
    """
    stopped: set[int] = set()
    while True:
        table = _processes()
        tree = {pid}
        grew = True
        while grew:
            grew = False
            for child, (ppid, _sid) in table.items():
                if ppid in tree and child not in tree:
                    tree.add(child)
                    grew = True
        tree |= {p for p, (_ppid, sid) in table.items() if sid == pid}
        if pipe is not None:
            tree |= _holders(pipe)
        tree.discard(os.getpid())
        new = tree - stopped
        if not new:
            break
        for p in new:
            with contextlib.suppress(OSError):
                os.kill(p, signal.SIGSTOP)
        stopped |= new
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    for p in stopped:
        with contextlib.suppress(OSError):
            os.kill(p, signal.SIGKILL)
    # SIGKILL takes effect asynchronously: wait (briefly) until each one is gone or a
    # zombie, so nothing of the command still runs when the call returns.
    for _ in range(400):
        if not any(_running(p) for p in stopped):
            break
        time.sleep(0.005)


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :][:1] not in ("Z", "X")


async def run_argv(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    timeout: float,
    output_limit: int,
    stdin: bytes | None = None,
    kill: Callable[[int, str | None], None] = kill_tree,
    pass_fds: Sequence[int] = (),
) -> CommandResult:
    """Run ``argv`` in a new session and return what it did; it never outlives this call.

    ``kill(pid, pipe)`` ends the process tree when the command times out, writes
    past ``output_limit`` or the awaiting task is cancelled (the cancellation is
    re-raised after the kill). ``pass_fds`` are descriptors the command inherits
    (as :class:`subprocess.Popen` passes them).
    """
    # The output pipe is made here so its inode is known: whoever still holds its
    # write end when the call ends belongs to the command, whatever its session.
    read_end, write_end = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=write_end,
            stderr=write_end,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
        )
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    pipe = _pipe_inode(read_end)
    reader = asyncio.StreamReader(limit=_CHUNK)
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_end, "rb", buffering=0)
    )
    chunks: list[bytes] = []
    size = 0
    limited = False

    async def collect() -> None:
        nonlocal size, limited
        if stdin is not None and proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(stdin)
                await proc.stdin.drain()
            proc.stdin.close()
        while chunk := await reader.read(_CHUNK):
            room = output_limit - size
            if len(chunk) > room:
                chunks.append(chunk[:room])
                size = output_limit
                limited = True
                return
            chunks.append(chunk)
            size += len(chunk)
        await proc.wait()

    try:
        await asyncio.wait_for(collect(), timeout)
    except TimeoutError:
        await _end(proc, kill, pipe)
        return CommandResult(None, b"".join(chunks), timed_out=True)
    except BaseException:  # cancelled: the command must not outlive the run
        await _end(proc, kill, pipe)
        raise
    finally:
        transport.close()
    if limited:
        await _end(proc, kill, pipe)
        return CommandResult(None, b"".join(chunks), output_limited=True)
    return CommandResult(proc.returncode, b"".join(chunks))


async def _end(
    proc: asyncio.subprocess.Process, kill: Callable[[int, str | None], None], pipe: str | None
) -> None:
    await asyncio.to_thread(kill, proc.pid, pipe)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    await asyncio.shield(proc.wait())
