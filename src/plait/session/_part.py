"""What every part of a :class:`~plait.session.Session` holds: the handle and its head.

A part (``session.transcript``, ``session.workspace``, ``session.settings``,
``session.scratchpad``, ``session.live``) is a small object made on each access;
it keeps the handle it was reached from and that handle's
:class:`~plait.session._head.Head`, and delegates each verb to the module of its
concern. :func:`head_of` is how the session layer's own modules reach a handle's
head; :func:`host_of` is how infrastructure above it (the live clients, the server,
the bundle writer) reaches the host a handle belongs to and its store, which are
not members of :class:`~plait.session.Session`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plait.session._head import Head
    from plait.session.host import SessionHost
    from plait.session.session import Session

__all__ = ["Part", "head_of", "host_of"]


def head_of(session: Session) -> Head:
    """The head ``session`` reads and writes through (for the session layer's modules).

    Args:
        session: a handle.

    Returns:
        Its :class:`~plait.session._head.Head`.
    """
    return session._head


def host_of(session: Session) -> SessionHost:
    """The host (a client's, or a bare one) ``session`` belongs to; its ``store`` is the store.

    Args:
        session: a handle.

    Returns:
        The :class:`~plait.session.host.SessionHost` that made the handle.
    """
    return session._head.host


class Part:
    """The base of a session's parts: the handle it belongs to and that handle's head.

    Args:
        session: the handle the part was reached from.
    """

    __slots__ = ("_head", "_session")

    def __init__(self, session: Session) -> None:
        self._session = session
        self._head = session._head

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of session {self._head.id}>"
