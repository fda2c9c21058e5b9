"""Public names loaded on first use: a package's ``__getattr__`` and ``__dir__`` (PEP 562).

A package that re-exports names of heavy modules (the stores, the server's auth,
the providers and their SDK adapters) would load all of them on import. With
:func:`lazy_names` it loads none: the first use of a name imports its module and
keeps the value in the package, so later uses cost a dictionary lookup. Type
checkers and readers see the names in the package's ``if TYPE_CHECKING:``
imports; ``tests/test_public_api.py`` checks those against the table.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, namespace: dict[str, Any], exports: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return the ``__getattr__`` and ``__dir__`` of a package whose names load lazily.

    Args:
        package: the package's ``__name__`` (for the error).
        namespace: the package's ``globals()``, where a loaded value is kept.
        exports: each lazy public name and the module it comes from.
    """

    def getattr_(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted({*namespace, *exports})

    return getattr_, dir_
