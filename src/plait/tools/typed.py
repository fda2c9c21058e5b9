"""A typed function's parameters as a JSON schema, and the check of what a model sent.

pydantic does both (D195): the parameters become the fields of a generated
model (``extra="forbid"``), its JSON schema is what the model is shown, and
what the model sends is validated by that model in strict JSON mode, so
``"3"`` is not an ``int`` and a nested model's fields are checked too. The
schema is trimmed for the model: no ``title``, no ``default`` (an argument
left out takes the function's own default), an ``Optional`` parameter that
defaults to ``None`` is shown as its inner type, and an enum is its values.
Argument descriptions come from ``Annotated[..., Field(description=...)]``,
else from the docstring's ``Args:`` section (Google, numpy or reST style,
read by ``docstring_parser``).
"""

from __future__ import annotations

import inspect
import json
import typing
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import docstring_parser
import pydantic
import pydantic.json_schema
import pydantic_core
from pydantic import ConfigDict, Field, create_model

from plait.errors import ToolError, ToolSchemaError

__all__ = ["Described", "describe", "result_text"]

_SUBSCHEMA_KEYS = ("items", "additionalProperties", "not", "contains", "propertyNames")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "$defs", "patternProperties")
_DROPPED = ("title", "default")


def _trim(schema: Any) -> Any:
    """The schema without titles and defaults; an enum keeps only its values (and words)."""
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROPPED:
            continue
        if key in _SUBSCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: _trim(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMA_LISTS and isinstance(value, list):
            out[key] = [_trim(sub) for sub in value]
        elif key in _SUBSCHEMA_KEYS:
            out[key] = _trim(value)
        else:
            out[key] = value
    if "enum" in out:
        out.pop("type", None)
    return out


def _drop_null(schema: dict[str, Any]) -> dict[str, Any]:
    """``anyOf [X, null]`` as X: the argument may be left out instead (its default is None)."""
    options = schema.get("anyOf")
    if not isinstance(options, list):
        return schema
    kept = [o for o in options if o != {"type": "null"}]
    if len(kept) != 1 or len(kept) == len(options):
        return schema
    rest = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**kept[0], **rest}


