"""The ``isolated`` backend: every tool call in its own namespaces, through bubblewrap.

Each call (a shell command or one file operation) gets a new mount, pid,
network, IPC, UTS and (where the kernel allows) user namespace. Inside, the
system folders (``/usr``, ``/etc`` and the ``/bin``, ``/lib`` links) are
read-only, ``/tmp`` is a private tmpfs, ``/proc`` and ``/dev`` are the
sandbox's own, the workspace is read-write (read-only if the session says so),
each mounted root is bound read-only or read-write by its mount mode, and
nothing else of the machine exists: no home folder, no ``/work``, no store.
The network is absent unless the policy allows it.

Limits: ``RLIMIT_AS`` and ``RLIMIT_FSIZE`` per process, ``RLIMIT_NPROC`` for the
call's processes (and, when plait runs as root, for whom that rlimit is not
enforced, a ``pids`` cgroup per call), the output cut at the policy's bytes.
When the call ends, times out or is cancelled, killing bubblewrap ends its pid
namespace and so every process in it, a ``setsid`` one included.

Privilege: every call runs with no capability at all (bubblewrap's
``--cap-drop ALL``, the bounding set included, and ``no_new_privs``), so even
when plait runs as root and the call's uid is the host's root, it cannot mount,
remount or unmount anything, make device nodes or take another user's files.
Under a seccomp filter (:mod:`plait.sandbox._seccomp`) it cannot make a set-uid
or set-gid file either: as root, such a file would be a set-uid root program on
the host. As root, a machine plait has no filter for refuses to open the backend.

Where bubblewrap is missing or the kernel refuses its namespaces, ``open``
raises :class:`~plait.errors.SandboxUnavailableError` saying what to install;
plait never runs the tools unconfined instead.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from plait.errors import InvalidArgumentError, SandboxUnavailableError
from plait.sandbox import _fileops, _seccomp
from plait.sandbox._fstree import make_folders, remove_made, remove_tree
from plait.sandbox.base import Mount, Sandbox, register_backend, workspace_folder
from plait.sandbox.policy import SandboxPolicy, tool_environment
from plait.sandbox.process import CommandResult, kill_tree, run_argv

__all__ = ["IsolatedBackend", "bwrap_argv"]

_INSTALL = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
    "bubblewrap; Arch: pacman -S bubblewrap)"
)
_SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
# Readable by root, and plait often runs as root in containers: shadowed with an empty file.
_MASKED = ("/etc/shadow", "/etc/gshadow", "/etc/sudoers")
_FILE_OP_TIMEOUT = 60.0
# Processes bubblewrap itself keeps in the call's cgroup (its monitor and the namespace's init).
_BWRAP_PROCESSES = 4


def _find(program: str) -> str | None:
    return shutil.which(program) or shutil.which(program, path="/usr/bin:/bin:/usr/local/bin")


def _pids_parent() -> Path | None:
    """A ``pids`` cgroup folder plait may create children in, or None."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):  # cgroup v1
            folder = Path("/sys/fs/cgroup/pids") / path.lstrip("/")
            if (folder / "cgroup.procs").exists() and os.access(folder, os.W_OK):
                return folder
    for line in lines:
        if line.startswith("0::"):  # cgroup v2: pids must be enabled for our children
            folder = Path("/sys/fs/cgroup") / line[3:].lstrip("/")
            try:
                enabled = (folder / "cgroup.subtree_control").read_text().split()
            except OSError:
                continue
            if "pids" in enabled and os.access(folder, os.W_OK):
                return folder
    return None


class _Cgroup:
    """One call's ``pids`` cgroup: created before the call, emptied and removed after."""

    def __init__(self, parent: Path, processes: int) -> None:
        self.path = parent / f"plait-{uuid.uuid4().hex}"
        self.path.mkdir()
        try:
            (self.path / "pids.max").write_text(str(processes + _BWRAP_PROCESSES))
        except OSError:
            self.path.rmdir()
            raise

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def kill(self) -> None:
        for _ in range(200):
            try:
                pids = [int(p) for p in self.procs.read_text().split()]
            except OSError:
                return
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            threading.Event().wait(0.005)

    def remove(self) -> None:
        self.kill()
        for _ in range(200):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:  # the last killed tasks are still exiting
                threading.Event().wait(0.005)


