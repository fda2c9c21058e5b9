"""What an import reads: only regular files, never too much, never blocking."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from plait import Client
from plait.errors import ImportFormatError
from plait.interop import (
    MAX_SOURCE_BYTES,
    import_bundle,
    is_bundle_file,
    read_bundle,
    seed_from_jsonl,
)

LINE = json.dumps({"role": "user", "content": "hi"}) + "\n"


def _plait(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``plait ARGS`` as a real process with no stdin; the timeout only guards a hang."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "plait.cli",
            "--store",
            str(tmp_path / "x.db"),
            "--workspace",
            str(ws),
            *args,
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    """A named pipe no one writes to: opening or reading it the ordinary way blocks."""
    path = tmp_path / "pipe.jsonl"
    os.mkfifo(path)
    return path


def test_a_fifo_is_refused_without_blocking(mem: Client, fifo: Path) -> None:
    with pytest.raises(ImportFormatError, match="cannot import a FIFO"):
        seed_from_jsonl(mem, fifo)
    with pytest.raises(ImportFormatError, match="cannot import a FIFO"):
        read_bundle(fifo)
    with pytest.raises(ImportFormatError, match="cannot import a FIFO"):
        import_bundle(mem, fifo)
    assert is_bundle_file(fifo) is False
    assert mem.sessions.list() == []


def test_a_device_is_refused(mem: Client) -> None:
    with pytest.raises(ImportFormatError, match="cannot import a character device"):
        seed_from_jsonl(mem, "/dev/zero")
    with pytest.raises(ImportFormatError, match="character device"):
        read_bundle("/dev/zero")
    assert is_bundle_file("/dev/zero") is False


def test_a_symlink_to_a_regular_file_is_read_and_to_a_fifo_is_refused(
    mem: Client, tmp_path: Path, fifo: Path
) -> None:
    real = tmp_path / "real.jsonl"
    real.write_text(LINE)
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    assert seed_from_jsonl(mem, link).ok
    bad = tmp_path / "bad.jsonl"
    bad.symlink_to(fifo)
    with pytest.raises(ImportFormatError, match="FIFO"):
        seed_from_jsonl(mem, bad)


def test_a_file_over_the_limit_is_refused_unread(mem: Client, tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    with big.open("wb") as f:  # sparse: the size is there, the bytes are not
        f.truncate(MAX_SOURCE_BYTES + 1)
    with pytest.raises(ImportFormatError, match=f"more than the {MAX_SOURCE_BYTES}"):
        seed_from_jsonl(mem, big)
    with pytest.raises(ImportFormatError, match="more than the"):
        read_bundle(big)
    assert mem.sessions.list() == []


@pytest.mark.slow
def test_plait_import_refuses_dev_zero_and_a_fifo(tmp_path: Path, fifo: Path) -> None:
    for source, what in (("/dev/zero", "character device"), (str(fifo), "FIFO")):
        done = _plait(tmp_path, "import", source)
        assert done.returncode == 1, done.stderr
        assert f"cannot import a {what}" in done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_plait_import_of_a_fifo_in_a_terminal_returns_to_the_prompt(
    tmp_path: Path, fifo: Path
) -> None:
    # In a real terminal (tmux), the command must come back with its error, not sit on
    # the pipe waiting for a writer.
    sock = f"plait-import-{os.getpid()}"
    ws = tmp_path / "ws"
    ws.mkdir()
    plait = Path(sys.executable).with_name("plait")
    command = (
        f"{plait} --store {tmp_path / 'x.db'} --workspace {ws} import {fifo}; "
        f"echo done=$?; {plait} --store {tmp_path / 'x.db'} --workspace {ws} import /dev/zero; "
        "echo done=$?"
    )
    tmux = ["tmux", "-L", sock]
    subprocess.run(
        [*tmux, "new-session", "-d", "-x", "200", "-y", "50", "bash", "--norc"], check=True
    )
    try:
        subprocess.run([*tmux, "send-keys", command, "Enter"], check=True)
        screen = ""
        for _ in range(600):  # waits for the two commands to end; not a measure of speed
            screen = subprocess.run(
                [*tmux, "capture-pane", "-p"], capture_output=True, text=True, check=True
            ).stdout
            if len(re.findall(r"^done=\d+$", screen, re.MULTILINE)) >= 2:
                break
            time.sleep(0.1)
        assert "cannot import a FIFO (named pipe)" in screen
        assert "cannot import a character device" in screen
        assert re.findall(r"^done=\d+$", screen, re.MULTILINE) == ["done=1", "done=1"]
    finally:
        subprocess.run([*tmux, "kill-server"], check=False)
