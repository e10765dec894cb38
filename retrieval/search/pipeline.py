"""The search as a declared pipeline: an ordered list of stages, each a small component that says what
it reads and writes, run one after another over one `Found` (issue 38).

A stage is an object with
- `name` — how the trail, the "why" view, tracing and `manage.py search --explain` call it;
- `help` — one line on what it does, for people;
- `reads` / `writes` — the fields of `Found` (and the response lists) it uses and changes: a test runs
  every stage of a real search and holds each to its declaration;
- `applies` — whether it runs for this request and these settings, declared as a `When` the runner
  reads here, without calling into the stage's module (a stage that does not apply leaves no trace);
- `run(found)` — does its work in place.

The trail: after every stage, each top-level result whose `score` it set or changed gets a step
`{"stage": name, "score": score}` in its `trail`, so the last step is always the number on the
result's badge, and every step to it is named (the "why" view reads it).

Each stage is declared in the module that does its work; retrieval.search.order puts them in their
one order. The stages over the lists every stage shares are declared here, beside the runner: `cut`,
`floor` and `ranks` (one merged order over every list, below), and those whose work is
retrieval.results' (`context`, `neighbours`, `raw_messages`). Modelled on Haystack 2.x components
(declared inputs and outputs, one place that wires them), kept to plain functions over one object
since the order is fixed per method.
"""

import re
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, Protocol

from django.conf import settings

from common import tracing
from retrieval import results
from retrieval.request import SearchRequest

LISTS = ("facts", "episodes", "chunks", "agent_memory", "profiles")  # every ranked list of a response
RESULTS = ("facts", "episodes", "chunks")  # the lists the retrieval methods fill
HYBRIDS = ("hybrid", "agentic")  # the methods whose candidates the rescoring stages reorder


@dataclass
class Found:
    """What one search carries from stage to stage."""

    run: object  # retrieval.search.Run: scope, request, permission filter, engine calls (the retrieve stage's)
    req: SearchRequest  # as searched (relative dates resolved, the candidate list widened)
    asked: str  # the query as the caller wrote it
    limit: int  # how many items per list the caller asked for
    response: dict = field(default_factory=dict)
    method_used: str = ""  # which method answered (agentic falls back to hybrid)
    notes: list[str] = field(default_factory=list)
    floor: float = 0.0
    below: dict = field(default_factory=partial(dict, dropped=0, best=None))
    weak: bool = False
    cpu_seconds: float = 0.0
    bridged: str = ""  # the query's words in the other language, searched by the keyword channel
    script: str = ""  # the query's script (retrieval.relevance.script), read once by the stages' conditions
    scope: object = None  # tenants.access.Scope: whose search, what it may read


@dataclass(frozen=True)
class When:
    """When a stage runs, declared: every condition given must hold (none given: always).

    The runner reads it here, so a stage that does not apply is never entered."""

    methods: tuple[str, ...] = ()  # the request's method is one of these
    setting: str = ""  # this setting is on
    weight: str = ""  # this setting, a weight, is under 1
    asks: str = ""  # the request asks for it: this field of the request is set…
    default: str = ""  # …or, where the request leaves it None, this setting is on
    filter: str = ""  # the request filters by this
    script: str = ""  # the query is in this script (Found.script)
    pattern: re.Pattern | None = None  # the query matches this

    def __call__(self, found: "Found") -> bool:
        req = found.req
        if self.methods and req.method not in self.methods:
            return False
        if self.setting and not getattr(settings, self.setting):
            return False
        if self.weight and not getattr(settings, self.weight) < 1.0:
            return False
        if self.asks:
            asked = getattr(req, self.asks)
            if not (asked or (asked is None and self.default and getattr(settings, self.default))):
                return False
        if self.filter and not req.filters.get(self.filter):
            return False
        if self.script and found.script != self.script:
            return False
        return self.pattern is None or self.pattern.search(req.query) is not None

    def __str__(self) -> str:
        parts = [f"method {' or '.join(self.methods)}" if self.methods else "", self.setting,
                 f"{self.weight} < 1" if self.weight else "",
                 (f"{self.asks} (or {self.default})" if self.default else self.asks) if self.asks else "",
                 f"filters.{self.filter}" if self.filter else "", f"a {self.script} query" if self.script else "",
                 "a query matching its pattern" if self.pattern is not None else ""]
        return ", ".join(p for p in parts if p) or "always"


ALWAYS = When()


class Stage(Protocol):
    name: str
    help: str
    reads: tuple[str, ...]
    writes: tuple[str, ...]

    applies: When

    def run(self, found: Found) -> None: ...


def record_trail(response: dict, stage: str) -> None:
    """Give each top-level result whose score this stage set or changed a step naming it.

    A new list, not an append: a stage that copies an item (the reranker) shares its trail list."""
    for key in LISTS:
        for item in response.get(key, []):
            score = item.get("score")
            if not isinstance(score, (int, float)):
                continue
            trail = item.get("trail") or []
            if not trail or abs(trail[-1]["score"] - score) > 5e-7:
                item["trail"] = [*trail, {"stage": stage, "score": round(float(score), 6)}]


Observer = Callable[[Stage, Found, str], None]  # (stage, found, "before" | "after"): tests watch each stage


