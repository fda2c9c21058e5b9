"""A tool that swaps a workspace folder for a symlink while plait walks it leads nothing out.

Checkpoints and restores walk the workspace on the host, and whatever runs in the
workspace may change it between two steps of that walk. Here the change is made at
the exact step: every ``os`` function (and ``open``) a walk could use is wrapped, and
the first time the walk touches a chosen path, the "tool" moves a folder (or a file)
aside and puts a symlink to a folder outside the workspace in its place. Whatever the
walk does next must stay inside: nothing outside is read into the checkpoint, made,
removed, written or has its mode changed.

The module runs as whoever runs the tests (root, in CI), and once more as an ordinary
user (``nobody``, through ``setpriv``) where the tests run as root.
"""

from __future__ import annotations

import builtins
import hashlib
import io
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from plait.errors import InvalidArgumentError
from plait.sandbox import CheckpointStore

_AS_USER = "PLAIT_TEST_WALK_RACES_AS_USER"

# The os functions a walk by path or by descriptor could reach a name with, and the
# positional arguments that name one.
_NAMED = {
    "open": (0,),
    "stat": (0,),
    "lstat": (0,),
    "scandir": (0,),
    "listdir": (0,),
    "mkdir": (0,),
    "makedirs": (0,),
    "symlink": (1,),
    "readlink": (0,),
    "chmod": (0,),
    "unlink": (0,),
    "remove": (0,),
    "rmdir": (0,),
    "replace": (0, 1),
    "rename": (0, 1),
    "utime": (0,),
}
_OPENS = {"open", "builtins.open"}
"""Only the calls that open a name: the swap lands after the walk looked at it."""
_ANY = set(_NAMED) | {"builtins.open"}

_real_fstat = os.fstat
_real_rename = os.rename
_real_symlink = os.symlink