_ROOT_WITHOUT_CGROUP = (
    "plait runs as root, for whom the kernel does not enforce RLIMIT_NPROC, and no "
    "writable pids cgroup is available to bound a call's processes: run plait as "
    "an ordinary user, or give it a cgroup with the pids controller"
)


def _call_cgroup(processes: int) -> _Cgroup | None:
    """The call's pids cgroup when plait runs as root (None otherwise: the rlimit holds).

    Raises:
        SandboxUnavailableError: as root, no pids cgroup can be made for the call.
    """
    if os.geteuid() != 0:
        return None
    parent = _pids_parent()
    if parent is None:
        raise SandboxUnavailableError(_ROOT_WITHOUT_CGROUP)
    try:
        return _Cgroup(parent, processes)
    except OSError as exc:
        raise SandboxUnavailableError(f"{_ROOT_WITHOUT_CGROUP} ({exc})") from exc


_ROOT_WITHOUT_FILTER = (
    "plait runs as root and has no seccomp filter for this machine's architecture "
    "({machine}), so a tool call could leave a set-uid root file on the host: run plait as "
    "an ordinary user"
)


def _filter_fd() -> int | None:
    """A fresh descriptor holding the seccomp filter (None: no filter, as a user only).

    bubblewrap reads the filter to its end, so each call gets its own descriptor.

    Raises:
        SandboxUnavailableError: plait runs as root and has no filter for this machine.
    """
    program = _seccomp.setid_filter()
    if program is None:
        if os.geteuid() == 0:
            raise SandboxUnavailableError(
                _ROOT_WITHOUT_FILTER.format(machine=platform.machine())
            )
        return None
    fd = os.memfd_create("plait-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _system_binds() -> list[str]:
    args: list[str] = []
    for name in _SYSTEM:
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for masked in _MASKED:
        if os.path.isfile(masked):
            args += ["--ro-bind", "/dev/null", masked]
    prefix = Path(sys.base_prefix).resolve()
    if not any(prefix.is_relative_to(Path("/") / n) for n in _SYSTEM):
        args += ["--ro-bind", str(prefix), str(prefix)]  # the interpreter the file tools use
    return args


def bwrap_argv(
    bwrap: str,
    workspace: Path,
    *,
    policy: SandboxPolicy,
    mounts: Sequence[Mount] = (),
    read_only: bool = False,
    prlimit: str = "/usr/bin/prlimit",
    seccomp_fd: int | None = None,
) -> list[str]:
    """The bubblewrap command line of one call, up to (not including) the program to run.

    Args:
        bwrap: the bubblewrap program.
        workspace: the workspace folder, bound at its own path.
        policy: the sandbox's policy (network, writable roots, limits).
        mounts: roots mounted into the workspace.
        read_only: bind the workspace read-only.
        prlimit: the prlimit program that sets the limits inside.
        seccomp_fd: a descriptor bubblewrap reads the seccomp filter from (the
            process must inherit it), or None for no filter.

    Returns:
        The argv, to which the program and its arguments are appended.

    Raises:
        InvalidArgumentError: a mount would land outside the workspace.
    """
    args = [bwrap, "--die-with-parent", "--new-session", "--unshare-all"]
    # Every capability goes, for root too (in its user namespace root would keep them all
    # and could remount a read-only bind read-write or unmount a mask).
    args += ["--cap-drop", "ALL"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    if policy.network:
        args.append("--share-net")
    args += _system_binds()
    args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    ws = str(workspace)
    args += ["--ro-bind" if read_only else "--bind", ws, ws]
    for root in policy.writable_roots:
        if os.path.isdir(root):
            args += ["--bind", root, root]
    for mount in mounts:
        target = os.path.normpath(os.path.join(ws, mount.at))
        if not target.startswith(ws + os.sep):
            raise InvalidArgumentError(f"a root mounted at {mount.at!r} leaves the workspace")
        args += ["--ro-bind" if mount.read_only else "--bind", str(mount.source), target]
        source = str(mount.source)
        if mount.read_only and source.startswith(ws + os.sep) and source != target:
            args += ["--ro-bind", source, source]  # under its own name in the workspace too
    lim = policy.limits
    args += ["--chdir", ws, "--", prlimit]
    args += [f"--as={lim.memory_bytes}", f"--nproc={lim.processes}"]
    args += [f"--fsize={lim.file_bytes}", "--core=0", "--"]
    return args


class IsolatedBackend:
    """Sandboxes whose every tool call runs confined, through bubblewrap (see the module).

    ``spec`` is a folder, as for ``local`` (used as it is and never deleted);
    without one a managed temporary workspace is made and deleted on close.
    The sandbox's :class:`~plait.sandbox.SandboxPolicy` is enforced on every call.
    """

    name = "isolated"
    isolates = True

    def __init__(self) -> None:
        self._probed: set[bool] = set()
        self._lock = threading.Lock()

    def open(self, spec: str | None, policy: SandboxPolicy | None = None) -> Sandbox:
        """Open a sandbox, after checking bubblewrap can confine a command here.

        Raises:
            SandboxUnavailableError: bubblewrap or prlimit is missing, the kernel
                refuses the namespaces, or (as root) no ``pids`` cgroup can bound
                the processes.
            InvalidArgumentError: ``spec`` is not an existing folder, or is ``/`` or
                a system folder (binding it read-write would undo the confinement).
        """
        policy = policy or SandboxPolicy()
        self._check(policy)
        root, managed = workspace_folder(self.name, spec)
        system = [Path("/") / name for name in _SYSTEM]
        if any(root == folder or folder.is_relative_to(root) for folder in system):
            raise InvalidArgumentError(
                f"isolated sandbox: {str(root)!r} holds system folders; "
                "a workspace cannot be one of them or a folder above them"
            )
        return Sandbox(self, root, managed=managed, policy=policy)

    def close(self, sandbox: Sandbox) -> None:
        """Delete the workspace if (and only if) this backend created it."""
        if sandbox.managed:
            # Iterative and never through a link: a tree any depth deep goes too.
            with contextlib.suppress(OSError):
                remove_tree(sandbox.root)

    def _programs(self) -> tuple[str, str]:
        bwrap, prlimit = _find("bwrap"), _find("prlimit")
        if bwrap is None:
            raise SandboxUnavailableError(f"the isolated backend needs bubblewrap: {_INSTALL}")
        if prlimit is None:
            raise SandboxUnavailableError(
                "the isolated backend needs prlimit (util-linux) to set limits: "
                "apt-get install util-linux"
            )
        if not prlimit.startswith(("/usr/", "/bin/", "/sbin/")):
            raise SandboxUnavailableError(
                f"prlimit at {prlimit} is not under /usr, so the sandbox cannot run it"
            )
        return bwrap, prlimit

    def _check(self, policy: SandboxPolicy) -> None:
        with self._lock:
            if policy.network in self._probed:
                return
        bwrap, prlimit = self._programs()
        cgroup = _call_cgroup(policy.limits.processes)  # as root: can one be made at all?
        if cgroup is not None:
            cgroup.remove()
        fd = _filter_fd()
        probe = bwrap_argv(
            bwrap, Path("/tmp"), policy=policy, read_only=True, prlimit=prlimit, seccomp_fd=fd
        )
        probe.append("/bin/true")
        try:
            done = subprocess.run(
                probe,
                capture_output=True,
                timeout=30,
                env={"PATH": "/usr/bin:/bin"},
                pass_fds=() if fd is None else (fd,),
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxUnavailableError(f"bubblewrap could not start: {exc}; {_INSTALL}") from exc
        finally:
            if fd is not None:
                os.close(fd)
        if done.returncode != 0:
            said = done.stderr.decode("utf-8", "replace").strip()
            raise SandboxUnavailableError(
                f"bubblewrap could not make its namespaces here ({said or done.returncode}): "
                "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
                "or kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu), or run in a "
                "container started with them"
            )
        with self._lock:
            self._probed.add(policy.network)

    async def _confined(
        self,
        sandbox: Sandbox,
        program: Sequence[str],
        *,
        timeout: float,
        mounts: Sequence[Mount],
        read_only: bool,
        stdin: bytes | None = None,
        output_limit: int | None = None,
    ) -> CommandResult:
        bwrap, prlimit = self._programs()
        policy = sandbox.policy
        fd = _filter_fd()
        try:
            argv = bwrap_argv(
                bwrap,
                sandbox.root,
                policy=policy,
                mounts=mounts,
                read_only=read_only,
                prlimit=prlimit,
                seccomp_fd=fd,
            ) + list(program)
            cgroup = _call_cgroup(policy.limits.processes)
        except BaseException:
            if fd is not None:
                os.close(fd)
            raise
        try:
            made = _mount_points(sandbox.root, mounts)
        except OSError as exc:
            if fd is not None:
                os.close(fd)
            if cgroup is not None:
                cgroup.remove()
            said = f"plait: a root cannot be mounted in the workspace: {exc}\n"
            return CommandResult(None, said.encode("utf-8", "replace"))
        if cgroup is not None:
            # The wrapper joins the cgroup before bubblewrap starts, so every process
            # the call makes is counted from the first.
            join = 'printf "%s" "$$" > "$1" && shift && exec "$@"'
            argv = ["/bin/sh", "-c", join, "plait-cgroup", str(cgroup.procs), *argv]

        def kill(pid: int, pipe: str | None) -> None:
            if cgroup is not None:
                cgroup.kill()
            kill_tree(pid, pipe)

        try:
            return await run_argv(
                argv,
                cwd=sandbox.root,
                env=tool_environment(policy, home="/tmp"),
                timeout=timeout,
                output_limit=output_limit or policy.limits.output_bytes,
                stdin=stdin,
                kill=kill,
                pass_fds=() if fd is None else (fd,),
            )
        finally:
            if fd is not None:
                os.close(fd)
            if cgroup is not None:
                cgroup.remove()
            remove_made(sandbox.root, made)

    async def run(
        self,
        sandbox: Sandbox,
        command: str,
        *,
        timeout: float,
        mounts: Sequence[Mount] = (),
        read_only: bool = False,
    ) -> CommandResult:
        """Run ``command`` with ``/bin/sh`` in the call's namespaces (see the module)."""
        return await self._confined(
            sandbox, ["/bin/sh", "-c", command], timeout=timeout, mounts=mounts, read_only=read_only
        )

    async def file_op(
        self,
        sandbox: Sandbox,
        request: Mapping[str, Any],
        *,
        mounts: Sequence[Mount] = (),
        read_only: bool = False,
    ) -> dict[str, Any]:
        """Do the operation inside the call's namespaces, on the path as the sandbox sees it.

        The request's ``at`` (the path relative to the workspace) is what is
        opened, so the kernel's mounts, not only plait's checks, decide what it
        reaches.
        """
        inner = dict(request)
        inner["path"] = os.path.normpath(os.path.join(sandbox.root, str(request.get("at", "."))))
        source = _fileops_source()
        python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
        done = await self._confined(
            sandbox,
            [python, "-I", "-S", "-c", source],
            timeout=_FILE_OP_TIMEOUT,
            mounts=mounts,
            read_only=read_only,
            stdin=json.dumps(inner).encode("utf-8"),
            # A reply carries up to max_chars characters, each at most 12 bytes as JSON.
            output_limit=12 * int(request.get("max_chars", 0)) + (64 << 10),
        )
        text = done.output.decode("utf-8", "replace")
        try:
            reply = json.loads(text)
        except ValueError:
            reply = None
        if done.exit_code != 0 or not isinstance(reply, dict):
            reason = "timed out" if done.timed_out else text.strip()[-500:] or "no reply"
            return {"ok": False, "error": f"the sandbox could not do it: {reason}"}
        return reply


@functools.cache
def _fileops_source() -> str:
    return Path(_fileops.__file__).read_text("utf-8")


def _mount_points(workspace: Path, mounts: Sequence[Mount]) -> list[str]:
    """Make the folders mounted roots land on; returns those made (removed after the call).

    Made and later removed through descriptors, never through a symlink: the
    workspace is the sandbox's to change, and a link it planted on a mount
    point's way must not lead plait to make or remove a folder elsewhere.

    Raises:
        OSError: a part of a mount point's path is a symlink or a file.
    """
    made: list[str] = []
    try:
        for mount in mounts:
            relative = os.path.normpath(mount.at)
            if relative != ".":
                made += make_folders(workspace, relative)
    except (OSError, ValueError) as exc:
        remove_made(workspace, made)
        if isinstance(exc, OSError) and exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise OSError(exc.errno, f"{mount.at!r} passes through a symlink or a file") from exc
        raise OSError(str(exc)) from exc
    return made


register_backend(IsolatedBackend())
