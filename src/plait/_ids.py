"""UUIDv7 ids (RFC 9562): they sort by creation time, so ids double as an order.

The standard library gains ``uuid.uuid7`` only in Python 3.14; this is the same
layout (48-bit millisecond clock, version and variant bits, random tail) with a
12-bit counter in ``rand_a`` so ids minted in one millisecond still sort in the
order they were made (RFC 9562 section 6.2, method 1).
"""

from __future__ import annotations

import hashlib
import random
import re
import secrets
import threading
import time
import unicodedata
from typing import Final

__all__ = ["id_slug", "is_session_id", "new_id", "new_ids"]

_lock = threading.Lock()
_last_ms = 0
_counter = 0
_prefix = ""
# The random tail makes ids unique, not secret (credentials use `secrets` directly), so a
# generator seeded once from the OS is enough and costs a tenth of an OS read per id.
_random = random.Random(secrets.randbits(128))


_LEAD: Final = 1 << 80 | 0x7000 << 64 | 0x8000 << 48
"""Above the 80 bits of ``ver | counter | var | random``: the version and variant bits,
and a leading 1 whose hex digit is dropped with the ``0x``."""


def new_id() -> str:
    """Return a new UUIDv7 as its canonical 36-character string.

    Returns:
        A lowercase hyphenated UUID whose string order is its creation order
        within this process.
    """
    global _last_ms, _counter, _prefix
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last_ms:
            _last_ms = ms
            _counter = _random.getrandbits(11)  # leave headroom before the counter wraps
            _prefix = f"{(ms >> 16) & 0xFFFFFFFF:08x}-{ms & 0xFFFF:04x}-"
        else:
            _counter += 1
            if _counter > 0xFFF:  # counter exhausted: borrow the next millisecond
                _last_ms += 1
                _counter = 0
                _prefix = f"{(_last_ms >> 16) & 0xFFFFFFFF:08x}-{_last_ms & 0xFFFF:04x}-"
        prefix, counter = _prefix, _counter
        tail = _random.getrandbits(62)
    # unix_ts_ms (48) | ver 7 (4) + counter (12) | var 0b10 (2) + random (62)
    h = hex(_LEAD | counter << 64 | tail)
    return f"{prefix}{h[3:7]}-{h[7:11]}-{h[11:]}"


def new_ids(n: int) -> list[str]:
    """Return ``n`` new UUIDv7s, in creation order: what ``n`` calls of :func:`new_id` return.

    The clock is read and the lock taken once for all of them, which is most of what an
    id costs: a batch of records appended together gets its ids at a third of the price.

    Args:
        n: how many ids (0 gives an empty list).

    Returns:
        Lowercase hyphenated UUIDs, each sorting after the one before it and after
        every id this process made earlier.
    """
    global _last_ms, _counter, _prefix
    out: list[str] = []
    if n <= 0:
        return out
    add = out.append
    bits = _random.getrandbits
    with _lock:
        ms = time.time_ns() // 1_000_000
        last, counter, prefix = _last_ms, _counter, _prefix
        if ms > last:
            # The first id opens a new millisecond as new_id does; the loop counts on from it.
            last, counter = ms, bits(11) - 1
            prefix = f"{(ms >> 16) & 0xFFFFFFFF:08x}-{ms & 0xFFFF:04x}-"
        for _ in range(n):
            counter += 1
            if counter > 0xFFF:  # counter exhausted: borrow the next millisecond
                last += 1
                counter = 0
                prefix = f"{(last >> 16) & 0xFFFFFFFF:08x}-{last & 0xFFFF:04x}-"
            # One hex() of the 80 bits after the prefix, led by a 1 that keeps its zeros
            # (hex() pads nothing): a third of what three padded formats cost.
            h = hex(_LEAD | counter << 64 | bits(62))
            add(f"{prefix}{h[3:7]}-{h[7:11]}-{h[11:]}")
        _last_ms, _counter, _prefix = last, counter, prefix
    return out


# Session ids are chosen by callers too (seed 003's ``open("incident-debug")``, an
# adapter's ``user/123``), so an id is a key: any short printable string. The few
# refusals are what no transport carries intact: a control character (a terminal
# or a log line mangles it), surrounding white space (a shell or a form trims it),
# and ``.`` / ``..`` (every URL parser removes them as path segments, even
# percent-encoded). Nothing names a file by an id as it is: see :func:`id_slug`.
_MAX_ID = 200

# The ids that are already a safe file name, kept as they are (UUIDv7s, seed 003's
# ``incident-debug``): lowercase, so two ids never share a name on a file system
# that ignores case, and short, so a name with a prefix and a suffix stays a name.
# They hold no ``_``, which every hashed slug holds: no chosen id takes another's slug.
_SAFE_NAME = re.compile(r"[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*")
_SAFE_MAX = 100
_READABLE_MAX = 40


def is_session_id(value: object) -> bool:
    """Tell whether ``value`` can name a session.

    Args:
        value: a candidate id.

    Returns:
        True for a string of 1 to 200 printable characters (``str.isprintable``:
        no control, format or separator character other than the ASCII space)
        with no white space at either end, other than ``.`` and ``..``. Slashes,
        colons, ``%`` and any other printable character are allowed
        (``user/123``, ``tenant:acme:chat-9``).
    """
    if not isinstance(value, str) or not value or len(value) > _MAX_ID:
        return False
    if value in {".", ".."} or value != value.strip():
        return False
    return value.isprintable()


def id_slug(session_id: str) -> str:
    """A file-name-safe name for a session id, distinct for distinct ids.

    An id that is already a safe name (lowercase ASCII letters, digits, ``-`` and
    inner dots, at most 100 characters: every UUIDv7) is its own slug, so file
    names of ordinary ids read as before. Any other id becomes its readable part
    (ASCII letters and digits, dashes between, at most 40 characters, lowercase),
    ``_`` and 16 hex digits of its SHA-256, so ``../../etc/passwd`` is
    ``etc-passwd_<hash>`` (``日本`` is ``id_<hash>``) and can never name a path
    outside the folder it is put in.

    Args:
        session_id: any string (meant for a valid session id).

    Returns:
        A non-empty name of ``[a-z0-9._-]`` that starts with a letter or digit: the
        id itself when it is a safe name already, else at most 57 characters.
    """
    if len(session_id) <= _SAFE_MAX and _SAFE_NAME.fullmatch(session_id):
        return session_id
    ascii_id = unicodedata.normalize("NFKD", session_id).encode("ascii", "ignore").decode()
    readable = re.sub(r"[^a-z0-9]+", "-", ascii_id.lower()).strip("-")[:_READABLE_MAX]
    digest = hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{readable.rstrip('-') or 'id'}_{digest}"
