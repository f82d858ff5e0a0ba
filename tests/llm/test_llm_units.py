"""Unit tests of the LLM layer that need no model: cache keys, SQLite cache, JSON validation/repair,
accounting, prompt files, and the pure parts of the LLM stages and verifier."""

from __future__ import annotations

import json

import pytest

from eval.slices import cited_ids
from garag.config import ConfigError, LLMConfig, load_config
from garag.llm import ChatMessage, ChatReply, LLMStats, ResponseCache, cache_key
from garag.llm.base import lines_begun
from garag.llm.models import resolve_model_file
from garag.llm.structured import extract_json, json_schema, parse_reply, repair_messages
from garag.types import Evidence, SentenceId
from pipeline.llm_stages import Subquestions, TripletBatch, clean_questions, triplets_from_reply
from verifier.llm import (
    PromptEvidence,
    VerdictReply,
    cited_refs,
    format_evidence,
    predicted_evidence,
    prompt_evidence,
    resolve_refs,
)

MSGS = [ChatMessage("system", "Be brief."), ChatMessage("user", "Is water wet?")]
SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}}
BASE = dict(model="m:sha256=abc", messages=MSGS, temperature=0.0, seed=13, max_tokens=64, schema=SCHEMA)


# -- cache keys and the SQLite cache ------------------------------------------------------


def test_cache_key_is_stable():
    assert cache_key(**BASE) == cache_key(**dict(BASE))


@pytest.mark.parametrize(
    "change",
    [
        {"model": "m:sha256=abd"},
        {"messages": [ChatMessage("system", "Be brief."), ChatMessage("user", "Is water dry?")]},
        {"messages": [ChatMessage("user", "Be brief."), ChatMessage("user", "Is water wet?")]},
        {"temperature": 0.7},
        {"seed": 14},
        {"max_tokens": 65},
        {"schema": None},
        {"schema": {"type": "object", "properties": {"b": {"type": "string"}}}},
        {"prompt_sha": "f00"},
        {"max_lines": 4},
    ],
)
def test_cache_key_changes_with_every_input(change):
    assert cache_key(**{**BASE, **change}) != cache_key(**BASE)


def test_cache_key_of_a_whole_reply_is_the_key_it_had_before_line_limits():
    """Replies cached before ``max_lines`` existed are still found: the digest is the one the key
    function gave then (garag 0d88e11)."""
    old = "b4abe75568744727725b43cea79c0cc1a97a204cf6422ac9070049860e8469ba"
    assert cache_key(**BASE) == old and cache_key(**{**BASE, "max_lines": None}) == old


@pytest.mark.parametrize(
    ("text", "begun"),
    [
        ("", 0),
        ("Verify: A.", 1),
        ("Verify: A.\n", 1),
        ("Verify: A.\nV", 2),
        ("Verify: A.\n\n  \nQuestion: B?\n", 2),
        ("```\nVerify: A.\n```\n", 1),
        ("Verify: A.\n``", 1),  # may still become a closing fence
        ("Verify: A.\n``\n", 2),
        ("Verify: A.\n`x", 2),
    ],
)
def test_lines_begun_counts_lines_with_text_from_their_first_character(text, begun):
    assert lines_begun(text) == begun


def test_response_cache_persists_across_connections(tmp_path):
    path = tmp_path / "c" / "replies.sqlite"
    cache = ResponseCache(path)
    assert cache.get("k1") is None
    cache.put("k1", "m", ChatReply('{"a": "x"}', 12, 3))
    cache.close()
    again = ResponseCache(path)
    assert again.get("k1") == ChatReply('{"a": "x"}', 12, 3)
    assert len(again) == 1
    again.close()


def test_a_damaged_cached_reply_is_a_miss_and_is_rewritten(tmp_path, caplog):
    import sqlite3

    path = tmp_path / "replies.sqlite"
    cache = ResponseCache(path)
    cache.put("k1", "m", ChatReply("Verify: Paris is in France.", 12, 3))
    cache.put("k2", "m", ChatReply("Verify: Oslo is in Norway.", 10, 4))
    cache.close()
    con = sqlite3.connect(path)
    con.execute("UPDATE replies SET text = 'Verify: Paris is in Spain.' WHERE key = 'k1'")  # changed bytes
    con.commit()
    con.close()
    cache = ResponseCache(path)
    with caplog.at_level("WARNING", logger="garag.llm.cache"):
        assert cache.get("k1") is None
    assert "fails its checksum" in caplog.text and str(path) in caplog.text
    assert len(cache) == 1  # the damaged reply is gone, whatever key its new reply is stored under
    assert cache.get("k2") == ChatReply("Verify: Oslo is in Norway.", 10, 4)
    cache.put("k1", "m", ChatReply("Verify: Paris is in France.", 12, 3))  # asked again
    assert cache.get("k1") == ChatReply("Verify: Paris is in France.", 12, 3)
    cache.close()


