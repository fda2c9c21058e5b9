"""The isolated backend's seccomp filter: no set-uid or set-gid bit is ever made.

When plait runs as root, a sandboxed call's uid is the host's root too:
bubblewrap maps the caller's uid into the call's user namespace and cannot map
it to another while the workspace stays writable. Dropping every capability
stops mounts, device nodes and files owned by others, but an owner may always
set the set-uid bit on its own file, and ``nosuid`` holds inside the sandbox
only: a file the call leaves with mode 4755 would be a set-uid root program on
the host. So the call runs under this filter, which refuses (``EPERM``) every
``chmod`` family call, ``open``/``creat`` with ``O_CREAT`` and ``mknod`` whose
mode carries ``S_ISUID`` or ``S_ISGID``, and makes the calls whose mode it
cannot read (``openat2``, whose mode is behind a pointer, and ``io_uring``,
which opens files without a system call) answer ``ENOSYS``, as an older kernel
would, so programs fall back to the calls it can check. Another architecture's
system calls (32-bit ones on a 64-bit kernel, x32) kill the process: their
numbers mean other calls.

The program is classic BPF, as ``bubblewrap --seccomp FD`` reads it: an array
of ``struct sock_filter`` in the machine's byte order.
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["setid_filter"]

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6].
_NR, _ARCH, _ARGS = 0, 4, 16
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000
_SETID = 0o6000
_X32_BIT = 0x40000000

# (audit arch, {syscall number: index of its mode argument}, calls answered ENOSYS).
_TABLES: dict[str, tuple[int, dict[int, int], tuple[int, ...]]] = {
    "x86_64": (
        0xC000003E,
        {
            2: 2,  # open(path, flags, mode)
            85: 1,  # creat(path, mode)
            90: 1,  # chmod(path, mode)
            91: 1,  # fchmod(fd, mode)
            133: 1,  # mknod(path, mode, dev)
            257: 3,  # openat(dirfd, path, flags, mode)
            259: 2,  # mknodat(dirfd, path, mode, dev)
            268: 2,  # fchmodat(dirfd, path, mode)
            452: 2,  # fchmodat2(dirfd, path, mode, flags)
        },
        (425, 437),  # io_uring_setup, openat2
    ),
    "aarch64": (
        0xC00000B7,
        {
            33: 2,  # mknodat
            52: 1,  # fchmod
            53: 2,  # fchmodat
            56: 3,  # openat
            452: 2,  # fchmodat2
        },
        (425, 437),
    ),
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def setid_filter(machine: str | None = None) -> bytes | None:
    """The filter for this machine's architecture, or None where plait has no table for it.

    Args:
        machine: an architecture name as :func:`platform.machine` gives it (default:
            this machine's).

    Returns:
        The BPF program's bytes, or None for an architecture without a table.
    """
    table = _TABLES.get(machine or platform.machine())
    if table is None:
        return None
    arch, modes, absent = table
    # The checks, then the four endings; a jump is relative (instructions skipped), so
    # a named target is resolved once the checks' length is known.
    Jump = int | str
    body: list[tuple[int, int, Jump, Jump]] = [
        (_LD_ABS, _ARCH, 0, 0),
        (_JEQ, arch, 0, "kill"),
        (_LD_ABS, _NR, 0, 0),
    ]
    if arch == _TABLES["x86_64"][0]:
        body.append((_JSET, _X32_BIT, "kill", 0))
    for number in absent:
        body.append((_JEQ, number, "enosys", 0))
    for number, index in sorted(modes.items()):
        # nr == number: load the mode's low 32 bits; set-id bits -> EPERM, else allow.
        # Otherwise skip the two, with the accumulator still holding nr.
        body.append((_JEQ, number, 0, 2))
        body.append((_LD_ABS, _ARGS + 8 * index, 0, 0))
        body.append((_JSET, _SETID, "eperm", "allow"))
    # Falling off the checks lands on the first ending: allowed.
    ends = {
        "allow": _ALLOW,
        "kill": _KILL_PROCESS,
        "enosys": _ERRNO | errno.ENOSYS,
        "eperm": _ERRNO | errno.EPERM,
    }
    labels = {name: len(body) + i for i, name in enumerate(ends)}

    def rel(target: Jump, at: int) -> int:
        return labels[target] - at - 1 if isinstance(target, str) else target

    program = [_insn(code, rel(jt, i), rel(jf, i), k) for i, (code, k, jt, jf) in enumerate(body)]
    program += [_insn(_RET, 0, 0, value) for value in ends.values()]
    return b"".join(program)
