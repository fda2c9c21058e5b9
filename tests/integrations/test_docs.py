"""The examples of docs/integrations/ (openai-agents, pydantic-ai, langgraph), run as written.

Every ``python`` block of a page runs, in order, in one namespace (top-level
``await`` allowed), in a fresh working directory: a page whose example stops
working fails here.
"""

from __future__ import annotations

import ast
import asyncio
import re
import sys
from pathlib import Path
from typing import Any

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(page: str) -> list[str]:
    return _BLOCK.findall((DOCS / page).read_text())


@pytest.mark.parametrize("page", ["openai-agents.md", "pydantic-ai.md"])
def test_every_example_runs(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    found = blocks(page)
    assert len(found) >= 5
    namespace: dict[str, Any] = {"__name__": "__docs__"}

    async def run_all() -> None:
        for n, source in enumerate(found):
            code = compile(source, f"{page}[{n}]", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            result = eval(code, namespace)
            if asyncio.iscoroutine(result):
                await result

    asyncio.run(run_all())
    assert (tmp_path / "chats.db").exists()
    assert (tmp_path / "chat.html").exists()


def test_the_langgraph_page_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    monkeypatch.chdir(tmp_path)
    found = blocks("langgraph.md")
    assert len(found) >= 5
    # The page's State is a TypedDict LangGraph reads the hints of, from its module.
    module = types.ModuleType("__langgraph_docs__")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    for n, source in enumerate(found):
        exec(compile(source, f"langgraph.md[{n}]", "exec"), module.__dict__)
    assert (tmp_path / "chats.db").exists()