def run_stages(stages: tuple[Stage, ...], found: Found, *, observe: Observer | None = None) -> Found:
    """Run `stages` in order over `found`, each in its own tracing span, leaving the trail."""
    for stage in stages:
        if not stage.applies(found):
            continue
        if observe:
            observe(stage, found, "before")
        with tracing.span(f"search.{stage.name}"):
            stage.run(found)
        record_trail(found.response, stage.name)
        if observe:
            observe(stage, found, "after")
    return found


def explain(stages: tuple[Stage, ...], found: Found | None = None) -> list[dict]:
    """The pipeline as rows people read: order, name, what it does, what it reads and writes, and
    (given a search's `found`) whether it ran."""
    rows = []
    for number, stage in enumerate(stages, start=1):
        row = {"order": number, "stage": stage.name, "help": stage.help, "when": str(stage.applies),
               "reads": list(stage.reads), "writes": list(stage.writes)}
        if found is not None:
            row["runs"] = stage.applies(found)
        rows.append(row)
    return rows


# --- the lists: one merged order over a response's facts, episodes, chunks, agent memory and profiles,
# and the floor.
# Every item's `score` is its calibrated relevance (retrieval.relevance), so the lists can be ranked
# against each other: each top-level item gets `rank` (1 = best) across all of them (foresight is
# among the facts, agent cases and skills in `agent_memory`, profile items in `profiles`). The lists
# keep their shape (shared/DESIGN.md); facts nested under an episode are its supporting detail and
# are not ranked. Ties keep the lists' order (facts, episodes, chunks, agent memory, profiles, each best first).


def drop_below(response: dict, floor: float) -> dict:
    """Leave out the items under `floor`; return how many there were and the best relevance seen."""
    seen = [it["score"] for key in LISTS for it in response.get(key, [])]
    for key in LISTS:
        if key in response:
            response[key] = [it for it in response[key] if it["score"] >= floor]
    return {"dropped": sum(s < floor for s in seen), "best": max(seen, default=None)}


def merged(response: dict) -> list[dict]:
    """The response's top-level items, best first: the order `rank` numbers."""
    items = [it for key in LISTS for it in response.get(key, [])]
    return sorted(items, key=lambda it: it["score"], reverse=True)


def assign_ranks(response: dict) -> None:
    for rank, item in enumerate(merged(response), start=1):
        item["rank"] = rank


class Cut:
    name = "cut"
    help = "each list back to the top_k asked for (the stages above reordered a wider candidate list)"
    reads = ("limit", *RESULTS)
    writes = LISTS
    applies = ALWAYS

    def run(self, found: Found) -> None:
        for key in LISTS:
            if key in found.response:
                found.response[key] = found.response[key][:found.limit]


class Floor:
    name = "floor"
    help = "hybrid's and agentic's results under MRAG_MIN_RELEVANCE are left out, and a weak answer is said so"
    reads = ("req", *LISTS)
    writes = (*LISTS, "floor", "below", "weak", "notes")
    applies = ALWAYS

    def run(self, found: Found) -> None:
        # Keyword answers what matches a term and vector keeps VECTOR_MIN_SIMILARITY, since a short
        # English query's relevant cosine is lower than CMRC's, which the map was fitted on
        # (bench/RESULTS.md, "One relevance").
        found.floor = settings.MRAG_MIN_RELEVANCE if found.req.method in HYBRIDS else 0.0
        found.below = drop_below(found.response, found.floor)
        found.weak = not any(found.response.get(key) for key in LISTS)
        if found.weak and found.below["dropped"]:
            found.notes = [*found.notes, f"Nothing answers this well: the best of {found.below['dropped']} results "
                                         f"has relevance {found.below['best']:.3f}, under the floor "
                                         f"{found.floor:g} (MRAG_MIN_RELEVANCE)."]


class Ranks:
    name = "ranks"
    help = "one order over every kind: each top-level result's rank"
    reads = LISTS
    writes = LISTS
    applies = ALWAYS

    def run(self, found: Found) -> None:
        assign_ranks(found.response)


# --- the stages whose work is retrieval.results'

class Context:
    name = "context"
    help = "each fact and episode gets the messages around what it cites (expand_context)"
    reads = ("req", "facts", "episodes")
    writes = ("facts", "episodes")
    applies = When(asks="expand_context")

    def run(self, found: Found) -> None:
        results.add_context(found.response["facts"] + found.response["episodes"])


class Neighbours:
    name = "neighbours"
    help = "the chunks and messages next to each result, in reading order (neighbours)"
    reads = ("req", *RESULTS)
    writes = RESULTS
    applies = When(asks="neighbours")

    def run(self, found: Found) -> None:
        response = found.response
        results.add_neighbours(response["facts"] + response["episodes"] + response.get("chunks", []),
                               found.req.neighbours)


class RawMessages:
    name = "raw_messages"
    help = "messages not yet made into memories (a session still open), in the search's scope"
    reads = ("req",)
    writes = ("raw_messages",)
    applies = ALWAYS

    def run(self, found: Found) -> None:
        found.response["raw_messages"] = results.raw_messages(found.run.scope, found.run.base.kb_ids,
                                                              found.req.filters)