def _where(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "arguments"


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else f"{text[:57]}..."


def explain(exc: pydantic.ValidationError) -> str:
    """The errors of a validation, one phrase each, naming the field (for the model to read)."""
    phrases = []
    for error in exc.errors(include_url=False):
        where = _where(tuple(error["loc"]))
        if error["type"] == "missing":
            phrases.append(f"missing {where!r}")
        elif error["type"] == "extra_forbidden":
            phrases.append(f"unknown {where!r}")
        else:
            phrases.append(f"{where!r}: {error['msg']} (got {_shown(error.get('input'))})")
    return "; ".join(phrases)


@dataclass(frozen=True, slots=True)
class Described:
    """A function's tool description: its words, its JSON schema, and its argument check."""

    description: str
    """The docstring's first paragraph (sections such as ``Args:`` left out)."""
    parameters: dict[str, Any]
    """The JSON schema of the arguments (an object schema)."""
    check: Callable[[Mapping[str, Any]], dict[str, Any]]
    """Validates what the model sent; returns the keyword arguments to call with.

    Raises :class:`~plait.errors.ToolError` naming each bad field."""


def _docstring(func: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(func) or ""
    try:
        parsed = docstring_parser.parse(doc)
    except docstring_parser.ParseError:  # a docstring is prose first: keep it as it is
        return doc.split("\n\n")[0], {}
    text = parsed.description or ""
    words = {p.arg_name: p.description for p in parsed.params if p.description}
    return text.split("\n\n")[0].strip(), words


def describe(func: Callable[..., Any], *, skip_first: bool = False) -> Described:
    """Describe ``func`` as a tool: the schema of its parameters and the check of arguments.

    ``skip_first`` leaves the first parameter out (the tool's context).

    Raises:
        ToolSchemaError: a parameter without an annotation, of a type JSON cannot
            carry (or pydantic does not know), or passed only by position or as ``*args``.
    """
    shown = getattr(func, "__name__", repr(func))
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except (NameError, TypeError) as exc:
        raise ToolSchemaError(f"tool {shown}: its annotations cannot be read: {exc}") from exc
    params = list(inspect.signature(func).parameters.values())[1 if skip_first else 0 :]
    description, words = _docstring(func)
    fields: dict[str, Any] = {}
    names: dict[str, str] = {}
    optional: set[str] = set()
    for i, p in enumerate(params):
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise ToolSchemaError(
                f"tool {shown}: parameter {p.name!r} must be passable by name (no *args, "
                "**kwargs or positional-only parameters)"
            )
        if p.name not in hints:
            raise ToolSchemaError(f"tool {shown}: parameter {p.name!r} needs a type")
        # Fields get neutral names, the real one as alias: a parameter may be called
        # `json`, `model_config` or `_x`, which a pydantic model would shadow or hide.
        field_name = f"p{i}"
        names[field_name] = p.name
        given = p.default is not inspect.Parameter.empty
        if given and p.default is None:
            optional.add(p.name)
        info = Field(p.default if given else ..., alias=p.name)
        if p.name in words and not _has_description(hints[p.name]):
            info = Field(p.default if given else ..., alias=p.name, description=words[p.name])
        fields[field_name] = (hints[p.name], info)
    try:
        with warnings.catch_warnings():
            # A default JSON cannot show is no matter: defaults are left out of the schema.
            warnings.simplefilter("ignore", pydantic.json_schema.PydanticJsonSchemaWarning)
            model = create_model(
                f"{shown}_arguments",
                __config__=ConfigDict(extra="forbid"),
                **fields,
            )
            schema = model.model_json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError) as exc:
        raise ToolSchemaError(f"tool {shown}: {_first_line(exc)}") from exc
    except (TypeError, ValueError, pydantic_core.PydanticSerializationError) as exc:
        raise ToolSchemaError(f"tool {shown}: a parameter type JSON cannot carry: {exc}") from exc
    parameters = _trim(schema)
    props = parameters.get("properties", {})
    for p in params:
        bare = {k: v for k, v in props.get(p.name, {}).items() if k != "description"}
        if not bare and _unwrapped(hints[p.name]) not in (Any, object):
            # pydantic shows some types it cannot read from JSON (``type[int]``) as "anything".
            raise ToolSchemaError(
                f"tool {shown}: parameter {p.name!r} is of a type JSON cannot carry "
                f"({hints[p.name]!r})"
            )
    for name in optional & set(props):
        props[name] = _drop_null(props[name])
    parameters["required"] = list(schema.get("required", []))
    parameters["type"] = "object"
    parameters["additionalProperties"] = False
    parameters["properties"] = props

    def check(arguments: Mapping[str, Any]) -> dict[str, Any]:
        try:
            text = json.dumps(dict(arguments))
        except (TypeError, ValueError) as exc:
            raise ToolError(f"the arguments are not JSON: {exc}") from exc
        try:
            done = model.model_validate_json(text, strict=True)
        except pydantic.ValidationError as exc:
            raise ToolError(explain(exc)) from exc
        # Only what was sent: a parameter left out takes the function's own default.
        return {names[f]: getattr(done, f) for f in done.model_fields_set}

    return Described(description, parameters, check)


def _unwrapped(annotation: Any) -> Any:
    """The type inside ``Annotated[...]``."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _has_description(annotation: Any) -> bool:
    if typing.get_origin(annotation) is not typing.Annotated:
        return False
    return any(
        isinstance(m, pydantic.fields.FieldInfo) and m.description for m in annotation.__metadata__
    )


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def result_text(result: Any) -> str:
    """What a tool's return value reads as: a string as it is, data as JSON, else ``str()``.

    Models, dataclasses, dicts and lists are written as JSON (what a model reads
    best); numbers, booleans, ``None`` and other objects as ``str()``, as before.
    """
    if isinstance(result, str):
        return result
    if isinstance(result, pydantic.BaseModel | dict | list | tuple) or (
        hasattr(result, "__dataclass_fields__") and not isinstance(result, type)
    ):
        try:
            return pydantic_core.to_json(result).decode()
        except pydantic_core.PydanticSerializationError:
            return str(result)
    return str(result)
