"""Full-text search on an encrypted store: keyed hashes of the terms, never the words (D324).

An encrypted store's index is fed, for each term of a record, an HMAC-SHA256 of the
folded term under the store's search key (``data_keys``, :data:`SEARCH_KID`), cut to
:data:`TERM_HEX` hex digits: one index token per term, in the term's position, so the
engine's phrase matching works unchanged. A query's words are cut and folded by the
same :func:`terms` and hashed by the same key; its snippets are made here, from the
hit's record opened, since the index holds no text to make them from.

The tokenizer is written here, not borrowed from the engine: the hashes are computed
in Python before the engine sees them, and the query must be cut exactly as the
records were. It follows FTS5's ``unicode61 remove_diacritics 2`` (letters and digits
make terms; anything else parts them; lower case; accents removed), so a query finds
what it finds on a plain store.
"""

from __future__ import annotations

import hmac
import re
import sys
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any, Final

from plait.errors import SearchQueryError, StoreCorruptError
from plait.store.search import MARK_END, MARK_START

__all__ = ["TERM_HEX", "SealedTerms", "match_query", "phrases", "snippet", "terms"]

TERM_HEX: Final = 16
"""Hex digits kept of a term's HMAC-SHA256 (64 bits: no two terms of a store collide in
practice, and an index token stays short)."""

SNIPPET_TERMS: Final = 16
"""Terms a snippet shows around its first match (as FTS5's ``snippet(..., 16)``)."""

_OPERATORS: Final = frozenset({"AND", "OR", "NOT", "NEAR"})
_SYNTAX: Final = re.compile(r"[*^:(){}+\-]")


@lru_cache(maxsize=1)
def _term_re() -> re.Pattern[str]:
    # Letters and digits (not "_"), and the combining marks that follow them: a
    # decomposed accent stays in its word, to be removed by folding. (Marks beyond the
    # Basic Multilingual Plane part words; both sides of a search part them alike.)
    ranges: list[tuple[int, int]] = []
    for c in range(0x300, 0x10000):
        if unicodedata.category(chr(c))[0] == "M":
            if ranges and ranges[-1][1] == c - 1:
                ranges[-1] = (ranges[-1][0], c)
            else:
                ranges.append((c, c))
    marks = "".join(f"\\u{lo:04x}-\\u{hi:04x}" for lo, hi in ranges)
    return re.compile(rf"[^\W_](?:[^\W_]|[{marks}])*")


