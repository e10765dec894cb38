"""The LLM extractor against a real local OpenAI-compatible server: real client, real HTTP, real retries."""

import json
from datetime import datetime, timezone

from extraction import extractor
from extraction.base import ExtractionUnit, Passage
from extraction.llm import LlmExtractor
from tests.fake_openai import fake_openai  # noqa: F401  (fixture)

WHEN = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


def _chat_unit() -> ExtractionUnit:
    return ExtractionUnit(
        "",
        [
            Passage("msg-1", "Hey Mel! Good to see you!", "Caroline", WHEN),
            Passage("msg-2", "I went to a LGBTQ support group yesterday and it was so powerful.", "Caroline", WHEN),
            Passage("msg-3", "Wow, that's cool! I painted a lake sunrise last year.", "Melanie", WHEN),
        ],
    )


def _user_prompt(body: dict) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "user")


VALID = {
    "topic": "Caroline and Melanie: support group, painting",
    "summary": "On 2023-05-08, Caroline told Melanie that she had gone to an LGBTQ support group the day before.",
    "facts": [
        {"text": "Caroline went to an LGBTQ support group on 2023-05-07.", "sources": [2], "occurred_at": "2023-05-07"},
        {"text": "Melanie painted a lake sunrise in 2022.", "sources": [3], "occurred_at": "2022"},
        {"text": "Caroline and Melanie greeted each other.", "sources": [1, 2], "occurred_at": None},
    ],
}


def test_it_maps_a_valid_reply_onto_source_ids(fake_openai):
    fake_openai.queue_json(VALID)

    episode = LlmExtractor().extract(_chat_unit())

    assert episode.mode == "llm"
    assert episode.topic == VALID["topic"] and episode.summary == VALID["summary"]
    assert [(f.text, f.source_ids) for f in episode.facts] == [
        ("Caroline went to an LGBTQ support group on 2023-05-07.", ["msg-2"]),
        ("Melanie painted a lake sunrise in 2022.", ["msg-3"]),
        ("Caroline and Melanie greeted each other.", ["msg-1", "msg-2"]),
    ]
    assert episode.facts[0].occurred_at == datetime(2023, 5, 7, tzinfo=timezone.utc)
    assert episode.facts[1].occurred_at == datetime(2022, 1, 1, tzinfo=timezone.utc)
    assert episode.facts[2].occurred_at == WHEN  # no date given: the message's time
    assert episode.facts[0].subject == "Caroline"
    assert episode.source_ids == ["msg-1", "msg-2", "msg-3"]
    assert episode.occurred_at == WHEN


def test_the_request_carries_the_numbered_passages(fake_openai):
    fake_openai.queue_json(VALID)

    LlmExtractor().extract(_chat_unit())

    (body,) = fake_openai.bodies("chat")
    assert body["model"] == "fake-llm"
    assert body["messages"][0]["role"] == "system" and '"sources"' in body["messages"][0]["content"]
    prompt = _user_prompt(body)
    assert "Kind: conversation" in prompt and "Participants: Caroline, Melanie" in prompt
    assert "[1] [2023-05-08 13:56] Caroline: Hey Mel! Good to see you!" in prompt
    assert "[2] [2023-05-08 13:56] Caroline: I went to a LGBTQ support group yesterday" in prompt
    assert "[3] [2023-05-08 13:56] Melanie: Wow, that's cool!" in prompt


def test_a_document_unit_is_numbered_without_speakers(fake_openai):
    fake_openai.queue_json({"topic": "Install", "summary": "Loci installs with pip.", "facts": []})
    unit = ExtractionUnit(
        "Guide › Install",
        [Passage("41", "Run pip install loci."), Passage("42", "Then migrate.")],
        context={"document": "guide.md"},
    )

    episode = LlmExtractor().extract(unit)

    prompt = _user_prompt(fake_openai.bodies("chat")[0])
    assert (
        "Kind: document section" in prompt and "Document: guide.md" in prompt and "Section: Guide › Install" in prompt
    )
    assert "[1] Run pip install loci.\n[2] Then migrate." in prompt
    assert episode.facts == [] and episode.summary == "Loci installs with pip."


def test_it_retries_a_malformed_reply_then_uses_the_valid_one(fake_openai):
    fake_openai.queue_chat("Here are the facts: Caroline went to a support group.")  # not JSON
    fake_openai.queue_json({"summary": "A chat.", "facts": "Caroline went"})  # wrong shape
    fake_openai.queue_json(VALID)

    episode = LlmExtractor().extract(_chat_unit())

    assert episode.mode == "llm"
    assert len(episode.facts) == 3
    bodies = fake_openai.bodies("chat")
    assert len(bodies) == 3
    assert '"facts" must be a list' in bodies[2]["messages"][-1]["content"]  # the model is told its mistake


