"""Alias table: the surface forms under which a corpus page may be mentioned.

Entities are the corpus's own pages, so the aliases come from page titles:
underscores become spaces, PTB brackets and HTML entities are undone, the
disambiguation part (``Liverpool_-LRB-band-RRB-`` -> ``liverpool``) is
stripped, text is NFKC-normalised and case folded.  A few safe variants are
added: the title without a leading article ("the beatles" -> "beatles"),
without dots ("f.c." -> "fc") and, for clubs, without the club suffix
("liverpool f.c." -> "liverpool"), so that pages sharing a base title compete
in disambiguation.  Purely numeric or one-character keys are dropped (year
pages would otherwise turn every date into a hub).
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from collections.abc import Iterable

from garag.text import detokenize, normalize_title

# Variant kinds: the title itself, and generated variants (less trusted in disambiguation).
EXACT, VARIANT = 0, 1

_ARTICLES = ("the ", "a ", "an ")
_CLUB_SUFFIXES = (" f.c", " a.f.c", " fc", " afc", " c.f", " football club")
_POSSESSIVE_RE = re.compile(r"(?:['\u2019]s|(?<=s)['\u2019])$")
_EDGE_PUNCT = "\"'`.,;:!?()[]{}\u201c\u201d\u2018\u2019"
_SPACE_RE = re.compile(r"\s+")


@functools.lru_cache(maxsize=1 << 18)
def mention_key(text: str) -> str:
    """Normalised key of a mention's surface text (same normalisation as titles).

    ``"The Beatles'"`` -> ``"the beatles"``; PTB tokens and HTML entities are undone.  Memoised: a
    graph build looks up the same surface strings (names, noun phrases) again and again.
    """
    text = detokenize(html.unescape(text))
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _SPACE_RE.sub(" ", text).strip().strip(_EDGE_PUNCT).strip()
    text = _POSSESSIVE_RE.sub("", text).strip()
    return text


def _usable(key: str) -> bool:
    return len(key) > 1 and any(ch.isalpha() for ch in key)


def title_aliases(page: str) -> list[tuple[str, int]]:
    """Alias keys of one page id with their kind, the title's own key first.

    The title's key is ``EXACT`` only for a title without a disambiguation part
    (``Liverpool``, not ``Liverpool_-LRB-band-RRB-``): Wikipedia gives the plain title to
    the primary sense, which disambiguation favours slightly.
    """
    base = mention_key(normalize_title(html.unescape(page)))
    if not _usable(base):
        return []
    plain = mention_key(normalize_title(html.unescape(page), strip_disambiguation=False)) == base
    keys: dict[str, int] = {base: EXACT if plain else VARIANT}
    variants = []
    for article in _ARTICLES:
        if base.startswith(article) and len(base) > len(article) + 2:
            variants.append(base[len(article) :])
    for suffix in _CLUB_SUFFIXES:
        if base.endswith(suffix) and len(base) > len(suffix) + 2:
            variants.append(base[: -len(suffix)])
    if "." in base:
        variants.append(_SPACE_RE.sub(" ", base.replace(".", "")).strip())
    for v in variants:
        if _usable(v) and v not in keys:
            keys[v] = VARIANT
    return list(keys.items())


def page_key(page: str) -> str:
    """Lookup key of a page id itself (a hyperlink to the exact page), apart from every alias key."""
    return "\x00" + page


def link_page_ids(target: str) -> tuple[str, str]:
    """The page ids a hyperlink target may name exactly: as written, and with a capital first letter."""
    page_id = target.strip().replace(" ", "_")
    return page_id, page_id[:1].upper() + page_id[1:]


class AliasTable:
    """Key -> candidate pages (with the kind of match), built from page titles.

    Pages under one key are kept in a stable order (by page id) so that
    disambiguation does not depend on the order pages were added in.  Compact, as every graph
    worker holds one for the whole corpus: a key naming one page by its exact title (most keys)
    stores that page id itself, other keys a sorted tuple of ``(page, kind)``.
    """

    def __init__(self) -> None:
        self._keys: dict[str, str | tuple[tuple[str, int], ...]] = {}
        self._pages: set[str] = set()
        self.max_tokens = 1

    @classmethod
    def from_pages(cls, pages: Iterable[str]) -> AliasTable:
        """Alias table of all ``pages``."""
        table = cls()
        table.add_pages(pages)
        return table

    def _set(self, key: str, pairs: dict[str, int]) -> None:
        if not pairs:
            self._keys.pop(key, None)
        elif len(pairs) == 1 and next(iter(pairs.values())) == EXACT:
            self._keys[key] = next(iter(pairs))
        else:
            self._keys[key] = tuple(sorted(pairs.items()))

    def add_pages(self, pages: Iterable[str]) -> set[str]:
        """Add pages; return the keys whose candidate set changed (new keys and ``page_key`` included)."""
        changed: set[str] = set()
        keys = self._keys
        for page in pages:
            if page in self._pages:
                continue
            self._pages.add(page)
            changed.add(page_key(page))
            for key, kind in title_aliases(page):
                if key not in keys and kind == EXACT:
                    keys[key] = page
                else:
                    self._set(key, {**dict(self.lookup(key)), page: kind})
                changed.add(key)
                self.max_tokens = max(self.max_tokens, key.count(" ") + 1)
        return changed

    def remove_pages(self, pages: Iterable[str]) -> set[str]:
        """Remove pages; return the keys whose candidate set changed (``page_key`` included)."""
        changed: set[str] = set()
        for page in pages:
            if page not in self._pages:
                continue
            self._pages.discard(page)
            changed.add(page_key(page))
            for key, _ in title_aliases(page):
                self._set(key, {p: k for p, k in self.lookup(key) if p != page})
                changed.add(key)
        return changed

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)

    def has_page(self, page: str) -> bool:
        return page in self._pages

    def lookup(self, key: str) -> tuple[tuple[str, int], ...]:
        """``(page, kind)`` candidates of a key, sorted by page id; () when unknown."""
        found = self._keys.get(key)
        if found is None:
            return ()
        return ((found, EXACT),) if isinstance(found, str) else found

    def resolve_link(self, target: str) -> tuple[tuple[str, int], ...]:
        """Candidates of a hyperlink target: the page itself when it exists, else by alias key."""
        for candidate in link_page_ids(target):
            if candidate in self._pages:
                return ((candidate, EXACT),)
        return self.lookup(mention_key(target))
