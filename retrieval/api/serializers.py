"""The search request and response, described for the OpenAPI schema (shared/DESIGN.md, the response shape).

The request is validated by retrieval.request.parse_search_request (its messages are the API's); these
serializers say the same in the schema, from the same constants. The response items are built by
retrieval.results; tests/schema_check.py validates every response of the API tests against them.
"""

from rest_framework import serializers

from retrieval.request import MAX_NEIGHBOURS, MAX_QUERY_CHARS, MAX_TOP_K, MEMORY_TYPES, METHODS


class SearchFiltersSerializer(serializers.Serializer):
    kb = serializers.ListField(child=serializers.SlugField(), required=False,
                               help_text="knowledge-base slugs (default: every KB the caller may read)")
    document_id = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False,
                                        help_text="only items from these documents")
    user_id = serializers.CharField(max_length=200, required=False, help_text="conversation memories of this user")
    session_id = serializers.CharField(max_length=200, required=False)
    valid_at = serializers.CharField(required=False, help_text="ISO date or date-time: only foresight whose "
                                                               "validity window holds then")
    agent_id = serializers.CharField(max_length=200, required=False,
                                     help_text="memories of this agent; \"*\": of every agent and of none. "
                                               "Default: only memories written under no agent (agent cases "
                                               "and skills asked for by memory_types: every agent's)")
    group_id = serializers.CharField(max_length=200, required=False, help_text="memories of this group chat")
    run_id = serializers.CharField(max_length=200, required=False, help_text="memories of this run (Mem0's run_id)")
    participant = serializers.CharField(max_length=200, required=False,
                                        help_text="a group chat's speaker: their personal episodes and own facts "
                                                  "rank first (nothing is left out)")
    metadata = serializers.DictField(required=False, help_text="{key: value}, {key: [values]} (any of them), or "
                                                               "{key: {\"gte\": 3, \"lt\": 10}} (gt, gte, lt, lte, "
                                                               "eq, in); every key must hold")


class SearchRequestSerializer(serializers.Serializer):
    query = serializers.CharField(max_length=MAX_QUERY_CHARS)
    method = serializers.ChoiceField(METHODS, default="hybrid")
    memory_types = serializers.ListField(child=serializers.ChoiceField(MEMORY_TYPES), required=False,
                                         help_text="default: episode and atomic_fact; add chunk for raw chunks")
    filters = SearchFiltersSerializer(required=False, help_text="an unknown filter is refused (400)")
    top_k = serializers.IntegerField(min_value=-1, max_value=MAX_TOP_K, default=10,
                                     help_text=f"1 to {MAX_TOP_K}; -1: everything above the similarity floor "
                                               "(vector), capped at the maximum")
    expand_context = serializers.BooleanField(default=False, help_text="add each item's parent chunk as context")
    neighbours = serializers.IntegerField(min_value=0, max_value=MAX_NEIGHBOURS, default=0,
                                          help_text="also the N child chunks before and after each item's source")
    rerank = serializers.BooleanField(required=False, allow_null=True,
                                      help_text="default: MRAG_RERANK (needs a configured reranker)")
    reference_time = serializers.CharField(required=False, allow_null=True,
                                           help_text="ISO date or date-time the question is asked at: its relative "
                                                     "dates (\"last Thursday\", \"last month\") are searched as the "
                                                     "days they name, e.g. \"last Thursday (18 May 2023)\"")


class SourceSerializer(serializers.Serializer):
    """Where an item came from: a chunk of a document (with its place in it) or a chat message."""

    type = serializers.ChoiceField(["chunk", "message"])
    document_id = serializers.IntegerField(required=False)
    document_name = serializers.CharField(required=False)
    chunk_id = serializers.IntegerField(required=False)
    parent_chunk_id = serializers.IntegerField(required=False, allow_null=True)
    page = serializers.IntegerField(required=False)
    slide = serializers.IntegerField(required=False)
    sheet = serializers.CharField(required=False)
    start_time = serializers.FloatField(required=False, help_text="seconds (transcripts)")
    end_time = serializers.FloatField(required=False)
    speaker = serializers.CharField(required=False)
    section_path = serializers.ListField(child=serializers.CharField(), required=False)
    message_id = serializers.CharField(required=False)
    session_id = serializers.CharField(required=False, allow_null=True, allow_blank=True)


class NeighbourSerializer(serializers.Serializer):
    chunk_id = serializers.IntegerField()
    ordinal = serializers.IntegerField()
    offset = serializers.IntegerField(help_text="position relative to the item's source chunk")
    text = serializers.CharField()
    page = serializers.IntegerField(required=False)
    slide = serializers.IntegerField(required=False)
    sheet = serializers.CharField(required=False)
    start_time = serializers.FloatField(required=False)
    end_time = serializers.FloatField(required=False)
    speaker = serializers.CharField(required=False)
    section_path = serializers.ListField(child=serializers.CharField(), required=False)


