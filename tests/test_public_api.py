"""The public API: what plait exports, its error hierarchy, its docstrings."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
import types

import pytest

import plait
import plait.errors as errors


def test_all_lists_exactly_the_public_names() -> None:
    for name in plait.__all__:  # each loads on first use (see plait/_lazy.py)
        assert hasattr(plait, name), name
    # Sub-packages and modules become attributes of `plait` as a side effect of imports.
    public = {
        name for name, value in vars(plait).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(plait.__all__) - {"__version__"} == public
    assert set(plait.__all__) <= set(dir(plait))
    with pytest.raises(AttributeError):
        plait.NoSuchName  # noqa: B018


def _imports_of(kind: str, *packages: str) -> None:
    """Check a lazy package's table against its TYPE_CHECKING imports, name for name."""
    for package in packages:
        module = importlib.import_module(package)
        tree = ast.parse(inspect.getsource(module))
        typed: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
                for stmt in node.body:
                    if isinstance(stmt, ast.ImportFrom) and stmt.module:
                        typed.update({a.name: stmt.module for a in stmt.names})
        assert typed, package
        for name, source in typed.items():
            assert getattr(module, name) is getattr(importlib.import_module(source), name), (
                kind, package, name)


def test_the_lazy_tables_match_the_names_type_checkers_see() -> None:
    _imports_of("lazy", "plait", "plait.store", "plait.providers")
    assert set(plait._EXPORTS) == set(plait.__all__) - {"__version__"}


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
        capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL,
    ).stdout
    return set(out.split())


_HEAVY = {
    "plait.auth", "plait.client", "plait.session", "plait.run", "plait.providers",
    "plait.providers.local", "plait.store.postgres", "plait.server", "plait.interop",
    "psycopg", "asyncio",
}


def test_import_plait_loads_none_of_the_library() -> None:
    loaded = _modules_after("import plait")
    assert not loaded & _HEAVY, sorted(loaded & _HEAVY)
    assert {m for m in loaded if m.startswith("plait.")} <= {"plait._lazy"}


def test_a_sqlite_client_never_loads_the_postgres_store_or_a_provider_sdk() -> None:
    loaded = _modules_after(
        "import tempfile\nfrom plait import Client\n"
        "d = tempfile.mkdtemp()\nc = Client(d, store=d + '/x.db')\n"
        "c.session.inject({'role': 'user', 'content': 'hi'})\nc.close()"
    )
    assert "plait.client" in loaded
    banned = {"plait.store.postgres", "psycopg", "plait.providers.openai",
              "plait.providers.anthropic", "plait.providers.local", "plait.auth"}
    assert not loaded & banned, sorted(loaded & banned)


def test_plait_help_loads_no_command_and_no_store() -> None:
    loaded = _modules_after(
        "import contextlib, io\nfrom plait.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])"
    )
    commands = {m for m in loaded if m.startswith("plait.cli.") and not m.startswith(
        "plait.cli._")}
    assert commands == set(), sorted(commands)
    assert not loaded & _HEAVY, sorted(loaded & _HEAVY)
    # Nor the store or the record model: the default store file is named when a command runs.
    assert not {m for m in loaded if m.startswith(("plait.store", "plait.records"))}, sorted(
        m for m in loaded if m.startswith(("plait.store", "plait.records")))


def test_every_error_derives_from_plait_error() -> None:
    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.PlaitError), name
        assert cls.__doc__, name
        assert name in (errors.__doc__ or ""), f"{name} missing from the drawn hierarchy"


def test_bad_input_errors_are_also_value_errors() -> None:
    assert issubclass(errors.InvalidArgumentError, ValueError)
    assert issubclass(errors.InvalidMessageError, ValueError)
    assert issubclass(errors.UnknownOptionError, ValueError)
    assert issubclass(errors.SessionNotFoundError, LookupError)


# Where the names a user imports live (D411): the top level, and one module per concern.
_PUBLIC_MODULES = (
    "plait", "plait.auth", "plait.client", "plait.compaction", "plait.context", "plait.interop",
    "plait.lineage", "plait.live", "plait.records", "plait.run", "plait.sandbox", "plait.session",
    "plait.store", "plait.views",
)


def test_every_public_name_has_a_docstring() -> None:
    named = [
        (f"{package}.{name}", getattr(module, name))
        for package in _PUBLIC_MODULES
        for module in [importlib.import_module(package)]
        for name in module.__all__
    ]
    for name, obj in named:
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), name
            # Members a class gets from its plait bases (the faces of Session) count too.
            mro = inspect.getmro(obj) if inspect.isclass(obj) else (obj,)
            for klass in [k for k in mro if k.__module__.startswith("plait")]:
                for attr, member in vars(klass).items():
                    public = not attr.startswith("_")
                    if not public or not (callable(member) or isinstance(member, property)):
                        continue
                    assert inspect.getdoc(member), f"{name}.{attr} ({klass.__name__})"


def test_the_cli_table_names_each_command_and_its_help() -> None:
    import click

    from plait.cli import COMMANDS, cli

    ctx = click.Context(cli)
    for name, (module, attr, summary) in COMMANDS.items():
        command = cli.get_command(ctx, name)
        assert command is getattr(importlib.import_module(module), attr)
        assert command is not None and command.name == name
        for limit in (30, 45, 80, 200):
            stand_in = click.Command(name, help=summary)
            assert stand_in.get_short_help_str(limit) == command.get_short_help_str(limit), name
