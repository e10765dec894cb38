"""Agent memory, measured on bench/agent_memory_data.py (labels written before the first run), deterministic mode.

In a fresh database and index (a temporary LOCI_VAR_DIR; the configured backends), each transcript is
posted and flushed under its agent (user "u-bench", one session each, a day apart), each team chat
under its group; then:
- cases: precision and recall of "this transcript yields an agent case", and how often the case's
  outcome label (success / failure / mixed) and its tool sequence match the labels;
- skills: each skill written is matched to the expected skill most of its cases come from (a match
  counts once); precision = matched / written, recall = matched / expected;
- maturity: each matched skill's maturity before and after the scripted feedback (POST-equivalent
  record_feedback), next to what the rule gives;
- rank 1: for each question, the search the API runs (hybrid, filters.agent_id, memory_types the
  kind asked for; a participant question with filters.group_id and filters.participant), is the
  first item the labelled case, skill or the participant's own personal episode or fact? Participant
  questions are also run without filters.participant, to show what the preference adds.

    PYTHONPATH=. flock /tmp/loci-heavy.lock nice -n 5 .venv/bin/python bench/agent_memory.py [--json]
"""

import os
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta, timezone

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "loci.settings")
if not os.environ.get("DATABASE_URL"):
    os.environ["LOCI_VAR_DIR"] = tempfile.mkdtemp(prefix="loci-bench-agent-")
os.environ.setdefault("LLM_ENABLED", "0")
django.setup()

from django.core.management import call_command  # noqa: E402

from bench.agent_memory_data import EXPECTED_SKILLS, FEEDBACK, QUESTIONS, TEAM_CHATS, TRANSCRIPTS  # noqa: E402

T0 = datetime(2024, 5, 6, 9, 0, tzinfo=timezone.utc)
USER = "u-bench"


def post(scope, kb, session, turns, *, start, agent_id="", group_id="", user_id=USER):
    from conversations.actions import accumulate_messages, flush_session

    messages = [{"message_id": f"{session}-{i}", "role": role, "sender_name": sender, "sender_id": sender,
                 "content": text, "timestamp": start + timedelta(minutes=i)}
                for i, (role, sender, text) in enumerate(turns)]
    accumulate_messages(scope, kb, user_id=user_id, session_id=session, messages=messages, agent_id=agent_id,
                        group_id=group_id)
    flush_session(scope, kb, user_id=user_id, session_id=session)


def search(scope, query, filters, memory_types):
    from retrieval.request import parse_search_request
    from retrieval.search import search as run

    return run(scope, parse_search_request({"query": query, "method": "hybrid", "top_k": 10,
                                            "memory_types": memory_types, "filters": filters}))


