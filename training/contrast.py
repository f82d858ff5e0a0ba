"""Contrast training claims: small labelled changes of FEVER claims that (mostly) keep every name.

Why: a verifier trained on FEVER learns shortcuts from the claim alone (Schuster et al., EMNLP
2019): "not" means REFUTES, and a claim whose names all occur in the evidence means SUPPORTS.
It then calls "Bhagat Singh was not an American." REFUTES although the claim is a negated
REFUTES claim, hence SUPPORTS.  Contrast pairs (the same names and the same evidence, a
small change, the other label) take those shortcuts away.  Every changed claim keeps the
ORIGINAL claim's evidence (:func:`contrast_train_examples` reads it so): only the claim changes.

Input: :class:`SourceClaim` (text, FEVER label, evidence sentences with their text), built from
``train_pairs.jsonl`` by :func:`sources_from_train_pairs` or from FEVER-format claims and a
sentence store by :func:`sources_from_claims`.  Each rule makes at most one change per claim and
returns nothing when it does not apply; the rules work on spaCy's parse (``en_core_web_sm``:
tags, lemmas, dependencies, entities) and live in :mod:`training.contrast_rules`.

Rules and their labels (S = SUPPORTS, R = REFUTES, NEI = NOT ENOUGH INFO):

* ``NEGATION``: "not" after the main clause's first auxiliary or copula, one of is/are/was/were/
  has/have/had/can/will/does/do/did ("was an American" -> "was not an American"; 30% of the time
  contracted: "wasn't"); a main verb without auxiliary gets do-support with its lemma
  ("sings" -> "does not sing", "won" -> "did not win", "has" -> "does not have").
  Label: S <-> R, NEI stays NEI.  Skipped: claims that already hold a negative word (not, n't,
  never, no, none, nothing, neither, nor, without, rarely, seldom, hardly, ...: stacking
  negations), positive-polarity words (some, somewhere, once, already: "wasn't once a colony"),
  claims of two sentences, quantified subjects ("All X ...", scope is ambiguous), a capitalised
  auxiliary (a title's: "You Can Count on Me"),
  modal auxiliaries other than can/will (could/may/might/must/should: "may not" does not
  contradict "may"), fragments without a finite verb, and coordination ("A and B", "A or B")
  unless the source is S: not-(A and B) is false when A and B is true, but undecided when
  A and B is false or unknown.
* ``NEGATION_REMOVED``: the claim's only negation, attached to the main clause, is dropped
  ("is not" -> "is", "isn't" -> "is", "can't"/"cannot" -> "can", "does not sing" -> "sings",
  "did not win" -> "won", "has never been" -> "has been").  So negating "X is not Y" gives
  "X is Y", never "X is not not Y".  Label: S <-> R, NEI stays NEI.  Skipped: the same blocks as
  NEGATION, two negative words, a negation inside a subordinate clause ("a war that never
  happened"), "not" before only/just/all/always/even/until/one/... ("not only": dropping it changes
  more than the polarity), negative-polarity words (any, ever, yet, either, "a single": "has not
  released any albums" -> "has released any albums"), other auxiliaries, and "did not V" whose
  past tense is unknown (a small irregular table, then regular rules).
* ``NUMBER``: one year (1500-2029) or whole number >= 2 (digits or two..twelve) that the
  evidence states as written (or, for number words, in digits) is moved: years by 1-10 years,
  small numbers to another small number, large ones by a factor (0.5-2, same rounding), to a
  value the evidence does not contain; a day next to a month moves within 1-28; a moved year is
  not after 2017 (FEVER's Wikipedia) unless the claim's is.  Label: S -> R only (the truth of a
  changed R claim is unknown).  Skipped: numbers within three words after over/under/more/less/
  about/nearly/before/after/since/by/than/... or anywhere after "at least"/"more than"/"up to"/...,
  or before "or more"/"%" (a moved bound may still hold); numbers in names (in a name entity or
  after a capitalised word: "Toy Story 3", "Billboard 200", "Three Days of the Condor"); numbers
  that are not counts ("24 is an Indian film"); "one" (a pronoun as often as a number); decimals;
  numbers the evidence does not state.
* ``ROLE_SWAP``: the two names of a listed asymmetric relation swap places: "X is/was the
  N of Y" for N in kinship, succession and part-of nouns (father, mother, son, daughter, parent,
  child, grand*, uncle, aunt, nephew, niece, predecessor, successor, mentor, teacher, student,
  capital, subsidiary, sequel, prequel, owner); "X V Y" and "Y was V-ed by X" for V in defeat, beat,
  succeed, precede, replace, influence, acquire, buy, own, employ, coach, mentor, teach, train,
  kill, murder, assassinate, found, adopt; "X is C than Y" for comparatives (older, younger,
  taller, larger, earlier, ...); "X was born before/after Y" (Y a person).  Both sides must be
  whole names (no name-like neighbour: "Senator Eugene McCarthy" fails), of one type or both
  parties (PERSON, ORG, GPE, LOC, FAC: "McLuhan taught English" fails).  Label: S -> R only.
  Skipped: every other relation (married, met, played with, ... are symmetric or unknown), and
  plural verbs (are/were/VBP would not agree with the swapped subject).
* ``RELATION``: one lower-case word (not inside a name: "East Timor" stays) is replaced by its
  contrary from :data:`training.contrast_rules.RELATION_LEXICON`: before/after, older/younger,
  largest/smallest, first/last, north/south, east/west (and -ern, northeast/southwest ...),
  increased/decreased, highest/lowest, above/below, earliest/latest, longest/shortest,
  male/female, successful/unsuccessful, alive/dead, ...; with conditions: comparatives (larger,
  higher, longer, earlier, more) only before "than"; most/least only before an adjective;
  best/better not in "best known"; won/lost/win only with a definite contest object ("won the
  election"; "won a championship" -> "lost a championship" may hold too); before/after not in
  "named after"; first/last only as adjectives.  "was born in/on <date>" <-> "died in/on <date>"
  for a date with a year, not a decade or century, and a singular subject (born and died in one
  place, or in one decade, may both hold).  Label: S -> R only.
* ``ENTITY`` (how HoVer wrote NOT_SUPPORTED claims; the one change that changes a name, as a
  baseline): a whole name (PERSON, ORG, GPE, LOC, NORP, FAC, EVENT, WORK_OF_ART; NORP only as an
  adjective: "American") that the evidence states, outside the claim's subject phrase and not
  part of an evidence page's title, is replaced by a name of the same spaCy type and the same use
  of "the" from the claims (seen at least twice with that type), one the evidence and the claim do
  not contain and that does not contain it; "a"/"an" before it follows the new name.  Replacing
  the subject would make the original evidence silent (NEI), not contradicting.  Label: S -> R.
* ``COMPOSED`` (:func:`compose_contrasts`): 2-4 parts, at least one changed claim, the rest
  changed or unchanged (``UNCHANGED``) claims of other sources, joined as "A, B, and C."
  (:func:`training.compositional.join_claims`); the premise is every part's evidence.  Label
  (:func:`training.compositional.compose_label`): R if any part is R, else NEI if any part is
  NEI, else S.  Targets: S half the time, else R (or NEI when NEI parts exist).

Determinism: claim ``c`` under rule ``k`` draws from ``random.Random(f"{seed}|{k}|{c.text}")``, so a
claim's change does not depend on the other claims or rules asked for.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from garag.claim_parse import SPACY_MODEL, ParsedClaim, parse_claims
from garag.errors import ErrorPolicy
from garag.jsonl import read_records
from garag.polarity import insert_negation, remove_negation
from garag.store import SentenceStore
from garag.text import page_to_title
from garag.types import Claim, Evidence, Label, SentenceId
from training.compositional import Part, compose_label, join_claims
from training.contrast_names import name_pool, substitute_entity, swap_roles
from training.contrast_rules import change_number, replace_relation
from training.data import TrainClaim, fetch_evidence, gold_premise, hard_negatives, read_train_pairs
from verifier.base import TrainExample
from verifier.trained import CONTRAST_GENERATOR as GENERATOR  # noqa: F401 - names what this module makes

CONTRAST_COMPOSED_SHARE = 0.35
"""Composed contrast claims per changed train claim (:func:`contrast_train_examples`)."""


class ChangeType(str, Enum):
    """How a contrast claim was made from its source claim."""

    NEGATION = "negation"
    NEGATION_REMOVED = "negation_removed"
    NUMBER = "number"
    ROLE_SWAP = "role_swap"
    RELATION = "relation"
    ENTITY = "entity"
    UNCHANGED = "unchanged"
    COMPOSED = "composed"


RULE_KINDS: tuple[ChangeType, ...] = (
    ChangeType.NEGATION,
    ChangeType.NEGATION_REMOVED,
    ChangeType.NUMBER,
    ChangeType.ROLE_SWAP,
    ChangeType.RELATION,
    ChangeType.ENTITY,
)
_FLIP = {
    Label.SUPPORTS: Label.REFUTES,
    Label.REFUTES: Label.SUPPORTS,
    Label.NOT_ENOUGH_INFO: Label.NOT_ENOUGH_INFO,
}


@dataclass(frozen=True)
class SourceClaim:
    """A claim to change: its text, label and evidence (the sentences with their text)."""

    id: int | str
    text: str
    label: Label
    evidence: tuple[Evidence, ...] = ()


@dataclass(frozen=True)
class ContrastClaim:
    """A changed claim with its label, the source it came from and the source's evidence.

    Attributes:
        text: the changed claim.
        label: its label (see the module docstring).
        change: the rule that made it.
        source_text: the claim it was made from (parts joined for COMPOSED).
        source_label: that claim's label.
        claim_id: the source claim's id (``+``-joined part ids for COMPOSED).
        evidence: the source claim's evidence, unchanged.
        detail: the edit, e.g. ``"was -> was not"``.
        parts: the parts of a COMPOSED claim, else empty.
    """

    text: str
    label: Label
    change: ChangeType
    source_text: str
    source_label: Label
    claim_id: int | str
    evidence: tuple[Evidence, ...] = ()
    detail: str = ""
    parts: tuple[ContrastClaim, ...] = ()


def contrast_label(change: ChangeType, source_label: Label) -> Label | None:
    """The label of a claim changed by ``change`` from a claim labelled ``source_label``, or None
    when the change leaves its truth unknown (then the change is not made)."""
    if change in (ChangeType.NEGATION, ChangeType.NEGATION_REMOVED):
        return _FLIP[source_label]
    if change is ChangeType.UNCHANGED:
        return source_label
    if change is ChangeType.COMPOSED:
        raise ValueError("a COMPOSED claim's label follows its parts: use compose_contrasts")
    return Label.REFUTES if source_label is Label.SUPPORTS else None


def _topics(evidence: Sequence[Evidence]) -> list[str]:
    return [re.sub(r"\s*\([^()]*\)\s*$", "", page_to_title(e.sentence.page)) for e in evidence]


def change_claim(
    source: SourceClaim,
    parsed: ParsedClaim,
    kind: ChangeType,
    seed: int,
    pool: dict[tuple[str, bool], list[str]] | None = None,
) -> ContrastClaim | None:
    """Apply one rule to one claim; None when the rule does not apply or its label would be unknown."""
    if kind not in RULE_KINDS:
        raise ValueError(f"kind must be one of {[k.value for k in RULE_KINDS]}, got {kind!r}")
    label = contrast_label(kind, source.label)
    if label is None:
        return None
    rng = random.Random(f"{seed}|{kind.value}|{source.text}")
    texts = [e.text for e in source.evidence]
    if kind is ChangeType.NEGATION:
        made = insert_negation(parsed, source.label, rng)
    elif kind is ChangeType.NEGATION_REMOVED:
        made = remove_negation(parsed, source.label)
    elif kind is ChangeType.NUMBER:
        made = change_number(parsed, texts, rng) if texts else None
    elif kind is ChangeType.ROLE_SWAP:
        made = swap_roles(parsed)
    elif kind is ChangeType.RELATION:
        made = replace_relation(parsed, rng)
    else:
        made = substitute_entity(parsed, texts, _topics(source.evidence), pool or {}, rng) if texts else None
    if made is None or made[0] == source.text.strip():
        return None
    return ContrastClaim(made[0], label, kind, source.text, source.label, source.id, source.evidence, made[1])


def contrast_claims(
    claims: Sequence[SourceClaim],
    seed: int,
    kinds: Collection[ChangeType] = RULE_KINDS,
    compositions: int = 0,
    parts: Sequence[int] = (2, 3, 4),
    model: str = SPACY_MODEL,
) -> list[ContrastClaim]:
    """Every rule of ``kinds`` applied to every claim where it applies, then ``compositions``
    composed claims (see the module docstring).  Deterministic for a seed.

    Args:
        claims: the claims to change.
        seed: random seed.
        kinds: the rules to apply (a subset of :data:`RULE_KINDS`).
        compositions: composed claims to add (:func:`compose_contrasts`).
        parts: allowed numbers of parts of a composed claim.
        model: spaCy pipeline to parse the claims with.

    Returns:
        Changed claims in claim order, rules in :data:`RULE_KINDS` order per claim, then the composed ones.
    """
    bad = [k for k in kinds if k not in RULE_KINDS]
    if bad:
        raise ValueError(f"kinds must be among {[k.value for k in RULE_KINDS]}, got {bad}")
    parsed = parse_claims([c.text for c in claims], model)
    pool = name_pool(parsed) if ChangeType.ENTITY in kinds else {}
    out = [
        made
        for source, p in zip(claims, parsed, strict=True)
        for kind in RULE_KINDS
        if kind in kinds
        for made in [change_claim(source, p, kind, seed, pool)]
        if made is not None
    ]
    if compositions:
        out.extend(compose_contrasts(out, claims, compositions, seed, parts))
    return out


def _unchanged(source: SourceClaim) -> ContrastClaim:
    return ContrastClaim(
        source.text, source.label, ChangeType.UNCHANGED, source.text, source.label, source.id, source.evidence
    )


def compose_contrasts(
    contrasts: Sequence[ContrastClaim],
    sources: Sequence[SourceClaim],
    n: int,
    seed: int,
    parts: Sequence[int] = (2, 3, 4),
) -> list[ContrastClaim]:
    """``n`` conjunctions of 2-4 claims, at least one of them changed, each part from another source.

    Args:
        contrasts: changed claims (COMPOSED ones are not used as parts).
        sources: claims that may join unchanged.
        n: composed claims to make (fewer when the inputs run out).
        seed: random seed.
        parts: allowed numbers of parts.

    Returns:
        COMPOSED claims; their label is :func:`training.compositional.compose_label` of the parts.
    """
    if not parts or min(parts) < 2:
        raise ValueError(f"parts must be >= 2, got {list(parts)}")
    changed = [c for c in contrasts if c.change not in (ChangeType.COMPOSED, ChangeType.UNCHANGED)]
    by_label = {lab: [c for c in changed if c.label is lab] for lab in Label}
    # changed parts are drawn by change type first: negation, the commonest, would crowd out the rest
    by_kind = {
        lab: [
            [c for c in by_label[lab] if c.change is k]
            for k in RULE_KINDS
            if any(c.change is k for c in by_label[lab])
        ]
        for lab in Label
    }
    fillers = {lab: by_label[lab] + [_unchanged(s) for s in sources if s.label is lab] for lab in Label}
    rng = random.Random(f"{seed}|composed")
    out: list[ContrastClaim] = []
    for _ in range(20 * n):
        if len(out) >= n or not by_label[Label.SUPPORTS] or len(fillers[Label.SUPPORTS]) < max(parts):
            break
        k = rng.choice(list(parts))
        target = Label.SUPPORTS if rng.random() < 0.5 else Label.REFUTES
        if target is Label.REFUTES and fillers[Label.NOT_ENOUGH_INFO] and rng.random() < 1 / 3:
            target = Label.NOT_ENOUGH_INFO
        groups = by_kind[target] or by_kind[Label.SUPPORTS]
        # weighted by the square root of a type's size: uniform weights reuse a rare type's few claims
        group = rng.choices(groups, weights=[len(g) ** 0.5 for g in groups])[0]
        first = rng.choice(group)
        if first.label is not target and not fillers[target]:
            continue
        chosen = [first] if first.label is target else [first, rng.choice(fillers[target])]
        while len(chosen) < k:
            chosen.append(rng.choice(fillers[Label.SUPPORTS]))
        if len({c.source_text for c in chosen}) < len(chosen):
            continue
        rng.shuffle(chosen)
        evidence = tuple(dict.fromkeys(e for c in chosen for e in c.evidence))
        label = compose_label([Part(i, c.text, c.label, True) for i, c in enumerate(chosen)])
        source_label = compose_label(
            [Part(i, c.source_text, c.source_label, True) for i, c in enumerate(chosen)]
        )
        out.append(
            ContrastClaim(
                text=join_claims([c.text for c in chosen]),
                label=label,
                change=ChangeType.COMPOSED,
                source_text=join_claims([c.source_text for c in chosen]),
                source_label=source_label,
                claim_id="+".join(str(c.claim_id) for c in chosen),
                evidence=evidence,
                detail=", ".join(c.change.value for c in chosen),
                parts=tuple(chosen),
            )
        )
    return out


def composed_premise(
    claim: ContrastClaim,
    index: dict,
    retrieved: Sequence[Sequence[SentenceId]],
    store: SentenceStore,
    top_k: int,
    texts: dict[SentenceId, str],
) -> tuple[Evidence, ...] | None:
    """A COMPOSED claim's premise: every part's evidence, then the parts' retrieved sentences, at
    most ``top_k``; None when the parts' evidence alone is longer.  ``index`` maps a source claim's
    id to its row of ``retrieved``."""
    if len(claim.evidence) > top_k:
        return None
    rows = [index[int(x)] for x in str(claim.claim_id).split("+") if int(x) in index]
    fill = [s for j in rows for s in retrieved[j][:top_k]]
    shown = {e.sentence for e in claim.evidence}
    evidence = list(claim.evidence) + [
        e for e in fetch_evidence(store, fill, texts) if e.sentence not in shown
    ]
    return tuple(evidence[:top_k])


def contrast_train_examples(
    claims: Sequence[TrainClaim],
    retrieved: Sequence[Sequence[SentenceId]],
    store: SentenceStore,
    *,
    top_k: int,
    distractors: int,
    share: float,
    nei_per_claim: float,
    nei_sentences: int,
    seed: int,
    composed_share: float = CONTRAST_COMPOSED_SHARE,
) -> tuple[list[TrainExample], Counter]:
    """Verifier training examples of contrast claims (``train.contrast``), read as the pipeline reads
    a claim:

    * a seeded ``share`` of the claims is changed by every rule that applies; each changed claim is
      read with its source's own premise (:func:`training.data.gold_premise`: the gold sentences and
      ``distractors`` retrieved ones), labelled by the rules above;
    * with odds ``nei_per_claim`` a changed claim is also read with its source's top
      ``nei_sentences`` retrieved non-evidence sentences, labelled NOT ENOUGH INFO, so that a
      change alone says nothing of the label;
    * ``composed_share * share`` composed claims per claim (:func:`compose_contrasts`, of the
      changed claims whose label is SUPPORTS or that have a name substituted: HoVer's kind), read
      with :func:`composed_premise`; none when ``composed_share`` is 0.

    Returns:
        The examples and counts by kind (``"negation:REFUTES"``, ``"nei"``, ``"composed:SUPPORTS"``).
    """
    if len(claims) != len(retrieved):
        raise ValueError(f"{len(claims)} claims but {len(retrieved)} retrieved lists")
    rng = random.Random(f"{seed}|contrast-examples")
    chosen = [i for i in range(len(claims)) if rng.random() < share]
    index = {claims[i].id: i for i in chosen}
    sources = sources_from_claims([claims[i] for i in chosen], store)
    twins = contrast_claims(sources, seed)
    texts: dict[SentenceId, str] = {}
    premises: dict[int, tuple[Evidence, ...]] = {}
    counts: Counter = Counter()
    out: list[TrainExample] = []
    for twin in twins:
        i = index[int(twin.claim_id)]
        claim, ranked = claims[i], retrieved[i]
        if i not in premises:
            premises[i] = fetch_evidence(store, gold_premise(claim, ranked, top_k, distractors, rng), texts)
        tag, gold = f"{twin.change.value}:{claim.id}", set(claim.evidence)
        if any(e.sentence in gold for e in premises[i]):
            out.append(TrainExample(claim=twin.text, evidence=premises[i], label=twin.label, claim_id=tag))
            counts[f"{twin.change.value}:{twin.label.value}"] += 1
        if rng.random() < nei_per_claim:
            negatives = hard_negatives(claim, ranked)[:nei_sentences]
            nei = fetch_evidence(store, negatives, texts)
            if nei:
                out.append(
                    TrainExample(claim=twin.text, evidence=nei, label=Label.NOT_ENOUGH_INFO, claim_id=tag)
                )
                counts["nei"] += 1
    parts = [t for t in twins if t.change is ChangeType.ENTITY or t.label is Label.SUPPORTS]
    for c in compose_contrasts(parts, sources, round(composed_share * len(chosen)), seed + 7):
        premise = composed_premise(c, index, retrieved, store, top_k, texts)
        if premise is None:
            counts["composed_skipped_evidence_over_top_k"] += 1
            continue
        out.append(
            TrainExample(claim=c.text, evidence=premise, label=c.label, claim_id=f"composed:{c.claim_id}")
        )
        counts[f"composed:{c.label.value}"] += 1
    counts["changed_claims"] = len(chosen)
    return out, counts


def contrast_counts(contrasts: Iterable[ContrastClaim]) -> Counter:
    """Counts by change (``"negation"``), by change and label (``"negation:SUPPORTS"``) and by label."""
    counts: Counter = Counter()
    for c in contrasts:
        counts[c.change.value] += 1
        counts[f"{c.change.value}:{c.label.value}"] += 1
        counts[c.label.value] += 1
    return counts


# --- sources (the only I/O: existing readers) -------------------------------------------------


def sources_from_train_pairs(path: str | Path, policy: ErrorPolicy | None = None) -> list[SourceClaim]:
    """FEVER train pairs (rows of one claim grouped by :func:`training.data.read_train_pairs`) with
    their ``sentence`` texts as evidence."""
    texts = {
        (r.get("page"), r.get("line")): r["sentence"]
        for r in read_records(path, key="sentence", policy=policy)
        if isinstance(r["sentence"], str)
    }
    return [
        SourceClaim(
            c.id, c.text, c.label, tuple(Evidence(s, texts.get((s.page, s.line), "")) for s in c.evidence)
        )
        for c in read_train_pairs(path, policy)
    ]


_LABELS = {lab.value: lab for lab in Label} | {"SUPPORTED": Label.SUPPORTS}


def sources_from_claims(claims: Iterable[Claim | TrainClaim], store: SentenceStore) -> list[SourceClaim]:
    """Labelled claims with their (first) evidence set's texts from ``store``.

    HoVer's NOT_SUPPORTED (refuted or unverifiable, unknown which) and unlabelled claims are skipped.
    """
    cache: dict[SentenceId, str] = {}
    out = []
    for c in claims:
        if isinstance(c, TrainClaim):
            label, ids = c.label, c.evidence
        else:
            label = _LABELS.get(c.label or "")
            ids = next((s for s in c.evidence if s), ())
        if label is not None:
            out.append(SourceClaim(c.id, c.text, label, fetch_evidence(store, ids, cache)))
    return out
