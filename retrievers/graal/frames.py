"""Frames: the units inside which co-mentioned entities are joined by an edge.

GRAAL (Mongiovi & Gangemi 2024) uses semantic-role-labelling frames: a
predicate with its arguments; two entities are related only when both take
part in the same event.  No SRL model installs here, so the default extractor
approximates frames from spaCy's dependency parse: every verbal predicate (a
verb, or a copula heading its own clause) with the subtrees of its argument
dependents; clausal dependents that are events of their own (``conj``,
``advcl``, ``ccomp``, ``parataxis``) are separate frames, not arguments.  A
frame's span runs from its first to its last token, and a mention belongs to a
frame when it *starts* inside that span, as GRAAL defines it.

GraphRetrieve (2021) uses whole sentences instead: ``SentenceFrames``.

The seam for a real SRL model is the ``FrameExtractor`` protocol: register a
factory with ``register_frame_extractor`` and name it in ``graal.frame_extractor``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

# Dependents that are arguments (or adjuncts carrying arguments) of a predicate.
ARGUMENT_DEPS = frozenset(
    {
        "nsubj",
        "nsubjpass",
        "csubj",
        "csubjpass",
        "dobj",
        "obj",
        "iobj",
        "dative",
        "attr",
        "oprd",
        "acomp",
        "agent",
        "prep",
        "npadvmod",
        "xcomp",
        "prt",
        "expl",
    }
)
# A copula or auxiliary is a predicate only when it heads a clause, not when it helps a verb.
_AUX_HELPER_DEPS = frozenset({"aux", "auxpass"})


@dataclass(frozen=True)
class Frame:
    """A predicate and the character span of it and its arguments.

    Attributes:
        start: first character of the frame in the parsed text.
        end: one past its last character.
        predicate: the predicate's lemma ("" for a whole-sentence frame).
    """

    start: int
    end: int
    predicate: str = ""

    def covers(self, position: int | None) -> bool:
        """Whether a mention starting at ``position`` lies in this frame (None: everywhere)."""
        return position is None or self.start <= position < self.end


class FrameExtractor(Protocol):
    """Turns a parsed sentence (a spaCy ``Doc`` or ``Span``) into frames."""

    name: str

    def frames(self, doc: Any) -> list[Frame]:
        """The sentence's frames, in text order; [] when it has none."""
        ...


def _is_predicate(token: Any) -> bool:
    if token.pos_ == "VERB":
        return True
    return token.pos_ == "AUX" and token.dep_ not in _AUX_HELPER_DEPS


class DependencyFrames:
    """Frames from the dependency parse: each predicate plus its argument subtrees."""

    name = "dependency"

    def frames(self, doc: Any) -> list[Frame]:
        base = doc.start_char if hasattr(doc, "start_char") else 0
        out: list[Frame] = []
        for token in doc:
            if not _is_predicate(token):
                continue
            lo, hi = token.idx, token.idx + len(token.text)
            for child in token.children:
                if child.dep_ not in ARGUMENT_DEPS:
                    continue
                sub = list(child.subtree)
                lo = min(lo, sub[0].idx)
                hi = max(hi, sub[-1].idx + len(sub[-1].text))
            out.append(Frame(lo - base, hi - base, token.lemma_ or token.text.lower()))
        return out


# Tokens after which a new clause may start (tagger-only frames).
_BOUNDARY_TEXT = frozenset({",", ";", ":", "(", ")", "--", "-", "\u2013", "\u2014"})
_BOUNDARY_POS = frozenset({"CCONJ", "SCONJ"})
_BOUNDARY_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})
_SKIP_TO_VERB = frozenset({"ADV", "PART"})


def tagged_frames(
    words: Sequence[str], starts: Sequence[int], pos: Sequence[str], tags: Sequence[str]
) -> list:
    """Frames without a dependency parse, from each token's text, offset, coarse and fine tag.

    A dependency frame is a predicate with its argument subtrees, so it reaches over the relative
    clauses and appositions inside its arguments but stops at coordinated and adverbial clauses.
    Approximated here: the sentence is cut into pieces at punctuation, conjunctions and relative
    pronouns; a predicate (a verb, or an auxiliary that does not help a verb) opens a frame at the
    start of its piece (the first one at the sentence's start, a subject before it included), and
    the frame runs on until a *hard* cut: a semicolon, a subordinating conjunction, or a
    coordinating conjunction that opens a piece with a predicate of its own.
    """
    n = len(words)
    pred = []
    for i in range(n):
        if pos[i] == "VERB":
            pred.append(True)
            continue
        if pos[i] != "AUX":
            pred.append(False)
            continue
        j = i + 1
        while j < n and pos[j] in _SKIP_TO_VERB:
            j += 1
        pred.append(not (j < n and pos[j] in ("VERB", "AUX")))
    cuts = [0] + [
        i
        for i in range(1, n)
        if words[i] in _BOUNDARY_TEXT or pos[i] in _BOUNDARY_POS or tags[i] in _BOUNDARY_TAGS
    ]
    pieces = [(a, b) for a, b in zip(cuts, [*cuts[1:], n], strict=True) if b > a]
    verb_of = [next((i for i in range(a, b) if pred[i]), None) for a, b in pieces]
    hard = [
        k > 0 and (words[a] == ";" or pos[a] == "SCONJ" or (pos[a] == "CCONJ" and verb_of[k] is not None))
        for k, (a, _) in enumerate(pieces)
    ]
    frames: list[tuple[int, int, str]] = []
    first_verb = True
    for k, (a, _) in enumerate(pieces):
        verb = verb_of[k]
        if verb is None:
            continue
        start = 0 if first_verb else a
        first_verb = False
        stop = next((m for m in range(k + 1, len(pieces)) if hard[m]), len(pieces))
        frames.append((start, pieces[stop - 1][1] - 1, words[verb].lower()))
    return [Frame(starts[a], starts[b] + len(words[b]), lemma) for a, b, lemma in frames]


class TaggerFrames:
    """:func:`tagged_frames` for a tagged ``Doc`` (``graal.parse: tagger`` calls the function on
    arrays directly)."""

    name = "tagger"

    def frames(self, doc: Any) -> list[Frame]:
        base = doc.start_char if hasattr(doc, "start_char") else 0
        toks = list(doc)
        return tagged_frames(
            [t.text for t in toks],
            [t.idx - base for t in toks],
            [t.pos_ for t in toks],
            [t.tag_ for t in toks],
        )


class SentenceFrames:
    """The whole sentence as one frame (GraphRetrieve)."""

    name = "sentence"

    def frames(self, doc: Any) -> list[Frame]:
        text = doc.text
        return [Frame(0, len(text), "")] if text.strip() else []


_EXTRACTORS: dict[str, Callable[[], FrameExtractor]] = {
    "dependency": DependencyFrames,
    "sentence": SentenceFrames,
    "tagger": TaggerFrames,
}


def register_frame_extractor(name: str, factory: Callable[[], FrameExtractor]) -> None:
    """Make a frame extractor (e.g. a real SRL model) available by name."""
    if not name:
        raise ValueError("frame extractor name must be non-empty")
    _EXTRACTORS[name] = factory


def frame_extractor(name: str) -> FrameExtractor:
    """A frame extractor by name.

    Raises:
        ValueError: unknown name.
    """
    if name not in _EXTRACTORS:
        raise ValueError(f"unknown frame extractor {name!r} (known: {', '.join(sorted(_EXTRACTORS))})")
    return _EXTRACTORS[name]()
