"""Every public verb, driven with hostile values: it answers with a plait error and
leaves the store as it was, or it works.

The verbs are the functions in ``plait.__all__``, the classes a caller builds
to act (``Client``, the stores, ``DurableSessions``, ``LiveClients``) and the
plain (not ``async``) methods of the handles they return. Each call gets at least
one hostile argument (JSON nested past every limit, integers past 64 bits, bytes,
lone surrogates, control characters, a 100 000-character string, the wrong type)
and sane ones elsewhere. A call that raises must raise a
:class:`plait.errors.PlaitError` (bad input is also a ``ValueError``) and must
not have changed the store.

Any other exception fails the test, and so does a plait error raised after a
write, unless ``WRITES_THEN_RAISES`` names the verb (it names none). Bounded to
a few examples per verb so the whole run stays under a minute.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import plait
from plait.errors import PlaitError

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("PLAIT_HOSTILE_EXAMPLES", "12"))


def _nested(depth: int, kind: str) -> Any:
    value: Any = {} if kind == "dict" else []
    for _ in range(depth):
        value = {"a": value} if kind == "dict" else [value]
    return value


class _Opaque:
    """An object of no type plait knows."""


HOSTILE = st.one_of(
    st.sampled_from(
        [
            None, True, False, -1, 0, 2**70, -(2**70), 10**23, 1.5, float("nan"), float("inf"),
            b"bytes", bytearray(b"x"), "", " ", "\x00", "\ud800", "a\udcffb", "\x1b]0;pwned\x07",
            "x" * 100_000, [], {}, set(), (), "../../outside", "/", _Opaque(),
        ]
    ),
    st.builds(_nested, st.integers(65, 1200), st.sampled_from(["list", "dict"])),
    st.integers(),
    st.binary(max_size=16),
    st.text(max_size=16),
    st.dictionaries(st.text(max_size=4), st.integers() | st.text(max_size=4), max_size=3),
    st.lists(st.integers() | st.none(), max_size=3),
)

# verb -> where it writes before it refuses (a half-done write to make whole).
WRITES_THEN_RAISES: dict[str, str] = {}


class World:
    """A store with one session worth acting on, in a folder of its own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "plait.db"
        ws = root / "ws"
        ws.mkdir()
        self.client = plait.Client(ws, store=self.db)
        self.session = self.client.sessions.create(
            [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hello"},
                {"role": "assistant", "content": "hi"},
            ],
            title="hostile",
        )
        self.live = plait.LiveClients(self.client)
        self.live.attach(self.session, "observer-1")
        self.bearers = plait.DurableSessions(self.client.store)

    def fingerprint(self) -> str:
        """Everything the store holds, hashed (read through a connection of its own)."""
        with contextlib.closing(sqlite3.connect(self.db)) as db:
            return hashlib.sha256("\n".join(db.iterdump()).encode("utf-8", "replace")).hexdigest()

    def sane(self, param: inspect.Parameter) -> Any:
        """A value of the kind the parameter wants, for the arguments not under test."""
        hint = str(param.annotation)
        if "Session" in hint and "Sessions" not in hint:
            return self.session
        if "Client" in hint or "SessionHost" in hint:
            return self.client
        if "Store" in hint:
            return self.client.store
        if param.name in {"session_id", "id", "dst"}:
            return self.session.id
        if param.name == "client_id":
            return "observer-1"
        if "int" in hint:
            return 1
        if "Mapping" in hint or "dict" in hint:
            return {}
        if "str" in hint:
            return "x"
        return None


def _verbs(world: World) -> dict[str, Callable[..., Any]]:
    """Every verb under test, by a name that says where it lives."""
    verbs: dict[str, Callable[..., Any]] = {}
    for name in plait.__all__:
        obj = getattr(plait, name)
        if inspect.isfunction(obj) and not inspect.iscoroutinefunction(obj):
            verbs[name] = obj
    for cls in (plait.Client, plait.SQLiteStore, plait.DurableSessions, plait.LiveClients):
        verbs[cls.__name__] = cls
    handles = {
        "Session": world.session,
        "SessionCollection": world.client.sessions,
        "Client": world.client,
        "DurableSessions": world.bearers,
        "LiveClients": world.live,
    }
    skip = {"close", "delete", "acquire", "release", "release_idle", "purge"}
    for owner, handle in handles.items():
        for attr in dir(type(handle)):
            if attr.startswith("_") or attr in skip:
                continue
            member = inspect.getattr_static(type(handle), attr)
            if isinstance(member, property) or not callable(member):
                continue
            bound = getattr(handle, attr)
            if inspect.iscoroutinefunction(bound) or inspect.isasyncgenfunction(bound):
                continue
            verbs[f"{owner}.{attr}"] = bound
    return verbs


@contextlib.contextmanager
def _world() -> Iterator[World]:
    with tempfile.TemporaryDirectory(prefix="plait-hostile-") as tmp:
        root = Path(tmp)
        here = Path.cwd()
        os.chdir(root)  # a verb that writes a relative path writes here
        try:
            world = World(root)
            try:
                yield world
            finally:
                world.client.close()
        finally:
            os.chdir(here)


def _parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    return [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


with _world() as _probe:  # a verb without arguments has nothing to make hostile
    VERB_NAMES = sorted(name for name, fn in _verbs(_probe).items() if _parameters(fn))


@pytest.mark.parametrize("verb", VERB_NAMES)
def test_a_hostile_argument_is_a_plait_error_and_changes_nothing(verb: str) -> None:
    with _world() as world:
        fn = _verbs(world)[verb]
        params = _parameters(fn)

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        @given(data=st.data())
        def check(data: st.DataObject) -> None:
            target = data.draw(st.sampled_from(params), label="hostile parameter")
            args: list[Any] = []
            kwargs: dict[str, Any] = {}
            for param in params:
                if param is target:
                    value = data.draw(HOSTILE, label=param.name)
                elif param.default is not param.empty:
                    continue
                else:
                    value = world.sane(param)
                if param.kind is param.KEYWORD_ONLY:
                    kwargs[param.name] = value
                else:
                    args.append(value)
            if target.kind is not target.KEYWORD_ONLY and target.default is not target.empty:
                # An optional positional under test goes by name (the ones before it are skipped).
                kwargs[target.name] = args.pop()
            before = world.fingerprint()
            try:
                result = fn(*args, **kwargs)
            except PlaitError:
                if verb not in WRITES_THEN_RAISES:
                    assert world.fingerprint() == before, f"{verb} raised after writing"
                return
            except Exception as exc:
                raise AssertionError(
                    f"{verb}({args!r:.200}, {kwargs!r:.200}) leaked {type(exc).__name__}: "
                    f"{str(exc)[:200]}"
                ) from exc
            if inspect.iscoroutine(result):
                result.close()

        check()