def main() -> int:
    from conversations.skills import record_feedback
    from memory.models import CaseCluster, Memory
    from tenants.access import Scope
    from tenants.models import KnowledgeBase, Tenant

    call_command("migrate", verbosity=0)
    tenant = Tenant.objects.create(slug="bench-agent", name="Bench agent memory")
    kb = KnowledgeBase.objects.create(tenant=tenant, slug="conversations", name="Conversations")
    scope = Scope(tenant, frozenset({kb.pk}), True, True, "bench")
    began = time.perf_counter()
    for n, (name, t) in enumerate(TRANSCRIPTS.items()):
        post(scope, kb, name, t["turns"], start=T0 + timedelta(days=n), agent_id=t["agent"])
    for n, (name, chat) in enumerate(TEAM_CHATS.items()):
        post(scope, kb, name, [("", who, text) for who, text in chat["turns"]], start=T0 + timedelta(days=30 + n),
             group_id=chat["group"], user_id="team-owner")
    ingest_s = time.perf_counter() - began

    # --- cases
    cases = {m.session_id: m for m in Memory.objects.filter(kind="agent_case")}
    tp = sum(1 for k, t in TRANSCRIPTS.items() if t["case"] and k in cases)
    fp = sum(1 for k, t in TRANSCRIPTS.items() if not t["case"] and k in cases)
    fn = sum(1 for k, t in TRANSCRIPTS.items() if t["case"] and k not in cases)
    labelled = [k for k, t in TRANSCRIPTS.items() if t["case"] and k in cases]
    label_ok = [k for k in labelled if cases[k].metadata["outcome_label"] == TRANSCRIPTS[k]["label"]]
    tools_ok = [k for k in labelled if list(dict.fromkeys(cases[k].metadata["tools"])) == TRANSCRIPTS[k]["tools"]]
    wrong_labels = {k: (cases[k].metadata["outcome_label"], cases[k].metadata["quality"], TRANSCRIPTS[k]["label"])
                    for k in labelled if k not in label_ok}

    # --- skills
    session_of = {str(m.pk): m.session_id for m in cases.values()}
    matched, written = {}, []
    for skill in Memory.objects.filter(kind="agent_skill"):
        members = [session_of.get(pk) for pk in skill.metadata["case_ids"]]
        votes = Counter(TRANSCRIPTS[s]["skill"] for s in members if s)
        best, _ = votes.most_common(1)[0]
        written.append({"name": skill.metadata["name"][:60], "agent": skill.agent_id, "cases": members,
                        "expected": best, "maturity": skill.metadata["maturity"]})
        if best and best not in matched and EXPECTED_SKILLS[best][0] == skill.agent_id:
            matched[best] = skill
    # Purity: of the cases each written skill's cluster holds, how many carry that skill's label.
    members_all = [(w["expected"], TRANSCRIPTS[c]["skill"]) for w in written for c in w["cases"] if c]
    purity = sum(1 for want, got in members_all if want == got) / len(members_all) if members_all else 0.0
    skill_p = len(matched) / len(written) if written else 0.0
    skill_r = len(matched) / len(EXPECTED_SKILLS)

    # --- maturity after scripted feedback
    maturity = {}
    for key, outcomes in FEEDBACK.items():
        skill = matched.get(key)
        if skill is None:
            maturity[key] = "no skill"
            continue
        before = skill.metadata["maturity"]
        s, f = skill.metadata["successes"], skill.metadata["failures"]
        for outcome in outcomes:
            skill = record_feedback(skill, outcome, note="bench", actor="bench")
        s += outcomes.count("success")
        f += outcomes.count("failure")
        maturity[key] = {"before": before, "after": skill.metadata["maturity"], "rule": round((s + 1) / (s + f + 2), 3),
                         "feedback": outcomes}

    # --- rank 1
    rows = []
    for question, agent_id, kind, answer in QUESTIONS:
        if kind == "participant":
            _, chat, who = answer
            group = TEAM_CHATS[chat]["group"]
            mine = {str(pk) for pk, meta, text in Memory.objects.filter(group_id=group).values_list(
                "pk", "metadata", "text")
                if meta.get("participant") == who or meta.get("subject") == who or text.startswith(f"{who}:")}
            for with_participant in (True, False):
                filters = {"group_id": group, **({"participant": who} if with_participant else {})}
                body = search(scope, question, filters, ["episode", "atomic_fact"])
                ranked = sorted(body["episodes"] + body["facts"], key=lambda it: it.get("rank", 99))
                rows.append({"q": question, "kind": "personal" + ("" if with_participant else " (no participant)"),
                             "hit": bool(ranked) and ranked[0]["id"] in mine})
            continue
        body = search(scope, question, {"agent_id": agent_id}, [kind])
        items = body["agent_memory"]
        if answer[0] == "case":
            wanted = str(cases[answer[1]].pk) if answer[1] in cases else None
        else:
            wanted = str(matched[answer[1]].pk) if answer[1] in matched else None
        rows.append({"q": question, "kind": answer[0], "hit": bool(items) and items[0]["id"] == wanted})
        # The same question judged on the one order across every kind (facts, episodes, profiles too).
        first = min((it for key in ("facts", "episodes", "chunks", "agent_memory", "profiles") for it in body.get(key, [])),
                    key=lambda it: it.get("rank", 99), default=None)
        rows.append({"q": question, "kind": f"{answer[0]} (rank 1 of every kind)",
                     "hit": first is not None and first["id"] == wanted})
    by_kind: dict[str, list[bool]] = {}
    for row in rows:
        by_kind.setdefault(row["kind"], []).append(row["hit"])

    report = {
        "ingest_s": round(ingest_s, 1),
        "cases": {"expected": sum(t["case"] for t in TRANSCRIPTS.values()), "found": len(cases),
                  "precision": round(tp / (tp + fp), 3) if tp + fp else 0.0, "recall": round(tp / (tp + fn), 3),
                  "outcome_label_accuracy": f"{len(label_ok)}/{len(labelled)}",
                  "tool_sequence_accuracy": f"{len(tools_ok)}/{len(labelled)}", "wrong_labels": wrong_labels},
        "skills": {"expected": len(EXPECTED_SKILLS), "written": len(written), "matched": sorted(matched),
                   "precision": round(skill_p, 3), "recall": round(skill_r, 3), "cluster_purity": round(purity, 3),
                   "clusters": sorted([c.case_ids.__len__() for c in CaseCluster.objects.all()], reverse=True),
                   "detail": written},
        "maturity_after_feedback": maturity,
        "rank1": {kind: f"{sum(hits)}/{len(hits)}" for kind, hits in by_kind.items()},
        "misses": [r["q"] for r in rows if not r["hit"]],
    }
    import json

    print(json.dumps(report, ensure_ascii=False, indent=None if "--json" in sys.argv else 2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
