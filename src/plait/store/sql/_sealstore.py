"""An SQL store's encryption verbs: opening it with its key, the key loader, rotation.

Written once for both SQL stores, over the connections :class:`~plait.store.sql._store.SQLStore`
lends; the sealing itself is :mod:`plait.store.sql._sealing` (D320-D323).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from plait.errors import EncryptionKeyError, EncryptionKeyMissingError, StoreCorruptError
from plait.store.sql._sealing import (
    CHECK_KID,
    OBJECTS_KID,
    DataKey,
    Sealer,
    master_key,
    open_sealer,
    parse_key,
)
from plait.store.sql._sealtext import SealedTerms

if TYPE_CHECKING:
    from plait.store.sql._dialect import Dialect
    from plait.store.sql._store import Connection

__all__ = ["SQLSealing"]

SEALING_VERSION = 13
"""The schema version that added ``data_keys``."""
_INSERT_KEY = "INSERT INTO data_keys (kid, owner_pk, wrapped) VALUES (?, ?, ?)"


class SQLSealing:
    """The encryption part of an SQL store: ``_sealer`` is None in a store not encrypted."""

    dialect: Dialect
    _sealer: Sealer | None = None
    _sealed_terms: SealedTerms | None = None
    _snapshot: Any
    _transaction: Any
    code_version: Any

    def _start_sealing(self, key: str | bytes | None, where: str) -> None:
        """Open the store's sealing with ``key`` (or ``$PLAIT_ENCRYPTION_KEY``'s).

        Called once the schema is current, before anything else is read or written.

        Raises:
            EncryptionKeyMissingError, EncryptionKeyMismatchError, EncryptionKeyError:
                see :func:`~plait.store.sql._sealing.open_sealer` (nothing was written).
            InvalidArgumentError: the key is not a key.
        """
        master = master_key(key)
        if self.code_version < SEALING_VERSION:
            # A store opened with fewer migrations (tests make old files so) has no keys.
            if master is not None:
                raise EncryptionKeyError(f"{where}: this schema has no data keys to seal with")
            return
        d = self.dialect
        with self._snapshot("read the key check") as conn:
            found = conn.execute(
                d.sql("SELECT wrapped FROM data_keys WHERE kid = ?"), (CHECK_KID,)
            ).fetchone()
            empty = conn.execute("SELECT 1 FROM sessions LIMIT 1").fetchone() is None
        sealer, check = open_sealer(
            master, None if found is None else bytes(found[0]), empty, self._load_key, where
        )
        if check is not None and sealer is not None:
            # Another process may be starting the same store: the first check value
            # stored wins, and this key must be the one it checks.
            keep = d.sql(_INSERT_KEY + " ON CONFLICT (kid) DO NOTHING")
            with self._transaction("store the key check") as conn:
                if conn.execute("SELECT 1 FROM sessions LIMIT 1").fetchone() is None:
                    conn.execute(keep, (CHECK_KID, None, check))
                    conn.execute(keep, sealer.objects_key())
                stored = conn.execute(
                    d.sql("SELECT wrapped FROM data_keys WHERE kid = ?"), (CHECK_KID,)
                ).fetchone()
            open_sealer(master, None if stored is None else bytes(stored[0]), False, None, where)
        self._sealer = sealer

    def _seal_part(self, digest: str, index: int, data: bytes) -> bytes:
        """An object's part as stored: sealed under the object key in an encrypted store."""
        sealer = self._sealer
        return data if sealer is None else sealer.seal_part(digest, index, data)

    def _open_part(self, digest: str, index: int, data: bytes) -> bytes:
        """An object's part as stored, opened (see :meth:`_seal_part`)."""
        sealer = self._sealer
        return data if sealer is None else sealer.open_part(digest, index, data)

    def _search_terms(self) -> SealedTerms | None:
        """What hashes an encrypted store's index terms (D324); None: not encrypted.

        The store's search key is made and stored the first time it is needed (a store
        encrypted before search could run there has none); the first one stored wins.
        """
        sealer = self._sealer
        if sealer is None:
            return None
        found = self._sealed_terms
        if found is None:
            try:
                key = sealer.search_key()
            except StoreCorruptError:
                keep = self.dialect.sql(_INSERT_KEY + " ON CONFLICT (kid) DO NOTHING")
                with self._transaction("store the search key") as conn:
                    conn.execute(keep, sealer.search_key_row())
                key = sealer.search_key()
            found = self._sealed_terms = SealedTerms(key, sealer.open_rows)
        return found

    def _refuse_another_key(self, key: str | bytes | None, check: bytes | None, where: str) -> None:
        """Refuse a missing or wrong key against a stored check value, before any migration.

        Raises:
            EncryptionKeyMissingError, EncryptionKeyMismatchError: see :meth:`_start_sealing`.
        """
        open_sealer(master_key(key), check, False, self._load_key, where)

    def _load_key(self, by: str, value: int) -> tuple[int | None, int, bytes] | None:
        column = "kid" if by == "kid" else "owner_pk"
        query = self.dialect.sql(f"SELECT owner_pk, kid, wrapped FROM data_keys WHERE {column} = ?")
        with self._key_reader() as conn:
            r = conn.execute(query, (value,)).fetchone()
        return None if r is None else (r[0], int(r[1]), bytes(r[2]))

    def _key_reader(self) -> AbstractContextManager[Connection]:
        """A connection to read a data key on (a read snapshot by default)."""
        return self._snapshot("read a data key")  # type: ignore[no-any-return]

    def _bind_key(self, conn: Connection, key: DataKey | None, pk: int) -> None:
        """Store ``key`` as the data key of the session just inserted with ``pk``."""
        if key is not None and self._sealer is not None:
            conn.execute(self.dialect.sql(_INSERT_KEY), self._sealer.bind(key, pk))

    @property
    def encrypted(self) -> bool:
        """Whether the store seals what sessions hold (opened with its master key)."""
        return self._sealer is not None

    def rotate_key(self, new_key: str | bytes) -> int:
        """Wrap every data key by ``new_key`` instead of the current master key.

        One transaction: the data keys and the check value are rewritten, no record is.
        From then on the store opens with ``new_key`` only.

        Returns:
            The number of sessions' data keys re-wrapped (the store's own two not counted).

        Raises:
            EncryptionKeyMissingError: the store is not encrypted (opened without a key).
            InvalidArgumentError: ``new_key`` is not a key.
        """
        sealer = self._sealer
        if sealer is None:
            raise EncryptionKeyMissingError("rotate_key: the store is not encrypted")
        fresh = Sealer(parse_key(new_key), self._load_key)
        d = self.dialect
        with self._transaction("rotate the encryption key") as conn:
            rows = conn.execute("SELECT kid, owner_pk, wrapped FROM data_keys").fetchall()
            rewrapped = sealer.rewrapped([(int(k), o, bytes(w)) for k, o, w in rows], fresh)
            update = d.sql("UPDATE data_keys SET wrapped = ? WHERE kid = ?")
            for pair in rewrapped:
                conn.execute(update, pair)
        fresh.adopt(sealer)
        self._sealer = fresh
        self._sealed_terms = None  # its key is the same; its sealer is not
        return sum(1 for _, kid in rewrapped if kid not in (CHECK_KID, OBJECTS_KID))
