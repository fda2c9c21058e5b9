"""Bearer tokens: minting, hashing, and the entropy a caller-given one must carry."""

from __future__ import annotations

import hashlib
import math
import re
import secrets
from collections import Counter
from itertools import pairwise
from typing import Final

from plait.errors import (
    InvalidArgumentError,
)

__all__ = [
    "MAX_TOKEN_LENGTH",
    "MIN_TOKEN_BITS",
    "MIN_TOKEN_LENGTH",
    "TOKEN_BYTES",
    "check_token_entropy",
    "new_token",
    "token_hash",
]

TOKEN_BYTES: Final = 32
"""Random bytes in a token plait mints (``secrets.token_urlsafe``): 256 bits."""
MIN_TOKEN_BITS: Final = 128
"""The least estimated entropy a caller-given token must carry."""
MIN_TOKEN_LENGTH: Final = 32
MAX_TOKEN_LENGTH: Final = 512
_TOKEN_CHARS: Final = re.compile(r"[A-Za-z0-9\-._~+/=]+")
_UUID: Final = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)


# -- tokens -----------------------------------------------------------------------------


def new_token() -> str:
    """Return a new bearer token: 32 random bytes, URL-safe base64 (43 characters).

    Never one that starts with ``-``: a command line would read it as an option
    (``plait token expire -x...``), one token in 64 otherwise.
    """
    while True:
        token = secrets.token_urlsafe(TOKEN_BYTES)
        if not token.startswith("-"):
            return token


def token_hash(token: str) -> str:
    """Return the one-way handle the store keeps for a token: its SHA-256, in hex.

    Safe to log and to show an operator: it cannot be turned back into the token.
    """
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def _entropy_bits(token: str) -> float:
    """Estimate a token's entropy: its length times log2 of the alphabet its classes span.

    A heuristic that catches mistakes (a constant, a short or repetitive string, a
    UUID), not a proof of randomness: :func:`check_token_entropy` adds the other rules.
    """
    alphabet = 0
    if any(c.islower() for c in token):
        alphabet += 26
    if any(c.isupper() for c in token):
        alphabet += 26
    if any(c.isdigit() for c in token):
        alphabet += 10
    if any(not c.isalnum() for c in token):
        alphabet += 7
    return len(token) * math.log2(max(alphabet, 2))


def _shannon_per_char(token: str) -> float:
    n = len(token)
    return -sum(c / n * math.log2(c / n) for c in Counter(token).values())


def check_token_entropy(token: object) -> str:
    """Check that a caller-given bearer token is high-entropy; return it.

    Seed 003: caller-supplied session ids must be high entropy. A token must be
    32 to 512 characters from the base64 / URL-safe alphabet; not a UUID (an
    identifier, not a secret: a UUIDv7 holds only 74 random bits); not a repeated
    or sequential pattern; at least 2.5 bits of Shannon entropy per character; and at least 128
    bits by its length and the character classes it uses. ``secrets.token_hex(16)``
    and ``secrets.token_urlsafe(32)`` pass. A heuristic: it refuses mistakes, and
    cannot prove a token random.

    Raises:
        InvalidArgumentError: the token is not a string or fails one of the rules.
    """
    if not isinstance(token, str):
        raise InvalidArgumentError("a bearer token must be a string")
    if not MIN_TOKEN_LENGTH <= len(token) <= MAX_TOKEN_LENGTH:
        raise InvalidArgumentError(
            f"a caller-given bearer token must be {MIN_TOKEN_LENGTH} to {MAX_TOKEN_LENGTH} "
            f"characters (got {len(token)}); omit id to let plait mint one"
        )
    if not _TOKEN_CHARS.fullmatch(token):
        raise InvalidArgumentError("a bearer token may use only letters, digits and - . _ ~ + / =")
    if _UUID.fullmatch(token):
        raise InvalidArgumentError(
            "a UUID is an identifier, not a secret; use secrets.token_urlsafe(32) "
            "or omit id to let plait mint a token"
        )
    periodic = (token + token).find(token, 1) < len(token)
    steps = sum(abs(ord(a) - ord(b)) == 1 for a, b in pairwise(token))
    sequential = steps * 2 > len(token)  # "abcdef...", "9876..."
    per_char = _shannon_per_char(token)
    bits = _entropy_bits(token)
    if periodic or sequential or per_char < 2.5 or bits < MIN_TOKEN_BITS:
        raise InvalidArgumentError(
            "the bearer token is low-entropy (repetitive, or too few distinct characters "
            "for its length); omit id to let plait mint one"
        )
    return token


def _plausible(token: object) -> bool:
    """Whether a presented token is worth a store lookup (anything else is simply unknown)."""
    return isinstance(token, str) and 0 < len(token) <= MAX_TOKEN_LENGTH
