"""Encryption at rest: the one seam every SQL engine seals and opens its columns through.

A store opened with a master key (``encryption_key=`` or ``$PLAIT_ENCRYPTION_KEY``) keeps
each session's content under a **data key** of its own: a random 32-byte AES-GCM key,
stored in ``data_keys`` wrapped (AES-GCM) by the master key. What is sealed: a record's
``payload`` and ``meta``; a session row's ``title``, ``scratchpad`` and ``metadata``; a
scratchpad version's ``scratchpad``, ``reason`` and ``metadata``; and, under the store's
own object key, checkpoint object parts and PostgreSQL's bus events (D320).

Written by hand on the ``cryptography`` package's AES-GCM rather than its Fernet: Fernet
has no associated data (a row could be moved and still open) and costs an HMAC and a
CBC pass per value where AES-GCM is one primitive.

A sealed column is text (both engines' columns are TEXT): base64 of the data key's id
(8 bytes), a random 12-byte nonce, the ciphertext and its tag. The associated data binds
a ciphertext to its place: a record's to its key id, position, record id, kind and column,
and the reader checks that the key belongs to the session that owns the row, so a row
moved to another position or session does not open; a session column's to its key id and
column name. A data key is bound to its key id and owner by its own associated data.

Erasing forgets by destroying: a data key's row goes with the ``sessions`` row of its
owner (a trigger on SQLite, a cascading foreign key on PostgreSQL); a tombstone kept for
a live fork has what the fork reads sealed again under a new key, and the old one goes
(D322). Rotating
the master key re-wraps every data key and rewrites no record (D323).
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from plait.errors import (
    EncryptionKeyError,
    EncryptionKeyMismatchError,
    EncryptionKeyMissingError,
    InvalidArgumentError,
    InvalidMessageError,
    MissingDependencyError,
    StoreCorruptError,
)

__all__ = [
    "CHECK_KID",
    "OBJECTS_KID",
    "SEARCH_KID",
    "KEY_ENV",
    "DataKey",
    "KeyLoader",
    "Sealer",
    "generate_key",
    "master_key",
    "open_sealer",
    "parse_key",
]

KEY_ENV: Final = "PLAIT_ENCRYPTION_KEY"
"""The environment variable a store's master key is read from when none is given."""
KEY_BYTES: Final = 32
CHECK_KID: Final = 0
"""The ``data_keys`` row that holds the master key's check value (owner NULL)."""
OBJECTS_KID: Final = 1
"""The ``data_keys`` row of the store's object key (owner NULL): checkpoint objects are
shared by digest across sessions, so they are sealed under one key of the store's."""
SEARCH_KID: Final = 2
"""The ``data_keys`` row of the store's search key (owner NULL): the key of the keyed
hashes an encrypted store's full-text index holds instead of words (D324)."""
_NONCE: Final = 12
_KID: Final = struct.Struct(">q")
_HEAD: Final = _KID.size + _NONCE
_CHECK_AAD: Final = b"plait master key check"
_CHECK_PLAIN: Final = bytes(KEY_BYTES)

KeyLoader = Callable[[str, int], "tuple[int | None, int, bytes] | None"]
"""``load(by, value)``: the ``(owner_pk, kid, wrapped)`` of the data key whose ``by``
(``"kid"`` or ``"owner"``) is ``value``, read from the store; None when there is none."""


def _aesgcm() -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise MissingDependencyError("an encrypted store", "crypto") from exc
    return AESGCM


def generate_key() -> str:
    """A new master key: 32 random bytes in URL-safe base64 (44 characters).

    Keep it apart from the store (a secrets manager, an environment variable): whoever
    holds both reads every session, and without it nothing in the store can be read.
    """
    return base64.urlsafe_b64encode(secrets.token_bytes(KEY_BYTES)).decode("ascii")


