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
import plait.auth
import plait.interop
import plait.live
import plait.store
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
        self.live = plait.live.LiveClients(self.client)
        self.live.attach(self.session, "observer-1")
        self.bearers = plait.auth.DurableSessions(self.client.store)

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
    free = {
        plait: plait.__all__,
        plait.auth: ("actor_chain", "actor_chain_validate_scope_attenuation", "authenticate",
                     "bind_principal", "push_actor"),
        plait.interop: ("export_bundle", "import_bundle", "seed_from_jsonl", "to_jsonl",
                        "write_bundle"),
        plait.store: ("open_store",),
    }
    for module, names in free.items():
        for name in names:
            obj = getattr(module, name)
            if inspect.isfunction(obj) and not inspect.iscoroutinefunction(obj):
                verbs[name] = obj
    for cls in (plait.Client, plait.store.SQLiteStore, plait.auth.DurableSessions,
                plait.live.LiveClients):
        verbs[cls.__name__] = cls
    handles = {
        "Session": world.session,
        "SessionCollection": world.client.sessions,
        "Client": world.client,
        "SessionHost": world.client.host,
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


def _cases(world: World) -> dict[str, tuple[Callable[[Any], Any], Callable[[Any], bool]]]:
    """The newer options, each: how to pass it a value, and what an accepted value must be."""
    from plait.providers import ModelSettings
    from plait.tools.base import tool

    def fn(x: int) -> int:
        """Echo."""
        return x

    def whole(v: object) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v > 0

    cases: dict[str, tuple[Callable[[Any], Any], Callable[[Any], bool]]] = {}
    for cap in ("max_reply_chars", "max_tool_arguments_chars", "max_tool_output_chars"):
        cases[f"ModelSettings({cap})"] = (
            lambda v, cap=cap: getattr(ModelSettings(**{cap: v}), cap), whole
        )
        cases[f"ModelSettings.from_json({cap})"] = (
            lambda v, cap=cap: getattr(ModelSettings.from_json({cap: v}), cap), whole
        )
    cases["ModelSettings(idle_timeout)"] = (
        lambda v: ModelSettings(idle_timeout=v).idle_timeout,
        lambda v: isinstance(v, float) and 0 < v < float("inf"),
    )
    cases["session.settings.set(repeat_limit)"] = (
        lambda v: world.session.settings.set(repeat_limit=v) or v, whole
    )
    def flag(v: object) -> bool:
        return v is True or v is False

    cases["tool(idempotent)"] = (lambda v: tool(fn, idempotent=v).idempotent, flag)
    cases["tool(read_only)"] = (lambda v: tool(read_only=v)(fn).read_only, flag)
    cases["tool(name)"] = (
        lambda v: tool(fn, name=v).name, lambda v: isinstance(v, str) and bool(v.strip())
    )
    return cases


with _world() as _probe:
    NEW_OPTIONS = sorted(_cases(_probe))


@pytest.mark.parametrize("option", NEW_OPTIONS)
def test_a_hostile_value_for_a_newer_option_is_a_plait_error_or_a_value_of_its_kind(
    option: str,
) -> None:
    """The reply and output caps, the idle timeout, ``repeat_limit`` and a tool's flags:
    a value is refused with a plait error (nothing written) or kept as what it must be,
    never taken as whatever it was (a truthy ``"false"`` made a tool idempotent)."""
    with _world() as world:
        set_, kept = _cases(world)[option]

        @settings(
            max_examples=EXAMPLES * 4,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
            database=None,
        )
        @given(value=HOSTILE | st.sampled_from(["false", "0", "1", -0.0, 1e308, 1, 2]))
        def check(value: Any) -> None:
            before = world.fingerprint()
            try:
                result = set_(value)
            except PlaitError:
                assert world.fingerprint() == before, f"{option} raised after writing"
                return
            except Exception as exc:
                raise AssertionError(
                    f"{option}({value!r:.100}) leaked {type(exc).__name__}: {exc!s:.200}"
                ) from exc
            unset = value is None and result is None  # None leaves the default
            assert unset or kept(result), f"{option} took {value!r:.100} as {result!r:.100}"

        check()


def test_make_current_takes_only_a_session_of_its_own_client() -> None:
    """Another client's session, a bare id, a client, or anything else: a plait error,
    and the current session stays what it was."""
    with _world() as world, tempfile.TemporaryDirectory() as other_dir:
        other = plait.Client(Path(other_dir), store=Path(other_dir) / "other.db")
        try:
            foreign = other.sessions.create([{"role": "user", "content": "elsewhere"}])
            world.client.host.make_current(world.session)
            for value in (foreign, foreign.id, world.session.id, other, world.client, None, 1):
                with pytest.raises(PlaitError):
                    world.client.host.make_current(value)
                assert world.client.host.make_current(world.session) is world.session
        finally:
            other.close()
