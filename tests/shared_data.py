"""Readers of the dev sets in shared/data that tests use (their own: a benchmark's reader may change
with the benchmark, a test's input must not)."""

import json
import re

from tests.conftest import SHARED_DATA

CMRC_TRIAL = SHARED_DATA / "zh" / "cmrc2018" / "cmrc2018_trial.squad.json"
LOCOMO_DEV = SHARED_DATA / "locomo" / "locomo10_dev.json"


def cmrc_passages(limit: int | None = None) -> list[dict]:
    """CMRC 2018 trial passages, each with its article's title."""
    data = json.loads(CMRC_TRIAL.read_text(encoding="utf-8"))
    passages = [{**p, "title": article.get("title") or ""} for article in data["data"] for p in article["paragraphs"]]
    return passages[:limit] if limit else passages


def title_file_name(passage: dict) -> str:
    """The passage's article title as a file name, as a saved Wikipedia page is named."""
    return re.sub(r'[\\/:*?"<>|\x00-\x1f]', "_", passage["title"] or passage["id"])[:120] + ".txt"


def corpus_sentences() -> list[str]:
    """LoCoMo's turns (English) and CMRC's sentences (Chinese): thousands of real texts of both kinds."""
    out = []
    for conversation in json.loads(LOCOMO_DEV.read_text(encoding="utf-8")):
        for key, turns in conversation["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                out += [f"{t['speaker']}: {t['text']}" for t in turns]
    for passage in cmrc_passages():
        out += [s for s in re.split(r"(?<=[。！？])", passage["context"]) if len(s) > 8]
    return out
