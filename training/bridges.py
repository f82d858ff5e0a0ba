"""Corpus bridges: HoVer-shaped claims of 2-4 parts, a FEVER train claim chained with corpus sentences.

HoVer's claims join facts from 2-4 pages, each next page named by the fact before it ("X was born
in Kolkata, the capital of West Bengal"), and its NOT_SUPPORTED claims were mostly written by
substituting one name ("... the capital of Bihar"); the pipeline reads them with the sentences
retrieved for the claim, which stay the original pages'.  :mod:`training.compositional` chains
train claims whose pages name each other, which among the few hundred claims the decision may use
is rare.  Here the next parts are sentences of the corpus itself, so every claim can start a chain:

* **Chain.**  A train claim (SUPPORTS or REFUTES, with gold evidence) names a page of the corpus:
  one of spaCy's names in it (:data:`LINK_TYPES`, a leading "the" dropped) is a page's title, not
  one of its evidence pages, so "Berry" of "Halle Berry" names no page; failing that, a name of
  its gold sentences does.  The page's first sentence that names its title within its first
  words (``MIN_WORDS``-``MAX_WORDS`` words once its parentheses are dropped) is the next part,
  and may name the page of the part after it, up to ``parts`` parts; no page is in more than
  ``MAX_PAGE_USES`` chains.  A corpus sentence is true by construction, so such a part is
  SUPPORTS with itself as evidence.
* **Text.**  Where the claim itself names the first page, one sentence in HoVer's form: each lead
  sentence's clause after the name of its page in the part before (:func:`fluent_chain`: "Marie
  Curie was born in Warsaw, the capital of Poland."), the chain cut where a clause cannot be made.
  Otherwise the parts joined as ``"A, and B."`` (:func:`training.compositional.join_claims`).
* **Read with.**  The train claim's gold sentences (at most two), every corpus part's sentence,
  then the train claim's retrieved sentences and the other sentences of the parts' pages, at most
  ``top_k``, shuffled (seeded).
* **Variants of one chain**, each an instance:

  - ``bridge``: as made.  Label: the train claim's (a refuted part refutes the conjunction,
    :func:`training.compositional.compose_label`).
  - ``bridge_entity``: one corpus part gets a name substituted (:func:`training.contrast_names.
    substitute_entity`: a name of the same spaCy type from the claims, outside the part's subject
    and its page title), read with the SAME sentences.  Label: REFUTES (the sentence states the
    original name in that role).  Made only from a SUPPORTS chain.  With odds ``decoy_share``
    the reading also holds a sentence of the substituted name's own page, where the corpus has
    one (retrieval finds the new name's page too), so a missing name is no certain sign.
  - ``bridge_hidden``: one corpus part's sentences (its whole page) are left out of the reading.
    Label: NOT ENOUGH INFO, unless the train claim is REFUTES (then REFUTES: its evidence is read).

Deterministic for a seed.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from garag.claim_parse import SPACY_MODEL, Ent, ParsedClaim, parse_claims
from garag.store import SentenceStore
from garag.text import detokenize, normalize_title, page_to_title, title_to_page
from garag.types import Evidence, Label, SentenceId
from training.compositional import Part, compose_label, join_claims
from training.contrast_names import Substitution, name_pool, substitute_entity
from training.data import fetch_evidence

MIN_WORDS = 6
MAX_WORDS = 25
# names that may title the next part's page (not NORP: "American" titles an album as often as not)
LINK_TYPES = frozenset({"PERSON", "ORG", "GPE", "LOC", "FAC", "EVENT", "WORK_OF_ART"})
MAX_PAGE_USES = 8  # chains through one page ("United States" would be in most)
LEAD_WORDS = 6  # the title within the sentence's first words: the sentence is about the page
_PTB_LEFT = re.compile(r"-[LR][RSC]B-")
_PARENS = re.compile(r"\s*\([^()]*\)")


@dataclass(frozen=True)
class Bridge:
    """One instance: the claim text, the sentences read, its label and how it was made.

    Attributes:
        text: the composed claim.
        evidence: the sentences read (at most ``top_k``).
        label: its label (see the module docstring).
        kind: ``bridge``, ``bridge_entity`` or ``bridge_hidden``.
        claim_index: the train claim it starts from (its index in the inputs).
        parts: the parts' texts, in order.
        detail: the substitution (``bridge_entity``) or the hidden page (``bridge_hidden``).
    """

    text: str
    evidence: tuple[Evidence, ...]
    label: Label
    kind: str
    claim_index: int
    parts: tuple[str, ...]
    detail: str = ""


class TitleIndex:
    """Pages of the store by normalised title."""

    def __init__(self, pages: Sequence[str]) -> None:
        self.by_title: dict[str, str] = {}
        for page in sorted(pages):
            key = normalize_title(page)
            if key and not key.isdigit():
                self.by_title.setdefault(key, page)

    def named(self, parsed: ParsedClaim, skip: set[str], first: int = 0) -> list[tuple[str, Ent]]:
        """Pages titled by a name of the text from token ``first`` on (spaCy's ``LINK_TYPES``, without
        a leading "the"), longest name first, not in ``skip``, with the name."""
        found: dict[str, Ent] = {}
        for e in sorted(parsed.ents, key=lambda e: e.start - e.end):
            if e.label not in LINK_TYPES or e.start < first:
                continue
            after = parsed.toks[e.end].text if e.end < len(parsed.toks) else ""
            if after[:1].isupper() or after.isdigit():  # "Toy Story" of "Toy Story 3"
                continue
            text = re.sub(r"^(?:the|a|an)\s+", "", e.text.strip(), flags=re.IGNORECASE).rstrip(".")
            page = self.by_title.get(normalize_title(title_to_page(text)))
            if page is not None and page not in skip and page not in found:
                found[page] = e
        return list(found.items())


def _char(p: ParsedClaim, tok: int, end: bool = False) -> int:
    """Where token ``tok`` starts in the text (``end``: where token ``tok - 1`` ends)."""
    at = sum(len(t.text) + len(t.ws) for t in p.toks[:tok])
    return at - len(p.toks[tok - 1].ws) if end and tok else at


def clause_about(p: ParsedClaim, who: bool) -> tuple[str, int, int] | None:
    """What a lead sentence says of its subject, to follow a name of it in another part: an appositive
    after a copula and a determiner ("Warsaw is the capital of Poland." -> "the capital of Poland"),
    else a relative clause ("Linkin Park formed in 1996." -> "which formed in 1996"; "who" for a
    person).  Returns the clause, its first token and where that token sits in the clause, or None
    (no single subject, or nothing after it)."""
    root = p.root
    subjects = p.children(root, "nsubj", "nsubjpass") if root is not None else []
    if not subjects:
        return None
    end = max(p.subtree(subjects[0])) + 1
    last = len(p.toks) - 1 if p.toks and p.toks[-1].text in (".", "!") else len(p.toks)
    if end >= last - 1:
        return None
    if p.toks[end].lemma == "be" and end == root and p.toks[end + 1].lower in ("a", "an", "the", "one"):
        start, prefix = end + 1, ""
    else:
        start, prefix = end, ("who " if who else "which ")
    text = prefix + p.text[_char(p, start) : _char(p, last, end=True)].strip().rstrip(",;")
    return text, start, len(prefix)


def _insert(text: str, at: int, clause: str) -> str:
    """``clause`` set off by commas after position ``at`` of ``text``."""
    rest = text[at:]
    return text[:at] + ", " + clause + ("" if rest[:1] in ("", ".", ",", ";", ":") else ",") + rest


def fluent_chain(
    claim: ParsedClaim, leads: Sequence[ParsedClaim], pages: Sequence[str], index: TitleIndex
) -> tuple[str, int] | None:
    """The chain as one sentence, each lead's clause after the name of its page in the part before
    ("Marie Curie was born in Warsaw, the capital of Poland, a country in Central Europe."), and how
    many corpus parts it holds (a chain stops where a clause cannot be made or does not name the next
    page); None when the claim does not name the first page."""
    pieces: list[tuple[str, int]] = []  # a part's text and where the next part's clause goes in it
    shift = 0  # where the part's text starts in its sentence, less its "which "
    found = dict(index.named(claim, set()))
    if pages[0] not in found:
        return None
    text, mention = claim.text.strip(), found[pages[0]]
    for j, lead in enumerate(leads):
        pieces.append((text, _char(claim if j == 0 else leads[j - 1], mention.end, end=True) - shift))
        made = clause_about(lead, who=mention.label == "PERSON")
        if made is None:
            pieces.pop()
            break
        text, start, prefix = made
        shift = _char(lead, start) - prefix
        if j + 1 == len(leads):
            pieces.append((text, -1))
            break
        nxt = dict(index.named(lead, set(), first=start)).get(pages[j + 1])
        if nxt is None:
            pieces.append((text, -1))
            break
        mention = nxt
    if len(pieces) < 2:
        return None
    merged = pieces[-1][0]
    for text, at in reversed(pieces[:-1]):
        merged = _insert(text, at, merged)
    return merged, len(pieces) - 1


def lead_sentence(store: SentenceStore, page: str) -> tuple[SentenceId, str] | None:
    """The page's lowest-numbered sentence that names its title, of ``MIN_WORDS``-``MAX_WORDS`` words."""
    title = normalize_title(page)
    for sent in sorted(store.page(page), key=lambda s: s.id.line):
        text = _PARENS.sub("", detokenize(sent.text)).strip()
        if _PTB_LEFT.search(text) or "(" in text or not MIN_WORDS <= len(text.split()) <= MAX_WORDS:
            continue
        head = " ".join(text.split()[: LEAD_WORDS + len(title.split())]).casefold()
        if title in head and text[:1].isupper():
            return sent.id, text if text.endswith(".") else text + "."
    return None