def test_a_reply_cache_with_the_crc_column_of_commits_ce95244_to_b73d332_is_read_and_written(tmp_path):
    import sqlite3

    path = tmp_path / "crc-column.sqlite"
    con = sqlite3.connect(path)  # that garag kept each reply's checksum in a 7th column
    con.execute(
        "CREATE TABLE replies (key TEXT PRIMARY KEY, model TEXT, text TEXT,"
        " prompt_tokens INTEGER, completion_tokens INTEGER, created REAL, crc INTEGER)"
    )
    con.execute("INSERT INTO replies VALUES ('k', 'm', 'its reply', 5, 2, 0.0, 12345)")
    con.commit()
    con.close()
    cache = ResponseCache(path)
    assert cache.get("k") == ChatReply("its reply", 5, 2)  # no checksum of this garag's: unchecked
    cache.put("k2", "m", ChatReply("a new reply", 7, 1))  # was: "table replies has 7 columns"
    assert cache.get("k2") == ChatReply("a new reply", 7, 1) and len(cache) == 2
    cache.close()


def test_an_older_reply_cache_is_read_and_a_broken_file_named(tmp_path):
    import sqlite3

    from garag.artifacts import ArtifactError

    path = tmp_path / "old.sqlite"
    con = sqlite3.connect(path)  # the table garag wrote before the crc column
    con.execute(
        "CREATE TABLE replies (key TEXT PRIMARY KEY, model TEXT, text TEXT,"
        " prompt_tokens INTEGER, completion_tokens INTEGER, created REAL)"
    )
    con.execute("INSERT INTO replies VALUES ('k', 'm', 'an old reply', 5, 2, 0.0)")
    con.commit()
    con.close()
    cache = ResponseCache(path)
    assert cache.get("k") == ChatReply("an old reply", 5, 2)  # unchecked, as it was
    cache.close()
    con = sqlite3.connect(path)  # that garag still writes to it after this one opened it
    con.execute("INSERT OR REPLACE INTO replies VALUES ('k2', 'm', 'another', 1, 1, 0.0)")
    con.execute("UPDATE replies SET prompt_tokens = 'five' WHERE key = 'k'")  # a damaged cell
    con.commit()
    con.close()
    cache = ResponseCache(path)
    assert cache.get("k2") == ChatReply("another", 1, 1)
    assert cache.get("k") is None  # no checksum, but not a reply either: a miss
    cache.close()
    broken = tmp_path / "broken.sqlite"
    broken.write_bytes(b"this is not an SQLite database file at all " * 4)
    with pytest.raises(ArtifactError, match=r"broken\.sqlite: damaged LLM reply cache .*; delete it"):
        ResponseCache(broken)


def test_chat_message_rejects_unknown_role():
    with pytest.raises(ValueError, match="role"):
        ChatMessage("tool", "x")


# -- JSON extraction, validation, repair --------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"questions": ["A?"]}', '{"questions": ["A?"]}'),
        ('Sure! ```json\n{"questions": ["A?"]}\n``` done', '{"questions": ["A?"]}'),
        ('{"q": "a } brace"} tail', '{"q": "a } brace"}'),
        ('{not json} then {"x": 1}', '{"x": 1}'),
        ("no json at all", None),
        ('{"unterminated": [1, 2', None),
    ],
)
def test_extract_json(text, expected):
    assert extract_json(text) == expected


def test_parse_reply_valid_and_invalid():
    ok, err = parse_reply('Answer: {"questions": ["Is A B?"]}', Subquestions)
    assert ok == Subquestions(questions=["Is A B?"]) and err == ""
    bad, err = parse_reply('{"questions": "Is A B?"}', Subquestions)
    assert bad is None and "questions" in err
    none, err = parse_reply("I think the claim is true.", Subquestions)
    assert none is None and "not a JSON object" in err


def test_verdict_reply_normalises_labels_and_ids():
    v = VerdictReply.model_validate_json(
        '{"label": "not_enough_info", "explanation": "x", "evidence": [1, "[2]"]}'
    )
    assert v.label == "NOT ENOUGH INFO" and v.evidence == ["1", "[2]"]
    assert VerdictReply.model_validate({"label": "nei", "explanation": ""}).label == "NOT ENOUGH INFO"
    bad, err = parse_reply('{"label": "TRUE", "explanation": "x"}', VerdictReply)
    assert bad is None and "label" in err


def test_repair_messages_append_bad_reply_and_schema():
    schema = json_schema(Subquestions)
    out = repair_messages(MSGS, "nope", "the reply is not a JSON object", schema)
    assert out[:2] == MSGS and out[2] == ChatMessage("assistant", "nope")
    assert out[3].role == "user" and "not a JSON object" in out[3].content
    assert json.dumps(schema, separators=(",", ":")) in out[3].content


