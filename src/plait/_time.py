"""Timezone-aware UTC timestamps, stored as integer microseconds since the epoch."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

__all__ = ["from_micros", "now_micros", "to_micros"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def now_micros() -> int:
    """Return the current UTC time in microseconds since the epoch."""
    return time.time_ns() // 1000


def from_micros(micros: int) -> datetime:
    """Turn stored microseconds into a timezone-aware UTC datetime."""
    return _EPOCH + timedelta(microseconds=micros)


def to_micros(moment: datetime) -> int:
    """Turn a timezone-aware datetime into microseconds since the epoch.

    Raises:
        ValueError: for a naive datetime, whose zone is unknown.
    """
    if moment.tzinfo is None:
        raise ValueError("naive datetime: give a timezone-aware one")
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
