"""No module reaches into another room's private names.

The import-linter contract keeps imports pointing inward; this keeps the parts
talking through public verbs. A *room* is a top-level module or package of
``plait`` (``plait.session``, ``plait.store``, ``plait.server`` ...). A name with
one leading underscore is private to the room that defines it: another room may
neither import it nor read it off an object (``client._lookup``,
``handle._writer``), nor import a room's private module (``plait.store._flock``).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import plait

SRC = Path(plait.__file__).parent


# The public API of named tuples (and ``urllib.parse`` results) wears an underscore.
_NAMEDTUPLE = frozenset({"_replace", "_asdict", "_fields", "_make"})


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in _NAMEDTUPLE


def _room(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def _modules() -> dict[str, ast.Module]:
    out: dict[str, ast.Module] = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = ast.parse(path.read_text(), str(path))
    return out


def _defined(tree: ast.Module) -> set[str]:
    """Every private name a module defines: functions, classes, attributes, slots."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)  # __slots__ entries, dataclass fields by name
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if _private(n)}


def _reaches(modules: dict[str, ast.Module]) -> list[str]:
    by_room: dict[str, set[str]] = defaultdict(set)
    for name, tree in modules.items():
        by_room[_room(name)] |= _defined(tree)
    found: list[str] = []
    for name, tree in modules.items():
        room = _room(name)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                target = node.module
                if not target.startswith("plait") or _room(target) == room:
                    continue
                if any(_private(p) for p in target.split(".")[2:]):
                    found.append(f"{name}: imports the private module {target}")
                for alias in node.names:
                    if _private(alias.name):
                        found.append(f"{name}: imports {target}.{alias.name}")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    target = alias.name
                    if target.startswith("plait") and _room(target) != room and any(
                        _private(p) for p in target.split(".")[2:]
                    ):
                        found.append(f"{name}: imports the private module {target}")
            elif isinstance(node, ast.Attribute) and _private(node.attr):
                base = node.value
                if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                    continue
                if node.attr not in by_room[room]:
                    found.append(f"{name}:{node.lineno}: reads .{node.attr}")
    return found


def test_no_room_reaches_into_another_rooms_private_names() -> None:
    assert _reaches(_modules()) == []


def test_the_check_sees_each_kind_of_reach() -> None:
    session = ast.parse(
        "class Host:\n"
        "    def _lookup(self, i):\n"
        "        self._handles = {}\n"
        "        return self._handles.get(i)\n"
    )
    server = ast.parse(
        "from plait.session.host import _ephemeral\n"
        "from plait.store._flock import lock\n"
        "def route(client):\n"
        "    return client._lookup('x')\n"
    )
    same_room = ast.parse("def part(host):\n    return host._handles\n")
    found = _reaches(
        {"plait.session.host": session, "plait.server.app": server, "plait.session.x": same_room}
    )
    assert found == [
        "plait.server.app: imports plait.session.host._ephemeral",
        "plait.server.app: imports the private module plait.store._flock",
        "plait.server.app:4: reads ._lookup",
    ]
