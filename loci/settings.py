"""Loci settings: one module, read from the environment (see the settings table in README.md)."""

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from common.env import env_bool, env_choice, env_float, env_int, env_list, env_rate, env_str, load_env_file

BASE_DIR = Path(__file__).resolve().parent.parent
# Settings shared by the server and every command beside it (LOCI_VAR_DIR above all): the project's
# .env, or the file LOCI_ENV_FILE names; the environment wins over it.
ENV_FILE = Path(env_str("LOCI_ENV_FILE", str(BASE_DIR / ".env")))
load_env_file(ENV_FILE)
VAR_DIR = Path(env_str("LOCI_VAR_DIR", str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)  # SQLite cannot create its file's folder

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY") or ("insecure-dev-key-change-me" if DEBUG or not env_bool("LOCI_REQUIRE_SECRET", False) else "")
if not SECRET_KEY:
    raise ImproperlyConfigured("SECRET_KEY must be set when LOCI_REQUIRE_SECRET=1")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    # Without autodiscovery: loci/urls.py imports the admin modules, so a worker or a command that
    # serves no page does not load every app's admin (and the domain actions they import).
    "django.contrib.admin.apps.SimpleAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI / Redoc assets as static files, no CDN
    "loci",
    "tenants",
    "memory",
    "ingest",
    "conversations",
    "entities",
    "retrieval",
    "webhooks",
    "portability",
    "console",
    "integrations",
]

MIDDLEWARE = [
    "loci.streaming.AsyncFileStreaming",  # outermost: it also streams WhiteNoise's static files under ASGI
    "common.tracing.TracingMiddleware",  # a span per request when tracing is on (LOCI_OTLP_ENDPOINT)
    "django.middleware.security.SecurityMiddleware",
    "tenants.forwarded.UntrustedForwardingMiddleware",  # notices a proxy LOCI_TRUSTED_PROXIES does not name
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "common.stored_text.StoredTextQueryMiddleware",  # a NUL in an /api/ query parameter is a 400
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "loci.urls"
WSGI_APPLICATION = "loci.wsgi.application"
ASGI_APPLICATION = "loci.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Database: SQLite in WAL mode under var/ unless DATABASE_URL points elsewhere.
DATABASE_URL = env_str("DATABASE_URL")
if DATABASE_URL:
    try:
        DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 60, minimum=0))}
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL is not a valid database URL: {exc}") from None
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "loci.sqlite3",
            "OPTIONS": {
                # WAL (set by loci.apps on each new connection, see common/sqlite.py) lets the web
                # process read while a worker writes; IMMEDIATE takes the write lock at BEGIN so
                # concurrent writers queue on busy_timeout instead of failing.
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
            },
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = ["tenants.sign_in.ThrottledModelBackend"]  # Django's, behind a failed-sign-in throttle
# Failed credentials per fixed window (tenants/throttle.py): past a limit, the username or address is
# refused, the right password included, until its window ends.
LOCI_AUTH_THROTTLE_WINDOW = env_int("LOCI_AUTH_THROTTLE_WINDOW", 900, minimum=1)
LOCI_SIGNIN_FAILURES_PER_USER = env_int("LOCI_SIGNIN_FAILURES_PER_USER", 10, minimum=1)
LOCI_SIGNIN_FAILURES_PER_IP = env_int("LOCI_SIGNIN_FAILURES_PER_IP", 50, minimum=1)
LOCI_API_KEY_FAILURES_PER_IP = env_int("LOCI_API_KEY_FAILURES_PER_IP", 20, minimum=1)
# Requests per API key or signed-in user (tenants/rate_limits.py), in the same cache: every API request,
# and searches apart (each one embeds a query and runs several index searches). Benchmarks set them off.
LOCI_RATE_LIMITS = {
    "user": env_rate("LOCI_RATE_LIMIT_USER", "600/min"),
    "search": env_rate("LOCI_RATE_LIMIT_SEARCH", "120/min"),
}
# CPU seconds one API key's (or user's) searches may use per minute (tenants.rate_limits.SearchCpuThrottle;
# 0: off): the request rate counts searches, this what they cost. 30 is a quarter of a 2-core server's minute;
# a typical hybrid search uses 0.03-0.1 CPU-s, the costliest the caps allow ~0.3 (bench/RESULTS.md).
LOCI_SEARCH_CPU_PER_MINUTE = env_float("LOCI_SEARCH_CPU_PER_MINUTE", 30.0, minimum=0.0)
LOCI_TRUSTED_PROXIES = env_int("LOCI_TRUSTED_PROXIES", 0, minimum=0)  # X-Forwarded-For hops to trust

