"""The entity check: a claim that names something no sentence read names is not supported.

HoVer's NOT_SUPPORTED claims are mostly supported claims with one fact changed, and the change
is usually a name, a place, a nationality or a date that the gold evidence does not contain.  A
verifier that reads 2-4 linked facts at once misses such a swap easily; a lexical check does not.
So, where ``verifier.entity_check`` applies, a SUPPORTS verdict whose claim names an entity
(spaCy NER; counts, ordinals, quantities, percentages, money and times are left out) with a word
that appears in none of the sentences the verifier read, nor in their page titles, becomes the
likelier of REFUTES and NOT ENOUGH INFO, and its explanation says which entity was missing.

Matching is on words: both sides are case-folded with their accents stripped, an entity's
function words ("the", "of", ...) are ignored, and a plural matches its singular ("1990s" is
found where "1990" is).  Names in other scripts are compared as they are.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from garag.text import detokenize, page_to_title
from garag.types import Evidence, Label, Verdict

# Entity types whose words are not names: "one of", "first", "two hours", "50%", "$3"...
SKIPPED_TYPES = frozenset({"CARDINAL", "ORDINAL", "QUANTITY", "PERCENT", "MONEY", "TIME"})
FUNCTION_WORDS = frozenset({"the", "of", "and", "a", "an", "in", "on", "at", "for", "to", "s"})
_WORD = re.compile(r"[^\W_]+")
# spaCy components NER does not need (en_core_web_sm's NER has its own token vectors).
_UNUSED = ("parser", "lemmatizer", "attribute_ruler", "tagger", "senter")


def words(text: str) -> list[str]:
    """Case-folded words of ``text`` with accents stripped ("Beyoncé's" -> ["beyonce", "s"])."""
    decomposed = unicodedata.normalize("NFKD", text)
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return _WORD.findall(plain.casefold())


def evidence_words(evidence: Iterable[Evidence]) -> set[str]:
    """The words of the sentences read and of their page titles."""
    out: set[str] = set()
    for e in evidence:
        out.update(words(detokenize(e.text)))
        out.update(words(page_to_title(e.sentence.page)))
    return out


def missing_entities(entities: Iterable[tuple[str, str]], found: set[str]) -> list[str]:
    """The entities (text, spaCy type) with a word that ``found`` lacks, in claim order, once each."""
    out: list[str] = []
    for text, kind in entities:
        if kind in SKIPPED_TYPES or text in out:
            continue
        needed = [w for w in words(text) if w not in FUNCTION_WORDS]
        if any(w not in found and not (w.endswith("s") and w[:-1] in found) for w in needed):
            out.append(text)
    return out


def withhold_support(verdict: Verdict, missing: Sequence[str]) -> Verdict:
    """``verdict`` unless it is SUPPORTS with entities missing: then the likelier other label."""
    if verdict.label is not Label.SUPPORTS or not missing:
        return verdict
    refute = float(verdict.scores.get(Label.REFUTES, 0.0))
    nei = float(verdict.scores.get(Label.NOT_ENOUGH_INFO, 0.0))
    label = Label.REFUTES if refute >= nei else Label.NOT_ENOUGH_INFO
    names = ", ".join(f'"{m}"' for m in missing)
    note = f" Entity check: no sentence read names {names}, so the claim is not supported."
    return Verdict(label, verdict.explanation + note, verdict.evidence, verdict.scores)


class EntityCheck:
    """Applies the entity check to a batch of verdicts (spaCy loaded on first use).

    Args:
        spacy_model: the spaCy pipeline whose NER finds the claim's entities.
    """

    def __init__(self, spacy_model: str) -> None:
        self.spacy_model = spacy_model
        self._nlp = None

    def entities(self, claims: Sequence[str]) -> list[list[tuple[str, str]]]:
        """Each claim's named entities as (text, spaCy type)."""
        if self._nlp is None:
            from garag.nlp import load_spacy

            self._nlp = load_spacy(self.spacy_model)
        unused = [name for name in _UNUSED if name in self._nlp.pipe_names]
        return [[(e.text, e.label_) for e in doc.ents] for doc in self._nlp.pipe(claims, disable=unused)]

    def apply(
        self, claims: Sequence[str], evidence: Sequence[Sequence[Evidence]], verdicts: Sequence[Verdict]
    ) -> list[Verdict]:
        """The verdicts with SUPPORTS withheld where a claim's entity is in no sentence read."""
        todo = [i for i, v in enumerate(verdicts) if v.label is Label.SUPPORTS]
        out = list(verdicts)
        ents = self.entities([claims[i] for i in todo])
        for i, claim_ents in zip(todo, ents, strict=True):
            out[i] = withhold_support(verdicts[i], missing_entities(claim_ents, evidence_words(evidence[i])))
        return out