def parse_key(key: str | bytes) -> bytes:
    """The 32 bytes of a master key given as URL-safe base64 text (or those bytes' text).

    Raises:
        InvalidArgumentError: not 32 bytes in URL-safe base64 (the key is never shown).
    """
    if isinstance(key, bytes) and len(key) == KEY_BYTES:
        return key
    if not isinstance(key, str | bytes):
        raise InvalidArgumentError(
            f"an encryption key is text (URL-safe base64), not {type(key).__name__}"
        )
    try:
        raw = base64.urlsafe_b64decode(key.strip())
    except (binascii.Error, ValueError) as exc:
        raise InvalidArgumentError(
            "the encryption key is not URL-safe base64 (`plait db keygen` makes one)"
        ) from exc
    if len(raw) != KEY_BYTES:
        raise InvalidArgumentError(
            f"the encryption key holds {len(raw)} bytes, not {KEY_BYTES} "
            "(`plait db keygen` makes one)"
        )
    return raw


def master_key(key: str | bytes | None) -> bytes | None:
    """The master key given, else ``$PLAIT_ENCRYPTION_KEY``'s, else None (no encryption).

    Raises:
        InvalidArgumentError: the key given (or the variable) is not a key.
    """
    if key is None:
        key = os.environ.get(KEY_ENV) or None
    return None if key is None else parse_key(key)


@dataclass(frozen=True, slots=True)
class DataKey:
    """A session's data key, unwrapped: its id, its owner (0 until its row is inserted)."""

    kid: int
    owner: int
    aead: Any
    raw: bytes


def _wrap_aad(kid: int, owner: int) -> bytes:
    return b"plait data key" + _KID.pack(kid) + _KID.pack(owner)


def _record_aad(kid: int, seq: int, rid: str, kind: str, column: bytes) -> bytes:
    return b"r" + _KID.pack(kid) + _KID.pack(seq) + column + kind.encode() + b"\0" + rid.encode()


def _bus_aad(kid: int, session_id: str) -> bytes:
    return b"bus" + session_id.encode()


def _column_aad(kid: int, name: bytes) -> bytes:
    return b"s" + _KID.pack(kid) + name


