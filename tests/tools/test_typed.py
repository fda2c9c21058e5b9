"""``@tool`` through pydantic: nested types, descriptions, strict checks, refused types."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # typing.TypedDict needs Python 3.12 for pydantic

from plait.errors import InvalidArgumentError, ToolSchemaError
from plait.tools import ToolContext, ToolOutcome, tool


def run(coro: object) -> ToolOutcome:
    return asyncio.run(coro)  # type: ignore[arg-type]


CTX = ToolContext(Path("."))


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int = 0


class Shape(BaseModel):
    name: str
    points: list[Point]
    colour: Colour = Colour.RED


class Box(TypedDict):
    width: float
    height: float


@dataclasses.dataclass
class Size:
    w: int
    h: int


def test_nested_models_dicts_enums_and_descriptions_make_the_schema() -> None:
    @tool
    def draw(
        shape: Shape,
        labels: dict[str, int],
        box: Box,
        mode: Literal["fill", "line"] = "line",
        scale: Annotated[float, Field(description="How much bigger.", gt=0)] = 1.0,
        note: str | None = None,
    ) -> str:
        """Draw a shape.

        Args:
            shape: The shape to draw.
            labels: Label to z-order.
            box: Where it goes.
            scale: Ignored: the Annotated description wins.
        """
        return "ok"

    params = draw.parameters
    assert draw.description == "Draw a shape."
    assert params["required"] == ["shape", "labels", "box"]
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert props["shape"] == {"$ref": "#/$defs/Shape", "description": "The shape to draw."}
    assert props["labels"] == {
        "type": "object",
        "additionalProperties": {"type": "integer"},
        "description": "Label to z-order.",
    }
    assert props["mode"] == {"enum": ["fill", "line"]}
    assert props["scale"] == {
        "type": "number",
        "exclusiveMinimum": 0.0,
        "description": "How much bigger.",
    }
    assert props["note"] == {"type": "string"}  # optional, defaulting to None: its inner type
    defs = params["$defs"]
    assert defs["Shape"]["properties"]["points"] == {
        "type": "array",
        "items": {"$ref": "#/$defs/Point"},
    }
    assert defs["Colour"] == {"enum": ["red", "blue"]}
    assert defs["Point"] == {
        "type": "object",
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
        "required": ["x"],
    }
    assert "title" not in json.dumps(params)  # titles are noise to a model
    json.dumps(draw.spec())  # what a provider sends is plain JSON


def test_arguments_arrive_as_the_declared_types_and_defaults_are_the_function_s() -> None:
    seen: dict[str, Any] = {}

    @tool
    def draw(shape: Shape, size: Size, box: Box, when: tuple[int, int], note: str | None = None,
             extra: list[str] | None = None) -> str:
        """Draw."""
        seen.update(shape=shape, size=size, box=box, when=when, note=note, extra=extra)
        return "drawn"

    sent = {
        "shape": {"name": "tri", "points": [{"x": 1}, {"x": 2, "y": 3}], "colour": "blue"},
        "size": {"w": 2, "h": 3},
        "box": {"width": 1, "height": 2.5},
        "when": [1, 2],
        "note": None,
    }
    assert run(draw.call(CTX, sent)) == ToolOutcome(True, "drawn")
    assert seen["shape"] == Shape(name="tri", points=[Point(x=1), Point(x=2, y=3)],
                                  colour=Colour.BLUE)
    assert seen["size"] == Size(2, 3) and seen["box"] == {"width": 1.0, "height": 2.5}
    assert seen["when"] == (1, 2) and seen["note"] is None and seen["extra"] is None


@pytest.mark.parametrize(
    ("sent", "named"),
    [
        ({"count": "3"}, "'count'"),  # a numeric string is not an int
        ({"count": 3.5}, "'count'"),
        ({"count": True}, "'count'"),
        ({"count": 1, "shape": {"name": "s", "points": [{"x": "1"}]}}, "'shape.points[0].x'"),
        ({"count": 1, "colour": "green"}, "'colour'"),
        ({"count": 1, "colour2": "red"}, "unknown 'colour2'"),
        ({}, "missing 'count'"),
    ],
)
def test_what_the_model_sent_is_checked_strictly_naming_the_field(
    sent: dict[str, Any], named: str
) -> None:
    calls: list[int] = []

    @tool
    def paint(count: int, shape: Shape | None = None, colour: Colour = Colour.RED) -> str:
        """Paint."""
        calls.append(count)
        return "painted"

    out = run(paint.call(CTX, sent))
    assert not out.ok and out.content.startswith("paint: bad arguments: ")
    assert named in out.content
    assert calls == []  # the function never ran


def test_docstring_args_in_google_numpy_and_rest_styles() -> None:
    @tool
    def google(path: str, depth: int = 1) -> str:
        """List a folder.

        Args:
            path: The folder, relative to the workspace.
            depth (int): How deep to go.
        """
        return path

    @tool
    def numpy(path: str) -> str:
        """List a folder.

        Parameters
        ----------
        path : str
            The folder to list.
        """
        return path

    @tool
    def rest(path: str) -> str:
        """List a folder.

        :param path: The folder to list.
        """
        return path

    props = google.parameters["properties"]
    assert props["path"]["description"] == "The folder, relative to the workspace."
    assert props["depth"]["description"] == "How deep to go."
    assert google.description == "List a folder."
    for t in (numpy, rest):
        assert t.parameters["properties"]["path"]["description"] == "The folder to list."
        assert t.description == "List a folder."


def test_awkward_parameter_names_keep_their_names() -> None:
    @tool
    def odd(json: str, model_config: int, _hidden: bool = False) -> str:
        """Names a pydantic model would shadow or hide."""
        return f"{json}/{model_config}/{_hidden}"

    assert list(odd.parameters["properties"]) == ["json", "model_config", "_hidden"]
    out = run(odd.call(CTX, {"json": "j", "model_config": 2, "_hidden": True}))
    assert out == ToolOutcome(True, "j/2/True")


class Opaque:
    """A class pydantic has no schema for."""


def test_types_json_cannot_carry_are_refused_when_the_tool_is_made() -> None:
    def takes_object(thing: Opaque) -> str:
        """Takes an opaque object."""
        return ""

    def takes_callable(fn: Callable[[int], int]) -> str:
        """Takes a function."""
        return ""

    def takes_class(cls: type[int] = int, anything: Any = None) -> str:
        """Takes a class (Any is fine: any JSON value)."""
        return ""

    def star(*names: str) -> str:
        """Takes *args."""
        return ""

    def untyped(x) -> str:  # type: ignore[no-untyped-def]
        """No annotation."""
        return ""

    for func in (takes_object, takes_callable, takes_class, star, untyped):
        with pytest.raises(ToolSchemaError) as caught:
            tool(func)
        assert func.__name__ in str(caught.value)
        assert isinstance(caught.value, InvalidArgumentError)  # what callers caught before


def test_a_returned_model_or_dict_reads_as_json() -> None:
    @tool
    def where() -> Point:
        """A point."""
        return Point(x=1, y=2)

    @tool
    def table() -> dict[str, list[int]]:
        """A table."""
        return {"a": [1, 2]}

    @tool
    def count() -> int:
        """A number."""
        return 3

    assert json.loads(run(where.call(CTX, {})).content) == {"x": 1, "y": 2}
    assert json.loads(run(table.call(CTX, {})).content) == {"a": [1, 2]}
    assert run(count.call(CTX, {})) == ToolOutcome(True, "3")
