"""The Claude Agent SDK and Google ADK pages: every Python snippet runs, in order, as shown."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs" / "integrations"
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@pytest.mark.parametrize("page", ["claude-agent-sdk.md", "google-adk.md"])
def test_the_page_runs(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLAIT_STORE", raising=False)
    blocks = _BLOCK.findall((DOCS / page).read_text())
    assert len(blocks) >= 2  # the switch and what it gains
    scope: dict[str, object] = {"__name__": "docs"}
    for n, block in enumerate(blocks):
        exec(compile(block, f"{page} snippet {n + 1}", "exec"), scope)
    assert (tmp_path / "sessions.db").is_file()
    exported = [p for p in tmp_path.iterdir() if p.suffix == ".html"]
    assert len(exported) == 1 and exported[0].stat().st_size > 0
    for name in ("store", "service"):
        owner = scope.get(name)
        if owner is not None:
            owner.close()  # type: ignore[attr-defined]
