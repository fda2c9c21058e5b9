"""The documentation site: mkdocs.yml's API reference builds from the docstrings and holds
the names a reader looks for.

The full site (`make docs`, every guide and every reference page, ``--strict``) takes
longer than a test should; this builds three of the reference pages with the project's own
configuration, strict, into a temporary folder, and reads the HTML it wrote. The build
fetches nothing: mkdocstrings reads src/ statically.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

pytest.importorskip("mkdocs", reason="the [docs] extra is not installed")
pytest.importorskip("mkdocstrings_handlers.python", reason="the [docs] extra is not installed")

from mkdocs.commands.build import build  # noqa: E402
from mkdocs.config import load_config  # noqa: E402

PAGES = ("session.md", "client.md", "errors.md")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("docs")
    docs = work / "docs"
    (docs / "reference").mkdir(parents=True)
    for page in PAGES:
        shutil.copy(DOCS / "reference" / page, docs / "reference" / page)
    (docs / "index.md").write_text("# plait\n")
    config = work / "mkdocs.yml"
    # The project's configuration, its pages and plugins cut to what these pages need.
    config.write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\n"
        f"docs_dir: {docs}\n"
        f"hooks:\n  - {ROOT / 'mkdocs_hooks.py'}\n"  # a hook's path is read from this file's folder
        "nav:\n  - index.md\n"
        + "".join(f"  - reference/{page}\n" for page in PAGES)
    )
    cfg = load_config(str(config), site_dir=str(work / "site"), strict=True)
    cfg.plugins.pop("search", None)  # no index for a throwaway site
    cfg["plugins"]["mkdocstrings"].config["handlers"]["python"]["paths"] = [str(ROOT / "src")]
    build(cfg)
    return work / "site"


def anchors(site: Path, page: str) -> set[str]:
    html = (site / "reference" / page / "index.html").read_text()
    return set(re.findall(r'id="(plait\.[\w.]+)"', html))


def test_the_reference_pages_hold_the_names_a_user_looks_for(site: Path) -> None:
    session = anchors(site, "session")
    for name in ("Session", "Session.fork", "Session.inject", "Session.prompt", "Session.compact"):
        assert f"plait.session.{name}" in session, name
    client = anchors(site, "client")
    assert "plait.client.Client" in client
    errors = anchors(site, "errors")
    for name in ("PlaitError", "SessionNotFoundError", "InvalidArgumentError"):
        assert f"plait.errors.{name}" in errors, name


def test_a_documented_verb_shows_its_docstring(site: Path) -> None:
    html = (site / "reference" / "session" / "index.html").read_text()
    start = html.index('id="plait.session.Session.fork"')
    assert "Returns" in html[start : start + 20_000]


def test_every_reference_page_is_in_the_nav_and_names_a_public_module() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in (DOCS / "reference").glob("*.md"))
    for page in pages:
        assert f"reference/{page}" in config, page
        assert re.search(r"^::: plait", (DOCS / "reference" / page).read_text(), re.M), page
    for module in ("client", "session", "records", "errors", "store", "testing", "run",
                   "tools", "sandbox", "providers", "compaction", "context", "auth", "live",
                   "interop", "integrations", "server"):
        assert f"{module}.md" in pages, module


def test_sphinx_roles_in_docstrings_read_as_code(site: Path) -> None:
    """The docstrings' :class:`X` roles show as the name in code, not as the role's text."""
    html = (site / "reference" / "session" / "index.html").read_text()
    assert not re.search(r":(class|meth|func|attr|exc|mod):<code>", html)
    assert "the <code>Session</code> handle" in html
