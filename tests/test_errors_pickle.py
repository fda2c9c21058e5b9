"""Every plait error survives pickling: a worker process or a task queue sends it back whole."""

from __future__ import annotations

import inspect
import pickle

import pytest

import plait.errors as errors

SAMPLES: dict[str, object] = {
    "str": "sample",
    "int": 3,
    "float": 1.5,
    "bool": True,
    "tuple": ("a", "b"),
    "list": ["a", "b"],
    "dict": {"k": "v"},
}


def _sample(annotation: str) -> object:
    """A value of the annotated type (the first alternative of a union that has one)."""
    for part in (p.strip() for p in annotation.split("|")):
        head = part.split("[", 1)[0]
        if head in SAMPLES:
            return SAMPLES[head]
        if head == "None":
            continue
        if head in ("Mapping", "Sequence", "object", "Any"):
            return SAMPLES["tuple"] if head == "Sequence" else "sample"
    return None


def _error_classes() -> list[type[errors.PlaitError]]:
    found = {
        obj
        for name in errors.__all__
        if isinstance(obj := getattr(errors, name), type) and issubclass(obj, errors.PlaitError)
    }
    return sorted(found, key=lambda c: c.__name__)


def _made(cls: type[errors.PlaitError]) -> errors.PlaitError:
    params = [
        p
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if not params:
        return cls("what went wrong")
    args, kwargs = [], {}
    for p in params:
        if p.default is not p.empty:
            continue
        # The errors' modules postpone annotations: each is the text written.
        value = _sample(str(p.annotation))
        if p.kind is p.KEYWORD_ONLY:
            kwargs[p.name] = value
        else:
            args.append(value)
    return cls(*args, **kwargs)


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_an_error_unpickles_as_the_same_error(cls: type[errors.PlaitError]) -> None:
    error = _made(cls)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is cls
    assert str(again) == str(error) and again.args == error.args
    assert vars(again) == vars(error)
    assert isinstance(again, errors.PlaitError)
