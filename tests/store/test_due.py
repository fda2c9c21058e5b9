"""DueCall: a call made a delay after it is asked for, on one kept thread."""

from __future__ import annotations

import gc
import os
import select
import threading
import time
import weakref

from plait.store.sql._due import DueCall

DELAY = 0.05


def _wait(cond: threading.Event, timeout: float = 30.0) -> None:
    assert cond.wait(timeout), "the call was never made"


def test_a_call_is_made_once_however_often_it_is_asked_for() -> None:
    made: list[float] = []
    done = threading.Event()

    def call() -> None:
        made.append(time.monotonic())
        done.set()

    due = DueCall(call, DELAY, name="test-due")
    asked = time.monotonic()
    for _ in range(5):
        due.arm()
    _wait(done)
    time.sleep(DELAY * 4)  # room for a second call, were one asked for
    assert len(made) == 1 and made[0] >= asked + DELAY
    due.close()


def test_one_thread_makes_every_call() -> None:
    threads: list[int] = []
    done = threading.Event()

    def call() -> None:
        threads.append(threading.get_ident())
        done.set()

    due = DueCall(call, DELAY, name="test-due-one-thread")  # no other test's thread
    for _ in range(4):
        done.clear()
        due.arm()
        _wait(done)
    assert len(threads) == 4 and len(set(threads)) == 1
    assert sum(t.name == "test-due-one-thread" for t in threading.enumerate()) == 1
    due.close()


def test_close_drops_the_pending_call_and_ends_the_thread() -> None:
    made: list[int] = []
    due = DueCall(lambda: made.append(1), DELAY, name="test-due-closed")
    due.arm()
    due.close()
    due.arm()  # after close: nothing
    time.sleep(DELAY * 4)
    assert made == []
    deadline = time.monotonic() + 30
    while any(t.name == "test-due-closed" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the thread did not end"
        time.sleep(0.01)


class _Owner:
    def __init__(self) -> None:
        self.calls = 0
        self.due = DueCall(self.tick, DELAY, name="test-due-owner")
        self.done = threading.Event()

    def tick(self) -> None:
        self.calls += 1
        self.done.set()


def test_an_owner_dropped_while_nothing_is_asked_is_collected() -> None:
    owner = _Owner()
    owner.due.arm()
    _wait(owner.done)
    gone = weakref.ref(owner)
    del owner
    gc.collect()
    assert gone() is None  # the kept thread held its method weakly


def test_a_forked_child_starts_a_thread_of_its_own() -> None:
    r, w = os.pipe()
    due = DueCall(lambda: os.write(w, f"{os.getpid()}\n".encode()), DELAY, name="test-due-fork")
    with os.fdopen(r) as calls:
        due.arm()
        assert calls.readline() == f"{os.getpid()}\n"
        pid = os.fork()
        if pid == 0:  # the child: the parent's thread is not here; its first arm starts one
            try:
                due.arm()
                time.sleep(30)  # the parent reads the call, then ends this process
            finally:
                os._exit(0)
        try:
            assert select.select([calls], [], [], 30)[0], "the child's call was never made"
            assert calls.readline() == f"{pid}\n"
        finally:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            os.close(w)
    due.close()


def test_a_child_forked_while_the_parent_held_the_lock_still_arms() -> None:
    """The parent's thread may hold the lock at the moment of the fork: the child's is its own."""
    r, w = os.pipe()
    due = DueCall(lambda: os.write(w, b"1"), DELAY, name="test-due-fork-held")
    due.arm()
    with os.fdopen(r, "rb", buffering=0) as calls:
        assert select.select([calls], [], [], 30)[0] and calls.read(1) == b"1"
        with due._cond:  # held here, as the parent's thread holds it between its waits
            pid = os.fork()
            if pid == 0:
                try:
                    due.arm()  # would wait forever on the parent's lock
                    time.sleep(30)
                finally:
                    os._exit(0)
        try:
            assert select.select([calls], [], [], 30)[0], "the child's call was never made"
            assert calls.read(1) == b"1"
        finally:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            os.close(w)
    due.close()
