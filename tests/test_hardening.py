"""Hostile inputs a red-team pass found, each answered by a plait error before anything
is written: credentials, deep or huge JSON, huge integers, odd paths, export targets
that are not regular files, and labels a terminal or an SVG cannot hold.

A test marked ``xfail(strict=True)`` names a check that exists here but must still be
called from the session or client layer; it turns into a failure (XPASS) once the
call is made, so the mark is removed with it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import plait
import plait.interop
import plait.store
from plait import Client
from plait._checks import (
    MAX_INT,
    MAX_JSON_CHARS,
    MAX_JSON_DEPTH,
    check_int,
    check_json,
    check_name,
    clean_title,
)
from plait._files import export_target, write_atomically
from plait.auth import DurableSessions, authenticate
from plait.cli import cli
from plait.errors import (
    InvalidArgumentError,
    InvalidMessageError,
    SessionNotFoundError,
    StoreCorruptError,
    shown,
)
from plait.interop import write_bundle
from plait.records import decode_record, dumps


def _nested(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


DEEP = _nested(1500)  # deeper than the interpreter's recursion limit


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    ws = tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=tmp_path / "plait.db") as made:
        yield made


# -- finding 1: one string is not a list of keys ------------------------------------------


def test_a_string_of_static_keys_is_refused_not_split_into_letters() -> None:
    for keys in ("supersecretkey", b"supersecretkey", bytearray(b"k")):
        with pytest.raises(InvalidArgumentError, match="not one string"):
            authenticate("Bearer s", static_keys=keys)  # type: ignore[arg-type]
    for keys in ([b"bytes-key"], [""], {"key-0123456789": 7}, 5):
        with pytest.raises(InvalidArgumentError):
            authenticate("Bearer bytes-key", static_keys=keys)  # type: ignore[arg-type]
    assert authenticate("Bearer s", static_keys=["supersecretkey"]) is None
    found = authenticate("Bearer supersecretkey", static_keys=["supersecretkey"])
    assert found is not None and found.principal == "api-key"
    assert authenticate("Bearer k", static_keys={"k": "me"}).principal == "me"  # type: ignore[union-attr]


# -- finding 15: deep and huge JSON --------------------------------------------------------


def test_the_json_check_limits_depth_and_size() -> None:
    assert check_json(_nested(MAX_JSON_DEPTH)) == "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    for too_deep in (_nested(MAX_JSON_DEPTH + 1), DEEP, {"a": DEEP}, [{"b": _nested(80)}]):
        with pytest.raises(InvalidMessageError, match="nested"):
            check_json(too_deep, "metadata")
    with pytest.raises(InvalidMessageError, match="characters"):
        check_json({"blob": "x" * MAX_JSON_CHARS})
    # A string full of brackets is not nesting.
    assert check_json({"text": "[" * 1000}).startswith('{"text"')
    circular: list[Any] = []
    circular.append(circular)
    for bad in (circular, {"n": float("nan")}, {1: object()}, b"bytes"):
        with pytest.raises(InvalidMessageError):
            dumps(bad)


def test_every_write_path_refuses_deep_json_and_writes_nothing(client: Client) -> None:
    s = client.session
    s.inject({"role": "user", "content": "hello"})
    def state() -> tuple[object, ...]:
        return (s.live.version, s.settings.metadata, s.scratchpad(), len(s.transcript.records))

    before = state()
    attempts = [
        lambda: s.inject({"role": "user", "content": "x", "meta": {"a": DEEP}}),
        lambda: s.inject(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "name": "t", "arguments": {"a": DEEP}}],
            }
        ),
        lambda: s.inject(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "name": "t", "arguments": "[" * 5000 + "]" * 5000}],
            }
        ),
        lambda: s.settings.set_metadata("k", DEEP),
        lambda: s.settings.set(k=DEEP),
        lambda: s.transcript.log_event("e", {"a": DEEP}),
        lambda: s.scratchpad.set({"a": DEEP}),
        lambda: client.sessions.create([{"role": "user", "content": "x"}], metadata={"a": DEEP}),
        lambda: DurableSessions(client.store).create(
            "p", ttl=timedelta(hours=1), attributes={"a": DEEP}
        ),
    ]
    for attempt in attempts:
        with pytest.raises(InvalidArgumentError):
            attempt()
    assert state() == before
    assert len(client.sessions.list()) == 1


def test_a_stored_row_nested_past_the_decoder_is_corrupt_not_a_crash() -> None:
    payload = '{"name":"e","data":{"a":' + "[" * 100_000 + "]" * 100_000 + "}}"
    with pytest.raises(StoreCorruptError):
        decode_record("event", payload, seq=0, id="x", created_at_us=0)
    with pytest.raises(StoreCorruptError):
        decode_record("user", '{"content":"x"}', seq=0, id="x", created_at_us=0,
                      meta="[" * 100_000 + "]" * 100_000)


def test_an_error_shows_a_hostile_value_briefly() -> None:
    assert shown("0190f4a0-0000-7000-8000-00000000c0de") == "'0190f4a0-0000-7000-8000-00000000c0de'"
    assert shown("i" * 200) == repr("i" * 200)  # the longest session id, whole
    assert len(shown("x" * 10**6)) < 300
    assert len(shown(DEEP)) < 50
    assert len(shown(10**5000)) < 100

    class Hostile:
        def __repr__(self) -> str:
            raise RuntimeError("no")

    assert shown(Hostile()).startswith("<Hostile")
    error = SessionNotFoundError(DEEP)
    assert error.session_id is DEEP and len(str(error)) < 100


# -- finding 15: huge integers -------------------------------------------------------------


def test_the_integer_check() -> None:
    assert check_int(5, "limit", lo=1) == 5
    assert check_int(MAX_INT, "limit") == MAX_INT
    for bad in (2**70, MAX_INT + 1, -1, 10**23):
        with pytest.raises(InvalidArgumentError, match="between"):
            check_int(bad, "limit")
    for bad in (True, 1.0, "3", None):
        with pytest.raises(InvalidArgumentError, match="must be an int"):
            check_int(bad, "limit")


def test_huge_numbers_on_the_command_line_are_usage_errors(tmp_path: Path) -> None:
    base = ["--store", str(tmp_path / "s.db"), "--workspace", str(tmp_path)]
    runner = CliRunner()
    for args in (
        ["sessions", "list", "--limit", str(10**23)],
        ["stats", "--limit", str(10**23)],
        ["token", "create", "me", "--ttl", "99999999999d"],
        ["token", "create", "me", "--ttl", "9" * 40],
    ):
        result = runner.invoke(cli, [*base, *args])
        assert result.exit_code == 2, (args, result.output, result.exception)
        assert "Traceback" not in result.output
    Client(tmp_path, store=tmp_path / "s.db").close()  # a listing reads a store that exists
    assert runner.invoke(cli, [*base, "sessions", "list", "--limit", "5"]).exit_code == 0


def test_a_token_lifetime_past_what_the_store_holds_is_refused(client: Client) -> None:
    with pytest.raises(InvalidArgumentError):
        DurableSessions(client.store).create("p", ttl=timedelta(days=999_999_999))
    assert DurableSessions(client.store).purge() == 0


def test_a_token_to_expire_can_come_from_standard_input(tmp_path: Path) -> None:
    base = ["--store", str(tmp_path / "s.db"), "--workspace", str(tmp_path)]
    runner = CliRunner()
    made = runner.invoke(cli, [*base, "token", "create", "me"])
    token = made.stdout.strip()
    assert runner.invoke(cli, [*base, "token", "expire", "-"], input=token + "\n").exit_code == 0
    again = runner.invoke(cli, [*base, "token", "expire", "-"], input=token)
    assert again.exit_code == 1


def test_to_jsonl_of_something_else_is_a_plait_error() -> None:
    for bad in (None, "id", 0):
        with pytest.raises(InvalidArgumentError):
            plait.interop.to_jsonl(bad)  # type: ignore[arg-type]


def test_wrong_argument_types_are_plait_errors(client: Client, tmp_path: Path) -> None:
    s = client.sessions.create([{"role": "user", "content": "hi"}])
    for model in (-1, True, b"gpt-4o"):
        with pytest.raises(InvalidArgumentError, match="model"):
            s.context(model=model)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="model"):
            s.transcript.compaction_due(model=model)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="tools"):
        s.context(tools=True)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="mapping"):
        s.transcript.compact_preview(True)  # type: ignore[arg-type]
    for messages in (None, 5, "hi", {"role": "user"}):
        with pytest.raises(InvalidArgumentError, match="list"):
            s.transcript.inject_many(messages)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="list"):
            client.sessions.create(messages)  # type: ignore[arg-type]
    for store in (0, object(), b"x.db", "", "a\0b", "\ud800.db"):
        with pytest.raises(InvalidArgumentError):
            plait.Client(tmp_path, store=store)  # type: ignore[arg-type]
    for workspace in (None, b"", 3):
        with pytest.raises(InvalidArgumentError, match="path"):
            plait.Client(workspace, store=":memory:")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        plait.store.SQLiteStore(tmp_path / "x.db", durability="fast")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        plait.store.SQLiteStore(tmp_path / "x.db", migrations=[(1, "x")])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError):
        client.host.handle(None)  # type: ignore[arg-type]
    assert client.host.holds_lock({}) is False  # type: ignore[arg-type]


# -- finding 11: exports replace regular files only --------------------------------------


def _exported_to(client: Client, target: Path) -> str:
    s = client.session
    s.inject({"role": "user", "content": "hello"})
    return s.export(target)


def test_an_export_refuses_a_symlink_a_fifo_and_a_folder(client: Client, tmp_path: Path) -> None:
    kept = tmp_path / "kept.txt"
    kept.write_text("mine")
    link = tmp_path / "link.html"
    link.symlink_to(kept)
    fifo = tmp_path / "pipe.html"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.html"
    folder.mkdir()
    loop = tmp_path / "loop.html"
    loop.symlink_to(loop)
    for target, why in ((link, "symlink"), (fifo, "FIFO"), (folder, "folder"), (loop, "symlink")):
        with pytest.raises(InvalidArgumentError, match=why):
            _exported_to(client, target)
    assert link.is_symlink() and kept.read_text() == "mine"
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and folder.is_dir()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_an_export_as_root_does_not_replace_a_device(client: Client, tmp_path: Path) -> None:
    device = tmp_path / "null.html"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a second /dev/null
    with pytest.raises(InvalidArgumentError, match="device"):
        _exported_to(client, device)
    assert stat.S_ISCHR(device.lstat().st_mode)


def test_an_export_replaces_a_regular_file_and_follows_a_link_when_asked(
    client: Client, tmp_path: Path
) -> None:
    old = tmp_path / "old.html"
    old.write_text("old")
    assert _exported_to(client, old) == str(old)
    assert "hello" in old.read_text()
    real = tmp_path / "real.html"
    link = tmp_path / "link.html"
    link.symlink_to(real)
    target = export_target(link, str(tmp_path), "x" * 8, "html", follow_symlinks=True)
    assert target == real
    write_atomically(target, "through the link")
    assert link.is_symlink() and real.read_text() == "through the link"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    to_fifo = tmp_path / "to-fifo.html"
    to_fifo.symlink_to(fifo)
    with pytest.raises(InvalidArgumentError, match="FIFO"):
        export_target(to_fifo, str(tmp_path), "x" * 8, "html", follow_symlinks=True)


def test_every_export_verb_refuses_a_symlink_unless_asked_to_follow_it(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    db = tmp_path / "s.db"
    with Client(ws, store=db) as c:
        s = c.sessions.create([{"role": "user", "content": "hello"}])
        writers = {
            "html": lambda p, **kw: s.export(p, **kw),
            "md": lambda p, **kw: s.export(p, format="markdown", **kw),
            "bundle.json": lambda p, **kw: write_bundle(s, p, **kw),
        }
        for ext, write in writers.items():
            real, link = tmp_path / f"real.{ext}", tmp_path / f"link.{ext}"
            link.symlink_to(real)
            with pytest.raises(InvalidArgumentError, match="symlink"):
                write(link)
            assert not real.exists()
            with pytest.raises(InvalidArgumentError, match="True or False"):
                write(link, follow_symlinks="yes")
            assert write(link, follow_symlinks=True) == str(real)
            assert link.is_symlink() and "hello" in real.read_text()
        sid = s.id
    base = ["--store", str(db), "--workspace", str(ws), "export", sid, "-o"]
    for extra in ([], ["--md"], ["--bundle", "local"], ["--as", "openai"]):
        real, link = tmp_path / "cli-real", tmp_path / "cli-link"
        link.unlink(missing_ok=True)
        real.unlink(missing_ok=True)
        link.symlink_to(real)
        refused = CliRunner().invoke(cli, [*base, str(link), *extra])
        assert refused.exit_code == 1 and "symlink" in refused.stderr, refused.output
        assert not real.exists()
        followed = CliRunner().invoke(cli, [*base, str(link), *extra, "--follow-symlinks"])
        assert followed.exit_code == 0, followed.output
        assert followed.stdout.strip() == str(real) and link.is_symlink()
        assert "hello" in real.read_text()


def test_a_target_swapped_for_a_fifo_before_the_rename_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "out.html"
    checked = export_target(target, str(tmp_path), "x" * 8, "html")
    os.mkfifo(target)  # what was absent when checked is a FIFO when written
    with pytest.raises(InvalidArgumentError, match="FIFO"):
        write_atomically(checked, "page")
    assert stat.S_ISFIFO(target.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.html"]


def test_the_command_line_export_to_a_fifo_fails_and_says_why(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with Client(ws, store=tmp_path / "s.db") as c:
        sid = c.sessions.create([{"role": "user", "content": "hi"}]).id
    fifo = tmp_path / "out.html"
    os.mkfifo(fifo)
    base = ["--store", str(tmp_path / "s.db"), "--workspace", str(ws)]
    result = CliRunner().invoke(cli, [*base, "export", sid, "-o", str(fifo)])
    assert result.exit_code != 0 and "FIFO" in result.output
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_a_path_with_a_lone_surrogate_is_a_plait_error(client: Client, tmp_path: Path) -> None:
    for bad in (str(tmp_path / "\ud800.html"), 7, b"\0", DEEP):
        with pytest.raises(InvalidArgumentError):
            export_target(bad, str(tmp_path), "x" * 8, "html")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        _exported_to(client, tmp_path / "\udcff\ud800.html")


# -- findings 13 and 17: labels ------------------------------------------------------------


def test_the_label_checks() -> None:
    assert clean_title("  a\ttitle\nhere ", 200) == "a title here"
    assert clean_title("café ☕ 👩‍💻", 200) == "café ☕ 👩‍💻"
    for bad in ("a\x00b", "\x1b]0;pwned\x07", "bell\x07", "del\x7f", "c1\x9b", "\ud800", "\ufffe"):
        with pytest.raises(InvalidArgumentError, match="control"):
            clean_title(bad, 200)
    for bad_type in (b"t", 3, None):
        with pytest.raises(InvalidArgumentError):
            clean_title(bad_type, 200)
    assert check_name("Session.import", "lineage_operator") == "Session.import"
    for bad_name in (b"x", 5, "", " x", "a\x00", "x" * 201, "\ud800"):
        with pytest.raises(InvalidArgumentError):
            check_name(bad_name, "lineage_operator")


def test_a_title_with_control_characters_is_refused(client: Client) -> None:
    s = client.session
    s.inject({"role": "user", "content": "hi"})
    for bad in ("a\x00b", "\x1b]0;pwned\x07"):
        with pytest.raises(InvalidArgumentError):
            s.rename(bad)
    with pytest.raises(InvalidArgumentError):
        client.sessions.create([], title="x\x00")


def test_a_lineage_operator_that_is_not_text_is_refused(client: Client) -> None:
    for bad in (b"Session.import", 7, "a\x00b"):
        with pytest.raises(InvalidArgumentError):
            client.sessions.create([], lineage_operator=bad)  # type: ignore[arg-type]
    assert client.sessions.list() == []


def test_a_huge_list_limit_is_refused(client: Client) -> None:
    with pytest.raises(InvalidArgumentError):
        client.sessions.list(limit=2**70)


def test_a_deeply_nested_id_is_unknown_not_a_recursion_error(client: Client) -> None:
    with pytest.raises((SessionNotFoundError, InvalidArgumentError)):
        client.open(DEEP)
    with pytest.raises(InvalidArgumentError):
        client.sessions.create([], session_id=DEEP)
