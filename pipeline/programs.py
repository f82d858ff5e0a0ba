"""Reasoning programs (ProgramFC style): a claim as ordered Verify / Question steps and a logical combination.

A program is written as in ProgramFC (Pan et al., ACL 2023)::

    fact_1 = Verify("Dum Dum Motijheel College is in Kolkata.")
    answer_1 = Question("Which state is Kolkata the capital of?")
    fact_2 = Verify("Kolkata is the capital of {answer_1}.")
    label = Predict(fact_1 and fact_2)

``Verify`` steps are sub-claims, each verified on its own retrieved evidence;
``Question`` steps are bridging questions whose answer (a span of their top
evidence) fills the ``{answer_N}`` slots of later steps; the final verdict is
the logical AND of the Verify steps (:func:`aggregate_steps`).

Two producers: :class:`RuleProgrammer` (spaCy clauses, relative clauses and
appositions, via :mod:`pipeline.decompose`) and the LLM few-shot programmer in
:mod:`pipeline.llm_stages`, whose replies go through :func:`parse_program`
(malformed -> :class:`ProgramError`, and the rule program is used instead).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from garag.types import Label

STEP_KINDS = ("verify", "question")
_SLOT_RE = re.compile(r"\{(answer_\d+)\}")
_STEP_RE = re.compile(
    r"""^\s*(?P<var>[A-Za-z_]\w*)\s*=\s*(?P<fn>Verify|Question)\(\s*f?(?P<q>["'])(?P<text>.*)(?P=q)\s*\)\s*$"""
)
_PREDICT_RE = re.compile(r"^\s*label\s*=\s*Predict\((?P<expr>.*)\)\s*$")


class ProgramError(ValueError):
    """A program that cannot be used (malformed text, unknown variable, unfilled slot)."""


@dataclass(frozen=True)
class Step:
    """One program step.

    Attributes:
        kind: "verify" (a sub-claim) or "question" (a bridging question).
        text: the sub-claim or question, possibly with ``{answer_N}`` slots.
        var: the variable the step assigns (``fact_1``, ``answer_1``).
    """

    kind: str
    text: str
    var: str

    def __post_init__(self) -> None:
        if self.kind not in STEP_KINDS:
            raise ProgramError(f"step kind must be one of {STEP_KINDS}, got {self.kind!r}")
        if not self.text.strip():
            raise ProgramError(f"step {self.var}: empty text")

    @property
    def slots(self) -> list[str]:
        """The ``answer_N`` variables this step's text uses."""
        return _SLOT_RE.findall(self.text)


@dataclass(frozen=True)
class Program:
    """An ordered list of steps; the verdict is the AND of the Verify steps.

    Attributes:
        steps: the steps in execution order.
        source: "rule", "llm", or "rule-fallback" (the LLM's program was unusable).
    """

    steps: tuple[Step, ...]
    source: str = "rule"
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if not any(s.kind == "verify" for s in self.steps):
            raise ProgramError("a program needs at least one Verify step")
        known: set[str] = set()
        for s in self.steps:
            missing = [v for v in s.slots if v not in known]
            if missing:
                raise ProgramError(f"step {s.var} uses {missing[0]} before a Question assigns it")
            if s.kind == "question":
                known.add(s.var)

    def to_text(self) -> str:
        """The ProgramFC-style text (parses back with :func:`parse_program`)."""
        lines = [
            f'{s.var} = {"Verify" if s.kind == "verify" else "Question"}("{s.text}")' for s in self.steps
        ]
        facts = [s.var for s in self.steps if s.kind == "verify"]
        lines.append(f"label = Predict({' and '.join(facts)})")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {"source": self.source, "steps": [[s.var, s.kind, s.text] for s in self.steps]}


def parse_program(text: str, max_steps: int = 8) -> Program:
    """Parse a ProgramFC-style program (code fences, ``def program():`` and comments allowed).

    Raises:
        ProgramError: no steps, a line that is not a step, a Predict over unknown variables or
            with an operator other than ``and``, duplicate variables, too many steps, an unfilled slot.
    """
    if not isinstance(text, str):
        raise ProgramError(f"program: expected text, got {type(text).__name__}")
    steps: list[Step] = []
    predict: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "```", "def ", "return")):
            continue
        m = _STEP_RE.match(line)
        if m:
            var = m["var"]
            if any(s.var == var for s in steps):
                raise ProgramError(f"variable {var} assigned twice")
            text_ = m["text"].replace('\\"', '"').strip()
            steps.append(Step("verify" if m["fn"] == "Verify" else "question", text_, var))
            continue
        m = _PREDICT_RE.match(line)
        if m:
            predict = m["expr"]
            continue
        raise ProgramError(f"not a program line: {line[:80]!r}")
    if not steps:
        raise ProgramError("no Verify or Question step")
    if len(steps) > max_steps:
        raise ProgramError(f"{len(steps)} steps (at most {max_steps})")
    if predict is not None:
        words = re.findall(r"[A-Za-z_]\w*", predict)
        facts = {s.var for s in steps if s.kind == "verify"}
        for w in words:
            if w in ("and", "not", "or"):
                if w != "and":
                    raise ProgramError(f"Predict uses {w!r}; only 'and' is supported")
            elif w not in facts:
                raise ProgramError(f"Predict names {w!r}, which no Verify step assigns")
    return Program(tuple(steps), source="llm")