# The throttle's counters must be seen by every web process: files under var/ serve the processes of
# one machine; several machines need a shared cache (LOCI_CACHE_URL=redis://host:6379/1).
LOCI_CACHE_URL = env_str("LOCI_CACHE_URL")
if not LOCI_CACHE_URL:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
                          "LOCATION": str(VAR_DIR / "cache"), "OPTIONS": {"MAX_ENTRIES": 10000}}}
elif LOCI_CACHE_URL.startswith(("redis://", "rediss://", "unix://")):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": LOCI_CACHE_URL}}
elif LOCI_CACHE_URL == "locmem://":  # one process only: tests, or a single web process
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
else:
    raise ImproperlyConfigured(f"LOCI_CACHE_URL must be empty, redis://… or locmem://, got {LOCI_CACHE_URL!r}")

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
MEDIA_ROOT = Path(env_str("LOCI_MEDIA_ROOT", str(VAR_DIR / "media")))
# Originals: files under MEDIA_ROOT, or objects in an S3-compatible bucket (django-storages). Parsers
# read a local copy of an object (ingest/originals.py), downloads stream it through the API.
LOCI_STORAGE = env_choice("LOCI_STORAGE", "filesystem", {"filesystem", "s3"})
if LOCI_STORAGE == "s3":
    if not env_str("LOCI_S3_BUCKET"):
        raise ImproperlyConfigured("LOCI_STORAGE=s3 needs LOCI_S3_BUCKET")
    # Path style (endpoint/bucket/key) is what MinIO, Ceph and moto answer without wildcard DNS.
    _S3_ADDRESSING = env_choice("LOCI_S3_ADDRESSING_STYLE", "path", {"path", "virtual", "auto"})
    _ORIGINALS = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": env_str("LOCI_S3_BUCKET"),
            "endpoint_url": env_str("LOCI_S3_ENDPOINT_URL") or None,  # unset: AWS itself
            "region_name": env_str("LOCI_S3_REGION") or None,
            # Unset: boto3's own chain (AWS_ACCESS_KEY_ID…, ~/.aws, an instance role).
            "access_key": env_str("LOCI_S3_ACCESS_KEY_ID") or None,
            "secret_key": env_str("LOCI_S3_SECRET_ACCESS_KEY") or None,
            "location": env_str("LOCI_S3_PREFIX").strip("/"),
            "addressing_style": None if _S3_ADDRESSING == "auto" else _S3_ADDRESSING,
            "default_acl": None,  # the bucket's own policy: originals are never public
            # Two uploads of one file into one KB are the same object (sha256 names); never clobber
            # a name another document still points at.
            "file_overwrite": False,
        },
    }
else:
    _ORIGINALS = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
STORAGES = {
    "default": _ORIGINALS,
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}

# --- Uploads
# MB here means 1,048,576 bytes, and every message about a size says it in the same unit.
_MAX_UPLOAD_MB = env_int("LOCI_MAX_UPLOAD_MB", 100, minimum=1)
LOCI_MAX_UPLOAD_BYTES = _MAX_UPLOAD_MB * 1024 * 1024
# Any request body, refused while it streams (ingest/upload_limits.py): it bounds what one request
# can put on the server's disk, since Django's ASGI handler stores a body before a view sees it.
LOCI_MAX_UPLOAD_REQUEST_BYTES = (
    env_int("LOCI_MAX_UPLOAD_REQUEST_MB", 2 * _MAX_UPLOAD_MB, minimum=_MAX_UPLOAD_MB) * 1024 * 1024
)
FILE_UPLOAD_HANDLERS = [
    "ingest.upload_limits.UploadLimitHandler",  # first, so it sees every chunk before it is stored
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]
DATA_UPLOAD_MAX_NUMBER_FILES = env_int("LOCI_MAX_FILES_PER_UPLOAD", 200, minimum=1)
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
# A JSON body is read into memory whole: 500 chat messages of a few KB each fit easily.
LOCI_MAX_JSON_BYTES = env_int("LOCI_MAX_JSON_MB", 10, minimum=1) * 1024 * 1024
# Django's own cap on a body read into memory (2.5 MB by default) answered a JSON batch between it
# and LOCI_MAX_JSON_MB with an HTML 400 (issue 30): the JSON limit is the one that applies. (Files
# stream to disk and are not counted; LOCI_MAX_UPLOAD_* bound them.)
DATA_UPLOAD_MAX_MEMORY_SIZE = LOCI_MAX_JSON_BYTES

