"""Portable session bundles: the three modes, import, refusal, lineage and the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from plait import Client, Session
from plait.cli import cli
from plait.errors import (
    BundleVersionError,
    ImportFormatError,
    InvalidArgumentError,
    SessionNotFoundError,
)
from plait.interop import (
    BUNDLE_SCHEMA,
    export_bundle,
    import_bundle,
    read_bundle,
    seed_from_jsonl,
    write_bundle,
)

# Fake credentials of every kind the sanitizer knows, built in pieces so no scanner
# mistakes this file for a leak. Each maps to the kind its replacement must name.
SECRETS: dict[str, str] = {
    "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2": "openai_api_key",
    "sk-ant-api03-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk": "anthropic_api_key",
    "AKIA" + "IOSFODNN7EXAMPLE": "aws_access_key_id",
    "ghp_" + "1234567890abcdefghijABCDEFGHIJ123456": "github_token",
    "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnop": "github_token",
    "xoxb-" + "123456789012-abcdefABCDEF": "slack_token",
    "xoxp-" + "998877665544-zyxwvuZYXWVU": "slack_token",
    "AIza" + "SyD1234567890abcdefghijklmnopqrstu": "google_api_key",
    "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFU": "jwt",
    "opaqueBearerValue12345678": "authorization_header",
    "plainBearerValue87654321": "bearer_token",
    "MIIEpAIBAAKCAQEA7" + "Secretkeymaterial": "private_key",
    "hunter2" + "pass": "url_password",
    "Correct" + "Horse42": "credential_pair",
    "s3cr3t" + "Value": "credential_pair",
    "tkn_" + "abcdef123": "credential_pair",
    "plain" + "value123": "credential_value",
    "ACME-INTERNAL-" + "98765": "custom",
}


def _secret(kind: str, n: int = 0) -> str:
    return [s for s, k in SECRETS.items() if k == kind][n]


def _seeded(client: Client) -> Session:
    """A session whose every text field holds some secret."""
    s = client.sessions.create(
        [
            {
                "role": "system",
                "content": (
                    f"Use key {_secret('openai_api_key')} and {_secret('anthropic_api_key')}."
                ),
            }
        ],
        title=f"debug {_secret('aws_access_key_id')}",
        metadata={
            "note": f"slack {_secret('slack_token', 1)}",
            "api_key": _secret("credential_value"),
        },
    )
    s.inject(
        {
            "role": "user",
            "content": (
                f"push with {_secret('github_token')} or {_secret('github_token', 1)}; "
                f"Authorization: Bearer {_secret('authorization_header')}"
            ),
        }
    )
    s.inject(
        {
            "role": "assistant",
            "content": "Calling the API.",
            "tool_calls": [
                {
                    "id": "c1",
                    "name": "http",
                    "arguments": {
                        "url": f"postgres://admin:{_secret('url_password')}@db.example.com/x",
                        "headers": f"bearer {_secret('bearer_token')}",
                        "note": f"google {_secret('google_api_key')}",
                    },
                }
            ],
            "meta": {"usage": {"input_tokens": 10, "output_tokens": 3, "cached_tokens": 0}},
        }
    )
    s.inject(
        {
            "role": "tool",
            "content": (
                f"-----BEGIN RSA PRIVATE KEY-----\n{_secret('private_key')}\n"
                f"-----END RSA PRIVATE KEY-----\njwt {_secret('jwt')} "
                f"password={_secret('credential_pair')} secret={_secret('credential_pair', 1)}"
            ),
            "tool_call_id": "c1",
            "tool_name": "http",
            "ok": False,
        }
    )
    s.transcript.log_event(
        "permission_routed",
        {"tool": "http", "why": f"token={_secret('credential_pair', 2)} {_secret('slack_token')}"},
    )
    s.inject({"role": "assistant", "content": f"Done; ticket {_secret('custom')}."})
    return s


def _dump(bundle: dict[str, Any]) -> str:
    return json.dumps(bundle, ensure_ascii=False)


def _count(client: Client) -> int:
    return len(client.sessions.list(1000))


# -- sanitized -----------------------------------------------------------------------------


def test_sanitized_bundle_carries_no_secret_anywhere(mem: Client) -> None:
    s = _seeded(mem)
    bundle = export_bundle(s, redact=[r"ACME-INTERNAL-\d+"])
    text = _dump(bundle)
    for secret in SECRETS:
        assert secret not in text, secret
    assert bundle["schema"] == BUNDLE_SCHEMA and bundle["mode"] == "sanitized"
    for kind in set(SECRETS.values()):
        assert f"[REDACTED:{kind}]" in text, kind
    # Ordinary text and structure survive.
    assert "Calling the API." in text
    assert bundle["tool_calls"][0]["name"] == "http" and bundle["tool_calls"][0]["ok"] is False
    assert bundle["transcript"][3]["content"].startswith("[REDACTED:private_key]\njwt ")


def test_sanitized_manifest_says_where_and_what_never_the_secret(mem: Client) -> None:
    bundle = export_bundle(_seeded(mem), redact=[r"ACME-INTERNAL-\d+"])
    manifest = bundle["redactions"]
    assert all(set(entry) == {"where", "kind", "count"} for entry in manifest)
    found = {(e["where"], e["kind"]) for e in manifest}
    assert ("transcript/0/content", "openai_api_key") in found
    assert ("transcript/0/content", "anthropic_api_key") in found
    assert ("session/title", "aws_access_key_id") in found
    assert ("session/metadata/api_key", "credential_value") in found
    assert ("transcript/1/content", "github_token") in found
    assert ("transcript/2/tool_calls/0/arguments/url", "url_password") in found
    assert ("tool_calls/0/result", "private_key") in found
    assert ("events/0/data/why", "slack_token") in found
    assert ("approvals/0/data/why", "credential_pair") in found
    assert ("replay/responses/1/content", "custom") in found
    assert {e["count"] for e in manifest if e["where"] == "transcript/1/content"} == {1, 2}
    assert {e["kind"] for e in manifest} == set(SECRETS.values())
    text = _dump({"m": manifest})
    for secret in SECRETS:
        assert secret not in text


def test_sanitized_bundle_imports_with_markers(mem: Client) -> None:
    s = _seeded(mem)
    copy = import_bundle(mem, export_bundle(s))
    assert [m.role for m in copy.history(full=True)] == [m.role for m in s.history(full=True)]
    assert "[REDACTED:openai_api_key]" in copy.transcript.records[0].text
    assert copy.settings.metadata["imported_bundle"]["mode"] == "sanitized"


# -- local ---------------------------------------------------------------------------------


def test_local_bundle_round_trips_exactly(mem: Client, tmp_path: Path) -> None:
    s = _seeded(mem)
    s.inject({"role": "summary", "content": "they called http", "folds": [1, 5]})
    s.inject({"role": "user", "content": "and then?", "meta": {"client": "tui"}})
    (tmp_path / "out").mkdir()
    path = write_bundle(s, tmp_path / "out" / "b.json", mode="local")
    assert Path(path).is_absolute() and Path(path).is_file()
    bundle = read_bundle(path)
    assert bundle["mode"] == "local" and bundle["redactions"] == []
    assert _secret("openai_api_key") in _dump(bundle)

    copy = import_bundle(mem, path, session_id="restored")
    assert copy.id == "restored"
    assert [m.to_dict() for m in copy.history(full=True)] == [
        m.to_dict() for m in s.history(full=True)
    ]
    assert [m.to_dict() for m in copy.history()] == [m.to_dict() for m in s.history()]
    originals = [r for r in s.transcript.records if r.kind != "event"]
    assert [r.meta for r in copy.transcript.records] == [r.meta for r in originals]
    assert [r.kind for r in copy.transcript.records] == [r.kind for r in originals]
    assert copy.title == s.title
    assert copy.lineage_operator == "Session.import"
    provenance = copy.settings.metadata["imported_bundle"]
    assert provenance["schema"] == BUNDLE_SCHEMA
    assert provenance["mode"] == "local"
    assert provenance["source_session_id"] == s.id
    assert provenance["lineage"] == []
    assert provenance["source_metadata"]["note"].startswith("slack ")


def test_sections_tool_pairs_approvals_replay_trace(mem: Client) -> None:
    s = _seeded(mem)
    bundle = export_bundle(s, mode="local")
    assert [e["kind"] for e in bundle["transcript"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert all({"seq", "created_at", "role"} <= set(e) for e in bundle["transcript"])
    assert [e["name"] for e in bundle["events"]] == ["permission_routed"]
    pair = bundle["tool_calls"][0]
    assert (pair["id"], pair["name"], pair["ok"]) == ("c1", "http", False)
    assert (pair["call_seq"], pair["result_seq"]) == (2, 3)
    assert bundle["approvals"][0]["name"] == "permission_routed"
    responses = bundle["replay"]["responses"]
    assert responses[0]["content"] == "Calling the API."
    assert responses[0]["tool_calls"][0]["name"] == "http"
    assert responses[0]["usage"]["input_tokens"] == 10
    assert "usage" not in responses[1]
    assert bundle["trace"] == []

    plain = mem.sessions.create([{"role": "user", "content": "hi"}])
    quiet = export_bundle(plain)
    assert quiet["approvals"] == [] and quiet["tool_calls"] == [] and quiet["redactions"] == []


# -- replay-only ---------------------------------------------------------------------------


def test_replay_only_has_no_user_system_or_tool_text(mem: Client) -> None:
    s = mem.sessions.create(
        [{"role": "system", "content": "SYSTEM-MARKER be terse"}], title="TITLE-MARKER"
    )
    s.inject({"role": "user", "content": "USER-MARKER list files", "meta": {"who": "USER-META"}})
    s.inject(
        {
            "role": "assistant",
            "content": "Listing.",
            "tool_calls": [{"id": "c1", "name": "ls", "arguments": {"path": "ARG-MARKER"}}],
            "meta": {"usage": {"input_tokens": 7, "output_tokens": 2, "cached_tokens": 1}},
        }
    )
    s.inject(
        {"role": "tool", "content": "TOOL-MARKER a b", "tool_call_id": "c1", "tool_name": "ls"}
    )
    s.transcript.log_event("approval_granted", {"detail": "EVENT-MARKER"})
    s.inject({"role": "assistant", "content": "Two files."})
    bundle = export_bundle(s, mode="replay-only")
    text = _dump(bundle)
    for marker in ("SYSTEM", "TITLE", "USER", "ARG", "TOOL", "EVENT"):
        assert f"{marker}-MARKER" not in text, marker
    assert "USER-META" not in text
    # Structure, names, ids, ok flags and usage stay; lengths replace the text.
    user = bundle["transcript"][1]
    assert user["content"] is None and user["content_chars"] == len("USER-MARKER list files")
    assert "meta" not in user
    assistant = bundle["transcript"][2]
    assert assistant["content"] is None and assistant["meta"] == {
        "usage": {"input_tokens": 7, "output_tokens": 2, "cached_tokens": 1}
    }
    assert assistant["tool_calls"][0]["name"] == "ls"
    assert assistant["tool_calls"][0]["arguments"] is None
    assert assistant["tool_calls"][0]["arguments_chars"] == len('{"path":"ARG-MARKER"}')
    pair = bundle["tool_calls"][0]
    assert (pair["id"], pair["name"], pair["ok"], pair["result"]) == ("c1", "ls", True, None)
    assert pair["result_chars"] == len("TOOL-MARKER a b")
    assert bundle["approvals"][0]["name"] == "approval_granted"
    assert bundle["approvals"][0]["data"] is None
    # The model's replies stay, in replay only, so a scripted provider can play them back.
    assert [r["content"] for r in bundle["replay"]["responses"]] == ["Listing.", "Two files."]
    assert bundle["replay"]["responses"][0]["usage"]["output_tokens"] == 2
    assert bundle["session"]["title"] is None

    before = _count(mem)
    with pytest.raises(InvalidArgumentError, match="replay-only"):
        import_bundle(mem, bundle)
    assert _count(mem) == before


def test_replay_only_still_redacts_the_replies(mem: Client) -> None:
    s = mem.sessions.create([{"role": "assistant", "content": f"key {_secret('openai_api_key')}"}])
    bundle = export_bundle(s, mode="replay-only")
    assert _secret("openai_api_key") not in _dump(bundle)
    assert bundle["redactions"] == [
        {"where": "replay/responses/0/content", "kind": "openai_api_key", "count": 1}
    ]


# -- lineage -------------------------------------------------------------------------------


def test_lineage_lists_ancestors_and_descendants(mem: Client) -> None:
    root = mem.sessions.create([{"role": "user", "content": "hi"}], title="root")
    fork = root.fork()
    grandchild = fork.fork()
    bundle = export_bundle(fork)
    assert bundle["session"]["parent_session_ids"] == [root.id]
    assert bundle["session"]["lineage_operator"] == fork.lineage_operator
    by_id = {n["id"]: n for n in bundle["lineage"]}
    assert by_id[root.id]["relation"] == "ancestor" and by_id[root.id]["title"] == "root"
    assert by_id[grandchild.id]["relation"] == "descendant"
    assert by_id[grandchild.id]["parent_session_ids"] == [fork.id]
    assert fork.id not in by_id
    assert export_bundle(fork, include_lineage=False)["lineage"] == []
    copy = import_bundle(mem, bundle)
    assert copy.settings.metadata["imported_bundle"]["lineage"] == [root.id]
    assert copy.parent_session_ids == ()


# -- refusal -------------------------------------------------------------------------------


@pytest.mark.parametrize("schema", ["plait.bundle.v2", "plait.bundle.v10", "plait.bundle.x"])
def test_newer_or_unknown_schema_is_refused(mem: Client, tmp_path: Path, schema: str) -> None:
    bundle = export_bundle(mem.sessions.create([{"role": "user", "content": "hi"}]))
    bundle["schema"] = schema
    before = _count(mem)
    with pytest.raises(BundleVersionError) as info:
        import_bundle(mem, bundle)
    assert info.value.schema == schema and isinstance(info.value, InvalidArgumentError)
    path = tmp_path / "b.json"
    path.write_text(json.dumps(bundle))
    with pytest.raises(BundleVersionError):
        import_bundle(mem, path)
    assert _count(mem) == before


def _bad(mutate: str, bundle: dict[str, Any]) -> object:
    if mutate == "not-object":
        return [bundle]
    if mutate == "no-schema":
        del bundle["schema"]
    elif mutate == "bad-mode":
        bundle["mode"] = "everything"
    elif mutate == "no-transcript":
        del bundle["transcript"]
    elif mutate == "no-session":
        bundle["session"] = "x"
    elif mutate == "bad-kind":
        bundle["transcript"][1]["kind"] = "robot"
    elif mutate == "content-not-text":
        bundle["transcript"][1]["content"] = 5
    elif mutate == "last-message-bad":
        bundle["transcript"][-1]["tool_calls"] = "not a list"
    elif mutate == "unknown-key":
        bundle["transcript"][0]["surprise"] = True
    return bundle


@pytest.mark.parametrize(
    "mutate",
    [
        "not-object",
        "no-schema",
        "bad-mode",
        "no-transcript",
        "no-session",
        "bad-kind",
        "content-not-text",
        "last-message-bad",
        "unknown-key",
    ],
)
def test_malformed_bundle_is_refused_and_nothing_is_created(mem: Client, mutate: str) -> None:
    s = mem.sessions.create(
        [
            {"role": "user", "content": "one"},
            {"role": "assistant", "content": "two"},
            {"role": "assistant", "content": "three"},
        ]
    )
    bad = _bad(mutate, export_bundle(s, mode="local"))
    before = _count(mem)
    with pytest.raises(ImportFormatError):
        import_bundle(mem, bad)  # type: ignore[arg-type]
    assert _count(mem) == before


@pytest.mark.parametrize("content", ["{not json", "", "\xff"])
def test_unreadable_file_is_refused(mem: Client, tmp_path: Path, content: str) -> None:
    path = tmp_path / "b.json"
    path.write_bytes(content.encode("latin-1"))
    with pytest.raises(ImportFormatError) as info:
        import_bundle(mem, path)
    assert info.value.path == str(path)


def test_bad_arguments(mem: Client) -> None:
    s = mem.sessions.create([{"role": "user", "content": "hi"}])
    with pytest.raises(InvalidArgumentError, match="mode"):
        export_bundle(s, mode="everything")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="local"):
        export_bundle(s, mode="local", redact=["x"])
    with pytest.raises(InvalidArgumentError, match="regular expression"):
        export_bundle(s, redact=["("])
    with pytest.raises(InvalidArgumentError, match="list"):
        export_bundle(s, redact="sk-.*")  # type: ignore[arg-type]
    with pytest.raises(SessionNotFoundError):
        export_bundle(mem.sessions.new())
    taken = export_bundle(s, mode="local")
    with pytest.raises(InvalidArgumentError):
        import_bundle(mem, taken, session_id="nul\x00")


# -- the CLI -------------------------------------------------------------------------------


def test_cli_export_and_import_a_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "x.db"
    with Client(ws, store=db) as c:
        sid = _seeded(c).id

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--store", str(db), "--workspace", str(ws), *args])

    out = tmp_path / "b.json"
    result = run("export", sid, "--bundle", "sanitized", "-o", str(out), "--redact", "ACME-[A-Z]+")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(out)
    text = out.read_text()
    assert json.loads(text)["mode"] == "sanitized"
    for secret in SECRETS:
        assert secret not in text, secret

    result = run("import", str(out), "--id", "from-bundle")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("imported from-bundle")
    assert "plait.bundle.v1 (sanitized)" in result.stdout

    monkeypatch.chdir(tmp_path)  # the CLI's default is the working directory, the whole id
    local = run("export", sid, "--bundle", "local")
    assert local.exit_code == 0, local.output
    default_path = Path(local.stdout.strip())
    assert default_path == tmp_path / f"plait-{sid}.bundle.json"
    result = run("import", str(default_path), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is True and data["source"]["mode"] == "local"
    with Client(ws, store=db) as c:
        copy = c.open(data["session_id"])
        original = c.open(sid)
        assert [m.to_dict() for m in copy.history(full=True)] == [
            m.to_dict() for m in original.history(full=True)
        ]

    assert run("export", sid, "--redact", "x").exit_code == 2
    assert run("import", str(default_path), "--last", "2").exit_code == 2
    replay = run("export", sid, "--bundle", "replay-only", "-o", str(tmp_path / "r.json"))
    assert replay.exit_code == 0
    refused = run("import", str(tmp_path / "r.json"))
    assert refused.exit_code == 1 and "replay-only" in refused.output
    newer = json.loads(text)
    newer["schema"] = "plait.bundle.v2"
    (tmp_path / "v2.json").write_text(json.dumps(newer))
    refused = run("import", str(tmp_path / "v2.json"))
    assert refused.exit_code == 1 and "plait.bundle.v2" in refused.output


def test_a_run_leaves_trace_spans_and_replays_offline(mem: Client, tmp_path: Path) -> None:
    import asyncio

    from plait.providers import Reply, ScriptedProvider, Usage
    from plait.records import ToolCall

    box = tmp_path / "box"
    box.mkdir()
    (box / "todo.txt").write_text("ship it")
    s = mem.sessions.create([{"role": "system", "content": "Be brief."}]).to("local", spec=str(box))
    script = [
        Reply(
            tool_calls=(ToolCall("t1", "read_file", {"path": "todo.txt"}),),
            usage=Usage(11, 3),
            finish_reason="tool_calls",
        ),
        Reply("The todo says: ship it.", usage=Usage(20, 6)),
    ]
    asyncio.run(s.prompt("what is left?", provider=ScriptedProvider(script)))
    bundle = export_bundle(s, mode="replay-only")
    spans = bundle["trace"]
    assert [span["name"] for span in spans] == [
        "chat scripted",
        "execute_tool read_file",
        "chat scripted",
    ]
    assert all(span["end_us"] >= span["start_us"] and span["duration_us"] >= 0 for span in spans)
    assert spans[0]["attributes"]["gen_ai.usage.input_tokens"] == 11
    assert spans[1]["attributes"]["gen_ai.tool.call.id"] == "t1"
    assert spans[1]["attributes"]["ok"] is True
    # The replay fixtures play the run back offline on a fresh session: same steps, same answer.
    replay = ScriptedProvider.from_replay(export_bundle(s)["replay"]["responses"])
    again = mem.sessions.create([{"role": "system", "content": "Be brief."}]).to(
        "local", spec=str(box)
    )
    result = asyncio.run(again.prompt("what is left?", provider=replay))
    assert result.text == "The todo says: ship it." and result.steps == 2
    assert [m.role for m in again.history()] == [m.role for m in s.history()]
    assert next(m for m in again.history() if m.role == "tool").text == "ship it"
    # Without runs there are no spans.
    assert export_bundle(mem.sessions.create([{"role": "user", "content": "hi"}]))["trace"] == []


def test_replay_only_drops_the_unmapped_records_an_import_kept(mem: Client, tmp_path: Path) -> None:
    # An import keeps the records it did not map verbatim (here a Claude Code progress line
    # holding hook output); a replay-only bundle must not carry their text.
    lines = [
        {"type": "progress", "uuid": "p1", "data": {"output": "HOOK-MARKER secret plan"}},
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": "hi"}},
        {
            "type": "assistant",
            "uuid": "a1",
            "message": {
                "id": "m1",
                "role": "assistant",
                "content": [{"type": "text", "text": "yo"}],
            },
        },
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    result = seed_from_jsonl(mem, path)
    assert result.ok
    session = mem.open(result.session_id or "")
    assert "HOOK-MARKER" in _dump(export_bundle(session, mode="local"))
    bundle = export_bundle(session, mode="replay-only")
    assert "HOOK-MARKER" not in _dump(bundle)
    seeded = bundle["session"]["metadata"]["seeded_from_jsonl"]
    assert seeded["unmapped"] is None and seeded["unmapped_chars"] > 0


def _bundle_file(tmp_path: Path, mem: Client, **extra: Any) -> tuple[Path, dict[str, Any]]:
    bundle = export_bundle(_seeded(mem), mode="local")
    bundle.update(extra)
    path = tmp_path / "big.bundle.json"
    path.write_text(json.dumps(bundle))
    return path, bundle


def test_a_huge_ignored_trace_costs_no_more_than_its_bytes(mem: Client, tmp_path: Path) -> None:
    import tracemalloc

    path, bundle = _bundle_file(tmp_path, mem, trace=[[]] * 2_000_000)
    size = path.stat().st_size
    tracemalloc.start()
    try:
        session = import_bundle(mem, path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # json.loads built 2M lists (some 26 bytes of memory for each of the file's bytes);
    # the trace is never built now: the file's bytes and what is kept, no more.
    assert peak < 2 * size
    assert session.transcript.length == len(bundle["transcript"])
    assert session.transcript.records[-1].text == bundle["transcript"][-1]["content"]


def test_read_bundle_keeps_what_it_is_asked_and_checks_the_rest(
    mem: Client, tmp_path: Path
) -> None:
    path, bundle = _bundle_file(tmp_path, mem)
    before = _count(mem)
    assert read_bundle(path) == json.loads(path.read_text())  # everything, as json reads it
    kept = read_bundle(path, keep={"replay"})
    assert kept["replay"] == bundle["replay"] and kept["trace"] == [] and kept["events"] == []
    assert kept["transcript"] == bundle["transcript"]
    for bad in ('"trace": [[}]', '"trace": {"a": 1}', '"trace": [' + "[" * 600 + "]" * 600 + "]"):
        text = path.read_text().replace('"trace": []', bad)
        assert bad in text
        path.write_text(text)
        with pytest.raises(ImportFormatError):
            import_bundle(mem, path)
        path.write_text(json.dumps(bundle))
    assert _count(mem) == before  # nothing was created


def test_a_bundle_that_keeps_no_message_says_so(mem: Client, tmp_path: Path) -> None:
    path, _ = _bundle_file(tmp_path, mem, transcript=[], trace=[[]] * 1000)
    with pytest.raises(ImportFormatError, match="holds no messages"):
        import_bundle(mem, path)


def test_a_shared_bundle_never_says_where_the_session_ran(client: Client, tmp_path: Path) -> None:
    box, anchor, lib = tmp_path / "box", tmp_path / "anchor", tmp_path / "lib"
    for folder in (box, anchor, lib):
        folder.mkdir()
    s = client.sessions.create([{"role": "user", "content": "hi"}]).to("local", spec=str(box))
    s.workspace.set_anchor(str(anchor))
    assert s.workspace.add_root(str(lib), mounted_at="vendor/lib").ok
    for mode in ("sanitized", "replay-only"):
        bundle = export_bundle(s, mode=mode)  # type: ignore[arg-type]
        assert str(tmp_path) not in json.dumps(bundle), mode
        settings = bundle["session"]["metadata"]["settings"]
        assert settings["workspace_anchor"] == "[REDACTED:host_path]"
        assert settings["sandbox"] == {"backend": "local", "spec": "[REDACTED:host_path]"}
        assert settings["roots"][0]["mounted_at"] == "vendor/lib"  # where it is in the sandbox
        kinds = {(e["where"], e["kind"]) for e in bundle["redactions"]}
        assert ("session/metadata/settings/roots/0/path", "host_path") in kinds
    # A local bundle is for one trust boundary: as stored.
    local = export_bundle(s, mode="local")
    assert local["session"]["metadata"]["settings"]["workspace_anchor"] == str(anchor)