def _ident(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


class Swap:
    """The tool's move: at the walk's first touch of ``trigger``, ``victim`` becomes a link.

    ``victim`` is renamed to ``<name>.moved`` (it stays in the workspace, as a tool's
    ``mv`` would leave it) and a symlink to ``target`` takes its name.
    """

    def __init__(
        self, trigger: Path, victim: Path, target: Path, calls: set[str] = _ANY
    ) -> None:
        self.trigger = trigger
        self.victim = victim
        self.target = target
        self.calls = calls
        self.done = False
        self._parent = _ident(os.stat(trigger.parent))
        st = os.lstat(trigger)
        self._inside = _ident(st) if stat.S_ISDIR(st.st_mode) else None

    def _touches(self, name: object, dir_fd: object) -> bool:
        if isinstance(name, int) or not isinstance(name, (str, bytes, os.PathLike)):
            return False
        text = os.fsdecode(name)
        if isinstance(dir_fd, int) and not os.path.isabs(text):
            here = _ident(_real_fstat(dir_fd))
            first = text.split("/", 1)[0]
            return (here == self._parent and first == self.trigger.name) or (
                self._inside is not None and here == self._inside
            )
        full = os.path.abspath(text)
        return full == str(self.trigger) or full.startswith(str(self.trigger) + "/")

    def seen(self, call: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """A walk's call: the swap is made, once, before the call that first touches ``trigger``."""
        if self.done or call not in self.calls:
            return
        for position in _NAMED.get(call, (0,)):
            if call in ("replace", "rename"):
                dir_fd = kwargs.get("src_dir_fd" if position == 0 else "dst_dir_fd")
            else:
                dir_fd = kwargs.get("dir_fd")
            if position < len(args) and self._touches(args[position], dir_fd):
                self.done = True
                _real_rename(self.victim, self.victim.with_name(self.victim.name + ".moved"))
                _real_symlink(self.target, self.victim)
                return


def _wrapped(swap: Swap, call: str, real: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        swap.seen(call, args, kwargs)
        return real(*args, **kwargs)

    return wrapper


@pytest.fixture
def race(monkeypatch: pytest.MonkeyPatch) -> Callable[[Swap], Swap]:
    """Arm a swap: every call a walk could make is watched for its trigger."""

    def arm(swap: Swap) -> Swap:
        for name in _NAMED:
            monkeypatch.setattr(os, name, _wrapped(swap, name, getattr(os, name)))
        real_open = builtins.open
        monkeypatch.setattr(builtins, "open", _wrapped(swap, "builtins.open", real_open))
        monkeypatch.setattr(io, "open", _wrapped(swap, "builtins.open", real_open))
        return swap

    return arm


def _snapshot(folder: Path) -> dict[str, object]:
    """Everything of a folder a walk could change: kinds, bytes, link targets, modes, times."""
    seen: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            st = path.lstat()
            rel = str(path.relative_to(folder))
            if stat.S_ISLNK(st.st_mode):
                seen[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                seen[rel] = ("dir", stat.S_IMODE(st.st_mode), st.st_mtime_ns)
            else:
                seen[rel] = ("file", path.read_bytes(), stat.S_IMODE(st.st_mode), st.st_mtime_ns)
    return seen


_OUTSIDE = {
    "one.txt": b"OUTSIDE one",
    "sub/two.txt": b"OUTSIDE two",
    "junk/j.txt": b"OUTSIDE junk",
    "three.txt": b"OUTSIDE three",
    "secret.txt": b"OUTSIDE secret",
}


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace, and beside it a folder whose names mirror the workspace's."""
    base = tmp_path.resolve()
    ws, outside = base / "ws", base / "outside"
    for rel, data in {
        "a/one.txt": b"one",
        "a/sub/two.txt": b"two",
        "b/three.txt": b"three",
        "f.txt": b"f",
    }.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_bytes(data)
    os.symlink("one.txt", ws / "a" / "link")
    for rel, data in _OUTSIDE.items():
        (outside / rel).parent.mkdir(parents=True, exist_ok=True)
        (outside / rel).write_bytes(data)
    (outside / "one.txt").chmod(0o600)
    return ws, outside


def _stored_outside(store: CheckpointStore) -> list[str]:
    """The outside files whose bytes the checkpoint store holds."""
    return [
        rel for rel, data in _OUTSIDE.items() if store.objects.has(hashlib.sha256(data).hexdigest())
    ]


@pytest.mark.parametrize(
    ("trigger", "victim", "to", "calls"),
    [
        ("b", "b", "", _ANY),  # a folder swapped as the walk comes to it
        ("b", "b", "", _OPENS),  # ... after the walk saw a folder there, before it opens it
        ("f.txt", "f.txt", "secret.txt", _OPENS),  # a file swapped before it is read
        ("a/sub", "a", "", _ANY),  # the folder the walk is in, swapped from above
    ],
    ids=["folder", "folder-once-seen", "file-once-seen", "folder-above"],
)
def test_a_checkpoint_reads_nothing_through_a_link_swapped_in_mid_walk(
    places: tuple[Path, Path],
    tmp_path: Path,
    race: Callable[[Swap], Swap],
    trigger: str,
    victim: str,
    to: str,
    calls: set[str],
) -> None:
    ws, outside = places
    before = _snapshot(outside)
    store = CheckpointStore(tmp_path / "cp")
    target = outside / to if to else outside
    swap = race(Swap(ws / trigger, ws / victim, target, calls))
    cid = store.checkpoint(ws)
    assert swap.done
    assert _stored_outside(store) == []
    assert _snapshot(outside) == before
    files = store.files(cid)
    if victim == "a":
        # Swapped while the walk was inside it: the walk goes on in the folder it holds.
        assert files["a/sub/two.txt"] == ("file", hashlib.sha256(b"two").hexdigest())
    else:
        assert files[victim] == ("symlink", str(target))  # the link, as a link
        assert not any(path.startswith(victim + "/") for path in files)


def _stretch_of_work(ws: Path) -> None:
    """What a tool did after the checkpoint: every kind of change a restore must undo."""
    (ws / "a" / "one.txt").write_bytes(b"one, changed")
    (ws / "a" / "one.txt").chmod(0o600)
    (ws / "a" / "sub" / "two.txt").write_bytes(b"two, changed")
    (ws / "a" / "sub" / "new.txt").write_bytes(b"new")
    (ws / "a" / "junk").mkdir()
    (ws / "a" / "junk" / "j.txt").write_bytes(b"junk")
    (ws / "a" / "sub").chmod(0o700)
    (ws / "b" / "three.txt").unlink()
    (ws / "a" / "link").unlink()  # a restore makes it again


@pytest.mark.parametrize(
    ("trigger", "victim", "calls"),
    [
        ("a", "a", _ANY),  # a folder swapped as the restore comes to it
        ("a/sub", "a", _ANY),  # the folder being restored, swapped from above
        ("a/junk", "a", _ANY),  # ... as the restore removes what the checkpoint lacks
        ("a/one.txt", "a", _OPENS),  # ... as the restore reads a file to compare it
        ("b", "b", _ANY),  # a folder whose file the restore makes again
    ],
    ids=["folder", "folder-above", "while-removing", "while-comparing", "while-making"],
)
def test_a_restore_changes_nothing_through_a_link_swapped_in_mid_walk(
    places: tuple[Path, Path],
    tmp_path: Path,
    race: Callable[[Swap], Swap],
    monkeypatch: pytest.MonkeyPatch,
    trigger: str,
    victim: str,
    calls: set[str],
) -> None:
    ws, outside = places
    store = CheckpointStore(tmp_path / "cp")
    original = _snapshot(ws)
    cid = store.checkpoint(ws)
    _stretch_of_work(ws)
    before = _snapshot(outside)
    swap = race(Swap(ws / trigger, ws / victim, outside, calls))
    store.restore(ws, cid)
    assert swap.done
    assert _snapshot(outside) == before
    monkeypatch.undo()
    # The next restore (the tool done) gives back the checkpoint, link removed, not followed.
    shutil.rmtree(ws / (victim + ".moved"), ignore_errors=True)
    store.restore(ws, cid)
    assert _without_times(_snapshot(ws)) == _without_times(original)
    assert _snapshot(outside) == before


def _without_times(snapshot: dict[str, object]) -> dict[str, object]:
    return {
        rel: value[:-1] if isinstance(value, tuple) and value[0] in ("file", "dir") else value
        for rel, value in snapshot.items()
    }


def test_a_restore_into_a_folder_that_became_a_link_is_refused(
    places: tuple[Path, Path], tmp_path: Path
) -> None:
    """The root itself is the caller's to name; a link there is refused, never followed."""
    ws, outside = places
    store = CheckpointStore(tmp_path / "cp")
    cid = store.checkpoint(ws)
    before = _snapshot(outside)
    os.rename(ws, tmp_path / "ws.moved")
    os.symlink(outside, ws)
    with pytest.raises(InvalidArgumentError):
        store.restore(ws, cid)
    with pytest.raises(InvalidArgumentError):
        store.checkpoint(ws)
    assert _snapshot(outside) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to an ordinary user needs root")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is missing")
@pytest.mark.skipif(bool(os.environ.get(_AS_USER)), reason="already running as the user")
def test_the_same_races_and_checkpoints_as_an_ordinary_user() -> None:
    """plait run by an ordinary user (nobody, switched to from root): the same promises.

    This module and ``test_checkpoint.py`` run again as ``nobody``. As root,
    permissions never stop a walk; as a user, folders a restore makes or keeps
    without write permission must not stop it either.
    """
    base = Path(tempfile.mkdtemp(prefix="plait-walk-races-"))
    try:
        os.chown(base, 65534, 65534)
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        argv += [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0"]
        argv += [__file__, str(Path(__file__).with_name("test_checkpoint.py"))]
        argv += [f"--basetemp={base / 'pt'}", f"--rootdir={base}", "-c", os.devnull]
        # The outer run's own settings (xdist's worker, coverage) are not the inner run's.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
        env.update({_AS_USER: "1", "HOME": str(base)})
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=300, cwd=base, env=env,
            stdin=subprocess.DEVNULL,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert " passed" in done.stdout and "failed" not in done.stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)

