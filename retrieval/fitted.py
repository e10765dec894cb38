"""Every number of the search and the memory that was fitted or chosen on data, in one place: its value,
what it was fitted on, the command that reproduces it and the date of that run (the run itself, with its
figures, is in bench/RESULTS.md under `results`).

The settings read their defaults from here (loci/search_settings.py); their environment variables still
override them, for a refit tried before it ships. Module constants that are tuning choices read their
value from here too. A refit changes the value, the date and the figures in bench/RESULTS.md together.

Not here: numbers taken from a source (RRF's k = 60, BM25's k1 and b, EverOS's own weights), limits
that bound work (top_k, batch sizes), and trained models' weights (their model cards say how they were
trained: retrieval/weights/e5x-rerank.md, conversations/models/statements.md, entities/models/entity_types.md).
"""

from dataclasses import dataclass

CMRC = "the CMRC 2018 trial set ingested by `python -m bench.cmrc --var-dir DIR` (256 passages, 1,000 questions)"
LOCOMO = "../shared/data/locomo/locomo10_dev.json"


@dataclass(frozen=True)
class Fitted:
    """One fitted number, or the numbers of one fitted map, with the run that chose them."""

    value: float | tuple[float, ...]
    fitted_on: str  # the data, and what was fitted or swept on it
    command: str  # what reproduces it, from the repository's root
    date: str  # the day of the run, YYYY-MM-DD
    results: str  # the section of bench/RESULTS.md that holds the run
    used_as: tuple[str, ...]  # the settings whose default it is, or the module constant it is


# --- the fusion of cosine and BM25 (retrieval/search/scoring.py): σ(w_cos·cos + w_bm25·bm25 + bias)

FUSION_EPISODE = Fitted(
    value=(17.6, 0.2, -18.7),
    fitted_on=f"{CMRC}: the cosine weight and the bias by a listwise logistic fit on the even questions and a "
    "grid over steepness and centre; the BM25 weight then raised to what did best on LoCoMo conversation 0 "
    "(hybrid R@5/10/20 0.691/0.749/0.815 against 0.659/0.742/0.797 fitted, 0.681/0.739/0.811 EverOS's)",
    command="python -m bench.fit_fusion --var-dir DIR",
    date="2026-11-29",
    results="CMRC 2018 retrieval quality",
    used_as=("MRAG_LR_W_COS", "MRAG_LR_W_BM25", "MRAG_LR_BIAS"),
)
FUSION_FACT = Fitted(
    value=(19.6, 0.08, -18.15),
    fitted_on=f"{CMRC}: as FUSION_EPISODE, the target the fact holding the answer in the gold passage "
    "(ans@200 0.810 on the fitting half, 0.802 held out); the BM25 weight raised on LoCoMo conversation 0",
    command="python -m bench.fit_fusion --var-dir DIR",
    date="2026-11-29",
    results="CMRC 2018 retrieval quality",
    used_as=("MRAG_FACT_W_COS", "MRAG_FACT_W_BM25", "MRAG_FACT_BIAS"),
)

# --- one calibrated relevance per signal (retrieval/relevance.py): P = σ(W·x + B), Platt scaling

_RELEVANCE_ON = (f"{CMRC}, the even questions: a one-feature logistic regression of 'the item comes from the "
                 "gold passage and holds a gold answer in its first 200 characters'")
RELEVANCE_MRAG = Fitted(
    value=(0.5348, -2.3607),
    fitted_on=f"{_RELEVANCE_ON}; x = logit of hybrid's final score (facts and episodes; held-out log loss 0.278)",
    command="python -m bench.fit_relevance --var-dir DIR",
    date="2026-12-01",
    results="One relevance, one order, a floor, across languages",
    used_as=("SEARCH_RELEVANCE_MRAG_W", "SEARCH_RELEVANCE_MRAG_B"),
)
RELEVANCE_CHUNK = Fitted(
    value=(0.7968, -1.27),
    fitted_on=f"{_RELEVANCE_ON}; x = logit of a chunk's fused score",
    command="python -m bench.fit_relevance --var-dir DIR",
    date="2026-12-01",
    results="One relevance, one order, a floor, across languages",
    used_as=("SEARCH_RELEVANCE_CHUNK_W", "SEARCH_RELEVANCE_CHUNK_B"),
)
RELEVANCE_BM25 = Fitted(
    value=(0.0781, -2.9557),
    fitted_on=f"{_RELEVANCE_ON}; x = keyword search's raw BM25 (SQLite FTS5's scores at the time)",
    command="python -m bench.fit_relevance --var-dir DIR",
    date="2026-12-01",
    results="One relevance, one order, a floor, across languages",
    used_as=("SEARCH_RELEVANCE_BM25_W", "SEARCH_RELEVANCE_BM25_B"),
)
RELEVANCE_COSINE = Fitted(
    value=(43.32, -40.64),
    fitted_on=f"{_RELEVANCE_ON}; x = vector search's raw cosine (e5-small)",
    command="python -m bench.fit_relevance --var-dir DIR",
    date="2026-12-01",
    results="One relevance, one order, a floor, across languages",
    used_as=("SEARCH_RELEVANCE_COSINE_W", "SEARCH_RELEVANCE_COSINE_B"),
)

# --- the rescoring stages' maps: P = σ(a·logit(hybrid relevance) + b·stage score + c)