def test_it_falls_back_to_the_deterministic_extractor_when_the_llm_never_answers_properly(fake_openai):
    fake_openai.queue_chat("nope", "still not json", "{broken")  # LLM_MAX_RETRIES=2 → three attempts

    episode = LlmExtractor().extract(_chat_unit())

    assert len(fake_openai.bodies("chat")) == 3
    assert episode.mode == "deterministic"
    assert "LLM extraction failed" in episode.warning
    (fact,) = [f for f in episode.facts if f.source_ids == ["msg-2"]]
    assert fact.text.startswith("Caroline went to a LGBTQ support group yesterday (7 May 2023)")


def test_it_falls_back_when_the_server_fails(fake_openai):
    fake_openai.queue_error("chat", 503, times=3)

    episode = LlmExtractor().extract(_chat_unit())

    assert episode.mode == "deterministic" and episode.facts


def test_out_of_range_sources_are_dropped_or_replaced_by_the_whole_unit(fake_openai):
    fake_openai.queue_json(
        {
            "topic": "Chat",
            "summary": "Caroline and Melanie talked.",
            "facts": [
                {"text": "Caroline went to a support group.", "sources": [2, 9, 0], "occurred_at": None},
                {"text": "Melanie paints.", "sources": [7], "occurred_at": "not a date"},
                {"text": "Melanie painted a lake sunrise.", "sources": ["[3]"]},
                {"text": "Melanie  paints.", "sources": [3]},  # a duplicate: its sources merge
            ],
        }
    )

    episode = LlmExtractor().extract(_chat_unit())

    assert [(f.text, f.source_ids) for f in episode.facts] == [
        ("Caroline went to a support group.", ["msg-2"]),
        ("Melanie paints.", ["msg-1", "msg-2", "msg-3"]),
        ("Melanie painted a lake sunrise.", ["msg-3"]),
    ]
    assert episode.facts[1].occurred_at is None  # an unreadable date is dropped, not guessed


def test_a_chinese_unit_asks_for_chinese_and_maps_the_reply(fake_openai):
    fake_openai.queue_json(
        {
            "topic": "小明的故宫之行",
            "summary": "2024-01-10，小明告诉小红他前一天去了故宫。",
            "facts": [{"text": "小明于2024-01-09去了北京故宫博物院。", "sources": [1], "occurred_at": "2024-01-09"}],
        }
    )
    when = datetime(2024, 1, 10, 9, 30)
    unit = ExtractionUnit(
        "",
        [
            Passage("c1", "我昨天去了北京的故宫博物院。", "小明", when),
            Passage("c2", "真好！你拍照了吗？", "小红", when),
        ],
    )

    episode = LlmExtractor().extract(unit)

    prompt = _user_prompt(fake_openai.bodies("chat")[0])
    assert "Language: Chinese" in prompt
    assert "[1] [2024-01-10 09:30] 小明: 我昨天去了北京的故宫博物院。" in prompt
    assert episode.topic == "小明的故宫之行"
    assert [(f.text, f.source_ids, f.occurred_at) for f in episode.facts] == [
        ("小明于2024-01-09去了北京故宫博物院。", ["c1"], datetime(2024, 1, 9)),
    ]


def test_extractor_picks_the_llm_when_configured(fake_openai):
    fake_openai.queue_chat(json.dumps(VALID))

    engine = extractor()

    assert isinstance(engine, LlmExtractor)
    assert engine.extract(_chat_unit()).mode == "llm"


GUIDE = "# Install\n\nRun pip install orbit, then orbit init.\n\n# Backups\n\nOrbit backs up its database every night.\n"


def test_a_document_section_the_model_failed_says_it_is_the_rules_and_the_others_the_models(
        fake_openai, world, lite_vector_settings, tmp_path):
    """Each section's memories carry its own mode: with one section by the model and one by the rules,
    the document says "mixed" but every episode and fact says which wrote it (not "mixed" for all)."""
    from ingest.actions import ingest_document
    from ingest.tasks import run_inline
    from memory.models import Document
    from tenants.access import permitted_scope

    fake_openai.queue_json({"topic": "Install", "summary": "Orbit installs with pip and orbit init.",
                            "facts": [{"text": "Orbit installs with pip install orbit.", "sources": [1]}]})
    # Every later chat call answers 500: the second section falls back to the rules.
    path = tmp_path / "orbit.md"
    path.write_text(GUIDE)
    with open(path, "rb") as fh:
        upload = ingest_document(permitted_scope(world.alice, write=True), world.docs, fh, "orbit.md")
    run_inline(upload.document.pk)

    document = Document.objects.get(pk=upload.document.pk)
    assert document.status == "ready" and document.extraction_mode == "mixed"
    episodes = list(document.memories.filter(kind="episode").order_by("ordinal"))
    assert [(e.topic, e.extraction_mode) for e in episodes] == [("Install", "llm"), ("Backups", "deterministic")]
    assert "LLM extraction failed" in episodes[1].metadata["extraction_warning"]
    for episode in episodes:
        assert {f.extraction_mode for f in document.memories.filter(parent=episode)} == {episode.extraction_mode}