# OCR runs 1.5-5 s a page on one core: 300 pages stay inside the parse stage's default time limit.
LOCI_OCR_MAX_PAGES = env_int("LOCI_OCR_MAX_PAGES", 300, minimum=0)

# --- REST framework
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tenants.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "loci.api_schema.AutoSchema",  # adds the error shape to every operation
    "DEFAULT_PAGINATION_CLASS": "common.pagination.StrictPageNumberPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "common.api_errors.exception_handler",
    "DEFAULT_THROTTLE_CLASSES": ["tenants.rate_limits.PrincipalRateThrottle", "tenants.rate_limits.SearchRateThrottle",
                                 "tenants.rate_limits.SearchCpuThrottle"],
    # Strict JSON: NaN, bad UTF-8, NUL, lone surrogates and deep nesting are 400s, not 500s further in.
    "DEFAULT_PARSER_CLASSES": [
        "common.json_parser.StrictJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Loci API",
    "DESCRIPTION": "Multi-tenant knowledge and memory platform: documents and conversations in, "
    "episodes and atomic facts out, hybrid mRAG search.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    # One name per choice set used by several fields; without these, every schema load warns.
    "ENUM_NAME_OVERRIDES": {
        "SearchMethodEnum": "retrieval.request.METHODS",  # method and answered_by
        "AgentMemoryTypeEnum": "retrieval.search.memory_kinds.AGENT_KINDS",
        "EntityTypeEnum": "entities.models.Entity.Type",
        "ExtractionModeEnum": ["deterministic", "llm"],  # what created a memory, profile item or mention
    },
    # Tags by resource (documents, memories, keys, …): the first path segment after the version.
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    # Every path is documented without a trailing slash (each route accepts both).
    "POSTPROCESSING_HOOKS": ["drf_spectacular.hooks.postprocess_schema_enums", "loci.api_schema.without_trailing_slash"],
    # The docs pages load their scripts from our static files (collectstatic, whitenoise), not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # No validator badge: it would send the schema's URL to validator.swagger.io.
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
}