class Sealer:
    """Seals and opens a store's columns under per-session data keys wrapped by a master key.

    Unwrapped keys are kept in memory by key id and by owner; a key is read from the
    store (``load``) the first time a row needs it. An erased session's key leaves the
    store with its row, so no later read in any process can open what it wrote.
    """

    def __init__(self, master: bytes, load: KeyLoader) -> None:
        self._wrapper = _aesgcm()(master)
        self._load = load
        self._by_kid: dict[int, DataKey] = {}
        self._by_owner: dict[int, DataKey] = {}
        self._lock = threading.Lock()

    # -- the master key -----------------------------------------------------------------

    def check_value(self) -> bytes:
        """A check value of the master key, stored once: a known block wrapped by it."""
        nonce = secrets.token_bytes(_NONCE)
        return nonce + bytes(self._wrapper.encrypt(nonce, _CHECK_PLAIN, _CHECK_AAD))

    def verify(self, stored: bytes | None, where: str) -> None:
        """Refuse a master key that is not the store's (before anything is read or written).

        Raises:
            EncryptionKeyMismatchError: the check value does not open with this key.
        """
        if stored is None:
            return
        if self._unwrap(bytes(stored), _CHECK_AAD) != _CHECK_PLAIN:
            raise EncryptionKeyMismatchError(
                f"{where}: the encryption key given is not this store's "
                "(its check value does not open with it); nothing was read or written"
            )

    def _unwrap(self, blob: bytes, aad: bytes) -> bytes | None:
        from cryptography.exceptions import InvalidTag

        try:
            return bytes(self._wrapper.decrypt(blob[:_NONCE], blob[_NONCE:], aad))
        except (InvalidTag, ValueError):
            return None

    def wrap(self, key: DataKey, owner: int) -> bytes:
        """``key`` wrapped by the master key, bound to its id and ``owner``."""
        nonce = secrets.token_bytes(_NONCE)
        return nonce + bytes(self._wrapper.encrypt(nonce, key.raw, _wrap_aad(key.kid, owner)))

    def rewrapped(
        self, rows: Sequence[tuple[int, int | None, bytes]], new: Sealer
    ) -> list[tuple[bytes, int]]:
        """Each ``(kid, owner, wrapped)`` of ``rows`` wrapped by ``new``'s master key instead.

        Returns ``(wrapped, kid)`` pairs; the check value (``CHECK_KID``) is made anew.

        Raises:
            EncryptionKeyMismatchError: a key does not open with this master key.
        """
        out: list[tuple[bytes, int]] = []
        for kid, owner, wrapped in rows:
            if kid == CHECK_KID:
                out.append((new.check_value(), kid))
                continue
            raw = self._unwrap(bytes(wrapped), _wrap_aad(kid, int(owner or 0)))
            if raw is None:
                raise EncryptionKeyMismatchError(f"data key {kid} does not open with this key")
            out.append((new.wrap(DataKey(kid, int(owner or 0), None, raw), int(owner or 0)), kid))
        return out

    # -- data keys ------------------------------------------------------------------------

    def new_key(self) -> DataKey:
        """A new data key for a session about to be inserted (bind it to its row's key)."""
        kid = max(secrets.randbits(63), SEARCH_KID + 1)
        raw = secrets.token_bytes(KEY_BYTES)
        return DataKey(kid, 0, _aesgcm()(raw), raw)

    def objects_key(self) -> tuple[int, None, bytes]:
        """A new object key: the ``(kid, owner_pk, wrapped)`` row to insert once."""
        key = self.new_key()
        return OBJECTS_KID, None, self.wrap(DataKey(OBJECTS_KID, 0, key.aead, key.raw), 0)

    def search_key_row(self) -> tuple[int, None, bytes]:
        """A new search key: the ``(kid, owner_pk, wrapped)`` row to insert once.

        Random and wrapped like a data key (not derived from the master key), so that a
        rotation re-wraps it and the index made under it stays valid.
        """
        key = self.new_key()
        return SEARCH_KID, None, self.wrap(DataKey(SEARCH_KID, 0, key.aead, key.raw), 0)

    def search_key(self) -> bytes:
        """The store's search key (the HMAC key of its index's terms).

        Raises:
            StoreCorruptError: the store holds none yet (see :meth:`search_key_row`).
        """
        return self._key(SEARCH_KID).raw

    def seal_bus(self, session_id: str, event: str) -> str:
        """A run event passed between processes, sealed under the object key."""
        return self.seal(self._key(OBJECTS_KID), event, b"bus" + session_id.encode())

    def open_bus(self, session_id: str, event: str) -> str:
        """What :meth:`seal_bus` sealed.

        Raises:
            StoreCorruptError: it does not open (another session's, or altered).
        """
        aad = partial(_bus_aad, session_id=session_id)
        return self.open(event, aad, None, f"an event of session {session_id!r}")

    def seal_part(self, digest: str, index: int, data: bytes) -> bytes:
        """A checkpoint object's part sealed under the object key (nonce in front)."""
        key = self._key(OBJECTS_KID)
        nonce = secrets.token_bytes(_NONCE)
        aad = b"o" + digest.encode() + _KID.pack(index)
        return nonce + bytes(key.aead.encrypt(nonce, data, aad))

    def open_part(self, digest: str, index: int, blob: bytes) -> bytes:
        """What :meth:`seal_part` sealed.

        Raises:
            StoreCorruptError: it does not open (another object's part, or altered).
        """
        from cryptography.exceptions import InvalidTag

        key = self._key(OBJECTS_KID)
        aad = b"o" + digest.encode() + _KID.pack(index)
        try:
            return bytes(key.aead.decrypt(blob[:_NONCE], blob[_NONCE:], aad))
        except (InvalidTag, ValueError) as exc:
            raise StoreCorruptError(f"object {digest} part {index} does not open") from exc

    def bind(self, key: DataKey, owner: int) -> tuple[int, int, bytes]:
        """Keep ``key`` as ``owner``'s; the ``(kid, owner_pk, wrapped)`` row to insert."""
        bound = DataKey(key.kid, owner, key.aead, key.raw)
        with self._lock:
            replaced = self._by_owner.get(owner)
            if replaced is not None:  # a kept tombstone's rows sealed again (an erase)
                self._by_kid.pop(replaced.kid, None)
            self._by_kid[key.kid] = bound
            self._by_owner[owner] = bound
        return key.kid, owner, self.wrap(key, owner)

    def owner_key(self, owner: int) -> DataKey:
        """The data key of the session whose row key is ``owner``.

        Raises:
            StoreCorruptError: the store holds no key for it (written before the store was
                encrypted, or its key was destroyed).
        """
        found = self._by_owner.get(owner)
        if found is not None:
            return found
        got = self._load("owner", owner)
        if got is None:
            raise StoreCorruptError(f"session key {owner}: no data key is stored for it")
        return self._keep(got)

    def _key(self, kid: int) -> DataKey:
        found = self._by_kid.get(kid)
        if found is not None:
            return found
        got = self._load("kid", kid)
        if got is None:
            raise StoreCorruptError(
                f"data key {kid} is not in the store (erased, or from another store)"
            )
        return self._keep(got)

    def _keep(self, got: tuple[int | None, int, bytes]) -> DataKey:
        owner, kid, wrapped = got
        owner = int(owner or 0)
        raw = self._unwrap(bytes(wrapped), _wrap_aad(kid, owner))
        if raw is None:
            raise StoreCorruptError(f"data key {kid} does not open with the master key")
        key = DataKey(kid, owner, _aesgcm()(raw), raw)
        with self._lock:
            self._by_kid[kid] = key
            self._by_owner.setdefault(owner, key)
        return key

    def adopt(self, other: Sealer) -> None:
        """Keep the data keys ``other`` holds unwrapped (a rotation changes none of them)."""
        with other._lock:
            by_kid, by_owner = dict(other._by_kid), dict(other._by_owner)
        with self._lock:
            self._by_kid.update(by_kid)
            self._by_owner.update(by_owner)

    def forget(self, owners: Sequence[int]) -> None:
        """Drop the keys of erased sessions from memory too."""
        with self._lock:
            for owner in owners:
                key = self._by_owner.pop(owner, None)
                if key is not None:
                    self._by_kid.pop(key.kid, None)

    # -- columns ----------------------------------------------------------------------------

    def seal(self, key: DataKey, text: str, aad: bytes) -> str:
        """``text`` sealed under ``key`` (its id and the nonce in front), as base64 text.

        Raises:
            InvalidMessageError: text that is not Unicode (a lone surrogate): nothing written.
        """
        nonce = secrets.token_bytes(_NONCE)
        try:
            data = text.encode()
        except UnicodeEncodeError as exc:
            raise InvalidMessageError(
                f"text is not valid Unicode ({exc.reason} at {exc.start})"
            ) from exc
        body = key.aead.encrypt(nonce, data, aad)
        return base64.b64encode(_KID.pack(key.kid) + nonce + body).decode("ascii")

    def open(self, text: Any, aad: Callable[[int], bytes], owner: int | None, where: str) -> str:
        """What :meth:`seal` sealed; ``aad(kid)`` its associated data.

        ``owner``: the session the row belongs to, whose key it must be (None: any key).

        Raises:
            StoreCorruptError: not sealed text, a key not in the store, or another place's.
        """
        from cryptography.exceptions import InvalidTag

        try:
            blob = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError, TypeError) as exc:
            raise StoreCorruptError(f"{where}: not sealed text ({exc})") from exc
        if len(blob) < _HEAD + 16:
            raise StoreCorruptError(f"{where}: sealed text too short")
        kid = _KID.unpack_from(blob)[0]
        key = self._key(kid)
        if owner is not None and key.owner != owner:
            raise StoreCorruptError(f"{where}: sealed with another session's key")
        try:
            plain = key.aead.decrypt(blob[_KID.size : _HEAD], blob[_HEAD:], aad(kid))
        except InvalidTag as exc:
            raise StoreCorruptError(f"{where}: does not open (moved, or altered)") from exc
        return str(plain.decode())

    def seal_record(
        self, key: DataKey, seq: int, rid: str, kind: str, payload: str, meta: str | None
    ) -> tuple[str, str | None]:
        """A record's ``payload`` and ``meta`` columns, sealed to its key, position and id."""
        kid = key.kid
        sealed = self.seal(key, payload, _record_aad(kid, seq, rid, kind, b"p"))
        if meta is None:
            return sealed, None
        return sealed, self.seal(key, meta, _record_aad(kid, seq, rid, kind, b"m"))

    def open_rows(self, rows: Sequence[Sequence[Any]], first: int = 0) -> list[tuple[Any, ...]]:
        """Rows ``(key, id, kind, payload, meta, created_at, tokens)`` with payload and meta open.

        The columns start at ``first``; a record's key names its owner and position.

        Raises:
            StoreCorruptError: a column does not open where it is.
        """
        out: list[tuple[Any, ...]] = []
        by_kid = self._by_kid
        for row in rows:
            key, rid, kind, payload, meta = row[first : first + 5]
            owner, seq = key >> 32, key & 0xFFFFFFFF
            # The common case inline (a read opens every row); any failure is opened
            # again by open(), which names what is wrong.
            try:
                blob = binascii.a2b_base64(payload, strict_mode=True)
                found = by_kid.get(int.from_bytes(blob[:8], "big", signed=True))
                if found is None or found.owner != owner or meta is not None:
                    raise ValueError
                tail = seq.to_bytes(8, "big") + b"p" + kind.encode() + b"\0" + rid.encode()
                opened = found.aead.decrypt(blob[8:_HEAD], blob[_HEAD:], b"r" + blob[:8] + tail)
                out.append(
                    (*row[:first], key, rid, kind, opened.decode(), None, *row[first + 5 :])
                )
                continue
            except Exception:  # opened again below, by open(), which says why
                pass
            where = f"record seq={seq} of session key {owner}"
            aad = partial(_record_aad, seq=seq, rid=rid, kind=kind, column=b"p")
            text = self.open(payload, aad, owner, where)
            if meta is not None:
                aad = partial(_record_aad, seq=seq, rid=rid, kind=kind, column=b"m")
                meta = self.open(meta, aad, owner, where)
            out.append((*row[:first], key, rid, kind, text, meta, *row[first + 5 :]))
        return out

    def seal_columns(
        self, key: DataKey, names: Sequence[str], values: Sequence[Any], sealed: frozenset[str]
    ) -> tuple[Any, ...]:
        """``values`` (named ``names``), those in ``sealed`` that are not NULL sealed."""
        return tuple(
            self.seal(key, v, _column_aad(key.kid, n.encode()))
            if v is not None and n in sealed
            else v
            for n, v in zip(names, values, strict=True)
        )

    def open_columns(
        self, r: Sequence[Any], at: dict[str, int], owner: int | None, where: str
    ) -> list[Any]:
        """``r`` with the columns at ``at`` (name to index) opened."""
        out = list(r)
        for name, i in at.items():
            if out[i] is not None:
                aad = partial(_column_aad, name=name.encode())
                out[i] = self.open(out[i], aad, owner, where)
        return out


