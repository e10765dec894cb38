"""MemCell segmentation: hard-limit split point, time gaps, embedding topic shifts, LLM boundaries."""

import json
import random
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from conversations.boundaries import DeterministicBoundaryDetector, LlmBoundaryDetector
from conversations.segmentation import (BoundaryDecision, Turn, format_window, forced_split_point,
                                              segment_turns)
from tests.fake_openai import fake_openai  # noqa: F401  (fixture)

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


def turns(texts, *, minutes=1, start=T0, session="s1"):
    return [Turn(f"m{i + 1}", "Caroline" if i % 2 == 0 else "Melanie", text, start + timedelta(minutes=minutes * i),
                 session) for i, text in enumerate(texts)]


class NoBoundaries:
    mode = "deterministic"

    def detect(self, window):
        return BoundaryDecision([], should_wait=True)


def brute_force_split(counts, max_tokens, max_messages):
    if len(counts) <= max_messages and sum(counts) <= max_tokens:
        return None
    best = 0
    for p in range(1, len(counts) + 1):
        if sum(counts[:p]) <= max_tokens and p <= max_messages:
            best = p
    return max(1, best)


def test_forced_split_point_is_the_longest_prefix_within_the_limits():
    assert forced_split_point([10] * 10, max_tokens=1000, max_messages=500) is None
    assert forced_split_point([10] * 10, max_tokens=35, max_messages=500) == 3
    assert forced_split_point([10] * 10, max_tokens=1000, max_messages=4) == 4
    assert forced_split_point([5000, 1, 1], max_tokens=100, max_messages=500) == 1  # one huge turn alone
    rng = random.Random(7)
    for _ in range(300):
        counts = [rng.randint(1, 60) for _ in range(rng.randint(1, 40))]
        limits = {"max_tokens": rng.randint(20, 800), "max_messages": rng.randint(1, 30)}
        assert forced_split_point(counts, **limits) == brute_force_split(counts, **limits), (counts, limits)


def test_segment_turns_closes_windows_at_the_hard_limit_and_keeps_the_tail_pending():
    window = turns([f"message number {i}" for i in range(7)])
    cut = segment_turns(window, NoBoundaries(), final=False, max_messages=3)
    assert [len(s) for s in cut.segments] == [3, 3] and cut.forced == 2
    assert [t.message_id for t in cut.pending] == ["m7"]
    final = segment_turns(window, NoBoundaries(), final=True, max_messages=3)
    assert [len(s) for s in final.segments] == [3, 3, 1] and final.pending == []


def test_segment_turns_splits_by_token_count():
    window = turns(["word " * 200] * 4)  # ~200 tokens per formatted line
    cut = segment_turns(window, NoBoundaries(), final=True, max_tokens=450)
    assert [len(s) for s in cut.segments] == [2, 2] and cut.forced == 1


def constant_embed(texts):
    return np.ones((len(texts), 4), dtype=np.float32) / 2.0


def test_a_long_pause_starts_a_new_segment():
    detector = DeterministicBoundaryDetector(embed=constant_embed, max_segment=20)
    window = turns(["We talked about the garden"] * 3) + turns(["Then about the garden again"] * 3,
                                                                 start=T0 + timedelta(hours=5))
    assert detector.detect(window).starts == [3]
    short_pause = turns(["We talked about the garden"] * 6, minutes=30)
    assert detector.detect(short_pause).starts == []


def test_a_new_session_starts_a_new_segment():
    window = turns(["hello there friend"] * 2) + turns(["hello again friend"] * 2, session="s2")
    assert DeterministicBoundaryDetector(embed=constant_embed).detect(window).starts == [2]


