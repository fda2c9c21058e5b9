"""UUIDv7 ids (RFC 9562): they sort by creation time, so ids double as an order.

The standard library gains ``uuid.uuid7`` only in Python 3.14; this is the same
layout (48-bit millisecond clock, version and variant bits, random tail) with a
12-bit counter in ``rand_a`` so ids minted in one millisecond still sort in the
order they were made (RFC 9562 section 6.2, method 1).
"""

from __future__ import annotations

import random
import secrets
import threading
import time

__all__ = ["is_session_id", "new_id"]

_lock = threading.Lock()
_last_ms = 0
_counter = 0
_prefix = ""
# The random tail makes ids unique, not secret (credentials use `secrets` directly), so a
# generator seeded once from the OS is enough and costs a tenth of an OS read per id.
_random = random.Random(secrets.randbits(128))


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
    rand_b = tail & 0xFFFFFFFFFFFF
    return f"{prefix}{0x7000 | counter:04x}-{0x8000 | (tail >> 48):04x}-{rand_b:012x}"


# Session ids are chosen by callers too (seed 003's ``open("incident-debug")``),
# so any short printable name is allowed, but never one that could be read as a
# path or that a terminal would mangle.
_MAX_ID = 200


def is_session_id(value: object) -> bool:
    """Tell whether ``value`` can name a session.

    Args:
        value: a candidate id.

    Returns:
        True for a non-empty string of at most 200 printable characters with
        no path separator, no NUL, no surrounding white space, and not ``.``
        or ``..``.
    """
    if not isinstance(value, str) or not value or len(value) > _MAX_ID:
        return False
    if value in {".", ".."} or value != value.strip():
        return False
    if any(ch in value for ch in "/\\\x00"):
        return False
    return value.isprintable()
