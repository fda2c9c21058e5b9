"""Shared fixtures: every store plait ships, and a guard against reaching the network."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from plait import Client
from plait.store import MemoryStore, SQLiteStore, Store

STORE_KINDS = ["sqlite", "memory"]


def make_store(kind: str, tmp_path: Path) -> Store:
    """Open a fresh store of the given kind."""
    if kind == "sqlite":
        return SQLiteStore(tmp_path / "plait.db")
    if kind == "memory":
        return MemoryStore()
    raise AssertionError(kind)


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Each store plait ships, fresh for every test."""
    s = make_store(request.param, tmp_path)
    yield s
    s.close()


@pytest.fixture
def client(store: Store, tmp_path: Path) -> Iterator[Client]:
    """A client on each store, in a temporary workspace."""
    ws = tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=store) as c:
        yield c


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any test that tries to reach a host other than this machine."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and host not in {"127.0.0.1", "localhost", "::1"} and not (
            self.family == socket.AF_UNIX
        ):
            raise RuntimeError(f"test tried to reach the network: {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture(autouse=True)
def _plait_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep every test's default store out of the user's home."""
    monkeypatch.setenv("PLAIT_HOME", str(tmp_path_factory.mktemp("plait-home")))
    monkeypatch.delenv("PLAIT_STORE", raising=False)
