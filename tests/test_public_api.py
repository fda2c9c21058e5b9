"""The public API: what plait exports, its error hierarchy, its docstrings."""

from __future__ import annotations

import inspect
import types

import plait
import plait.errors as errors


def test_all_lists_exactly_the_public_names() -> None:
    # Sub-packages and modules become attributes of `plait` as a side effect of imports.
    public = {
        name for name, value in vars(plait).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(plait.__all__) - {"__version__"} == public
    for name in plait.__all__:
        assert hasattr(plait, name), name


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


def test_every_public_name_has_a_docstring() -> None:
    for name in plait.__all__:
        obj = getattr(plait, name)
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
