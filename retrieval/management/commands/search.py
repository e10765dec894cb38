import json

from django.core.management.base import BaseCommand, CommandError

from retrieval import warmup
from retrieval.request import METHODS, SearchError, parse_search_request
from retrieval.search import EngineError, search
from retrieval.search.order import PIPELINE
from retrieval.search.pipeline import explain, merged
from tenants.access import Scope
from tenants.models import KnowledgeBase, Tenant


class Command(BaseCommand):
    help = "Search a tenant's memories (same code path as the API)."

    def add_arguments(self, parser):
        parser.add_argument("query")
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--kb", action="append", help="limit to this knowledge base (repeatable)")
        parser.add_argument("--method", default="hybrid", choices=list(METHODS))
        parser.add_argument("--top-k", type=int, default=10)
        parser.add_argument("--types", default="episode,atomic_fact", help="comma-separated memory types")
        parser.add_argument("--json", action="store_true", help="print the raw JSON response")
        parser.add_argument("--explain", action="store_true",
                            help="first print the search's stages in order, which ran, and what each reads and writes")

    def handle(self, *args, **opts):
        warmup.start()  # the model loads beside the tenant lookup; the search waits for it outside its deadline
        tenant = Tenant.objects.filter(slug=opts["tenant"]).first()
        if tenant is None:
            raise CommandError(f"No tenant '{opts['tenant']}'.")
        scope = Scope(tenant, frozenset(KnowledgeBase.objects.filter(tenant=tenant).values_list("id", flat=True)),
                      False, False, "cli:search")
        body = {"query": opts["query"], "method": opts["method"], "top_k": opts["top_k"],
                "memory_types": opts["types"].split(",")}
        if opts["kb"]:
            body["filters"] = {"kb": opts["kb"]}
        ran = set()
        try:
            response = search(scope, parse_search_request(body),
                              observe=lambda stage, found, when: ran.add(stage.name))
        except (SearchError, EngineError) as exc:
            raise CommandError(str(exc))
        if opts["explain"]:
            self._explain(ran)
        if opts["json"]:
            self.stdout.write(json.dumps(response, ensure_ascii=False, indent=2))
            return
        q = response["query"]
        self.stdout.write(f"{q['method']} (answered by {q['answered_by']}) in {q['took_ms']} ms")
        for note in q["notes"]:
            self.stdout.write(f"  note: {note}")
        for item in merged(response):  # one order over every kind: the API's `rank`
            if "atomic_fact" in item:  # a fact, or foresight or an agent case or skill, which share its fields
                kind = {"agent_case": "case", "agent_skill": "skill"}.get(item.get("memory_type"), "fact")
                self.stdout.write(f"  #{item['rank']:<3} {kind:<7} {item['score']:.3f}  {item['atomic_fact']}  "
                                  f"{_where(item)}")
            elif "summary" in item:
                self.stdout.write(f"  #{item['rank']:<3} episode {item['score']:.3f}  [{item['topic_name']}] "
                                  f"{item['summary'][:160]}")
                for fact in item["atomic_facts"]:
                    self.stdout.write(f"           fact {fact['score']:.3f}  {fact['atomic_fact']}")
            elif "subject" in item:  # a profile item: what is known of a conversation's person
                self.stdout.write(f"  #{item['rank']:<3} profile {item['score']:.3f}  {item['text'][:160]}  "
                                  f"(profile of {item['user_id']})")
            else:
                self.stdout.write(f"  #{item['rank']:<3} chunk   {item['score']:.3f}  {item['text'][:160]}  "
                                  f"{_where(item)}")
        if q["weak"]:
            self.stdout.write("  Nothing answers this well.")

    def _explain(self, ran: set[str]) -> None:
        self.stdout.write("Stages, in the order they run (each result's `trail` names those that moved its score):")
        for row in explain(PIPELINE):
            self.stdout.write(f"  {row['order']:>2}. {row['stage']} {'ran' if row['stage'] in ran else 'skipped':<8} "
                              f"{row['help']}")
            self.stdout.write(f"      when {row['when']}; reads {', '.join(row['reads'])}; writes {', '.join(row['writes'])}")
        self.stdout.write("")


def _where(item):
    if not item["sources"]:
        return ""
    s = item["sources"][0]
    parts = [s.get("document_name") or s.get("message_id") or ""]
    for key in ("page", "slide", "sheet"):
        if s.get(key):
            parts.append(f"{key} {s[key]}")
    if s.get("start_time") is not None:
        parts.append(f"at {s['start_time']:.0f}s")
    return "(" + ", ".join(str(p) for p in parts if p) + ")"
