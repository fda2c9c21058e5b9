"""Trying to get out of the isolated backend, as a model would: through its tools.

Every test drives the built-in tools on a :class:`ToolContext` bound to an
isolated sandbox and then looks at the real machine: the files beside the
workspace, the processes still running, what the command could reach.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from plait.sandbox import Limits, Sandbox, SandboxPolicy, backend_named
from plait.tools import ToolContext, list_files, read_file, shell, write_file
from plait.tools.base import Root
from tests.sandbox.conftest import call, leftovers, open_isolated

PYTHON = os.path.realpath(getattr(sys, "_base_executable", sys.executable))


def _ctx(handle: Sandbox, *roots: Root) -> ToolContext:
    return ToolContext(handle.root, roots=roots, sandbox=handle)


def test_the_shell_sees_the_workspace_and_nothing_of_the_machine_beside_it(
    isolated: Sandbox, workspace: Path
) -> None:
    ctx = _ctx(isolated)
    (workspace / "mine.txt").write_text("in the workspace")
    assert call(shell, ctx, command="cat mine.txt").content.endswith("in the workspace")
    listing = call(shell, ctx, command="ls -a /; ls ~ /root /work /home 2>&1 | head -5")
    shown = listing.content.split()
    assert "work" not in shown and "home" not in shown and "var" not in shown
    # The folder holding the workspace, as the sandbox sees it, is empty but for the workspace.
    beside = call(shell, ctx, command=f"ls -1a {workspace.parent}")
    assert beside.content.splitlines()[1:] == [".", "..", "ws"]


def test_writes_through_dotdot_and_absolute_paths_never_reach_the_machine(
    isolated: Sandbox, workspace: Path
) -> None:
    ctx = _ctx(isolated)
    outside = workspace.parent
    script = (
        "echo escaped > ../dotdot.txt; "
        f"echo escaped > {outside}/absolute.txt; "
        "echo escaped > /etc/plait-escape.txt; "
        "echo escaped > /usr/plait-escape.txt; "
        f"echo escaped > {outside}/secret.txt; "
        "echo done"
    )
    out = call(shell, ctx, command=script)
    assert "done" in out.content and "Read-only file system" in out.content
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt", "ws"]
    assert (outside / "secret.txt").read_text() == "TOPSECRET"
    assert not Path("/etc/plait-escape.txt").exists() and not Path("/usr/plait-escape.txt").exists()
    for bad in ("../dotdot.txt", str(outside / "absolute.txt"), "a/../../x.txt"):
        refused = call(write_file, ctx, path=bad, content="escaped")
        assert not refused.ok, bad
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt", "ws"]


def test_symlinks_out_of_the_workspace_lead_nowhere(isolated: Sandbox, workspace: Path) -> None:
    ctx = _ctx(isolated)
    secret = workspace.parent / "secret.txt"
    os.symlink(secret, workspace / "planted")  # a link someone else left in the workspace
    made = call(shell, ctx, command=f"ln -s {secret} mine; ln -s ../secret.txt rel; echo ok")
    assert made.ok
    for link in ("planted", "mine", "rel"):
        shown = call(shell, ctx, command=f"cat {link}; echo changed > {link}")
        assert "TOPSECRET" not in shown.content, link
        assert "TOPSECRET" not in call(read_file, ctx, path=link).content
        assert not call(write_file, ctx, path=link, content="changed").ok
    assert secret.read_text() == "TOPSECRET"


def test_symlinks_inside_the_workspace_still_work(isolated: Sandbox, workspace: Path) -> None:
    ctx = _ctx(isolated)
    (workspace / "docs").mkdir()
    (workspace / "docs" / "a.txt").write_text("A")
    assert call(shell, ctx, command="ln -s docs/a.txt link && ln -s docs d && echo ok").ok
    assert call(read_file, ctx, path="link").content == "A"
    assert call(write_file, ctx, path="d/b.txt", content="B").ok
    assert (workspace / "docs" / "b.txt").read_text() == "B"
    assert call(shell, ctx, command="cat d/b.txt").content.endswith("B")


def test_a_read_only_root_is_read_only_for_the_shell_too(
    isolated: Sandbox, workspace: Path, tmp_path: Path
) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "keep.txt").write_text("original")
    ctx = _ctx(isolated, Root(lib, "lib", read_only=True))
    assert call(shell, ctx, command="cat lib/keep.txt").content.endswith("original")
    attack = call(
        shell,
        ctx,
        command="echo changed > lib/keep.txt; rm -f lib/keep.txt; touch lib/new; "
        "mv lib/keep.txt moved.txt; chmod 000 lib/keep.txt; ls lib",
    )
    assert "Read-only file system" in attack.content
    assert (lib / "keep.txt").read_text() == "original"
    assert sorted(p.name for p in lib.iterdir()) == ["keep.txt"]
    assert not call(write_file, ctx, path="x/../lib/keep.txt", content="changed").ok
    # The folder the root is mounted on was made for the call and taken away after it.
    assert not (workspace / "lib").exists()


def test_a_read_only_root_inside_the_workspace_stays_read_only_under_both_names(
    isolated: Sandbox, workspace: Path
) -> None:
    data = workspace / "data"
    data.mkdir()
    (data / "keep.txt").write_text("original")
    ctx = _ctx(isolated, Root(data, "ro", read_only=True))
    out = call(shell, ctx, command="echo changed > data/keep.txt; echo changed > ro/keep.txt")
    assert out.content.count("Read-only file system") == 2
    for path in ("data/keep.txt", "ro/keep.txt", "x/../data/keep.txt", "./ro/../data/keep.txt"):
        assert not call(write_file, ctx, path=path, content="changed").ok, path
    assert (data / "keep.txt").read_text() == "original"


def test_a_read_write_root_is_writable(
    isolated: Sandbox, workspace: Path, tmp_path: Path
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    ctx = _ctx(isolated, Root(out_dir, "out", read_only=False))
    assert call(shell, ctx, command="echo made > out/a.txt").ok
    assert call(write_file, ctx, path="out/b.txt", content="made").ok
    assert (out_dir / "a.txt").read_text() == "made\n"
    assert (out_dir / "b.txt").read_text() == "made"


def _postgres_listens() -> bool:
    with socket.socket() as probe:
        probe.settimeout(1)
        try:
            probe.connect(("127.0.0.1", 5432))
        except (OSError, RuntimeError):  # RuntimeError: the test suite's own network guard
            return False
    return True


CONNECT = (
    f"{PYTHON} -c \"import socket; s = socket.create_connection(('127.0.0.1', 5432), 3); "
    "print('CONNECTED')\""
)


def test_no_network_not_even_loopback(isolated: Sandbox) -> None:
    out = call(shell, _ctx(isolated), command=CONNECT)
    assert not out.ok and "CONNECTED" not in out.content
    interfaces = call(shell, _ctx(isolated), command="ls /sys/class/net 2>&1; cat /proc/net/dev")
    assert "eth" not in interfaces.content


def test_the_policy_can_allow_the_network(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # the suite's guard blocks this process's sockets; the probe needs one
    if not _postgres_listens():
        pytest.skip("nothing listens on 127.0.0.1:5432 to connect to (PostgreSQL is not running)")
    handle = open_isolated(workspace, SandboxPolicy(network=True))
    try:
        out = call(shell, _ctx(handle), command=CONNECT)
        assert out.ok and "CONNECTED" in out.content
    finally:
        handle.release()


def test_a_fork_bomb_stops_at_the_process_limit(workspace: Path) -> None:
    handle = open_isolated(workspace, SandboxPolicy(limits=Limits(processes=40)))
    ctx = _ctx(handle)
    # A counter started first reports how many processes the sandbox holds a moment into
    # the bomb, using shell builtins only after its one `sleep` (there may be no process
    # left to fork once the bomb runs): the bomb starts only once that sleep is running.
    count = '(sleep 1; set -- /proc/[0-9]*; echo "alive $#")'
    bomb = "bomb() { bomb | bomb; }"
    try:
        command = f"{bomb}; {count} & sleep 0.5; (bomb) & wait # 271828"
        out = call(shell, ctx, command=command, timeout=20)
    finally:
        handle.release()
    assert "Cannot fork" in out.content  # the kernel refused forks past the limit
    alive = [int(line.split()[1]) for line in out.content.splitlines() if line.startswith("alive")]
    assert alive and alive[0] <= 40 + 4
    assert leftovers("271828") == []


def test_a_command_never_outlives_its_timeout_even_in_a_new_session(isolated: Sandbox) -> None:
    ctx = _ctx(isolated)
    script = "(setsid sleep 314.15 >/dev/null 2>&1 &); setsid sleep 314.16 & sleep 314.17"
    out = call(shell, ctx, command=script, timeout=1)
    assert not out.ok and out.content.startswith("timed out after 1 s (killed)")
    assert leftovers("314.1") == []


def test_background_processes_end_with_the_call(isolated: Sandbox) -> None:
    out = call(shell, _ctx(isolated), command="(setsid sleep 315.5 >/dev/null 2>&1 &); echo ok")
    assert out.ok and leftovers("315.5") == []


def test_output_and_memory_are_bounded(workspace: Path) -> None:
    policy = SandboxPolicy(limits=Limits(output_bytes=64 * 1024, memory_bytes=256 << 20))
    handle = open_isolated(workspace, policy)
    ctx = _ctx(handle)
    try:
        flood = call(shell, ctx, command="yes 316.25", timeout=60)
        hog = call(shell, ctx, command=f"{PYTHON} -c 'bytearray(512 << 20); print(\"GOT\")'")
    finally:
        handle.release()
    assert not flood.ok and "the command was stopped" in flood.content
    assert leftovers("316.25") == []
    assert not hog.ok and "MemoryError" in hog.content and "GOT" not in hog.content


def test_the_private_tmp_is_the_calls_own(isolated: Sandbox) -> None:
    ctx = _ctx(isolated)
    marker = Path("/tmp") / f"plait-escape-{os.getpid()}"
    assert call(shell, ctx, command=f"echo x > {marker} && cat {marker}").ok
    assert not marker.exists()
    assert "No such file" in call(shell, ctx, command=f"cat {marker}").content


@pytest.mark.parametrize("backend", ["local", "isolated"])
def test_a_folder_plait_did_not_create_is_never_deleted(backend: str, tmp_path: Path) -> None:
    given = tmp_path / "given"
    given.mkdir()
    (given / "keep.txt").write_text("keep")
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.txt").write_text("data")
    opened = open_isolated(given) if backend == "isolated" else backend_named(backend).open(
        str(given)
    )
    assert not opened.managed
    opened.release()
    assert (given / "keep.txt").read_text() == "keep"
    # A managed workspace holding links to folders outside: closing it removes the links only.
    managed = open_isolated() if backend == "isolated" else backend_named(backend).open(None)
    ctx = ToolContext(managed.root, sandbox=managed)
    call(shell, ctx, command=f"ln -s {precious} out; ln -s {given} given; mkdir -p d/e")
    os.symlink(precious, managed.root / "planted")
    root = managed.root
    managed.release()
    assert not root.exists()
    assert (precious / "data.txt").read_text() == "data"
    assert (given / "keep.txt").read_text() == "keep"


def test_file_tools_run_confined_and_list_the_mounts(
    isolated: Sandbox, workspace: Path, tmp_path: Path
) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "l.txt").write_text("library")
    ctx = _ctx(isolated, Root(lib, "lib", read_only=True))
    assert call(write_file, ctx, path="a/b.txt", content="hello").ok
    assert call(read_file, ctx, path="a/b.txt").content == "hello"
    assert call(read_file, ctx, path="lib/l.txt").content == "library"
    assert call(list_files, ctx).content.splitlines() == ["a/", "lib/ (mounted, read-only)"]
    assert not call(write_file, ctx, path="lib/l.txt", content="x").ok
    assert (lib / "l.txt").read_text() == "library"
    shutil.rmtree(workspace / "a")


@pytest.mark.parametrize("backend", ["local", "isolated"])
def test_a_cancelled_call_takes_its_processes_with_it(backend: str, tmp_path: Path) -> None:
    handle = open_isolated(tmp_path) if backend == "isolated" else backend_named("local").open(
        str(tmp_path)
    )
    ctx = ToolContext(tmp_path, sandbox=handle)
    marker = "318.25" if backend == "local" else "318.5"

    async def main() -> None:
        task = asyncio.ensure_future(
            shell.call(ctx, {"command": f"setsid sleep {marker} & sleep {marker}", "timeout": 600})
        )
        while len(leftovers(marker)) < 2:  # both sleeps are running
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        asyncio.run(asyncio.wait_for(main(), 120))
    finally:
        handle.release()
    assert leftovers(marker) == []


def test_a_nested_namespace_cannot_remount_a_read_only_root(
    isolated: Sandbox, tmp_path: Path
) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "keep.txt").write_text("original")
    ctx = _ctx(isolated, Root(lib, "lib", read_only=True))
    for attempt in (
        "mount -o remount,rw,bind lib",
        "unshare -rm sh -c 'mount -o remount,rw,bind lib; echo changed > lib/keep.txt'",
        "unshare -rm sh -c 'umount lib; echo changed > lib/keep.txt'",
        "unshare -rm sh -c 'mount -o remount,rw,bind /usr; touch /usr/plait-escape'",
    ):
        call(shell, ctx, command=attempt)
    assert (lib / "keep.txt").read_text() == "original"
    assert sorted(p.name for p in lib.iterdir()) == ["keep.txt"]
    assert not Path("/usr/plait-escape").exists()


_AS_ROOT = pytest.mark.skipif(os.geteuid() != 0, reason="plait runs as root here only in CI")


@_AS_ROOT
def test_as_root_the_shell_cannot_remount_unmount_or_make_devices(
    isolated: Sandbox, workspace: Path, tmp_path: Path
) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "keep.txt").write_text("original")
    ctx = _ctx(isolated, Root(lib, "lib", read_only=True))
    marker = Path("/usr") / f"plait-escape-{os.getpid()}"
    attack = call(
        shell,
        ctx,
        command=(
            "grep CapEff /proc/self/status; "
            "mount -o remount,rw,bind lib && echo changed > lib/keep.txt; "
            f"mount -o remount,rw,bind /usr && touch {marker}; "
            "umount /etc/shadow; cat /etc/shadow; "
            "umount lib && touch lib/under; "
            "mount -t tmpfs none lib; mknod null2 c 1 3; chown 1234 . ; echo DONE"
        ),
    )
    assert "CapEff:\t0000000000000000" in attack.content and "DONE" in attack.content
    assert (lib / "keep.txt").read_text() == "original"
    assert not marker.exists()
    assert "root:" not in attack.content  # /etc/shadow's mask stayed in place
    assert not (workspace / "lib").exists() and not (workspace / "null2").exists()
    assert workspace.stat().st_uid == 0


_SETID_ATTEMPTS = (
    "cp /bin/sh s1; chmod 4755 s1; chmod u+s s1; chmod g+s s1; "
    "install -m 6755 /bin/sh s2; "
    f"{PYTHON} -c \"import os; os.open('s3', os.O_CREAT | os.O_WRONLY, 0o4755)\"; "
    f"{PYTHON} -c \"import os; os.mknod('s4', 0o104755)\"; "
    f"{PYTHON} -c \"import os; os.close(os.open('s5', os.O_CREAT | os.O_WRONLY, 0o755)); "
    "os.chmod('s5', 0o2755)\"; "
    "mkdir d && chmod g+s d; echo DONE"
)


def _setid(folder: Path) -> list[str]:
    return sorted(
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if path.lstat().st_mode & (stat.S_ISUID | stat.S_ISGID)
    )


def test_no_call_leaves_a_set_uid_or_set_gid_file(isolated: Sandbox, workspace: Path) -> None:
    out = call(shell, _ctx(isolated), command=_SETID_ATTEMPTS)
    assert "DONE" in out.content and "Operation not permitted" in out.content
    assert (workspace / "s1").exists() and (workspace / "d").is_dir()
    assert _setid(workspace) == []
    # What stays allowed: the ordinary modes.
    ok = call(shell, _ctx(isolated), command="chmod 750 s1 && install -m 700 /bin/sh s6 && echo OK")
    assert "OK" in ok.content
    assert stat.S_IMODE((workspace / "s1").stat().st_mode) == 0o750


_AS_USER = """
import asyncio, json, os, sys
sys.path.insert(0, sys.argv[1])
from plait.sandbox import backend_named
from plait.tools import ToolContext, shell
from plait.tools.base import Root
ws, lib, command = sys.argv[2], sys.argv[3], sys.argv[4]
handle = backend_named("isolated").open(ws)
ctx = ToolContext(handle.root, roots=(Root(lib, "lib", read_only=True),), sandbox=handle)
out = asyncio.run(shell.call(ctx, {"command": command}))
handle.release()
print(json.dumps(out.content))
"""


@_AS_ROOT
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is missing")
def test_as_an_ordinary_user_the_same_attempts_fail() -> None:
    """plait run by an ordinary user (here nobody, switched to from root): the same promises."""
    # pytest's own temporary folders are root's alone; nobody needs one it can reach.
    base = Path(tempfile.mkdtemp(prefix="plait-as-user-"))
    try:
        base.chmod(0o755)
        ws, lib = base / "ws", base / "lib"
        ws.mkdir()
        lib.mkdir()
        (lib / "keep.txt").write_text("original")
        os.chown(ws, 65534, 65534)
        src = str(Path(__file__).resolve().parents[2] / "src")
        command = (
            "mount -o remount,rw,bind lib && echo changed > lib/keep.txt; umount lib; "
            "unshare -rm sh -c 'mount -o remount,rw,bind lib; echo changed > lib/keep.txt'; "
            + _SETID_ATTEMPTS
        )
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
        argv += [sys.executable, "-I", "-c", _AS_USER, src, str(ws), str(lib), command]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=base)
        if "SandboxUnavailableError" in done.stderr:
            pytest.skip(f"the isolated backend cannot run as an ordinary user: {done.stderr}")
        assert done.returncode == 0, done.stderr
        assert "DONE" in json.loads(done.stdout)
        assert (lib / "keep.txt").read_text() == "original"
        assert (ws / "s1").stat().st_uid == 65534
        assert _setid(ws) == []
    finally:
        shutil.rmtree(base)


@pytest.mark.parametrize("backend", ["local", "isolated"])
def test_a_managed_workspace_any_depth_deep_is_removed_on_close(backend: str) -> None:
    """A model's shell can nest folders past Python's recursion limit."""
    handle = open_isolated() if backend == "isolated" else backend_named(backend).open(None)
    root = handle.root
    ctx = ToolContext(root, sandbox=handle)
    name = "d"
    made = call(
        shell,
        ctx,
        command=f"i=0; while [ $i -lt 1100 ]; do mkdir {name} && cd {name} || break; "
        "i=$((i+1)); done; chmod 500 .; echo $i",
        timeout=120,
    )
    assert made.content.rstrip().endswith("1100")
    os.symlink("/etc", root / "etc-link")
    handle.release()
    assert not root.exists()
    assert Path("/etc/passwd").exists()


def test_a_mount_point_never_follows_a_link_the_workspace_holds(
    isolated: Sandbox, workspace: Path, tmp_path: Path
) -> None:
    """plait makes a nested root's mount point on the host: never through a planted link."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "keep.txt").write_text("original")
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, workspace / "vendor")  # as the shell could leave it
    ctx = _ctx(isolated, Root(lib, "vendor/lib", read_only=True))
    out = call(shell, ctx, command="echo ran")
    assert not out.ok and "symlink" in out.content and "ran" not in out.content
    assert list(outside.iterdir()) == []  # no folder made outside the workspace
    assert not call(read_file, ctx, path="vendor/lib/keep.txt").ok


def test_removing_a_mount_point_never_follows_a_link_swapped_in_during_the_call(
    isolated: Sandbox, workspace: Path, tmp_path: Path
) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    other = tmp_path / "other"
    (other / "lib").mkdir(parents=True)  # someone else's empty folder
    ctx = _ctx(isolated, Root(lib, "vendor/lib", read_only=True))
    out = call(shell, ctx, command=f"mv vendor moved && ln -s {other} vendor && echo swapped")
    assert "swapped" in out.content
    assert (other / "lib").is_dir()
    assert (workspace / "vendor").is_symlink()
