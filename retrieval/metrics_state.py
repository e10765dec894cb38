"""The Prometheus gauges read at scrape time: documents per status, stalled documents, rows per index.

They are state, not events: read from the database and the indexes when /metrics is scraped, so they
are the same whichever process answers (common/metrics.py). Registered by RetrievalConfig.ready().
"""

import logging

from django.conf import settings
from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from memory.models import Document
from retrieval.backends import keyword_index, vector_index
from retrieval.backends.base import IndexFilter
from tenants.models import KnowledgeBase, Tenant

log = logging.getLogger(__name__)



class StateCollector:
    """Gauges computed when scraped: documents per status, stalled documents, rows per index and tenant."""

    def collect(self):
        yield from self._documents()
        yield from self._index_rows()

    def _documents(self):
        Status = Document.Status
        per_status = _count_by_status(Document.objects.all())
        documents = GaugeMetricFamily("loci_documents", "Documents per status; queued to indexing is the "
                                      "ingestion backlog.", labels=["status"])
        for status in Status.values:
            documents.add_metric([status], per_status.get(status, 0))
        yield documents

        # A stage's worker keeps its document moving (progress updates touch updated_at); one that has not
        # moved for a lease is held by a dead or stuck worker, and a re-delivered task may take it over.
        stale = timezone.now() - timezone.timedelta(seconds=settings.LOCI_STAGE_LEASE_SECONDS)
        in_stage = (Status.PARSING, Status.EXTRACTING, Status.INDEXING)
        stalled_by_status = _count_by_status(Document.objects.filter(status__in=in_stage, updated_at__lt=stale))
        stalled = GaugeMetricFamily("loci_documents_stalled", "Documents in a stage that has not moved for "
                                    "longer than LOCI_STAGE_LEASE_SECONDS.", labels=["status"])
        for status in in_stage:
            stalled.add_metric([status], stalled_by_status.get(status, 0))
        yield stalled

        oldest = Document.objects.filter(status=Status.QUEUED).aggregate(t=Min("updated_at"))["t"]
        yield GaugeMetricFamily("loci_documents_queued_oldest_seconds", "Age of the oldest queued document "
                                "(0 when none): grows while no worker takes work.",
                                value=(timezone.now() - oldest).total_seconds() if oldest else 0.0)

    def _index_rows(self):
        kb_ids: dict[int, list[int]] = {}
        for tenant_id, kb_id in KnowledgeBase.objects.values_list("tenant_id", "pk"):
            kb_ids.setdefault(tenant_id, []).append(kb_id)
        rows = GaugeMetricFamily("loci_index_rows", "Rows in each index projection per tenant, every "
                                 "status included (one count per tenant and index per scrape).",
                                 labels=["index", "tenant"])
        errors = GaugeMetricFamily("loci_index_count_errors", "Index projections that could not be counted "
                                   "during this scrape.", labels=["index"])
        tenants = list(Tenant.objects.values_list("pk", "slug", "isolation"))
        for name, index in (("vector", vector_index), ("keyword", keyword_index)):
            try:
                for tenant_id, slug, isolation in tenants:
                    flt = IndexFilter(tenant_id=tenant_id, kb_ids=tuple(kb_ids.get(tenant_id, ())),
                                      exclusive=isolation == Tenant.Isolation.EXCLUSIVE, statuses=())
                    rows.add_metric([name, slug], index().count(flt) if flt.kb_ids else 0)
                errors.add_metric([name], 0)
            except Exception:  # an index that is down must not hide every other metric
                log.warning("metrics: could not count the %s index", name, exc_info=True)
                errors.add_metric([name], 1)
        yield rows
        yield errors


def _count_by_status(documents) -> dict[str, int]:
    return {row["status"]: row["n"] for row in documents.order_by().values("status").annotate(n=Count("pk"))}
