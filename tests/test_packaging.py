"""The wheel and the sdist a release would publish install and work in a fresh venv.

``python -m build`` builds both from the checkout (the wheel from the sdist, as a
release does); each goes into a venv of its own made with ``python -m venv`` (no
system site-packages), with its dependencies from the package index (D260), and
every command runs from a folder outside the checkout with ``PYTHONPATH`` cleared,
so nothing can import the source tree instead of what was installed.

Needs the ``build`` package (the ``[test]`` extra). Without it the tests skip,
saying so, unless ``PLAIT_REQUIRE_BUILD=1`` (CI), where they fail.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = os.environ.get("PLAIT_REQUIRE_BUILD") == "1"
# The extras the wheel's venv gets: the web page's server, one framework adapter, the kit.
EXTRAS = "server,openai-agents,testing"

# Run by the venv's python: the page and its static files served from the installed
# package (importlib.resources), the API page's Swagger files, and the adapter's import.
SMOKE = """
import importlib.metadata, importlib.resources, json, sys, tempfile
from pathlib import Path

import plait, plait.testing
import plait.integrations.openai_agents
from fastapi.testclient import TestClient
from plait.server.app import create_app

folder = Path(tempfile.mkdtemp())
served = {}
with TestClient(create_app(folder / "s.db", workspace=folder)) as client:
    for path in ("/", "/static/app.js", "/static/app.css", "/static/live.js", "/docs"):
        reply = client.get(path)
        served[path] = [reply.status_code, reply.text[:200]]
print(json.dumps({
    "file": plait.__file__,
    "version": plait.__version__,
    "metadata": importlib.metadata.version("plait"),
    "typed": importlib.resources.files("plait").joinpath("py.typed").is_file(),
    "served": served,
}))
"""


def _env(home: Path) -> dict[str, str]:
    """The environment without anything that points python at the checkout."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV"}
    }
    env["PLAIT_HOME"] = str(home)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(args: list[str | Path], cwd: Path, env: dict[str, str]) -> str:
    out = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, f"{args}\n{out.stdout}\n{out.stderr}"
    return out.stdout


def _project_version() -> str:
    source = (ROOT / "src" / "plait" / "__init__.py").read_text("utf-8")
    line = next(ln for ln in source.splitlines() if ln.startswith("__version__ = "))
    return line.split("=", 1)[1].strip().strip("\"'")


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel ``python -m build`` makes of the checkout."""
    if importlib.util.find_spec("build") is None:
        message = "needs the build package: pip install -e '.[test]'"
        if REQUIRED:
            pytest.fail(f"PLAIT_REQUIRE_BUILD=1, but this test {message}")
        pytest.skip(message)
    out = tmp_path_factory.mktemp("dist")
    # The build runs in its own isolated environment; it writes only into `out`.
    env = _env(tmp_path_factory.mktemp("home"))
    if "PYTHONPATH" in os.environ:  # the frontend, `build`, may itself come from it
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    _run([sys.executable, "-m", "build", "-o", out, ROOT], cwd=out, env=env)
    wheels = list(out.glob("plait-*.whl"))
    sdists = list(out.glob("plait-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, list(out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


def _venv(where: Path, env: dict[str, str]) -> Path:
    _run([sys.executable, "-m", "venv", where / "venv"], cwd=where, env=env)
    return where / "venv" / "bin"


def test_the_wheel_installs_with_its_extras_and_serves_the_page(
    dist: dict[str, Path], tmp_path: Path
) -> None:
    env = _env(tmp_path / "home")
    bin_ = _venv(tmp_path, env)
    wheel = dist["wheel"]
    _run(
        [bin_ / "python", "-m", "pip", "install", "-q", f"plait[{EXTRAS}] @ {wheel.as_uri()}"],
        cwd=tmp_path, env=env,
    )

    assert "plait: durable, branchable sessions" in _run([bin_ / "plait", "--help"], tmp_path, env)
    version = _project_version()
    assert _run([bin_ / "plait", "--version"], tmp_path, env).strip() == f"plait, version {version}"
    assert wheel.name == f"plait-{version}-py3-none-any.whl"

    seen = json.loads(_run([bin_ / "python", "-c", SMOKE], tmp_path, env))
    assert seen["file"].startswith(str(tmp_path / "venv")), seen["file"]
    assert seen["version"] == seen["metadata"] == version
    assert seen["typed"] is True
    for path, (status, head) in seen["served"].items():
        assert status == 200, (path, head)
    assert "<html" in seen["served"]["/"][1].lower()


def test_the_sdist_builds_and_installs(dist: dict[str, Path], tmp_path: Path) -> None:
    env = _env(tmp_path / "home")
    bin_ = _venv(tmp_path, env)
    _run([bin_ / "python", "-m", "pip", "install", "-q", dist["sdist"]], cwd=tmp_path, env=env)

    assert "Usage: plait" in _run([bin_ / "plait", "--help"], tmp_path, env)
    # The core alone: the kit and the server say which extra they need.
    out = subprocess.run(
        [bin_ / "python", "-c", "import plait, plait.testing"],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )
    assert out.returncode != 0 and "pip install 'plait[testing]'" in out.stderr, out.stderr
    located = _run([bin_ / "python", "-c", "import plait; print(plait.__file__)"], tmp_path, env)
    assert located.startswith(str(tmp_path / "venv")), located


def test_the_sdist_carries_the_docs_and_tests(dist: dict[str, Path]) -> None:
    with tarfile.open(dist["sdist"]) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    for name in ("pyproject.toml", "README.md", "CHANGELOG.md", "src/plait/py.typed",
                 "src/plait/server/static/index.html", "tests/test_packaging.py"):
        assert name in names, name