def corpus_bridges(
    claims: Sequence,
    retrieved: Sequence[Sequence[SentenceId]],
    store: SentenceStore,
    top_k: int,
    seed: int,
    parts: Sequence[int] = (2, 3, 4),
    decoy_share: float = 0.3,
    model: str = SPACY_MODEL,
) -> tuple[list[Bridge], Counter]:
    """At most one chain per train claim, with its variants (see the module docstring).

    Args:
        claims: :class:`training.data.TrainClaim` objects.
        retrieved: per claim, its retrieved sentence ids best first.
        store: the corpus (titles, sentences).
        top_k: sentences read per instance.
        seed: random seed.
        parts: allowed numbers of parts (the first is the train claim).
        decoy_share: odds that a substituted name's own page is read too.
        model: spaCy pipeline (names to substitute).

    Returns:
        The instances and counts (``chains``, ``parts_K``, per kind and label, skips).
    """
    if len(claims) != len(retrieved):
        raise ValueError(f"{len(claims)} claims but {len(retrieved)} retrieved lists")
    if not parts or min(parts) < 2 or max(parts) > top_k:
        raise ValueError(f"parts must be between 2 and top_k {top_k}, got {list(parts)}")
    rng = random.Random(f"{seed}|bridges")
    index = TitleIndex(store.page_names())
    leads: dict[str, tuple[SentenceId, str] | None] = {}

    def lead(page: str) -> tuple[SentenceId, str] | None:
        if page not in leads:
            leads[page] = lead_sentence(store, page)
        return leads[page]

    counts: Counter = Counter()
    # chains grow one part at a time for all claims together (one spaCy pass per step)
    usable = [i for i, c in enumerate(claims) if c.label in (Label.SUPPORTS, Label.REFUTES) and c.evidence]
    want = {i: rng.choice(list(parts)) for i in usable}
    grown: dict[int, tuple[set[str], list[str], list[tuple[SentenceId, str]]]] = {
        i: ({s.page for s in claims[i].evidence}, [], []) for i in usable
    }
    # the first link: a name of the claim, else of its gold sentences (the claim's topic is not one)
    gold_text = {
        i: " ".join(detokenize(e.text) for e in fetch_evidence(store, claims[i].evidence[:2], {}))
        for i in usable
    }
    frontier = {i: claims[i].text for i in usable}
    fallback = dict(zip(usable, parse_claims([gold_text[i] for i in usable], model), strict=True))
    uses: Counter = Counter()

    def linkable(parsed: ParsedClaim, used: set[str]) -> list[str]:
        """Pages the text names that may join a chain (not yet in it, used less than the cap, with a lead)."""
        return [p for p, _ in index.named(parsed, used) if uses[p] < MAX_PAGE_USES and lead(p) is not None]

    while frontier:
        keys = sorted(frontier)
        step: dict[int, str] = {}
        for i, p in zip(keys, parse_claims([frontier[i] for i in keys], model), strict=True):
            used, pages, sentences = grown[i]
            options = linkable(p, used) or ([] if pages else linkable(fallback[i], used))
            if not options:
                continue
            page = rng.choice(options[:2])  # among the longest names
            used.add(page)
            uses[page] += 1
            pages.append(page)
            sentences.append(lead(page))  # type: ignore[arg-type]
            if len(pages) < want[i] - 1:
                step[i] = sentences[-1][1]
        frontier = step
    chains = [(i, grown[i][1], grown[i][2]) for i in usable if grown[i][1]]
    counts["skipped_names_no_page"] = len(usable) - len(chains)
    counts["chains"] = len(chains)
    counts.update(f"parts_{len(pages) + 1}" for _, pages, _ in chains)
    parsed_claims = parse_claims([c.text for c in claims], model)
    pool = name_pool(parsed_claims)
    parsed = iter(parse_claims([s for _, _, sents in chains for _, s in sents], model))
    texts: dict[SentenceId, str] = {}
    out: list[Bridge] = []
    for i, pages, sentences in chains:
        claim = claims[i]
        leads = [next(parsed) for _ in sentences]
        fluent = fluent_chain(parsed_claims[i], leads, pages, index)
        if fluent is not None:  # HoVer's form: one sentence (a chain cut where a clause fails)
            text, n = fluent
            pages, sentences, leads = pages[:n], sentences[:n], leads[:n]
            counts["fluent"] += 1
        else:  # the claim does not name the first page (it came from its gold sentences): "A, and B."
            text = join_claims([claim.text, *(s for _, s in sentences)])
        part_texts = (claim.text, *(s for _, s in sentences))
        gold = list(dict.fromkeys(list(claim.evidence)[:2]))
        base = gold + [sid for sid, _ in sentences]
        fill = [s for s in retrieved[i] if s.page not in pages] + [
            s.id for p in pages for s in store.page(p) if s.id not in base
        ]
        label = compose_label(
            [Part(0, claim.text, claim.label, True)]
            + [Part(j + 1, s, Label.SUPPORTS, True) for j, s in enumerate(part_texts[1:])]
        )
        out.append(_made(store, texts, text, base, fill, top_k, rng, label, "bridge", i, part_texts))
        if claim.label is Label.SUPPORTS:
            changed = _substituted(
                parsed_claims[i], leads, pages, part_texts, fluent, index, pool, rng, model
            )
            if changed is None:
                counts["skipped_entity_no_name"] += 1
            else:
                changed_text, changed_parts, edit = changed
                decoy = _decoy_page(index, edit.name) if rng.random() < decoy_share else None
                extra = [s.id for s in store.page(decoy)][:1] if decoy else []
                out.append(
                    _made(
                        store,
                        texts,
                        changed_text,
                        base + extra,
                        fill,
                        top_k,
                        rng,
                        Label.REFUTES,
                        "bridge_entity",
                        i,
                        changed_parts,
                        edit.detail + (" (page read)" if extra else ""),
                    )
                )
        # one corpus part's page left out of the reading
        hidden = pages[rng.randrange(len(pages))]
        label = Label.REFUTES if claim.label is Label.REFUTES else Label.NOT_ENOUGH_INFO
        out.append(
            _made(
                store,
                texts,
                text,
                [s for s in base if s.page != hidden],
                [s for s in fill if s.page != hidden],
                top_k,
                rng,
                label,
                "bridge_hidden",
                i,
                part_texts,
                hidden,
            )
        )
    for b in out:
        counts[f"{b.kind}_{b.label.value}"] += 1
    return out, counts


