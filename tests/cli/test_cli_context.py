"""``plait context ID``: a bar per source, or the report as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from plait import Client
from plait.cli import cli
from tests.cli._helpers import assert_clean_error, conversation


def _base(tmp_path: Path) -> tuple[list[str], str]:
    db = str(tmp_path / "c.db")
    with Client(tmp_path, store=db) as client:
        sid = conversation(client).id
    return ["--store", db, "--workspace", str(tmp_path)], sid


def test_a_bar_per_source_and_the_total(tmp_path: Path) -> None:
    base, sid = _base(tmp_path)
    result = CliRunner().invoke(cli, [*base, "context", sid])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    names = ["System prompt", "User messages", "Assistant messages", "Tool output"]
    assert [line.split("  ")[0].strip() for line in lines[:4]] == names
    assert all("█" in line for line in lines[:4])
    assert "/ 128,000 tokens" in result.output and "free" in result.output
    # Its replies name no model: the window is plait's default, and said to be a guess.
    assert lines[-1].startswith("window: a guess, plait does not know this model's window")


def test_the_window_names_where_it_came_from(tmp_path: Path) -> None:
    base, sid = _base(tmp_path)
    env = {"PLAIT_CONTEXT_WINDOW": "4096"}
    result = CliRunner().invoke(cli, [*base, "context", sid], env=env)
    assert result.exit_code == 0, result.output
    assert "/ 4,096 tokens" in result.output
    assert result.output.splitlines()[-1] == "window from PLAIT_CONTEXT_WINDOW"
    data = json.loads(CliRunner().invoke(cli, [*base, "context", sid, "--json"], env=env).output)
    assert (data["window"], data["window_source"]) == (4096, "environment")


def test_json_has_every_field_of_the_report(tmp_path: Path) -> None:
    base, sid = _base(tmp_path)
    result = CliRunner().invoke(cli, [*base, "context", sid, "--json", "--model", "gpt-4o"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data) == {
        "window", "used", "from_provider", "measured_by", "partial", "free", "fraction", "shares",
        "window_source",
    }
    assert data["window"] == 128_000  # gpt-4o's window ...
    assert data["measured_by"].endswith("cl100k_base")  # ... counts made for the session's model
    assert data["shares"][0]["name"] == "System prompt"
    assert data["used"] == sum(s["tokens"] for s in data["shares"])


def test_before_the_first_reply_and_an_unknown_id(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    with Client(tmp_path, store=db) as client:
        sid = client.sessions.create([{"role": "user", "content": "hi"}]).id
    base = ["--store", db, "--workspace", str(tmp_path)]
    result = CliRunner().invoke(cli, [*base, "context", sid])
    assert result.exit_code == 0 and "no reply yet" in result.output
    assert json.loads(CliRunner().invoke(cli, [*base, "context", sid, "--json"]).output) is None
    missing = CliRunner().invoke(cli, [*base, "context", "0190f0f0-0000-7000-8000-000000000000"])
    assert_clean_error(missing)


def test_the_shares_add_up_to_what_the_provider_counted(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    with Client(tmp_path, store=db) as client:
        s = conversation(client)
        # The provider counted the whole request: template, schemas and all (772 tokens).
        s.inject({"role": "user", "content": "and now?"})
        s.inject(
            {
                "role": "assistant",
                "content": "Done.",
                "meta": {"usage": {"input_tokens": 760, "output_tokens": 12}},
            }
        )
        sid = s.id
    base = ["--store", db, "--workspace", str(tmp_path)]
    data = json.loads(CliRunner().invoke(cli, [*base, "context", sid, "--json"]).output)
    assert data["from_provider"] and data["used"] >= 772
    names = [share["name"] for share in data["shares"]]
    assert names[-1] == "Unattributed" and data["shares"][-1]["tokens"] > 0
    assert sum(share["tokens"] for share in data["shares"]) == data["used"]
    shown = CliRunner().invoke(cli, [*base, "context", sid]).output
    assert "Unattributed" in shown and "no source accounts for" in shown
