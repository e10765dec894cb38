"""Examples for the search endpoint's schema, taken from real responses (a LoCoMo chat and a PDF handbook).

tests/test_api_schema.py validates each against the schema, so an example cannot drift from the shape.
"""

HYBRID_REQUEST = {
    "query": "When did Caroline go to the LGBTQ support group?",
    "method": "hybrid",
    "top_k": 10,
    "filters": {"kb": ["docs"], "user_id": "u1"},
}

KEYWORD_CHUNKS_REQUEST = {
    "query": "annual leave carry over",
    "method": "keyword",
    "memory_types": ["episode", "chunk"],
    "filters": {"document_id": [42]},
    "top_k": 5,
    "neighbours": 1,
}

_FACT = {
    "id": "b18c0404-7cfd-5756-a0ca-6e14fcfae5c6",
    "atomic_fact": "Caroline went to a LGBTQ support group yesterday (7 May 2023) and it was so powerful.",
    "topic_name": "Caroline and Melanie: support, kids, work",
    "score": 0.140543,
    "parent_episode_id": "4759ff4b-a2ef-5da8-b16e-af7ae29addaa",
    "kb": "docs",
    "occurred_at": "2023-05-07T00:00:00+00:00",
    "user_id": "u1",
    "session_id": "s1",
    "sources": [{"type": "message", "message_id": "m3", "session_id": "s1"}],
    "scores": {"cosine": 0.864622, "bm25": 1.361192, "fused": 0.250771, "fact": 0.250771, "episode": 0.030316,
               "alpha": 0.5, "final": 0.140543},
}

_HANDBOOK_SOURCE = {"type": "chunk", "document_id": 42, "document_name": "handbook.pdf", "chunk_id": 1187,
                    "parent_chunk_id": 1180, "page": 4, "section_path": ["Leave", "Annual leave"]}

HYBRID_RESPONSE = {
    "episodes": [{
        "id": "0c5d1a7e-3f5b-5c0e-9a43-2b8f1f6de901",
        "summary": "Annual leave: employees accrue 25 days a year; up to 5 unused days carry over to March.",
        "topic_name": "Leave > Annual leave",
        "score": 0.061207,
        "kb": "docs",
        "occurred_at": None,
        "user_id": None,
        "session_id": None,
        "atomic_facts": [{
            "id": "5e0f8c1b-77a2-5d9e-8a0b-1c2d3e4f5a6b",
            "atomic_fact": "Up to 5 unused days of annual leave carry over to the end of March.",
            "topic_name": "Leave > Annual leave",
            "score": 0.052871,
            "parent_episode_id": "0c5d1a7e-3f5b-5c0e-9a43-2b8f1f6de901",
            "kb": "docs",
            "occurred_at": None,
            "user_id": None,
            "session_id": None,
            "sources": [_HANDBOOK_SOURCE],
            "scores": {"cosine": 0.801214, "bm25": 0.0, "fused": 0.075442},
        }],
        "sources": [_HANDBOOK_SOURCE],
        "scores": {"cosine": 0.812006, "bm25": 2.104391, "rrf": 0.032266, "fused": 0.061207},
    }],
    "facts": [_FACT],
    "chunks": [],
    "profiles": [],
    "raw_messages": [],
    "agent_memory": [],
    "query": {
        "text": "When did Caroline go to the LGBTQ support group?",
        "method": "hybrid",
        "answered_by": "hybrid",
        "filters_applied": {"tenant": "acme", "kb": ["docs"], "user_id": "u1",
                            "memory_types": ["episode", "atomic_fact"]},
        "llm": False,
        "notes": [],
        "took_ms": 46.4,
        "cpu_ms": 21.7,
        "weak": False,
        "min_relevance": 0.01,
        "below_floor": 0,
    },
}
