"""The store errors: the store itself could not do its job, and the warning a listing issues.

Private: import these names from :mod:`plait.errors`, where the whole hierarchy is drawn.
"""

from __future__ import annotations

from plait.errors import PlaitError, shown


class StoreError(PlaitError):
    """The store could not complete an operation (the driver's error is chained)."""


class StaleSessionError(StoreError):
    """Compare-and-set on the session head failed: someone else wrote first.

    The handle's view of the session is older than the stored one. Nothing was
    written; call ``refresh()`` on the handle and decide again.

    Attributes:
        session_id: the session.
        expected: the version the handle had.
        actual: the version in the store (``None`` if it is gone).
    """

    def __init__(self, session_id: str, expected: int, actual: int | None) -> None:
        self.session_id = session_id
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"session {shown(session_id)} changed since this handle read it "
            f"(had version {expected}, store has {actual}); refresh() and retry"
        )


class SchemaTooNewError(StoreError):
    """The database was written by a newer plait; this one refuses to touch it."""


class SchemaOutdatedError(StoreError):
    """The database predates this plait; ``plait db migrate`` upgrades it."""


class StoreCorruptError(StoreError):
    """A stored row could not be decoded, or the database reports damaged storage."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """A command that only reads named a store file that does not exist; nothing was made.

    Reading never creates a store (nor its folder): a typo in a path is said, not
    answered with a new, empty database.

    Attributes:
        path: the file named.
    """

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(message)


class NotAStoreError(StoreError):
    """The file named as the store is not a SQLite database (its header is not SQLite's).

    Such a file was never a store, so it is not called damaged, and nothing is written to it.

    Attributes:
        path: the file named.
    """

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        super().__init__(message)


class EncryptionKeyError(StoreError):
    """The store's encryption key is missing or wrong (nothing was written).

    An encrypted store keeps a check value of its master key: a store opened without
    a key, or with another one, is refused when it is opened, before anything is
    written or read. (A key that is not 32 bytes in URL-safe base64 is an
    :class:`InvalidArgumentError`.) Also raised for a key given to a store that
    already holds plain sessions: a store is encrypted from its start or not at all.
    """


class EncryptionKeyMissingError(EncryptionKeyError):
    """The store is encrypted and no key was given.

    Give it as ``encryption_key=`` or in ``$PLAIT_ENCRYPTION_KEY``.
    """


class EncryptionKeyMismatchError(EncryptionKeyError):
    """The key given is not the one the store was encrypted with (its check value differs)."""


class StorePartMissingError(StoreError):
    """The store offers no part this verb needs, and plait has no fallback for it.

    A store is a transcript store plus the optional parts it offers (writer locks,
    tallies, lineage, bearer sessions, live clients, search, ...: ``plait.store.PARTS``
    names each with the fallback plait uses when it has one). Nothing was read or written.

    Attributes:
        part: the missing part's name (a key of ``plait.store.PARTS``, e.g. ``"search"``).
        protocol: the protocol a store implements to offer it (e.g. ``"SearchStore"``).
    """

    def __init__(self, part: str, protocol: str, verb: str) -> None:
        self.part = part
        self.protocol = protocol
        super().__init__(
            f"{verb} needs the store part {part!r} ({protocol}), which this store does not offer"
        )


class StoreCorruptWarning(PlaitError, UserWarning):
    """A listing left out stored rows it could not decode (the others are listed).

    ``plait db check --deep`` names them and says how to recover what is left.
    """