class ContextSerializer(serializers.Serializer):
    """Context expansion: the parent chunk (expand_context) and the neighbouring child chunks (neighbours)."""

    parent_chunk_id = serializers.IntegerField(required=False)
    text = serializers.CharField(required=False, help_text="the parent chunk's text")
    neighbours = NeighbourSerializer(many=True, required=False)


_SCORES_HELP = ("per-stage scores behind `score` (e.g. cosine, bm25, rrf, fact, episode, rerank), "
                "and `via_fact: true` for an episode shown because one of its facts matched")


class TrailStepSerializer(serializers.Serializer):
    stage = serializers.CharField(help_text="the search stage that set or changed the score "
                                            "(`manage.py search --explain` lists them in order)")
    score = serializers.FloatField()


class _ItemSerializer(serializers.Serializer):
    score = serializers.FloatField(help_text="calibrated relevance (0-1), comparable across kinds and methods")
    rank = serializers.IntegerField(required=False, min_value=1, help_text=(
        "1-based place in the one order across facts, episodes, chunks, agent memory and profile items "
        "(absent on nested facts)"))
    kb = serializers.SlugField()
    sources = SourceSerializer(many=True)
    scores = serializers.DictField(child=serializers.JSONField(), help_text=_SCORES_HELP)
    trail = TrailStepSerializer(many=True, required=False, help_text=(
        "each stage that set or changed `score`, in order: the last step's score is `score` (absent on nested facts)"))
    context = ContextSerializer(required=False)


class _MemoryItemSerializer(_ItemSerializer):
    id = serializers.UUIDField()
    topic_name = serializers.CharField(allow_blank=True)
    occurred_at = serializers.DateTimeField(allow_null=True)
    user_id = serializers.CharField(allow_null=True)
    session_id = serializers.CharField(allow_null=True)


class AtomicFactItemSerializer(_MemoryItemSerializer):
    atomic_fact = serializers.CharField()
    parent_episode_id = serializers.UUIDField(allow_null=True)
    # Foresight items (memory_types "foresight") are listed among the facts, with these fields.
    memory_type = serializers.ChoiceField(["foresight"], required=False, help_text="present on foresight items")
    valid_from = serializers.DateTimeField(required=False, help_text="foresight: when its window opens")
    valid_until = serializers.DateTimeField(required=False, help_text="foresight: when it closes (exclusive)")
    expired = serializers.BooleanField(required=False, help_text="foresight whose window has ended (demoted)")
    extraction_mode = serializers.ChoiceField(["deterministic", "llm"], required=False)
    # A question about the past ("used to", "以前") gets back the facts a listed fact superseded.
    status = serializers.ChoiceField(["superseded"], required=False, help_text=(
        "present on an older fact shown for a question about the past; current facts omit it"))
    superseded_by = serializers.UUIDField(required=False, help_text="the fact that replaced it")


class ProfileItemSerializer(serializers.Serializer):
    """One item of a conversation user's profile: what is known about one person (the subject)."""

    id = serializers.UUIDField()
    user_id = serializers.CharField()
    subject = serializers.CharField(allow_blank=True, help_text="the person it is about (a chat speaker)")
    category = serializers.CharField(help_text="name, occupation, location, family, pet, possession, preference, "
                                               "dislike, goal or interest")
    value = serializers.CharField(allow_blank=True)
    text = serializers.CharField()
    kind = serializers.ChoiceField(["explicit", "implicit"], help_text="implicit: a recurring interest")
    status = serializers.ChoiceField(["active", "superseded", "disabled"])
    extraction_mode = serializers.ChoiceField(["deterministic", "llm"], help_text="what created the item: the "
                                              "LLM (when configured) or the rules (without one, or when it failed)")
    since = serializers.DateTimeField(allow_null=True, help_text="time of the first fact behind it")
    last_seen = serializers.DateTimeField(allow_null=True, help_text="time of the latest fact behind it")
    fact_ids = serializers.ListField(child=serializers.UUIDField(), help_text="the facts it was built from")
    message_ids = serializers.ListField(child=serializers.CharField(), help_text="the messages those facts cite")
    superseded_by = serializers.UUIDField(allow_null=True, help_text="the item that replaced it")
    score = serializers.FloatField(required=False, help_text="in a search: its relevance to the query")
    rank = serializers.IntegerField(required=False, min_value=1, help_text=(
        "in a search: its place in the one order across every kind of item"))
    trail = TrailStepSerializer(many=True, required=False, help_text=(
        "in a search: each stage that set or changed `score`, in order"))


