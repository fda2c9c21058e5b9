"""Framework keys as plait session ids, and the sessions under one key prefix.

A framework names a conversation by a tuple (a project and a session, an app,
a user and a session); plait names it by one id of at most 200 printable
characters. Each part is escaped (``%`` and ``/``), so ``/`` only ever
separates parts and the tuple reads back unambiguously; a part too long for
its share of the 200 characters keeps its start and ends in a hash of the
whole, so the same key always gives the same id.
"""

from __future__ import annotations

import hashlib
from typing import Final

from plait.store import Store
from plait.store.base import SessionRow, sessions_with_prefix

__all__ = ["MAX_ID", "id_part", "scan", "unescape"]

MAX_ID: Final = 200
_HASH: Final = 16
_EVERY: Final = 2**31 - 1  # "no limit" for a listing of the whole store


def id_part(value: str, budget: int) -> str:
    """``value`` as one part of a session id, at most ``budget`` characters."""
    escaped = value.replace("%", "%25").replace("/", "%2F")
    if len(escaped) <= budget:
        return escaped
    digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:_HASH]
    head = escaped[: max(budget - _HASH - 1, 0)]
    if "%" in head[-2:]:  # never cut an escape in half
        head = head[: head.rindex("%")]
    return f"{head}~{digest}"


def unescape(part: str) -> str:
    """The value an :func:`id_part` that was not shortened stands for."""
    return part.replace("%2F", "/").replace("%25", "%")


def scan(store: Store, prefix: str) -> list[SessionRow]:
    """The live sessions of the store whose id starts with ``prefix``, newest first.

    A store that narrows listings itself (:class:`~plait.store.base.ListingStore`,
    as plait's SQL stores do) reads only these sessions.
    """
    return sessions_with_prefix(store, None, prefix, _EVERY)