# --- Celery (every key with the CELERY_ prefix is read by loci/celery.py)
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "filesystem://")
# kombu's filesystem transport with messages written whole (loci/broker.py: kombu's own loses some).
CELERY_BROKER_TRANSPORT = "loci.broker:Transport" if CELERY_BROKER_URL.startswith("filesystem") else None
_BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_TRANSPORT_OPTIONS = (
    {
        "data_folder_in": str(_BROKER_DIR / "queue"),
        "data_folder_out": str(_BROKER_DIR / "queue"),
        "processed_folder": str(_BROKER_DIR / "processed"),
        "control_folder": str(_BROKER_DIR / "control"),  # broadcast (inspect/ping); default is ./control
        "store_processed": False,
        # How often an idle worker looks for a message (kombu's default, 1 s, is each stage's worst
        # added wait); the test suite's installations look more often.
        "polling_interval": env_float("LOCI_BROKER_POLL_SECONDS", 1.0, minimum=0.01),
    }
    if CELERY_BROKER_URL.startswith("filesystem")
    else {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600, minimum=60)}
)
# Imported by a worker as it starts (and by no other process): its sweepers' and dispatcher's receivers.
CELERY_IMPORTS = ("loci.worker_receivers",)
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True  # a killed worker's task is re-delivered
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 1800, minimum=10)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 2100, minimum=20)
# A stage whose document has not moved for this long may be taken over by a re-delivered task.
LOCI_STAGE_LEASE_SECONDS = env_int("LOCI_STAGE_LEASE_SECONDS", 60, minimum=1)
# How often each worker (and `up`) looks for stages whose lease ran out, and documents waiting for
# their next stage for longer than LOCI_STALLED_QUEUE_SECONDS (their message may be lost).
LOCI_SWEEP_INTERVAL_SECONDS = env_float("LOCI_SWEEP_INTERVAL_SECONDS", 30.0, minimum=0.2)
# Conversation extraction off the request path (conversations/extraction_jobs.py): "llm" queues it to a
# worker only where a model is configured (the rules alone answer a flush in well under a second:
# bench/RESULTS.md, issue 37 item 2), "always", or "never" (every request extracts, as before).
LOCI_ASYNC_EXTRACTION = env_choice("LOCI_ASYNC_EXTRACTION", "llm", {"llm", "always", "never"})
# A running extraction job renews its lease every third of this; one not renewed for this long (its
# worker died) is taken over. Longer than a heartbeat can be late, far shorter than a flush's deadline.
LOCI_EXTRACTION_LEASE_SECONDS = env_float("LOCI_EXTRACTION_LEASE_SECONDS", 60.0, minimum=1.0)
# The longest a `wait` request (POST /memories…, ?wait=true) may ask to be held for its extraction.
LOCI_EXTRACTION_WAIT_MAX_SECONDS = env_float("LOCI_EXTRACTION_WAIT_MAX_SECONDS", 300.0, minimum=1.0)
LOCI_STALLED_QUEUE_SECONDS = env_int("LOCI_STALLED_QUEUE_SECONDS", 900, minimum=1)
# How long a stage retries an engine (embedding server, Milvus, OpenSearch, database) that does not
# answer, with backoff, before the document fails with a reason naming it.
LOCI_ENGINE_RETRY_SECONDS = env_float("LOCI_ENGINE_RETRY_SECONDS", 300.0, minimum=0.0)
# The reflection pass over conversation memory (conversations/tasks.py, the task still registered as
# ingest.tasks.reflect_memories): how often `up`'s clock (conversations/reflection_timer.py) and
# Celery beat, where one runs, queue it (daily; 0: never, and `manage.py reflect` runs it by hand)
# and the seconds one pass may take.
LOCI_REFLECT_INTERVAL_SECONDS = env_float("LOCI_REFLECT_INTERVAL_SECONDS", 86400.0, minimum=0.0)
LOCI_REFLECT_BUDGET_SECONDS = env_float("LOCI_REFLECT_BUDGET_SECONDS", 120.0, minimum=1.0)
CELERY_BEAT_SCHEDULE = ({"reflect-memories": {"task": "ingest.tasks.reflect_memories",
                                              "schedule": LOCI_REFLECT_INTERVAL_SECONDS}}
                        if LOCI_REFLECT_INTERVAL_SECONDS else {})
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# --- Pluggable backends (common/backends.py), chosen like CACHES: per kind, named aliases of a dotted
# BACKEND path and its OPTIONS, with a `default` alias; one entry on its own is the default alias.
# --- `manage.py up`: where the web server listens, and the worker's processes
LOCI_HOST = env_str("LOCI_HOST", "127.0.0.1")
LOCI_PORT = env_int("LOCI_PORT", 8000, minimum=1, maximum=65535)
LOCI_WORKER_CONCURRENCY = env_int("LOCI_WORKER_CONCURRENCY", 2, minimum=1)
# What `up` and its workers share on this machine: each worker's heartbeat file (workers/) and
# `up`'s own record of its children (up.json), read by /healthz and the sweeper.
LOCI_RUN_DIR = VAR_DIR / "run"
# Each worker beats this often; one idle and silent for LOCI_WORKER_STALE_SECONDS (or holding one task
# past CELERY_TASK_TIME_LIMIT plus that) is stale, and `up` kills and restarts it.
LOCI_WORKER_HEARTBEAT_SECONDS = env_float("LOCI_WORKER_HEARTBEAT_SECONDS", 5.0, minimum=0.2)
LOCI_WORKER_STALE_SECONDS = env_float("LOCI_WORKER_STALE_SECONDS", 60.0, minimum=1.0)

