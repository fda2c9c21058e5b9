"""``plait serve``: its help, and the install command when the [server] extra is missing."""

from __future__ import annotations

import importlib.util

import pytest
from click.testing import CliRunner

from plait.cli import cli
from plait.errors import MissingDependencyError
from plait.server import create_app


def test_serve_help() -> None:
    result = CliRunner().invoke(cli, ["serve", "-h"])
    assert result.exit_code == 0
    for option in ("--host", "--port", "--api-key", "--model", "--builtin-tools"):
        assert option in result.output


def test_serve_without_the_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec

    def missing(name: str, *args: object) -> object:
        return None if name == "fastapi" else real(name, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(importlib.util, "find_spec", missing)
    result = CliRunner().invoke(cli, ["--store", ":memory:", "serve"])
    assert result.exit_code == 1
    assert "pip install 'plait[server]'" in result.output
    with pytest.raises(MissingDependencyError) as caught:
        create_app(":memory:")
    assert caught.value.extra == "server"
