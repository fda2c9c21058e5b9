"""docs/architecture.md stays a map, and every decision number the project cites resolves.

The map is read by people before anything else: it stays within two screens, its table cells
stay short, and it names every room of ``src/plait``. A decision number cited in the code,
the tests or the docs names a record in force or a folded one listed in the records' index.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = ROOT / "docs" / "architecture.md"
DECISIONS = ROOT / "docs" / "decisions"
LINE_BUDGET = 120
CELL_WORDS = 40


def rooms() -> list[str]:
    """Every package and public module at the top of src/plait."""
    top = ROOT / "src" / "plait"
    packages = [p.name for p in top.iterdir() if (p / "__init__.py").is_file()]
    modules = [p.stem for p in top.glob("*.py") if not p.name.startswith("_")]
    return sorted(packages + modules)


def test_the_map_fits_its_line_budget() -> None:
    lines = MAP.read_text().splitlines()
    assert len(lines) <= LINE_BUDGET, f"{len(lines)} lines; the map's budget is {LINE_BUDGET}"


def test_no_table_cell_of_the_map_is_a_paragraph() -> None:
    for line in MAP.read_text().splitlines():
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        for cell in line.strip().strip("|").split("|"):
            words = re.sub(r"<!--.*?-->", "", cell).split()
            assert len(words) <= CELL_WORDS, cell


def test_the_map_names_every_room_of_the_package() -> None:
    text = MAP.read_text()
    missing = [name for name in rooms() if f"`{name}" not in text and f" {name} " not in text]
    assert not missing, f"docs/architecture.md does not name {missing}"


def test_the_map_walks_an_append_and_a_served_run() -> None:
    text = MAP.read_text()
    assert "## Walkthrough: an append" in text
    assert "## Walkthrough: a served run" in text


def _resolvable() -> set[int]:
    kept = {int(p.name[1:4]) for p in DECISIONS.glob("D[0-9][0-9][0-9]-*.md")}
    index = (DECISIONS / "README.md").read_text()
    folded = {int(n) for n in re.findall(r"^\| D(\d+) \|", index, re.M)}
    return kept | folded


def test_every_cited_decision_resolves() -> None:
    known = _resolvable()
    cited: dict[int, set[str]] = {}
    paths = [*ROOT.glob("src/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("docs/**/*.md"),
             *ROOT.glob("benchmarks/**/*.py"), *ROOT.glob("benchmarks/**/*.md"),
             ROOT / "README.md", ROOT / "Makefile"]
    for path in paths:
        for match in re.finditer(r"(?<![\w/.-])D(\d{1,3})(?!\w)", path.read_text(errors="replace")):
            number = int(match.group(1))
            if number not in known:
                cited.setdefault(number, set()).add(str(path.relative_to(ROOT)))
    assert not cited, f"decision numbers with no record and no folded entry: {cited}"


def test_every_record_in_force_is_in_the_index_and_none_is_superseded() -> None:
    index = (DECISIONS / "README.md").read_text()
    for record in DECISIONS.glob("D[0-9][0-9][0-9]-*.md"):
        assert f"]({record.name})" in index, record.name
        status = record.read_text().split("## Status", 1)[-1].split("##", 1)[0]
        assert "superseded" not in status.lower(), record.name
