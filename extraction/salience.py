"""Content words and sentence salience within one extraction unit (no corpus statistics needed)."""

import logging
import math
import re
import warnings
from collections import Counter
from functools import lru_cache

from extraction.sentences import has_cjk

_WORD = re.compile(r"[a-z0-9][a-z0-9'&-]*[a-z0-9]|[a-z]")

# Function words: they say nothing about what a sentence is about.
EN_STOPWORDS = frozenset(
    """a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during
    each either etc few for from further get gets got had hadn't has hasn't have haven't having he he'd he'll he's
    her here here's hers herself him himself his how how's however i i'd i'll i'm i've if in into is isn't it it's
    its itself just let's like may me might more most much must mustn't my myself no nor not now of off on once
    only or other ought our ours ourselves out over own per same shall shan't she she'd she'll she's should
    shouldn't so some such than that that's the their theirs them themselves then there there's these they
    they'd they'll they're they've this those though through thus to too under until up upon us very via was
    wasn't we we'd we'll we're we've were weren't what what's when when's where where's whether which while who
    who's whom whose why why's will with within without won't would wouldn't yes yet you you'd you'll you're
    you've your yours yourself yourselves one ones really quite rather even ever still already always never
    often sometimes something anything everything nothing someone anyone everyone thing things lot lots
    gonna wanna gotta kinda sorta oh hey hi hello yeah yep ok okay wow lol haha hmm um uh ah aw""".split()
)
# Chat pleasantries: real words, but a sentence made only of them is small talk, not a fact.
CHAT_FILLER = frozenset(
    """good great nice cool awesome amazing wonderful fantastic incredible glad happy sorry thanks thank see hear
    sounds totally super pretty definitely sure congrats congratulations bye care talk later soon know mean
    guess think feel day time well way tell keep going hope love proud exciting excited agree true right exactly
    absolutely look 你好 您好 谢谢 不客气 好的 当然 可以 觉得 一下 真的 特别 看到 知道 听起来 不错 充满 一定 有趣
    喜欢 希望 开心 高兴""".split()
)
ZH_STOPWORDS = frozenset(
    """的 了 和 是 就 都 而 及 与 着 或 一个 没有 我们 你们 他们 她们 它们 我 你 他 她 它 这 那 这个 那个 这些 那些 之
    在 也 很 还 又 但 但是 并 并且 而且 因为 所以 如果 虽然 然后 以及 其 其中 被 把 让 给 对 对于 从 向 到 于 以 为
    上 下 中 里 个 些 吗 呢 吧 啊 呀 嗯 哦 哈哈 已经 可以 能够 会 要 就是 还是 只是 不是 什么 怎么 这样 那样 自己
    一些 一样 非常 比较 进行 通过 之后 之前 以后 以前 时候""".split()
)


@lru_cache(maxsize=1)
def _jieba():
    with warnings.catch_warnings():  # jieba 0.42 imports the deprecated pkg_resources
        warnings.simplefilter("ignore", UserWarning)
        import jieba  # noqa: PLC0415 - its dictionary takes ~1 s to load, so only when Chinese appears

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def words(text: str) -> list[str]:
    """Segmented words: jieba for text with Chinese, a regex for the rest; lower-cased."""
    if has_cjk(text):
        # Without the HMM pass for unknown words jieba is ~30% faster; dictionary words suffice for scoring.
        return [w.strip().lower() for w in _jieba().lcut(text, HMM=False) if w.strip()]
    return _WORD.findall(text.lower().replace("’", "'"))


def content_words(text: str, *, ignore: frozenset | set = frozenset()) -> list[str]:
    """Words that carry meaning: no stop words, no punctuation, Chinese words of two or more characters."""
    out = []
    for word in words(text):
        if word in ignore or word in EN_STOPWORDS or word in ZH_STOPWORDS:
            continue
        if word[0] >= "\u3400":  # CJK and full-width forms
            if len(word) >= 2 and has_cjk(word):
                out.append(word)
        elif any(c.isalnum() for c in word) and (len(word) >= 2 or word.isdigit()):
            out.append(word)
    return out


_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# Characters that are grammar, not content: a bigram containing one says little about the topic.
_FUNCTION_CHARS = frozenset("的了和是在也很都就而及与着或这那之其被把让给对从向到于为个些吗呢吧啊呀我你他她它们有不一")


def terms(text: str, *, ignore: frozenset | set = frozenset()) -> list[str]:
    """Scoring terms: English content words, and overlapping character bigrams of Chinese runs.

    Bigrams instead of jieba words keep scoring at regex speed (jieba runs at ~130k characters/s,
    which alone would use most of the per-page budget); for comparing sentences inside one unit they
    work as well as words, and they are what Chinese IR used before segmenters.
    """
    if not has_cjk(text):
        return content_words(text, ignore=ignore)
    out = content_words(_CJK_RUN.sub(" ", text), ignore=ignore)
    for run in _CJK_RUN.findall(text):
        for a, b in zip(run, run[1:]):
            if a not in _FUNCTION_CHARS and b not in _FUNCTION_CHARS and a + b not in ignore:
                out.append(a + b)
    return out


def centrality(token_lists: list[list[str]], *, boost: set[str] = frozenset()) -> list[float]:
    """Cosine of each sentence's word set with the unit's word profile (document frequency inside the unit).

    A sentence that shares the words most other sentences use is central to the unit; `boost` words
    (from the section title) count as if half the sentences used them.
    """
    df = Counter(t for tokens in token_lists for t in set(tokens))
    if not df:
        return [0.0] * len(token_lists)
    extra = max(1.0, len(token_lists) / 2)
    profile = {t: d + (extra if t in boost else 0.0) for t, d in df.items()}
    norm = math.sqrt(sum(v * v for v in profile.values()))
    scores = []
    for tokens in token_lists:
        unique = set(tokens)
        if not unique:
            scores.append(0.0)
            continue
        scores.append(sum(profile[t] for t in unique) / (math.sqrt(len(unique)) * norm))
    return scores


_VERB_LIKE = frozenset("made make makes get gets got go goes went take takes took taking give gave come came".split())


def keywords(
    token_lists: list[list[str]], texts: list[str] = (), *, limit: int = 3, ignore: set[str] = frozenset()
) -> list[str]:
    """The unit's most repeated content words (verb forms left out), ties broken by first appearance."""
    counts: Counter = Counter()
    first: dict[str, int] = {}
    for i, tokens in enumerate(token_lists):
        for t in tokens:
            if t in ignore or t in CHAT_FILLER or t in _VERB_LIKE or t.isdigit():
                continue
            if not has_cjk(t) and (len(t) < 3 or t.endswith(("ing", "ed", "ly", "'s"))):
                continue
            counts[t] += 1
            first.setdefault(t, i)
    # A pair of words that keeps appearing together ("support group") names the topic better than either.
    joined = "\n".join(texts).lower()
    pairs = Counter(
        (a, b) for tokens in token_lists for a, b in zip(tokens, tokens[1:]) if a in counts and b in counts and a != b
    )
    for (a, b), n in pairs.most_common():
        if texts and (a + b if has_cjk(a) else f"{a} {b}") not in joined:
            continue  # adjacent only after stop words were removed
        if n >= 2 and a in counts and b in counts and n >= 0.5 * min(counts[a], counts[b]):
            phrase = a + b if has_cjk(a) else f"{a} {b}"
            counts[phrase], first[phrase] = max(counts.pop(a), counts.pop(b)), min(first[a], first[b])
    ranked = sorted(counts, key=lambda t: (-counts[t], first[t]))
    return ranked[:limit]
