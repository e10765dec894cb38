"""Extractors turn an ExtractionUnit into an episode with atomic facts; pick one with `extractor()`."""

from django.conf import settings

from extraction.deterministic import DeterministicExtractor
from extraction.llm import LlmExtractor


def extractor():
    """The LLM extractor when an LLM is configured (it falls back per unit), else the deterministic one."""
    if getattr(settings, "LLM_ENABLED", False):
        return LlmExtractor()
    return deterministic_extractor()


def deterministic_extractor():
    """The model-free extractor; also the LLM extractor's per-unit fallback."""
    return DeterministicExtractor()