class EpisodeItemSerializer(_MemoryItemSerializer):
    summary = serializers.CharField()
    atomic_facts = AtomicFactItemSerializer(many=True, help_text="its best-matching facts")


class ChunkItemSerializer(_ItemSerializer):
    id = serializers.IntegerField()
    text = serializers.CharField()


class RawMessageSerializer(serializers.Serializer):
    """A chat message accumulated but not extracted yet."""

    message_id = serializers.CharField()
    session_id = serializers.CharField()
    user_id = serializers.CharField()
    sender = serializers.CharField(allow_blank=True)
    content = serializers.CharField()
    timestamp = serializers.DateTimeField()


class QueryEchoSerializer(serializers.Serializer):
    text = serializers.CharField()
    searched_as = serializers.CharField(required=False, help_text="the query with its relative dates resolved "
                                                                   "against reference_time, when that changed it")
    keyword_bridge = serializers.CharField(required=False, help_text="the query's words in English that the keyword "
                                                                      "channel also searched (SEARCH_QUERY_BRIDGE)")
    method = serializers.ChoiceField(METHODS)
    answered_by = serializers.ChoiceField(METHODS, help_text="agentic without an LLM answers as hybrid")
    filters_applied = serializers.DictField(child=serializers.JSONField(),
                                            help_text="the tenant, the KBs searched and the other filters")
    llm = serializers.BooleanField(help_text="whether an LLM is configured")
    notes = serializers.ListField(child=serializers.CharField())
    took_ms = serializers.FloatField()
    cpu_ms = serializers.FloatField(help_text=(
        "CPU time the search used (its request thread and index calls, the query embedding apart): what "
        "SEARCH_CPU_BUDGET_SECONDS bounds and LOCI_SEARCH_CPU_PER_MINUTE counts"))
    weak = serializers.BooleanField(help_text="true when no item reaches min_relevance: nothing answers well")
    min_relevance = serializers.FloatField(help_text="the floor below which items are left out (MRAG_MIN_RELEVANCE)")
    below_floor = serializers.IntegerField(help_text="how many items the floor left out")


class AgentMemoryItemSerializer(_MemoryItemSerializer):
    """An agent case (what an agent did about a task) or an agent skill (what it learnt from several)."""

    memory_type = serializers.ChoiceField(["agent_case", "agent_skill"])
    text = serializers.CharField()
    atomic_fact = serializers.CharField(help_text="the same as text (items share the facts' fields)")
    parent_episode_id = serializers.UUIDField(allow_null=True, help_text="a case: the episode of its MemCell")
    agent_id = serializers.CharField(allow_null=True)
    extraction_mode = serializers.ChoiceField(["deterministic", "llm"], help_text=(
        "what wrote it: the LLM (when one is configured) or the rules (without one, or when it failed); "
        "a skill is always the rules' summary of its cases"))
    steps = serializers.ListField(child=serializers.CharField(), help_text="the approach, in order")
    task = serializers.CharField(required=False, help_text="a case: the request it worked on")
    outcome = serializers.CharField(required=False, allow_blank=True, help_text="a case: how it ended")
    outcome_label = serializers.ChoiceField(["success", "failure", "mixed"], required=False)
    quality = serializers.FloatField(required=False, help_text="a case: 0-1, from its evidence")
    evidence = serializers.ListField(child=serializers.DictField(), required=False,
                                     help_text="a case: what the quality rests on (kind, message_id, text)")
    tools = serializers.ListField(child=serializers.CharField(), required=False)
    name = serializers.CharField(required=False, help_text="a skill: its name")
    when = serializers.ListField(child=serializers.CharField(), required=False, help_text="a skill: tasks it fits")
    pitfalls = serializers.ListField(child=serializers.CharField(), required=False)
    maturity = serializers.FloatField(required=False, help_text="a skill: 0-1, rises with successful reuse")
    case_ids = serializers.ListField(child=serializers.UUIDField(), required=False)


class SearchResponseSerializer(serializers.Serializer):
    episodes = EpisodeItemSerializer(many=True)
    facts = AtomicFactItemSerializer(many=True, help_text="hybrid and agentic only; empty for keyword and vector")
    chunks = ChunkItemSerializer(many=True, help_text="with memory_types including chunk")
    profiles = ProfileItemSerializer(many=True, help_text="profile items of the users in scope that bear on the query")
    raw_messages = RawMessageSerializer(many=True)
    agent_memory = AgentMemoryItemSerializer(many=True, help_text="agent cases and skills (memory_types agent_case, "
                                                                  "agent_skill, or a search naming an agent)")
    query = QueryEchoSerializer()


class EngineErrorSerializer(serializers.Serializer):
    error = serializers.CharField()
    engine = serializers.CharField(help_text="the engine that failed or did not answer in time")
