"""``plait compact`` and ``plait uncompact``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from plait import Client
from plait.cli import cli
from plait.providers import ScriptedProvider


def _store(tmp_path: Path) -> tuple[str, str]:
    db = str(tmp_path / "c.db")
    with Client(tmp_path, store=db) as client:
        s = client.sessions.create()
        for i in range(10):
            s.inject({"role": "user", "content": f"request {i}"})
            s.inject({"role": "assistant", "content": f"answer {i}"})
        return db, s.id


def test_dry_run_then_compact_then_uncompact(tmp_path: Path) -> None:
    db, sid = _store(tmp_path)
    runner = CliRunner()
    base = ["--store", db, "--workspace", str(tmp_path)]
    dry = runner.invoke(cli, [*base, "compact", sid, "--keep-last", "4", "--dry-run", "--json"])
    assert dry.exit_code == 0, dry.output
    plan = json.loads(dry.output)
    assert plan["compressed"] == 16 and plan["kept"] == 4
    with Client(tmp_path, store=db) as client:
        assert client.open(sid).transcript.length == 20  # the dry run wrote nothing
    done = runner.invoke(cli, [*base, "compact", sid, "--keep-last", "4"])
    assert done.exit_code == 0, done.output
    assert done.output == "folded 16 messages into a summary, kept 4\n"
    with Client(tmp_path, store=db) as client:
        history = client.sessions.history_of(sid, full=False)
        assert history[0].role == "summary" and len(history) == 5
    again = runner.invoke(cli, [*base, "compact", sid, "--keep-last", "4"])
    assert again.output == "nothing worth folding\n"
    undo = runner.invoke(cli, [*base, "uncompact", sid])
    assert undo.exit_code == 0, undo.output
    with Client(tmp_path, store=db) as client:
        assert len(client.sessions.history_of(sid, full=False)) == 20
    nothing = runner.invoke(cli, [*base, "uncompact", sid])
    assert nothing.exit_code == 1 and "no compaction to undo" in nothing.output
    assert "Traceback" not in nothing.output


def test_bad_arguments_are_clean_errors(tmp_path: Path) -> None:
    db, sid = _store(tmp_path)
    runner = CliRunner()
    bad = runner.invoke(cli, ["--store", db, "compact", sid, "--keep-last", "-1"])
    assert bad.exit_code == 2
    unknown = runner.invoke(cli, ["--store", db, "compact", "no-such-session"])
    assert unknown.exit_code == 1 and "Traceback" not in unknown.output


def test_the_llm_strategy_summarizes_with_the_named_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, sid = _store(tmp_path)
    model = ScriptedProvider(["They asked ten questions and got ten answers."])
    named: list[str | None] = []

    def select(spec: str | None) -> ScriptedProvider:
        named.append(spec)
        return model

    monkeypatch.setattr("plait.cli.compaction.select_provider", select)
    runner = CliRunner()
    base = ["--store", db, "--workspace", str(tmp_path)]
    done = runner.invoke(
        cli, [*base, "compact", sid, "--strategy", "llm", "--model", "openai:gpt-4o", "--json"]
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["summary"] == "They asked ten questions and got ten answers."
    assert named == ["openai:gpt-4o"]
    sent = model.requests[0].messages
    assert sent[0].role == "system" and "request 0" in " ".join(m.text for m in sent)


def test_show_puts_the_summary_where_the_model_reads_it(tmp_path: Path) -> None:
    db, sid = _store(tmp_path)
    with Client(tmp_path, store=db) as client:
        client.open(sid).inject({"role": "system", "content": "Be brief."})
    runner = CliRunner()
    base = ["--store", db, "--workspace", str(tmp_path)]
    done = runner.invoke(cli, [*base, "compact", sid, "--keep-last", "4", "--strategy", "truncate"])
    assert done.exit_code == 0, done.output
    shown = runner.invoke(cli, [*base, "sessions", "show", sid])
    assert shown.exit_code == 0, shown.output
    roles = [line.split(":")[0].split()[1] for line in shown.output.splitlines()[1:]]
    # The summary folds requests 0..7 and is read before request 8; the system prompt
    # written after the last answer stays where it was written.
    assert roles == ["summary", "user", "assistant", "user", "assistant", "system"]
    assert "#16 user: request 8" in shown.output.splitlines()[2]
    full = runner.invoke(cli, [*base, "sessions", "show", sid, "--full"])
    assert full.output.splitlines()[-1].split()[1] == "summary:"  # in place, where it ran


def test_a_strategy_without_a_model_needs_no_key_and_a_bad_spec_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    db, sid = _store(tmp_path)
    runner = CliRunner()
    base = ["--store", db, "--workspace", str(tmp_path), "compact", sid]
    bad = runner.invoke(cli, [*base, "--model", "gpt-4o", "--dry-run"])
    assert bad.exit_code == 2 and "model spec 'gpt-4o'" in bad.output
    # truncate writes its summary itself: no model is built, so no API key is asked for.
    done = runner.invoke(cli, [*base, "--strategy", "truncate", "--model", "anthropic"])
    assert done.exit_code == 0, done.output
    assert done.output.startswith("folded ") and "into a summary" in done.output
