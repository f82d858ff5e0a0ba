"""Running reasoning programs inside the verification pipeline (``reasoning.programs``).

For each claim: its program (:mod:`pipeline.programs`) -> Question steps answered in
order, in rounds across the batch (each retrieves its own evidence; the answer, per
``reasoning.answer_from`` the page title of its best sentence that the question does not
already name or a named entity of the asked type (:class:`EntityAnswerer`), fills the
later steps' ``{answer_N}`` slots) -> every Verify step retrieves its own evidence (GRAAL over the
step's entities and the graph ranking in graph mode, as for a claim) -> one batched
verifier call over all steps -> the AND of the step verdicts (and of the whole
claim's verdict with ``reasoning.verify_claim``).  The explanation lists every step
with its verdict and evidence ids.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

from garag.config import Config
from garag.text import detokenize, normalize_title, page_to_title, title_to_page
from garag.types import Claim, Evidence, Label, Verdict, unique_evidence
from pipeline.programs import Program, ProgramError, RuleProgrammer, aggregate_steps, fill_slots

MAX_EVIDENCE = 5
T = TypeVar("T")


def make_programmer(config: Config, llm_client: Any = None) -> Any:
    """The configured programmer: rule-based, or the LLM one with the rule programmer as fallback."""
    from pipeline.decompose import RuleDecomposer

    rule = RuleProgrammer(RuleDecomposer(config.decomposition).load().subclaims, config.reasoning.max_steps)
    if config.reasoning.programs == "rule":
        return rule
    from pipeline.llm_stages import LLMProgrammer

    reasoning = config.reasoning
    return LLMProgrammer(
        llm_client,
        rule,
        reasoning.max_steps,
        accept_steps=reasoning.accept_steps,
        max_tokens=reasoning.program_tokens,
    )


def title_answer(question: str, evidence: Sequence[Evidence]) -> str | None:
    """The page title of the best evidence sentence whose title the question does not name."""
    asked = question.casefold()
    for e in evidence:
        title = page_to_title(e.sentence.page)
        if normalize_title(e.sentence.page) not in asked:
            return title
    return None


# What a question asks for: the spaCy entity types that can answer it, from the first of these
# nouns after its "what" / "which" ("which city", "what is the name of the band"), else from its
# wh-word ("how many", "when", "where", "who").  A question that says none of these takes any entity.
_NOUN_TYPES: dict[str, frozenset[str]] = {
    noun: frozenset(types.split())
    for nouns, types in (
        ("year date decade century month day", "DATE TIME"),
        (
            "city country state town county region province island nation river mountain village "
            "capital continent place location borough district neighborhood area",
            "GPE LOC FAC",
        ),
        (
            "team band company club organization organisation group university college school party "
            "label network newspaper magazine airline agency brand firm league studio channel",
            "ORG",
        ),
        (
            "film movie album song book novel show series game play opera single record episode poem "
            "painting sitcom musical documentary",
            "WORK_OF_ART",
        ),
        ("language", "LANGUAGE NORP"),
        ("nationality", "NORP GPE"),
        ("person man woman actor actress singer director writer author player musician", "PERSON"),
    )
    for noun in nouns.split()
}
_WH_TYPES: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = tuple(
    (re.compile(p, re.IGNORECASE), frozenset(types.split()))
    for p, types in (
        (r"\bhow (old|long)\b", "DATE CARDINAL QUANTITY"),
        (r"\bhow (many|much|tall|high|large|big)\b", "CARDINAL QUANTITY MONEY PERCENT"),
        (r"\bwhen\b", "DATE TIME"),
        (r"\bwhere\b", "GPE LOC FAC"),
        (r"\bwho(m|se)?\b", "PERSON"),
    )
)
# Types that answer a question less well than the asked ones, as well as a page title of no known
# type: "who" may mean a band or a company.
_SECOND_CHOICE = {frozenset({"PERSON"}): frozenset({"ORG", "NORP"})}
# "Who was John Severin?", "What is The Others?": a question that only asks what a named thing is.
_IDENTITY = re.compile(
    r"^\s*(?:who|what)\s+(?:is|was|are|were)\s+((?:\S+\s*){1,6}?)\s*\?+\s*$", re.IGNORECASE
)
_NAME_PARTICLES = frozenset("of the de van von der du la le and & jr. sr.".split())


def _is_name(text: str) -> bool:
    """A proper name: capitalised words, with particles ("of", "van", ...) only after the first."""
    words = text.split()
    return (
        bool(words)
        and words[0][:1].isupper()
        and all(w[:1].isupper() or w.casefold() in _NAME_PARTICLES for w in words)
    )


_WHAT = re.compile(r"\b(what|which)\b", re.IGNORECASE)
_TITLE = "TITLE"  # the candidate that is the sentence's page title


def asked_types(question: str) -> frozenset[str] | None:
    """The entity types that answer ``question`` (None: it does not say; any entity)."""
    what = _WHAT.search(question)
    if what:
        for word in _WORD.findall(question[what.end() :].casefold()):
            types = _NOUN_TYPES.get(word) or (_NOUN_TYPES.get(word[:-1]) if word.endswith("s") else None)
            if types:
                return types
    for pattern, types in _WH_TYPES:
        if pattern.search(question):
            return types
    return None


class EntityAnswerer:
    """``reasoning.answer_from: entity``: a question's answer is a named entity of its top evidence
    sentences (spaCy NER, or the sentence's page title) of the type its wh-phrase asks for (a
    city for "which city", a person for "who", ...) that the question does not name.

    Candidates are ranked in tiers, then by their sentence's rank, then by their place in it
    (a page title counts as the last entity of its sentence):

    0. of an asked type (any type when the question does not say) and a page of the corpus:
       the sentence's page title, or an entity that names a page;
    1. of an asked type, naming no page;
    2. of a second-choice type ("who": an organisation), or a page title of no known type;

    and without any, the title answer (``title_answer``).  A question that only asks what a
    named thing is ("Who was John Severin?") is answered by that name: its slot stands for the
    thing.  A yes/no question ("Did ...?") asks for no entity: the title answer.

    Args:
        spacy_model: the spaCy pipeline (its NER).
        has_page: whether a page id is in the corpus (None: no entity counts as a page).
        sentences: how many of the question's top sentences are read.
    """

    def __init__(
        self, spacy_model: str, has_page: Callable[[str], bool] | None = None, sentences: int = 3
    ) -> None:
        self.spacy_model = spacy_model
        self.has_page = has_page or (lambda page: False)
        self.sentences = sentences
        self._nlp: Any = None

    def answers(self, questions: Sequence[str], evidence: Sequence[Sequence[Evidence]]) -> list[str | None]:
        """One answer per question, read from its evidence (best first); spaCy runs once per batch."""
        if self._nlp is None:
            from garag.nlp import load_spacy

            self._nlp = load_spacy(self.spacy_model)
        tops = [list(ev[: self.sentences]) for ev in evidence]
        texts = [detokenize(e.text) for ev in tops for e in ev]
        docs = iter(self._nlp.pipe(texts, disable=["parser", "lemmatizer"]))
        return [self._answer(q, ev, [next(docs) for _ in ev]) for q, ev in zip(questions, tops, strict=True)]

    def _answer(self, question: str, evidence: Sequence[Evidence], docs: Sequence[Any]) -> str | None:
        named = _IDENTITY.match(question)
        if named and _is_name(named.group(1)):
            return named.group(1)  # "Who was John Severin?": the slot stands for the entity it names
        if _YES_NO.match(question):
            return title_answer(question, evidence)
        wanted = asked_types(question)
        second = _SECOND_CHOICE.get(wanted, frozenset()) if wanted else frozenset()
        asked = _words(question)
        best: tuple[tuple[int, int, int], str] | None = None
        for rank, (e, doc) in enumerate(zip(evidence, docs, strict=True)):
            title = page_to_title(e.sentence.page)
            ents = [(_entity_text(ent.text), ent.label_) for ent in doc.ents]
            # the title takes the type of an entity of its sentence that names it or that it names
            # ("Ricky Dene Gervais" for "Ricky Gervais"), else none
            tw = _words(normalize_title(e.sentence.page))  # without "(1997 film)"
            title_kind = next(
                (k for t, k in ents if k in _NAME_TYPES and (w := _words(t)) and (w <= tw or tw <= w)), _TITLE
            )
            for place, (text, kind) in enumerate([*ents, (title, title_kind)]):
                words = _words(text)
                if not words or words <= asked:
                    continue  # the question names it already
                fits = wanted is None or kind in wanted
                if fits and (place == len(ents) or self.has_page(title_to_page(text))):
                    tier = 0
                elif fits:
                    tier = 1
                elif kind == _TITLE or kind in second:
                    tier = 2
                else:
                    continue
                key = (tier, rank, place)
                if best is None or key < best[0]:
                    best = (key, text)
        return best[1] if best else title_answer(question, evidence)


def _entity_text(text: str) -> str:
    """An NER span as a name: without a leading "the" or a trailing possessive."""
    text = re.sub(r"^(the|a|an)\s+", "", text, flags=re.IGNORECASE)
    return re.sub(r"\s*['’]s$", "", text)


_NAME_TYPES = frozenset("PERSON NORP FAC ORG GPE LOC PRODUCT EVENT WORK_OF_ART LAW LANGUAGE".split())
_YES_NO = re.compile(
    r"^\s*(is|was|are|were|do|does|did|has|have|had|can|could|will|would|should)\b", re.IGNORECASE
)


_WORD = re.compile(r"[^\W_]+")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.casefold()) if w not in _STOP}


_STOP = frozenset("the a an of in on at to for and or by with from is was are were".split())


def _combine(
    program: Program,
    steps: list[dict],
    claim_verdict: Verdict | None,
) -> Verdict:
    """The AND of the step verdicts (and the claim's), with every step in the explanation."""
    used: list[tuple[str, Verdict]] = [(s["var"], s["verdict"]) for s in steps if s["kind"] == "verify"]
    if claim_verdict is not None:
        used.append(("claim", claim_verdict))
    label = aggregate_steps([v.label for _, v in used])
    support = min(float(v.scores.get(Label.SUPPORTS, 0.0)) for _, v in used)
    refute = max(float(v.scores.get(Label.REFUTES, 0.0)) for _, v in used)
    scores = {
        Label.SUPPORTS: support,
        Label.REFUTES: refute,
        Label.NOT_ENOUGH_INFO: max(0.0, 1.0 - support - refute),
    }
    # evidence: each step's best sentence first (so that every step's page is cited), then the rest
    ranked = interleave([v.evidence for _, v in used], MAX_EVIDENCE)
    parts = []
    for s in steps:
        if s["kind"] == "question":
            parts.append(f"{s['var']}: {s['text']!r} -> {s.get('answer') or '(no answer)'}")
        else:
            ids = ", ".join(f"({e.page}, {e.line})" for e in s["verdict"].evidence[:3]) or "no evidence"
            parts.append(f"{s['var']}: {s['text']!r} -> {s['verdict'].label.value} [{ids}]")
    if claim_verdict is not None:
        parts.append(f"whole claim -> {claim_verdict.label.value}")
    rule = {
        Label.SUPPORTS: "every step is supported",
        Label.REFUTES: "a step is refuted",
        Label.NOT_ENOUGH_INFO: "a step lacks evidence",
    }[label]
    explanation = f"Program ({program.source}): " + "; ".join(parts) + f". {rule} -> {label.value}."
    return Verdict(label, explanation, tuple(ranked), scores)


def interleave(lists: Sequence[Sequence[T]], k: int, key: Callable[[T], Hashable] = lambda x: x) -> list[T]:
    """The first ``k`` distinct items (by ``key``) taking each list's next best in turn."""
    out: list[T] = []
    seen: set[Hashable] = set()
    for depth in range(max((len(x) for x in lists), default=0)):
        for x in lists:
            if depth < len(x) and key(x[depth]) not in seen:
                seen.add(key(x[depth]))
                out.append(x[depth])
                if len(out) >= k:
                    return out
    return out


def _step_record(row: dict, with_verdict: bool) -> dict:
    """One step of a prediction's program record."""
    out = {"var": row["var"], "kind": row["kind"], "text": row["text"]}
    if row["kind"] == "question":
        return out | {"answer": row.get("answer"), "evidence": row.get("evidence", [])}
    if not with_verdict:
        return out | {"read": [e.sentence.to_json() for e in row.get("read", [])]}
    v = row["verdict"]
    return out | {
        "label": v.label.value,
        "scores": {lab.value: round(float(p), 6) for lab, p in v.scores.items()},
        "evidence": [s.to_json() for s in v.evidence],
        "read": [e.sentence.to_json() for e in row["read"]],
    }


def _program_record(
    program: Program, steps: list[dict], label: Label, claim_verdict: Verdict | None, union_read: list | None
) -> dict:
    """A prediction's ``"program"``: the program, its steps and how they were combined."""
    union = union_read is not None
    return {
        "source": program.source,
        **({"notes": list(program.notes)} if program.notes else {}),
        "text": program.to_text(),
        **({"combine": "union"} if union else {}),
        "steps": [_step_record(r, with_verdict=not union) for r in steps],
        **({"read": [e.sentence.to_json() for e in union_read]} if union else {}),
        "claim_verdict": claim_verdict.label.value if claim_verdict is not None else None,
        "label": label.value,
    }


def _reads(own: Sequence[Evidence], steps: Sequence[dict]) -> list[Sequence[Evidence]]:
    """The claim's own evidence, then what each of its Verify steps read."""
    return [own, *(r.get("read", []) for r in steps if r["kind"] == "verify")]


def _union_verdicts(
    pipe: Any,
    claims: Sequence[Claim],
    programs: Sequence[Program],
    records: Sequence[list[dict]],
    evidence: Sequence[Sequence[Evidence]],
) -> tuple[list[Verdict], list[dict], list[list[Evidence]]]:
    """``combine: union``: each claim verified once on its own and its steps' evidence together."""
    k = pipe.config.verifier.top_k
    union = [
        interleave(_reads(evidence[i], steps), k, key=lambda e: e.sentence) for i, steps in enumerate(records)
    ]
    verdicts = list(pipe.verifier.verify_batch([c.text for c in claims], union))
    for i, (program, v) in enumerate(zip(programs, verdicts, strict=True)):
        # the steps as run: slots filled, each question with its answer
        steps = "; ".join(
            f"{r['var']}: {r['text']!r}"
            + (f" -> {r.get('answer') or '(no answer)'}" if r["kind"] == "question" else "")
            for r in records[i]
        )
        verdicts[i] = Verdict(
            v.label,
            f"Program ({program.source}; the claim read with every step's evidence): {steps}. "
            + v.explanation,
            v.evidence,
            v.scores,
        )
    out_records = [
        _program_record(program, steps, v.label, None, ev)
        for program, steps, v, ev in zip(programs, records, verdicts, union, strict=True)
    ]
    return verdicts, out_records, union


def _answerer(pipe: Any) -> EntityAnswerer:
    if pipe.answerer is None:
        pipe.answerer = EntityAnswerer(pipe.config.decomposition.spacy_model, pipe.store.has_page)
    return pipe.answerer


def run_programs(
    pipe: Any,
    claims: Sequence[Claim],
    verdicts: Sequence[Verdict],
    evidence: Sequence[Sequence[Evidence]],
    oracle: bool = False,
) -> tuple[list[Verdict], list[dict], list[list[Evidence]], list[list[Evidence]]]:
    """Programs for a batch of claims whose whole-claim verdicts are known.

    Args:
        pipe: a built :class:`pipeline.verification.VerificationPipeline` with a programmer.
        claims: the claims.
        verdicts: each claim's verdict on its own evidence (a step of the AND with
            ``reasoning.verify_claim``; reused for a step that restates the claim).
        evidence: the evidence each claim's verdict read.
        oracle: steps read the claim's gold evidence instead of retrieving.

    Returns:
        The combined verdicts, per claim the JSON-able program record, the evidence the final
        verdict read (the claim's own for ``combine: and``, the union for ``union``), and every
        sentence the verdict rests on (for ``and`` the claim's evidence and every Verify step's,
        each sentence once; for ``union`` the union again).
    """
    cfg = pipe.config
    programs: list[Program] = pipe.programmer.programs([c.text for c in claims])
    records: list[list[dict]] = [[] for _ in programs]
    answers: list[dict[str, str]] = [{} for _ in programs]
    # Steps in rounds: round r takes each program's r-th step, so a step's slots are filled from the
    # answers of its own program's earlier questions, and the round's questions (LLM programs
    # only) are retrieved in one batch across the claims.
    for r in range(max((len(p.steps) for p in programs), default=0)):
        asked: list[tuple[int, dict]] = []
        for i, program in enumerate(programs):
            if r >= len(program.steps):
                continue
            step = program.steps[r]
            try:
                text = fill_slots(step.text, answers[i])
            except ProgramError:
                text = step.text  # an unanswered slot stays visible; the step is verified as written
            row = {"var": step.var, "kind": step.kind, "text": text}
            records[i].append(row)
            if step.kind == "question":
                asked.append((i, row))
        if asked:
            questions = [row["text"] for _, row in asked]
            found = pipe.step_evidence(questions)
            if cfg.reasoning.answer_from == "entity":
                given = _answerer(pipe).answers(questions, found)
            else:
                given = [title_answer(q, ev) for q, ev in zip(questions, found, strict=True)]
            for (i, row), ev, answer in zip(asked, found, given, strict=True):
                if answer:
                    answers[i][row["var"]] = answer
                row.update({"answer": answer, "evidence": [e.sentence.to_json() for e in ev[:3]]})
    # Verify steps: one retrieval batch and one verifier batch for the whole claim batch
    todo: list[tuple[int, dict]] = []
    for i, (claim, steps) in enumerate(zip(claims, records, strict=True)):
        for row in steps:
            if row["kind"] != "verify":
                continue
            if row["text"].strip().rstrip(".").casefold() == claim.text.strip().rstrip(".").casefold():
                row["verdict"], row["read"] = verdicts[i], list(evidence[i])
            else:
                todo.append((i, row))
    if todo:
        texts = [row["text"] for _, row in todo]
        if oracle:
            step_ev = [pipe.gold_evidence(claims[i]) if claims[i].verifiable else [] for i, _ in todo]
            missing = [j for j, ev in enumerate(step_ev) if not ev]
            if missing:
                found = pipe.step_evidence([texts[j] for j in missing])
                for j, ev in zip(missing, found, strict=True):
                    step_ev[j] = ev
        else:
            step_ev = pipe.step_evidence(texts)
        k = cfg.verifier.top_k
        if cfg.reasoning.combine == "union":
            for (_, row), ev in zip(todo, step_ev, strict=True):
                row["read"] = list(ev[:k])
        else:
            step_verdicts = pipe.verifier.verify_batch(texts, [ev[:k] for ev in step_ev])
            for (_, row), v, ev in zip(todo, step_verdicts, step_ev, strict=True):
                row["verdict"], row["read"] = v, list(ev[:k])
    if cfg.reasoning.combine == "union":
        verdicts, out, union = _union_verdicts(pipe, claims, programs, records, evidence)
        return verdicts, out, union, union
    out_verdicts, out_records = [], []
    for i, (program, steps) in enumerate(zip(programs, records, strict=True)):
        restated = any(r["kind"] == "verify" and r.get("verdict") is verdicts[i] for r in steps)
        claim_verdict = verdicts[i] if cfg.reasoning.verify_claim and not restated else None
        combined = _combine(program, steps, claim_verdict)
        out_verdicts.append(combined)
        out_records.append(_program_record(program, steps, combined.label, claim_verdict, None))
    rests_on = [
        unique_evidence([e for ev in _reads(evidence[i], steps) for e in ev])
        for i, steps in enumerate(records)
    ]
    return out_verdicts, out_records, [list(e) for e in evidence], rests_on