def _fold(word: str) -> str:
    if word.isascii():
        return word.lower()
    decomposed = unicodedata.normalize("NFD", word)
    stripped = "".join(c for c in decomposed if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", stripped).lower()


def terms(text: str) -> list[tuple[str, int, int]]:
    """Each term of ``text``: ``(folded term, start, end)``, ``text[start:end]`` as written.

    The one tokenizer of an encrypted store's index: records are cut with it before
    their terms are hashed, and so are queries.
    """
    return [(_fold(m.group()), m.start(), m.end()) for m in _term_re().finditer(text)]


class SealedTerms:
    """Hashes terms under a store's search key; opens the records it indexes."""

    def __init__(self, key: bytes, open_rows: Callable[[list[Any]], list[Any]]) -> None:
        self._key = key
        self._open_rows = open_rows
        self._cache: dict[str, str] = {}

    def hash(self, term: str) -> str:
        """The index token of a folded term."""
        found = self._cache.get(term)
        if found is None:
            digest = hmac.digest(self._key, term.encode("utf-8", "surrogatepass"), "sha256")
            found = digest.hex()[:TERM_HEX]
            if len(self._cache) > 100_000:  # a bound, not a policy: terms repeat a lot
                self._cache.clear()
            self._cache[sys.intern(term)] = found
        return found

    def tokens(self, text: str) -> str:
        """``text`` as the index sees it: its terms' tokens, in order."""
        return " ".join(self.hash(t) for t, _, _ in terms(text))

    def opened(self, rows: Sequence[Any]) -> list[Any]:
        """``(key, rid, kind, payload, meta, ...)`` rows, opened.

        A row that does not open (damaged, or its key destroyed) is left out: it gives
        the index nothing.
        """
        try:
            return self._open_rows(list(rows))
        except StoreCorruptError:
            out: list[Any] = []
            for row in rows:
                try:
                    out.extend(self._open_rows([row]))
                except StoreCorruptError:
                    continue
            return out

    def texts(
        self, rows: Iterable[Any], index_text: Callable[[str, str], str | None]
    ) -> list[tuple[int, str]]:
        """``(key, tokens)`` of each sealed ``(key, rid, kind, payload, meta)`` row searched."""
        out: list[tuple[int, str]] = []
        for key, _rid, kind, payload, *_ in self.opened(list(rows)):
            text = index_text(str(kind), str(payload))
            if text is not None:
                out.append((int(key), self.tokens(text)))
        return out


def match_query(query: str, hashed: Callable[[str], str]) -> tuple[str, frozenset[str]]:
    """A query of words and ``"quoted phrases"`` as an FTS5 query of hashed terms.

    Returns:
        The FTS5 query ("" when the query has no term), and the tokens it looks for.

    Raises:
        SearchQueryError: an operator, a prefix or an unclosed quote (see :func:`phrases`).
    """
    groups, wanted = phrases(query, hashed)
    return " ".join('"' + " ".join(g) + '"' for g in groups), wanted


def phrases(query: str, hashed: Callable[[str], str]) -> tuple[list[list[str]], frozenset[str]]:
    """A query of words and ``"quoted phrases"`` as phrases of hashed terms, all to match.

    Each bare word is a phrase of its terms (``don't`` is two adjacent terms), as in FTS5.

    Returns:
        The phrases, each its tokens in order (none when the query has no term), and
        the tokens they look for.

    Raises:
        SearchQueryError: an operator, a prefix or an unclosed quote: an encrypted
            store's index holds hashes of whole terms, so it matches words and phrases only.
    """
    groups: list[list[str]] = []
    wanted: set[str] = set()
    for word, quoted in _pieces(query):
        if not quoted and (word in _OPERATORS or _SYNTAX.search(word)):
            raise SearchQueryError(
                f"bad search query {query!r}: an encrypted store's index holds hashed "
                'terms, so it matches words and "quoted phrases" only (no operators '
                f"or prefixes: {word!r})"
            )
        tokens = [hashed(t) for t, _, _ in terms(word)]
        if tokens:
            wanted.update(tokens)
            groups.append(tokens)
    return groups, frozenset(wanted)


def _pieces(query: str) -> list[tuple[str, bool]]:
    """The query's bare words and quoted phrases (``""`` in a phrase is a quote), in order.

    Raises:
        SearchQueryError: a quote not closed.
    """
    out: list[tuple[str, bool]] = []
    at = 0
    while at < len(query):
        quote = query.find('"', at)
        bare = query[at:] if quote < 0 else query[at:quote]
        out.extend((w, False) for w in bare.split())
        if quote < 0:
            break
        phrase, at = [], quote + 1
        while True:
            close = query.find('"', at)
            if close < 0:
                raise SearchQueryError(f"bad search query {query!r}: a quote is not closed")
            phrase.append(query[at:close])
            if query.startswith('"', close + 1):
                phrase.append('"')
                at = close + 2
                continue
            at = close + 1
            break
        out.append(("".join(phrase), True))
    return out


def snippet(text: str, wanted: frozenset[str], hashed: Callable[[str], str]) -> str:
    """The text around the first matched term, each matched term marked (as FTS5's)."""
    found = terms(text)
    hits = [i for i, (t, _, _) in enumerate(found) if hashed(t) in wanted]
    if not found:
        return text
    first = hits[0] if hits else 0
    start = max(0, min(first - SNIPPET_TERMS // 4, len(found) - SNIPPET_TERMS))
    end = min(len(found), start + SNIPPET_TERMS)
    out: list[str] = ["\u2026"] if start > 0 else []
    at = 0 if start == 0 else found[start][1]
    marked = set(hits)
    for i in range(start, end):
        _, lo, hi = found[i]
        out.append(text[at:lo])
        out.append(f"{MARK_START}{text[lo:hi]}{MARK_END}" if i in marked else text[lo:hi])
        at = hi
    out.append(text[at:] if end == len(found) else "\u2026")
    return "".join(out)