# --- Index projections, chosen like CACHES: a dotted BACKEND path and its OPTIONS.
ISOLATION_DEFAULT = env_choice("LOCI_ISOLATION_DEFAULT", "shared", {"shared", "exclusive"})
MILVUS_URI = env_str("MILVUS_URI")
# Unset: a free port, picked when the embedded server starts and recorded next to var/milvus.db.
MILVUS_LITE_PORT = env_int("MILVUS_LITE_PORT", 0, minimum=0, maximum=65535)
if 0 < MILVUS_LITE_PORT < 1024:
    raise ImproperlyConfigured(f"MILVUS_LITE_PORT must be 1024-65535 (or unset), got {MILVUS_LITE_PORT}")
OPENSEARCH_URL = env_str("OPENSEARCH_URL")

# Where the Milvus Lite backend keeps its data (and where an installation indexed on it before the
# embedded default had it: `up`, `reconcile` and /healthz say when that one still awaits `reindex`).
MILVUS_LITE_PATH = VAR_DIR / "milvus.db"
LOCI_VECTOR_INDEX = {
    # The default without MILVUS_URI: vectors in a SQLite file, scored inside each process (no server).
    # LOCI_VECTOR_BACKEND=retrieval.backends.milvus.MilvusVectorIndex without MILVUS_URI selects
    # Milvus Lite, a server process started on demand over var/milvus.db.
    "BACKEND": env_str("LOCI_VECTOR_BACKEND", "retrieval.backends.milvus.MilvusVectorIndex" if MILVUS_URI
                       else "retrieval.backends.sqlite_vectors.SqliteVectorIndex"),
    "OPTIONS": {
        "path": str(VAR_DIR / "vectors.sqlite3"),  # the embedded default's file (each build: vectors.bN.sqlite3)
        "uri": MILVUS_URI,
        "token": env_str("MILVUS_TOKEN"),
        "lite_path": str(MILVUS_LITE_PATH),
        "lite_port": MILVUS_LITE_PORT,
        "collection_prefix": env_str("MILVUS_COLLECTION_PREFIX", "loci"),
        "index_type": env_choice("MILVUS_INDEX_TYPE", "IVF_FLAT", {"FLAT", "IVF_FLAT", "HNSW"}),
        # Strong: a row is searchable as soon as it is indexed. Bounded skips a server's wait for
        # the next time tick on every search, at the price of a few seconds' staleness.
        "consistency_level": env_choice("MILVUS_CONSISTENCY_LEVEL", "Strong",
                                        {"Strong", "Bounded", "Session", "Eventually"}),
        # The embedded index's approximate path (retrieval/backends/coarse.py): a partition of at
        # least this many rows is searched through an IVF when more than EXACT_ROWS of its rows pass
        # the filter (0: always exact); PROBE_SHARE of its lists are read when every row passes, CANDIDATES x
        # top_k proposals are rescored exactly.
        "approximate_rows": env_int("LOCI_VECTOR_APPROXIMATE_ROWS", 50_000, minimum=0),
        "exact_rows": env_int("LOCI_VECTOR_EXACT_ROWS", 20_000, minimum=0),
        "probe_share": env_float("LOCI_VECTOR_PROBE_SHARE", 0.1, minimum=0.001, maximum=1.0),
        "candidates": env_int("LOCI_VECTOR_CANDIDATES", 4, minimum=1),
    },
}
LOCI_KEYWORD_INDEX = {
    # The default without OPENSEARCH_URL: tantivy indexes in var/keyword-index, searched inside each
    # process. LOCI_KEYWORD_BACKEND=retrieval.backends.sqlite_fts.SqliteKeywordIndex selects SQLite FTS5
    # (var/keyword.sqlite3: where an installation kept its keyword rows before tantivy was the default).
    "BACKEND": env_str(
        "LOCI_KEYWORD_BACKEND",
        "retrieval.backends.opensearch.OpenSearchKeywordIndex" if OPENSEARCH_URL
        else "retrieval.backends.tantivy_keywords.TantivyKeywordIndex",
    ),
    "OPTIONS": {
        "directory": str(VAR_DIR / "keyword-index"),  # tantivy's (each build: keyword-index.bN)
        "path": str(VAR_DIR / "keyword.sqlite3"),  # FTS5's (each build: keyword.bN.sqlite3)
        "url": OPENSEARCH_URL,
        "index_prefix": env_str("OPENSEARCH_INDEX_PREFIX", "loci"),
        "verify_certs": env_bool("OPENSEARCH_VERIFY_CERTS", True),
    },
}

