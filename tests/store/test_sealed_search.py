"""Search on an encrypted SQLite store, read from the file: hashed terms, never the words.

The conformance kit's ``SearchConformance`` checks what a caller finds on the encrypted
stores; these tests read what the file holds, and what such a store refuses (PostgreSQL's
tables: ``test_pg_sealed_search.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from plait.errors import SearchQueryError
from plait.records import AssistantRecord, Record, UserRecord
from plait.store import SQLiteStore, new_encryption_key
from plait.store.search import MARK_END, MARK_START
from plait.testing._transcript import appended, new_row

WORDS = ("okapicontent", "okapireply", "pangolinphrase", "caf\u00e9okapi")


def _raw(path: Path) -> bytes:
    return b"".join(
        Path(f"{path}{suffix}").read_bytes()
        for suffix in ("", "-wal", "-journal")
        if Path(f"{path}{suffix}").exists()
    )


def _said(store: Any, sid: str, *texts: str) -> None:
    recs: list[Record] = [
        (UserRecord if i % 2 == 0 else AssistantRecord)(seq=i, content=t)  # type: ignore[call-arg]
        for i, t in enumerate(texts)
    ]
    store.create(appended(new_row(sid), recs), recs)


@pytest.fixture
def sealed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("PLAIT_ENCRYPTION_KEY", raising=False)
    store = SQLiteStore(tmp_path / "s.db", encryption_key=new_encryption_key())
    yield store
    store.close()


def test_searches_leave_no_word_of_an_encrypted_session_in_the_file(
    sealed: Any, tmp_path: Path
) -> None:
    """The main file and its log, read raw after searches, hold no searched word."""
    _said(sealed, "s", "the okapicontent here", "an okapireply to the pangolinphrase here")
    _said(sealed, "t", "caf\u00e9okapi is open", "nothing")
    hits = sealed.search("okapicontent")
    assert [(h.session_id, h.position) for h in hits] == [("s", 0)]
    assert f"{MARK_START}okapicontent{MARK_END}" in hits[0].snippet
    assert [h.position for h in sealed.search('"the pangolinphrase"')] == [1]
    assert sealed.search('"pangolinphrase the"') == []
    # Accents and case are folded as on a plain store: one tokenizer for both sides.
    assert [h.session_id for h in sealed.search("CAFEOKAPI")] == ["t"]
    sealed.reindex()
    assert len(sealed.search("okapireply")) == 1
    raw = _raw(tmp_path / "s.db")
    assert Path(f"{tmp_path / 's.db'}-wal").exists() and raw
    found = [w for w in (*WORDS, "pangolin", "okapi") if w.encode() in raw]
    found += [w for w in WORDS if w.encode("utf-16-le") in raw]
    assert found == []


def test_operators_and_prefixes_are_refused_words_and_phrases_are_not(sealed: Any) -> None:
    """Only words and quoted phrases: anything else says why, and nothing is searched."""
    _said(sealed, "s", "red kangaroo jumps")
    for query in ("kang*", "red OR blue", "NOT red", "red -blue", "body:red", '"red kangaroo'):
        with pytest.raises(SearchQueryError):
            sealed.search(query)
    with pytest.raises(SearchQueryError, match="words and"):
        sealed.search("kang*")
    assert len(sealed.search('red "kangaroo jumps"')) == 1
    assert sealed.search("...") == []  # no term at all: nothing matches


def test_erase_and_rotation_keep_the_index_true(sealed: Any, tmp_path: Path) -> None:
    """An erased session's rows leave the index; a rotated key keeps what it matches."""
    _said(sealed, "gone", "wombat secretword")
    _said(sealed, "kept", "wombat other")
    assert {h.session_id for h in sealed.search("wombat")} == {"gone", "kept"}
    sealed.erase("gone")
    assert {h.session_id for h in sealed.search("wombat")} == {"kept"}
    assert sealed.search("secretword") == []
    new_key = new_encryption_key()
    sealed.rotate_key(new_key)
    _said(sealed, "after", "wombat later")
    assert {h.session_id for h in sealed.search("wombat")} == {"kept", "after"}
    sealed.close()
    again = SQLiteStore(tmp_path / "s.db", encryption_key=new_key)
    try:
        assert {h.session_id for h in again.search("wombat")} == {"kept", "after"}
    finally:
        again.close()

