"""What candidate questions cost to write: a tenant's rows rewritten in place (`reindex(tenant)`) with
CANDIDATE_QUESTIONS off, then on, over data a benchmark already ingested (its `--var-dir`).

    python -m bench.question_cost --var-dir DIR [--tenant docqa] [--keep]

The two passes write the same source rows (their vectors are embedding-cache hits after the first
pass); the difference is the questions: generated, embedded and written to both indexes. With
`--keep` the questions stay (a following `--reuse` run of the benchmark searches them); without it,
a last pass with the setting off removes them again.
"""

import argparse
import json

from bench.harness import cpu_seconds, setup_django


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--var-dir", required=True)
    parser.add_argument("--tenant", default="docqa")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    setup_django(args.var_dir)

    from django.test import override_settings

    from retrieval.backends import vector_index
    from retrieval.backends.base import IndexFilter
    from retrieval.projection import reindex
    from tenants.models import Tenant

    tenant = Tenant.objects.get(slug=args.tenant)
    kb_ids = tuple(tenant.knowledge_bases.values_list("pk", flat=True))

    def questions() -> int:
        return vector_index().count(IndexFilter(tenant_id=tenant.pk, kb_ids=kb_ids, kinds=("question",), statuses=()))

    out = {}
    for name, on in (("off", False), ("on", True)) + ((("off again", False),) if not args.keep else ()):
        with override_settings(CANDIDATE_QUESTIONS=on, LLM_ENABLED=False):
            started = cpu_seconds()
            rows = reindex(tenant)["rows"]
            out[name] = {"rows": rows, "cpu_s": round(cpu_seconds() - started, 1), "question_rows": questions()}
    out["questions_cpu_s"] = round(out["on"]["cpu_s"] - out["off"]["cpu_s"], 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