def _substituted(
    claim: ParsedClaim,
    leads: Sequence[ParsedClaim],
    pages: Sequence[str],
    part_texts: Sequence[str],
    fluent: tuple[str, int] | None,
    index: TitleIndex,
    pool: Mapping[tuple[str, bool], Sequence[str]],
    rng: random.Random,
    model: str,
) -> tuple[str, tuple[str, ...], Substitution] | None:
    """The chain's text with a name substituted in a corpus part (a fluent chain, given as
    :func:`fluent_chain` made it: its last part, whose clause names no further page), its parts and
    the substitution; None where no name can be substituted."""
    options = [len(leads) - 1] if fluent else rng.sample(range(len(leads)), len(leads))
    for j in options:
        made = substitute_entity(leads[j], [part_texts[j + 1]], [page_to_title(pages[j])], pool, rng)
        if made is None:
            continue
        changed = list(part_texts)
        changed[j + 1] = made.text
        if not fluent:
            return join_claims(changed), tuple(changed), made
        again = fluent_chain(claim, [*leads[:-1], *parse_claims([made.text], model)], pages, index)
        if again is not None and again[1] == fluent[1] and again[0] != fluent[0]:
            return again[0], tuple(changed), made
    return None


def _decoy_page(index: TitleIndex, name: str) -> str | None:
    """The page of the substituted name, if the corpus has one."""
    return index.by_title.get(normalize_title(title_to_page(name)))


def _made(
    store: SentenceStore,
    texts: dict[SentenceId, str],
    text: str,
    first: Sequence[SentenceId],
    fill: Sequence[SentenceId],
    top_k: int,
    rng: random.Random,
    label: Label,
    kind: str,
    i: int,
    parts: Sequence[str],
    detail: str = "",
) -> Bridge:
    chosen = list(dict.fromkeys(first))[:top_k]
    chosen += [s for s in dict.fromkeys(fill) if s not in chosen][: top_k - len(chosen)]
    rng.shuffle(chosen)
    return Bridge(text, fetch_evidence(store, chosen, texts), label, kind, i, tuple(parts), detail)


def bridge_instances(
    claims: Sequence,
    retrieved: Sequence[Sequence[SentenceId]],
    store: SentenceStore,
    top_k: int,
    seed: int,
) -> tuple[list[tuple[str, tuple[Evidence, ...], Label, int]], Mapping[str, int]]:
    """``(claim, read sentences, label, group)`` instances of :func:`corpus_bridges` (group: the train
    claim's index, so a claim's chains are held out with it)."""
    made, counts = corpus_bridges(claims, retrieved, store, top_k, seed)
    return [(b.text, b.evidence, b.label, b.claim_index) for b in made], counts
