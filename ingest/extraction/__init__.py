"""Extractors turn an ExtractionUnit into an episode with atomic facts; pick one with `extractor()`."""


def extractor():
    """The LLM extractor when an LLM is configured (it falls back per unit), else the deterministic one."""
    from django.conf import settings

    if getattr(settings, "LLM_ENABLED", False):
        from ingest.extraction.llm import LlmExtractor

        return LlmExtractor()
    return deterministic_extractor()


def deterministic_extractor():
    """The model-free extractor; also the LLM extractor's per-unit fallback."""
    from ingest.extraction.deterministic import DeterministicExtractor

    return DeterministicExtractor()