def topic_embed(texts):
    """Texts about painting point one way, texts about hiking another, with a little noise."""
    rng = np.random.default_rng(0)
    out = []
    for text in texts:
        base = np.array([1.0, 0.0, 0.0, 0.0]) if "paint" in text else np.array([0.0, 1.0, 0.0, 0.0])
        out.append(base + rng.normal(0, 0.05, 4))
    matrix = np.array(out, dtype=np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def test_an_embedding_topic_shift_starts_a_new_segment():
    painting = [f"I paint landscapes {i}" for i in range(6)]
    hiking = [f"We went hiking on trail {i}" for i in range(6)]
    detector = DeterministicBoundaryDetector(embed=topic_embed, min_segment=3, max_segment=20)
    assert detector.detect(turns(painting + hiking)).starts == [6]
    assert detector.detect(turns(painting + painting)).starts == []
    # A shift closer to the edge than the minimum segment length is not taken.
    assert detector.detect(turns(painting[:2] + hiking)).starts == []


def test_an_over_long_topic_is_cut_at_its_least_similar_gap():
    detector = DeterministicBoundaryDetector(embed=constant_embed, max_segment=8, min_segment=3)
    starts = detector.detect(turns(["same topic all along"] * 20)).starts
    bounds = [0, *starts, 20]
    assert starts and all(3 <= b - a <= 8 for a, b in zip(bounds, bounds[1:]))


def test_an_over_long_topic_is_not_cut_between_a_question_and_its_answer():
    detector = DeterministicBoundaryDetector(embed=constant_embed, max_segment=8, min_segment=3)
    texts = [f"Did you see the garden number {i}?" for i in range(10)]
    texts[4] = "The garden was lovely this year."  # the only turn no one answers
    assert detector.detect(turns(texts)).starts == [5]
    # A tag question asks for agreement, not an answer: its gap is as good a cut as any.
    texts = [f"The garden number {i} is lovely, right?" for i in range(10)]
    assert detector.detect(turns(texts)).starts == [3]


def window_of_four():
    return turns(["I went to a support group yesterday.", "How was it?", "Anyway, want to go hiking?", "Sure!"])


def test_llm_boundaries_are_retried_on_bad_output_then_used(fake_openai):  # noqa: F811
    fake_openai.queue_chat("the boundaries are 3", json.dumps({"boundaries": [9], "should_wait": False}),
                           json.dumps({"boundaries": [3], "should_wait": False}))
    detector = LlmBoundaryDetector(fallback=DeterministicBoundaryDetector(embed=constant_embed))
    decision = detector.detect(window_of_four())
    assert decision.starts == [2] and decision.should_wait is False and decision.mode == "llm"
    bodies = fake_openai.bodies("chat")
    assert len(bodies) == 3
    prompt = bodies[0]["messages"][-1]["content"]
    assert "[1] [2023-05-08T13:56:00+00:00] Caroline: I went to a support group yesterday." in prompt
    assert "[4] [2023-05-08T13:59:00+00:00] Melanie: Sure!" in prompt


def test_llm_boundaries_fall_back_to_the_deterministic_detector_after_five_bad_replies(fake_openai):  # noqa: F811
    fake_openai.queue_chat(*["not json"] * 5)
    detector = LlmBoundaryDetector(fallback=DeterministicBoundaryDetector(embed=constant_embed))
    decision = detector.detect(window_of_four())
    assert decision.mode == "deterministic" and decision.starts == []
    assert len(fake_openai.bodies("chat")) == 5


def test_segment_turns_packs_the_tail_when_the_llm_says_not_to_wait(fake_openai):  # noqa: F811
    fake_openai.queue_json({"boundaries": [3], "should_wait": True})
    fake_openai.queue_json({"boundaries": [3], "should_wait": False})
    detector = LlmBoundaryDetector(fallback=DeterministicBoundaryDetector(embed=constant_embed))
    waiting = segment_turns(window_of_four(), detector, final=False)
    assert [len(s) for s in waiting.segments] == [2] and len(waiting.pending) == 2
    done = segment_turns(window_of_four(), detector, final=False)
    assert [len(s) for s in done.segments] == [2, 2] and done.pending == []


def test_a_model_boundary_leaving_one_turn_alone_is_dropped(fake_openai):  # noqa: F811
    # A real model (SmolLM2) cut an agent's task from the tool calls that did it: neither half was a case.
    fake_openai.queue_json({"boundaries": [2, 3, 4], "should_wait": False})
    detector = LlmBoundaryDetector(fallback=DeterministicBoundaryDetector(embed=constant_embed))
    assert detector.detect(window_of_four()).starts == [2]  # 2 would strand turn 1, 4 strands turn 4


def test_format_window_numbers_lines_from_one():
    assert format_window(window_of_four()).splitlines()[1] == "[2] [2023-05-08T13:57:00+00:00] Melanie: How was it?"


@pytest.mark.django_db
@pytest.mark.usefixtures("lite_vector_settings")
def test_a_relative_date_is_resolved_from_the_message_time(world, django_capture_on_commit_callbacks):
    from conversations.actions import accumulate_messages, flush_session
    from memory.models import Memory
    from tenants.access import permitted_scope

    scope = permitted_scope(world.alice, write=True)
    messages = [
        {"message_id": "d1", "sender_id": "caroline", "sender_name": "Caroline", "timestamp": T0,
         "content": "I went to a LGBTQ support group yesterday and it was so powerful."},
        {"message_id": "d2", "sender_id": "melanie", "sender_name": "Melanie", "timestamp": T0 + timedelta(minutes=1),
         "content": "That's wonderful, I'm so glad the support group helped you."},
    ]
    with django_capture_on_commit_callbacks(execute=True):
        accumulate_messages(scope, world.notes, user_id="u1", session_id="s1", messages=messages)
        flush_session(scope, world.notes, user_id="u1", session_id="s1")
    fact = Memory.objects.get(kind="atomic_fact", source_message_ids=["d1"])
    assert "yesterday (7 May 2023)" in fact.text and fact.text.startswith("Caroline went")
    assert fact.occurred_at.date().isoformat() == "2023-05-07"


def test_an_assistant_reply_is_compared_by_its_opening_words_a_persons_long_turn_by_more():
    # An assistant's reply spends its length on advice after naming the topic; embedding all of it
    # for the topic comparison was a quarter of a LongMemEval-S user's ingestion CPU.
    from conversations.boundaries import ASSISTANT_TOPIC_WORDS, TOPIC_WORDS

    seen = []

    def embed(texts):
        seen.extend(texts)
        return [[1.0, 0.0]] * len(texts)

    long_text = " ".join(f"word{i}" for i in range(300))
    chat = [Turn(f"m{i}", "assistant" if i % 2 else "user", long_text, T0 + timedelta(seconds=30 * i), "s1",
                 "assistant" if i % 2 else "user") for i in range(8)]
    DeterministicBoundaryDetector(embed).detect(chat)
    assert [len(line.split()) for line in seen] == [TOPIC_WORDS, ASSISTANT_TOPIC_WORDS] * 4
    assert seen[1] == "assistant: " + " ".join(f"word{i}" for i in range(ASSISTANT_TOPIC_WORDS - 1))