LATE_INTERACTION_MAP = Fitted(
    value=(2.3776, 11.888, -3.8588),
    fitted_on="each session of LoCoMo dev conversations 0, 2, 4, 5 posted alone (206 answerable questions, "
    "144 of other conversations; 5,878 candidates): the order b/a = 5 kept (the R@10 plateau of "
    "`python -m bench.rank_stages --replay`), scale and bias by logistic regression of 'cites an evidence turn'",
    command="python -m bench.fit_late_interaction --convs 0,2,4,5 --max-sessions 12 --collect FILE; "
    "python -m bench.fit_late_interaction --fit FILE",
    date="2026-12-02",
    results="Late interaction on by default: its map refitted on short chats",
    used_as=("SEARCH_LATE_INTERACTION_A", "SEARCH_LATE_INTERACTION_B", "SEARCH_LATE_INTERACTION_C"),
)
MULTILINGUAL_RERANK_MAP = Fitted(
    value=(0.0331, 2.1733, -40.3616),
    fitted_on=f"{CMRC}, passages 0-63: the 125 even questions' hybrid items (1,250) rescored by e5x-rerank v1",
    command="python -m bench.fit_multilingual --var-dir DIR --limit-passages 64",
    date="2026-12-01",
    results="e5x-rerank v1 (residual on e5-small), the multilingual stage and the Chinese floor",
    used_as=("SEARCH_MULTILINGUAL_RERANK_A", "SEARCH_MULTILINGUAL_RERANK_B", "SEARCH_MULTILINGUAL_RERANK_C"),
)

# --- chosen by a sweep

MIN_RELEVANCE = Fitted(
    value=0.01,
    fitted_on=f"{CMRC}: floors 0-0.03 lose no answer (0.035 the first that does); then real files, where a "
    "one-word query over small files scores lower ('Doylestown' over fake-text.txt 0.014) and an unrelated "
    "file's best match 0.0077: 0.01 keeps the first and drops the second",
    command="python -m bench.fit_relevance --var-dir DIR",
    date="2026-12-01",
    results="One relevance, one order, a floor, across languages",
    used_as=("MRAG_MIN_RELEVANCE",),
)
CROSS_LANGUAGE_COSINE_SHIFT = Fitted(
    value=0.08,
    fitted_on="four English files and twelve CMRC passages, 6 Chinese questions over English files, 7 English "
    "over Chinese, 7 same-language controls: shift 0 / 0.08 / 0.12 (zh->en first item 0/6 -> 3/6; 0.12 the "
    "same for hybrid, and it cost a vector control)",
    command="python -m bench.crosslang",
    date="2026-12-01",
    results="One relevance, one order, a floor, across languages",
    used_as=("SEARCH_CROSS_LANGUAGE_COSINE_SHIFT",),
)
CJK_SHARE = Fitted(
    value=0.8,
    fitted_on=f"{CMRC} and bench.crosslang's files: with a looser cut (a text under 20 % CJK counted as Latin) four "
    "CMRC lines quoting English names were shifted for every Chinese question and led vector's results (CMRC "
    "vector R@1 0.985 -> 0.929); at 0.8 such lines are mixed, and every method's CMRC figures equal the unshifted ones",
    command="python -m bench.cmrc --var-dir DIR; python -m bench.crosslang",
    date="2026-12-01",
    results="One relevance, one order, a floor, across languages",
    used_as=("retrieval.relevance.CJK_SHARE",),
)
FACTS_COMPETING = Fitted(
    value=6,
    fitted_on=f"{CMRC}: the answer's fact is its passage's best-scored one for 64 % of questions, in its top three "
    "for 79 %, top six 88 % (EverOS lets 3 compete); then LoCoMo conversations 0-5, hybrid evidence R@10 for "
    "2 / 3 / 4 / 6: 0.719 / 0.751 / 0.758 / 0.772",
    command=f"python -m bench.cmrc --var-dir DIR; MRAG_FACTS_COMPETING=N python -m bench.locomo {LOCOMO} "
    "--convs 0,1,2,3,4,5",
    date="2026-11-29",
    results="CMRC 2018 retrieval quality",
    used_as=("MRAG_FACTS_COMPETING",),
)

# --- conversation memory

TOPIC_THRESHOLD = Fitted(
    value=0.91,
    fitted_on="LoCoMo conversations 0-1: the 5th percentile of in-session gap cosines (multilingual-e5-small, "
    "means of 3 turns each side; median 0.944, 10th percentile 0.920); no tool prints them, they were read "
    "from the ingestion's boundaries",
    command=f"python -m bench.locomo {LOCOMO} --convs 0,1",
    date="2026-11-29",
    results="Design notes moved from code comments",
    used_as=("conversations.boundaries.TOPIC_THRESHOLD",),
)
DUPLICATE_COSINE = Fitted(
    value=0.97,
    fitted_on="LoCoMo conversation 0's ~760 facts: the median nearest neighbour at cosine 0.93, and 98 facts "
    "with a neighbour above 0.95 that says something else; no tool prints them",
    command=f"python -m bench.locomo {LOCOMO} --convs 0",
    date="2026-11-29",
    results="Design notes moved from code comments",
    used_as=("conversations.consolidation.DUPLICATE_COSINE",),
)

ALL = {name: value for name, value in globals().items() if isinstance(value, Fitted)}