def test_json_schema_inlines_refs():
    schema = json_schema(TripletBatch)
    assert "$defs" not in json.dumps(schema) and "$ref" not in json.dumps(schema)
    item = schema["properties"]["triplets"]["items"]
    assert set(item["required"]) == {"sentence", "subject", "relation", "object"}


# -- accounting ------------------------------------------------------------------------------


def test_stats_per_stage_and_total():
    st = LLMStats()
    st.add("decompose", calls=2, prompt_tokens=100, seconds=0.5)
    st.add("verdict", calls=1, cache_hits=3, fallbacks=1)
    snap = st.snapshot()
    assert snap["decompose"]["calls"] == 2 and snap["verdict"]["cache_hits"] == 3
    assert snap["total"]["calls"] == 3 and snap["total"]["fallbacks"] == 1
    assert st.stage("nothing").calls == 0
    with pytest.raises(ValueError, match="unknown LLM counter"):
        st.add("x", bogus=1)


# -- prompt files --------------------------------------------------------------------------


def test_prompts_load_with_version_and_hash(tmp_path):
    pytest.importorskip("langchain_core", reason="prompt templates need langchain-core (garag[llm])")
    from prompts import load_prompt

    for name in ("decompose", "triplets", "verdict"):
        p = load_prompt(name)
        assert p.version >= 1 and len(p.sha256) == 64
    msgs = load_prompt("decompose").render(claim="A is B.", max_questions=3)
    assert msgs[0].role == "system" and msgs[-1].role == "user" and "A is B." in msgs[-1].content
    # few-shot turns are sent verbatim (their JSON braces are not template fields)
    assert any(m.role == "assistant" and m.content.startswith('{"questions"') for m in msgs)
    with pytest.raises(ValueError, match="missing field"):
        load_prompt("decompose").render(claim="A is B.")
    text = tmp_path / "v.yaml"
    text.write_text("name: v\nversion: 1\nsystem: s\nuser: 'Q: {q}'\n")
    first = load_prompt("v", tmp_path).sha256
    text.write_text("name: v\nversion: 2\nsystem: s!\nuser: 'Q: {q}'\n")
    assert load_prompt("v", tmp_path).sha256 != first
    with pytest.raises(ValueError, match="not found"):
        load_prompt("nope", tmp_path)
    assert load_prompt("v", tmp_path).reply == "json"  # the reply's form, when the file does not say
    text.write_text("name: v\nversion: 2\nreply: xml\nsystem: s\nuser: 'Q: {q}'\n")
    with pytest.raises(ValueError, match=r"v\.yaml: reply must be one of json, lines, got 'xml'"):
        load_prompt("v", tmp_path)


def test_program_prompts_examples_parse_as_programs():
    from pipeline.llm_stages import ProgramReply
    from pipeline.programs import parse_step_lines, program_from_steps
    from prompts import load_prompt

    lines, as_json = load_prompt("program"), load_prompt("program_json")
    assert (lines.reply, as_json.reply) == ("lines", "json")
    assert [u for u, _ in lines.examples] == [u for u, _ in as_json.examples]  # the same claims
    for (_, text), (_, js) in zip(lines.examples, as_json.examples, strict=True):
        reply = ProgramReply.model_validate(json.loads(js))
        assert parse_step_lines(text).steps == program_from_steps([(s.op, s.text) for s in reply.steps]).steps
    # the slot in an example stays literal when the prompt is rendered
    msgs = lines.render(claim="A is B.", max_steps=4)
    assert any("{answer_1} was born in Canada." in m.content for m in msgs if m.role == "assistant")


def test_verdict_examples_are_valid_replies_covering_every_label():
    from prompts import load_prompt

    labels = set()
    for user, assistant in load_prompt("verdict").examples:
        reply = VerdictReply.model_validate(json.loads(assistant))
        labels.add(reply.label)
        shown = {line.split()[0] for line in user.splitlines() if line.startswith("[")}
        # an example must never cite an id its evidence does not show (what the verifier drops)
        assert set(cited_refs(reply)) <= shown, (user, assistant)
        assert (reply.label == "NOT ENOUGH INFO") == (not reply.evidence)
    assert labels == {"SUPPORTS", "REFUTES", "NOT ENOUGH INFO"}


# -- stage helpers -------------------------------------------------------------------------


def test_clean_questions_dedups_and_caps():
    qs = ["Is A B?", "is a b", "  ", "A is B.", "Was C born in 1900", "Is D E?", "Is F G?"]
    assert clean_questions(qs, "A is B.", 3) == ["Is A B?", "Was C born in 1900?", "Is D E?"]


