"""An episode's summary: its most central candidate sentences, in source order, within a word budget."""

from extraction.candidates import TERMINAL, Candidate
from extraction.sentences import has_cjk

SUMMARY_WORDS = 80
SUMMARY_CHARS = 200  # Chinese: ~200 characters carry about what 80 English words do
SUMMARY_SENTENCES = 4


def budget_for(zh: bool) -> int:
    return SUMMARY_CHARS if zh else SUMMARY_WORDS


def pick(candidates: list[Candidate], budget: int, zh: bool) -> list[Candidate]:
    """The most central sentences that fit the budget, skipping near-duplicates of ones already chosen."""
    chosen: list[Candidate] = []
    used = 0
    # A sentence longer than half the budget would crowd the others out, so it ranks lower.
    ranked = sorted(candidates, key=lambda c: c.score * min(1.0, budget / 2 / max(1, size(c.text, zh))), reverse=True)
    for c in ranked:
        length = size(c.text, zh)
        if chosen and used + length > budget:
            continue
        if any(_overlap(c.tokens, other.tokens) > 0.6 for other in chosen):
            continue
        chosen.append(c)
        used += length
        if len(chosen) == SUMMARY_SENTENCES:
            break
    return sorted(chosen, key=lambda c: c.position)


def ended(text: str, zh: bool) -> str:
    return text if TERMINAL.search(text) else text + ("。" if zh else ".")


def size(text: str, zh: bool) -> int:
    return len(text) if zh else len(text.split())


def _overlap(a: list[str], b: list[str]) -> float:
    sa, sb = set(a), set(b)
    return len(sa & sb) / max(1, min(len(sa), len(sb)))


def joined(parts: list[str], zh: bool) -> str:
    out = ""
    for part in (p.strip() for p in parts if p.strip()):
        # Chinese sentences join without a space, anything next to Latin text with one.
        tight = zh and (has_cjk(out[-1:] + part[:1]) or "\u3000" <= out[-1:] <= "\u303f" or "\uff00" <= out[-1:])
        out += part if not out or tight else " " + part
    return out


def trimmed(text: str, budget: int, zh: bool) -> str:
    if zh:
        return text if len(text) <= budget else text[: budget - 1].rstrip("，,、 ") + "…"
    tokens = text.split()
    return text if len(tokens) <= budget else " ".join(tokens[:budget]).rstrip(",;: ") + "…"