def _no_keys(by: str, value: int) -> None:
    return None


def open_sealer(
    key: bytes | None, check: bytes | None, empty: bool, load: KeyLoader | None, where: str
) -> tuple[Sealer | None, bytes | None]:
    """The sealer of a store being opened, and the check value to store if it starts now.

    A store that starts being encrypted also stores its object key
    (:meth:`Sealer.objects_key`) with the check value.

    ``check``: the store's stored check value (None: never encrypted); ``empty``: it
    holds no session. A store starts being encrypted when it is first opened with a key
    while empty; it is never half plain, half sealed.

    Raises:
        EncryptionKeyMissingError: an encrypted store, and no key.
        EncryptionKeyMismatchError: a key that is not the store's.
        EncryptionKeyError: a key for a store that already holds plain sessions.
    """
    if key is None:
        if check is not None:
            raise EncryptionKeyMissingError(
                f"{where}: the store is encrypted; give its key (encryption_key= or ${KEY_ENV})"
            )
        return None, None
    sealer = Sealer(key, load or _no_keys)
    if check is not None:
        sealer.verify(check, where)
        return sealer, None
    if not empty:
        raise EncryptionKeyError(
            f"{where}: the store already holds sessions in plain text; an encryption key "
            "can only be given to a new (empty) store (export and import them into one)"
        )
    return sealer, sealer.check_value()
