"""Extraction jobs over REST: how POST /memories and /memories/flush answer when extraction is queued.

    POST …  (extraction queued)       202 {"status": "queued", "job_id", "status_url", "kb", …}
    POST …  with "wait": true          200 the synchronous answer (and its job_id), extracted in the request
    GET    /api/v1/memories/jobs/{id}  pending | running | done (with the answer) | failed (with the reason)

See conversations/extraction_jobs.py for when extraction is queued (LOCI_ASYNC_EXTRACTION).
"""

from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations import actions, extraction_jobs
from conversations.tasks import queue_on_commit
from memory.models import ExtractionJob
from tenants.api.scoping import request_scope

TRUE, FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


class WaitFieldsSerializer(serializers.Serializer):
    """The fields a request that may extract takes on top of its own."""

    wait = serializers.BooleanField(
        required=False, default=False,
        help_text="true: extract in this request and answer as it always did (200), held up to `timeout`; "
                  "false (default): where extraction is queued (an LLM is configured), answer 202 at once "
                  "with a job to poll. Also accepted as the query parameter ?wait=true.")
    timeout = serializers.FloatField(
        required=False, min_value=1.0,
        help_text="with wait: the seconds the LLM steps may take (at most LOCI_EXTRACTION_WAIT_MAX_SECONDS and "
                  "LLM_FLUSH_DEADLINE_SECONDS); past them the rules finish the extraction")

    def validate_timeout(self, value):
        ceiling = settings.LOCI_EXTRACTION_WAIT_MAX_SECONDS
        if value > ceiling:
            raise ValidationError(f"At most {ceiling:g} seconds (LOCI_EXTRACTION_WAIT_MAX_SECONDS).")
        return value


WAIT_PARAMETER = OpenApiParameter("wait", bool, description="as the body's `wait` field")


class ExtractionQueuedSerializer(serializers.Serializer):
    status = serializers.ChoiceField(["queued"])
    job_id = serializers.UUIDField()
    status_url = serializers.CharField(help_text="GET it for the job's status, and its answer once done")
    kb = serializers.SlugField()
    message_count = serializers.IntegerField(required=False, help_text="POST /memories: the turns now stored "
                                                                       "and waiting for the job")


class ExtractionJobSerializer(serializers.Serializer):
    job_id = serializers.UUIDField()
    kind = serializers.ChoiceField(ExtractionJob.Kind.values, help_text="accumulate: POST /memories; flush")
    status = serializers.ChoiceField(ExtractionJob.Status.values)
    kb = serializers.SlugField()
    user_id = serializers.CharField()
    session_id = serializers.CharField()
    result = serializers.JSONField(allow_null=True, help_text="once done: what the request answers with wait=true")
    error = serializers.CharField(allow_null=True, help_text="once failed: why (its turns stay pending)")
    attempts = serializers.IntegerField(help_text="claims taken: above 1 when a worker died and another took over")
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    status_url = serializers.CharField()


class ExtractionFailedSerializer(serializers.Serializer):
    error = serializers.CharField(help_text="why the extraction failed; its turns stay pending")
    detail = serializers.JSONField()


# The answers of a POST that may extract, beside its own 200.
QUEUED_RESPONSES = {
    202: OpenApiResponse(ExtractionQueuedSerializer, description="extraction queued (an LLM is configured): poll "
                                                                 "status_url, or send wait=true"),
    503: OpenApiResponse(ExtractionFailedSerializer, description="wait=true and the extraction failed"),
}


class ExtractionFailed(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "extraction_failed"


def wait_options(request, data: dict) -> tuple[bool, float | None]:
    """`wait` (the body's field, or ?wait=) and its `timeout`."""
    wait = data.get("wait", False)
    raw = request.query_params.get("wait")
    if raw is not None:
        if raw.strip().lower() not in TRUE | FALSE:
            raise ValidationError({"wait": f"'{raw}' is not a boolean: use true or false."})
        wait = wait or raw.strip().lower() in TRUE
    return wait, data.get("timeout")


def accumulate(scope, kb, fields: dict, *, wait: bool, timeout: float | None) -> tuple[int, dict]:
    """POST /memories (and MCP's add_messages): store the turns, then extract here or queue a job."""
    if not extraction_jobs.queued_extraction():
        return status.HTTP_200_OK, {**actions.accumulate_messages(scope, kb, **fields), "kb": kb.slug}
    actions.store_messages(scope, kb, **fields)
    waiting = actions.pending_messages(kb, fields["user_id"], fields["session_id"]).count()
    if waiting < 2:  # one turn completes no MemCell: nothing to queue
        return status.HTTP_200_OK, {"status": "accumulated", "message_count": waiting, "kb": kb.slug}
    return extract_later(scope, kb, user_id=fields["user_id"], session_id=fields["session_id"],
                         kind=ExtractionJob.Kind.ACCUMULATE, wait=wait, timeout=timeout, waiting=waiting)


def flush(scope, kb, *, user_id: str, session_id: str, wait: bool, timeout: float | None) -> tuple[int, dict]:
    """POST /memories/flush (and MCP's flush): extract here or queue a job."""
    if not extraction_jobs.queued_extraction():
        return status.HTTP_200_OK, actions.flush_session(scope, kb, user_id=user_id, session_id=session_id)
    return extract_later(scope, kb, user_id=user_id, session_id=session_id, kind=ExtractionJob.Kind.FLUSH,
                         wait=wait, timeout=timeout)


def extract_later(scope, kb, *, user_id: str, session_id: str, kind: str, wait: bool, timeout: float | None,
                  waiting: int | None = None) -> tuple[int, dict]:
    """Queue the session's extraction (202 with its job), or, with `wait`, run it here (200)."""
    if wait:
        job, _ = extraction_jobs.record_job(scope, kb, user_id=user_id, session_id=session_id, kind=kind, reuse=False)
        job = extraction_jobs.run_job(job.pk, deadline_seconds=timeout) or job
        if job.status != ExtractionJob.Status.DONE:
            raise ExtractionFailed(f"The extraction failed: {job.error or job.status}. Its turns stay pending; "
                                   f"flush again later ({extraction_jobs.status_url(job)}).")
        answer = {**job.result, "job_id": str(job.pk)}
        if kind == ExtractionJob.Kind.ACCUMULATE:  # as the synchronous answers differ: POST /memories names its KB
            answer["kb"] = kb.slug
        return status.HTTP_200_OK, answer
    job, new = extraction_jobs.record_job(scope, kb, user_id=user_id, session_id=session_id, kind=kind)
    if new:
        queue_on_commit(job)
    body = {"status": "queued", "job_id": str(job.pk), "status_url": extraction_jobs.status_url(job), "kb": kb.slug}
    if waiting is not None:
        body["message_count"] = waiting
    return status.HTTP_202_ACCEPTED, body


def job_in_scope(scope, pk) -> ExtractionJob:
    return get_object_or_404(ExtractionJob.objects.select_related("kb"), pk=pk, tenant=scope.tenant,
                             kb_id__in=scope.kb_ids)


@extend_schema(parameters=[OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH)])
class ExtractionJobView(APIView):
    """One extraction job of the caller's knowledge bases."""

    @extend_schema(responses=ExtractionJobSerializer)
    def get(self, request, pk):
        return Response(extraction_jobs.describe(job_in_scope(request_scope(request), pk)))
