"""The store worker: calls off the event loop, in order, waited for through cancellation."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import os
import select
import subprocess
import sys
import threading
import weakref
from pathlib import Path

import pytest

from plait.run import StoreWorker

_NAME: contextvars.ContextVar[str] = contextvars.ContextVar("name", default="none")


def test_calls_run_on_one_other_thread_in_the_order_they_were_made() -> None:
    worker = StoreWorker()
    seen: list[tuple[int, int]] = []

    async def main() -> list[int]:
        loop_thread = threading.get_ident()

        def call(n: int) -> int:
            seen.append((n, threading.get_ident()))
            assert threading.get_ident() != loop_thread
            return n * 2

        return list(await asyncio.gather(*(worker.run(lambda n=n: call(n)) for n in range(20))))

    try:
        assert asyncio.run(main()) == [n * 2 for n in range(20)]
    finally:
        worker.close()
    assert [n for n, _ in seen] == list(range(20))
    assert len({t for _, t in seen}) == 1


def test_an_error_is_raised_to_the_caller_and_the_worker_goes_on() -> None:
    worker = StoreWorker()

    def fail() -> None:
        raise KeyError("gone")

    async def main() -> int:
        with pytest.raises(KeyError):
            await worker.run(fail)
        return await worker.run(lambda: 7)

    try:
        assert asyncio.run(main()) == 7
    finally:
        worker.close()


def test_a_call_sees_the_callers_context_variables() -> None:
    worker = StoreWorker()

    async def main() -> str:
        _NAME.set("caller")
        return await worker.run(_NAME.get)

    try:
        assert asyncio.run(main()) == "caller"
    finally:
        worker.close()


_HELD: contextvars.ContextVar[object] = contextvars.ContextVar("held", default=None)


def test_what_a_call_ran_is_let_go_before_its_caller_goes_on() -> None:
    """An object only a call and its context held goes when its caller drops it, in the
    caller's thread (a session's finalizer gives its sandbox back there, not later)."""
    worker = StoreWorker()

    class Held:
        pass

    async def main() -> weakref.ref[Held]:
        held = Held()
        token = _HELD.set(held)
        await worker.run(lambda held=held: held is not None)
        _HELD.reset(token)
        gone = weakref.ref(held)
        del held
        return gone

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the worker's thread and the caller's interleave finely
    try:
        for _ in range(200):
            assert asyncio.run(main())() is None  # no collection needed: nothing else holds it
    finally:
        sys.setswitchinterval(switch)
        worker.close()


def test_a_cancelled_caller_waits_for_its_call_and_is_cancelled_after() -> None:
    worker = StoreWorker()
    started, release = threading.Event(), threading.Event()
    done: list[str] = []

    def write() -> str:
        started.set()
        release.wait(30)
        done.append("written")
        return "written"

    async def main() -> None:
        task = asyncio.ensure_future(worker.run(write))
        await asyncio.to_thread(started.wait, 30)
        task.cancel()
        await asyncio.sleep(0)
        assert not task.done()  # still waiting for the write it handed over
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert done == ["written"]

    try:
        asyncio.run(main())
    finally:
        worker.close()


def test_run_through_returns_what_was_written_with_the_cancellation() -> None:
    worker = StoreWorker()
    started, release = threading.Event(), threading.Event()

    def write() -> str:
        started.set()
        release.wait(30)
        return "record"

    async def main() -> tuple[str, asyncio.CancelledError | None]:
        outcome: list[tuple[str, asyncio.CancelledError | None]] = []

        async def caller() -> None:
            outcome.append(await worker.run_through(write))

        task = asyncio.ensure_future(caller())
        await asyncio.to_thread(started.wait, 30)
        task.cancel()
        release.set()
        await task  # run_through does not raise the cancellation itself
        return outcome[0]

    try:
        value, cancelled = asyncio.run(main())
    finally:
        worker.close()
    assert value == "record" and isinstance(cancelled, asyncio.CancelledError)


def test_a_closed_worker_starts_again_on_the_next_call() -> None:
    worker = StoreWorker()
    assert asyncio.run(worker.run(lambda: 1)) == 1
    worker.close()
    assert asyncio.run(worker.run(lambda: 2)) == 2
    worker.close()


def _store_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "plait-store" and t.is_alive()}


def test_a_worker_nobody_holds_ends_its_thread() -> None:
    # Its own thread, told apart from other tests' workers (whose threads may end
    # meanwhile, as the collection below finds them unreferenced too).
    before = _store_threads()
    worker = StoreWorker()
    assert asyncio.run(worker.run(lambda: 1)) == 1
    (mine,) = _store_threads() - before
    del worker
    gc.collect()
    mine.join(timeout=30)  # the thread sees the end mark and returns
    assert not mine.is_alive()


def test_a_forked_child_runs_its_calls_on_a_thread_of_its_own() -> None:
    worker = StoreWorker()
    parent_thread = asyncio.run(worker.run(threading.get_ident))
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            child_thread = asyncio.run(worker.run(threading.get_ident))
            os.write(write, f"{child_thread != threading.get_ident()}".encode())
            worker.close()
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    try:
        answer = os.read(read, 16)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(read)
    assert os.waitstatus_to_exitcode(status) == 0 and answer == b"True"
    assert asyncio.run(worker.run(threading.get_ident)) == parent_thread  # the parent's goes on
    worker.close()


def test_a_child_forked_while_a_thread_held_the_workers_lock_still_runs_calls() -> None:
    """Another thread may be handing a call over (holding the worker's lock) at the fork."""
    worker = StoreWorker()
    asyncio.run(worker.run(threading.get_ident))
    read, write = os.pipe()
    with worker._lock:  # held, as a thread in the middle of handing a call over holds it
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                os.write(write, str(asyncio.run(worker.run(lambda: 42))).encode())
                code = 0
            finally:
                os._exit(code)
    os.close(write)
    try:
        ready = select.select([read], [], [], 30)[0]
        answer = os.read(read, 16) if ready else b"(no answer: the child waits on the lock)"
    finally:
        if not ready:
            os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(read)
    assert answer == b"42"
    worker.close()


def test_calls_handed_over_run_before_the_process_exits(tmp_path: Path) -> None:
    """A program that never closes its worker still gets the writes it handed over."""
    done = tmp_path / "done"
    program = f"""
import asyncio, time
from pathlib import Path
from plait.run import StoreWorker
worker = StoreWorker()
started = []

def slow_write():
    started.append(1)
    time.sleep(0.3)
    Path({str(done)!r}).write_text("written")

async def main():
    asyncio.get_running_loop().create_task(worker.run(slow_write))
    while not started:
        await asyncio.sleep(0.001)

loop = asyncio.new_event_loop()
loop.run_until_complete(main())  # returns while the write is still going
"""
    subprocess.run([sys.executable, "-c", program], check=True, timeout=60)
    assert done.read_text() == "written"