# Online reindex (retrieval/builds.py): which build of the indexes the default aliases serve. Every
# app process must see the same file (several hosts: put it on shared storage, e.g. the media volume).
LOCI_INDEX_STATE = Path(env_str("LOCI_INDEX_STATE", str(VAR_DIR / "index-builds.json")))
# After switching to a new build, how long the old one is kept for searches already under way.
LOCI_REINDEX_DRAIN_SECONDS = env_float("LOCI_REINDEX_DRAIN_SECONDS", 5.0, minimum=0.0)

# --- Models: embeddings, reranker, LLM (loci/model_settings.py, read here: after the .env above), and
# where they keep their files.
from loci.model_settings import *  # noqa: E402,F403
# Where e5-small-onnx's model files are converted to at first use (~110 MB, a few seconds), keyed by
# the source weights' hash and the converter version; several installations may share one.
LOCI_MODELS_DIR = Path(env_str("LOCI_MODELS_DIR", str(VAR_DIR / "models"))).resolve()
# One file for every process of an installation (web, workers, commands), so it belongs with the var dir.
EMBEDDING_CACHE_PATH = Path(env_str("EMBEDDING_CACHE_PATH", str(VAR_DIR / "embedding-cache.sqlite3"))).resolve()

# Webhooks (webhooks/): hosts (or host:port) a webhook may call although they resolve to a private or
# loopback address (refused otherwise: no request forgery into the private network); the time one
# POST may take; the attempts before a delivery is given up (back-off 10 s … 12 h: about 1.5 days at
# 12); how often each worker looks for new events and due deliveries.
LOCI_WEBHOOK_ALLOWED_HOSTS = env_list("LOCI_WEBHOOK_ALLOWED_HOSTS")
LOCI_WEBHOOK_TIMEOUT = env_float("LOCI_WEBHOOK_TIMEOUT", 10.0, minimum=1.0, maximum=60.0)
LOCI_WEBHOOK_MAX_ATTEMPTS = env_int("LOCI_WEBHOOK_MAX_ATTEMPTS", 12, minimum=1, maximum=50)
LOCI_WEBHOOK_POLL_SECONDS = env_float("LOCI_WEBHOOK_POLL_SECONDS", 2.0, minimum=0.1)

# Document facts read alone: "the company", "该公司" and a he/she with one person before it become the
# name (extraction/document_coreference.DocumentReferents) before they are indexed. Measured on bench.docqa
# with and without (bench/RESULTS.md, issue 28, session 9).
EXTRACTION_DOCUMENT_COREFERENCE = env_bool("EXTRACTION_DOCUMENT_COREFERENCE", True)

# --- The search's knobs (loci/search_settings.py, read here: after the .env above)
from loci.search_settings import *  # noqa: E402,F403

# --- Metrics (common/metrics.py, GET /metrics). Counters and histograms of every process sharing this
# folder (the web server, each Celery pool process, `ingest --wait`) are summed at scrape time by
# prometheus_client's multiprocess mode, which reads PROMETHEUS_MULTIPROC_DIR when it is first imported:
# settings always load before it, and always set it, so an inherited value never points a process
# of one var dir at another's files.
LOCI_METRICS_DIR = Path(env_str("LOCI_METRICS_DIR", str(VAR_DIR / "metrics"))).resolve()
LOCI_METRICS_DIR.mkdir(parents=True, exist_ok=True)
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(LOCI_METRICS_DIR)
# A Prometheus server sends it as `Authorization: Bearer …`; staff sessions need none.
LOCI_METRICS_TOKEN = env_str("LOCI_METRICS_TOKEN")

# --- Tracing (common/tracing.py): OpenTelemetry spans of requests, searches, documents and LLM calls,
# sent to this OTLP/HTTP traces URL (e.g. http://localhost:4318/v1/traces). Empty: no tracing at all.
LOCI_OTLP_ENDPOINT = env_str("LOCI_OTLP_ENDPOINT")
LOCI_OTEL_SERVICE_NAME = env_str("LOCI_OTEL_SERVICE_NAME", "loci")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "json": {"()": "common.logging.JsonFormatter"},
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": env_choice("LOG_FORMAT", "plain", {"plain", "json"})}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"jieba": {"level": "WARNING"}, "httpx": {"level": "WARNING"}},
}