def program_from_steps(steps: Sequence[tuple[str, str]], max_steps: int = 8, source: str = "llm") -> Program:
    """A program from ``(op, text)`` pairs (op "Verify" or "Question"); variables are numbered in order.

    Raises:
        ProgramError: an unknown op, too many steps, no Verify step, a slot used before it is answered.
    """
    if len(steps) > max_steps:
        raise ProgramError(f"{len(steps)} steps (at most {max_steps})")
    out: list[Step] = []
    counts = {"verify": 0, "question": 0}
    for op, text in steps:
        kind = {"Verify": "verify", "Question": "question"}.get(op)
        if kind is None:
            raise ProgramError(f"unknown step {op!r} (Verify or Question)")
        counts[kind] += 1
        out.append(
            Step(kind, " ".join(text.split()), f"{'fact' if kind == 'verify' else 'answer'}_{counts[kind]}")
        )
    return Program(tuple(out), source=source)


_LINE_RE = re.compile(r"^(?:[-*]\s*|\d+[.)]\s*)?(?P<op>Verify|Question)\s*:\s*(?P<text>.+)$")


def parse_step_lines(text: str, max_steps: int = 8) -> Program:
    """A program from ``Verify: ...`` / ``Question: ...`` lines, one step a line (the compact reply of
    ``prompts/program.yaml``; list marks, blank lines and code fences allowed).

    Raises:
        ProgramError: no steps, a line that is not a step, too many steps, a slot used before a
            Question answers it, no Verify step.
    """
    if not isinstance(text, str):
        raise ProgramError(f"program: expected text, got {type(text).__name__}")
    pairs = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("```"):
            continue
        m = _LINE_RE.match(line)
        if m is None:
            raise ProgramError(f"not a step line: {line[:80]!r}")
        pairs.append((m["op"], m["text"].strip()))
    if not pairs:
        raise ProgramError("no Verify or Question step")
    return program_from_steps(pairs, max_steps)


def fill_slots(text: str, answers: Mapping[str, str]) -> str:
    """Replace ``{answer_N}`` by its answer.

    Raises:
        ProgramError: a slot without an answer.
    """

    def sub(m: re.Match) -> str:
        if m[1] not in answers:
            raise ProgramError(f"no answer for {{{m[1]}}}")
        return answers[m[1]]

    return _SLOT_RE.sub(sub, text)


def aggregate_steps(labels: Sequence[Label]) -> Label:
    """The logical AND of step verdicts: any REFUTES -> REFUTES; all SUPPORTS -> SUPPORTS; else NEI."""
    if not labels:
        raise ValueError("no step verdicts to aggregate")
    if any(lab is Label.REFUTES for lab in labels):
        return Label.REFUTES
    if all(lab is Label.SUPPORTS for lab in labels):
        return Label.SUPPORTS
    return Label.NOT_ENOUGH_INFO


class RuleProgrammer:
    """Claim -> program of Verify steps from its simple clauses (no LLM).

    The clauses come from :mod:`pipeline.decompose`'s spaCy rules: coordinated verbs and
    noun phrases, relative clauses, appositions.  A claim that is one simple fact becomes a
    single Verify step (the claim itself).

    Args:
        clauses: claim -> declarative sub-claims (``RuleDecomposer.subclaims``).
        max_steps: at most this many steps.
    """

    name = "rule"

    def __init__(self, clauses: Callable[[str], list[str]], max_steps: int = 4) -> None:
        self._clauses = clauses
        self.max_steps = max_steps

    def program(self, claim: str) -> Program:
        claim = re.sub(r"\s+", " ", claim).strip()
        if not claim:
            raise ProgramError("empty claim")
        parts = self._clauses(claim)[: self.max_steps]
        if len(parts) < 2:
            parts = [claim]
        steps = tuple(Step("verify", p, f"fact_{i}") for i, p in enumerate(parts, start=1))
        return Program(steps, source="rule")

    def programs(self, claims: Sequence[str]) -> list[Program]:
        return [self.program(c) for c in claims]


def program_or_fallback(
    produce: Callable[[str], Any], fallback: RuleProgrammer, claim: str, counts: dict[str, int]
) -> Program:
    """``produce(claim)`` parsed as a program, or the rule program (counted) when it is unusable."""
    try:
        out = produce(claim)
        program = out if isinstance(out, Program) else parse_program(out)
        counts["llm"] = counts.get("llm", 0) + 1
        return program
    except ProgramError as e:
        counts["fallback"] = counts.get("fallback", 0) + 1
        rule = fallback.program(claim)
        return Program(rule.steps, source="rule-fallback", notes=(str(e)[:200],))