def test_triplets_from_reply_maps_sentence_numbers():
    ev = [Evidence(SentenceId("A", 0), "A is B ."), Evidence(SentenceId("C", 2), "C won D .")]
    batch = TripletBatch.model_validate(
        {
            "triplets": [
                {"sentence": 1, "subject": "A", "relation": "is", "object": "B"},
                {"sentence": 1, "subject": "A ", "relation": "is", "object": "B"},
                {"sentence": 2, "subject": "C", "relation": "won", "object": "D"},
                {"sentence": 3, "subject": "X", "relation": "y", "object": "Z"},
                {"sentence": 2, "subject": "", "relation": "won", "object": "D"},
            ]
        }
    )
    triplets, bad = triplets_from_reply(batch, ev)
    assert bad == 1
    assert [(t.subject, t.relation, t.object, t.source) for t in triplets] == [
        ("A", "is", "B", SentenceId("A", 0)),
        ("C", "won", "D", SentenceId("C", 2)),
    ]
    assert all(t.extractor == "llm" and 0 < t.confidence <= 1 for t in triplets)


def test_citations_are_parsed_stripped_and_ordered():
    reply = VerdictReply(
        label="SUPPORTS", explanation="[2] and [1, 9] say so; see [7].", evidence=["2", "[9]"]
    )
    assert cited_refs(reply) == ["[2]", "[9]", "[1]", "[7]"]
    a, b, c = SentenceId("A", 0), SentenceId("B", 1), SentenceId("C", 2)
    # prompt ids become (page, line) ids; [9] and [7] were never shown, so they go
    text = resolve_refs(reply.explanation, {"[1]": a, "[2]": b})
    assert text == "(B, 1) and (A, 0) say so; see."
    assert cited_ids(text) == [b, a]  # what the report's explanation checks read
    assert resolve_refs("[1, 1] is [x]", {"[1]": SentenceId("Page_(film)", 3)}) == "(Page_(film), 3) is"
    ranked = [a, b, c, SentenceId("D", 0), SentenceId("E", 0), SentenceId("F", 0)]
    assert predicted_evidence([c], ranked) == (c, a, b, SentenceId("D", 0), SentenceId("E", 0))


def test_prompt_evidence_numbering_and_format():
    ev = [Evidence(SentenceId("Abbey_Road", 0), "It -LRB- the album -RRB- was released .", 0.9)]
    ev.append(ev[0])
    items = prompt_evidence(ev, {SentenceId("Abbey_Road", 0): ["Abbey Road | released in | 1969"]})
    assert items == [
        PromptEvidence(
            "[1]", SentenceId("Abbey_Road", 0), ev[0].text, ("Abbey Road | released in | 1969",), 0.9
        )
    ]
    text = format_evidence(items)
    assert text.startswith("[1] Abbey Road (Abbey_Road, 0): It (the album) was released.")
    assert "    - Abbey Road | released in | 1969" in text


# -- config and model files ----------------------------------------------------------------


def test_llm_config_defaults_and_validation():
    cfg = load_config(overrides=["llm.backend=openai", "llm.base_url=http://127.0.0.1:1/v1"]).llm
    assert cfg.backend == "openai" and cfg.temperature == 0.0 and cfg.seed == 13
    with pytest.raises(ConfigError, match="llm.backend"):
        LLMConfig(backend="hf")
    with pytest.raises(ConfigError, match="llm.concurrency"):
        load_config(overrides=["llm.concurrency=0"])
    with pytest.raises(ConfigError, match="llm.response_format"):
        LLMConfig(response_format="text")


def test_resolve_model_file_rejects_bad_names(tmp_path):
    with pytest.raises(ValueError, match="expected"):
        resolve_model_file("gpt-9", tmp_path)
    fake = tmp_path / "x.gguf"
    fake.write_bytes(b"NOPE" + b"\0" * 8)
    with pytest.raises(ValueError, match="not a GGUF"):
        resolve_model_file(str(fake), tmp_path)
    with pytest.raises(FileNotFoundError):
        resolve_model_file(str(tmp_path / "missing.gguf"), tmp_path)


def test_llm_stages_implement_the_roles(tmp_path):
    from garag.llm import LLMClient
    from pipeline.llm_stages import LLMDecomposer, LLMTripletExtractor
    from pipeline.protocols import Decomposer, TripletExtractor
    from verifier.base import Verifier
    from verifier.llm import LLMVerifier

    client = LLMClient(LLMConfig(), tmp_path)  # cheap: no model is loaded
    assert isinstance(LLMDecomposer(client), Decomposer)
    assert isinstance(LLMTripletExtractor(client), TripletExtractor)
    assert isinstance(LLMVerifier(client), Verifier)
    with pytest.raises(ValueError, match="batch_size"):
        LLMTripletExtractor(client, batch_size=0)
    with pytest.raises(ValueError, match="empty"):
        LLMDecomposer(client).decompose("  ")
