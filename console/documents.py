"""Console pages for documents: upload, the list, a document's structure and memories, re-run and delete."""

import datetime

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Prefetch, Q
from django.http import FileResponse, Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from console import progress_estimates, viewers
from console.shell import console_scope, current_kb, kb_filter, location_label, render_page, safe_next
from django.utils import timezone

from ingest.actions import CANCELLED_STAGE, cancel_document, rerun_document
from memory import stage_times
from memory.actions import delete_document
from memory.models import Chunk, Document, Memory
from memory.toc import document_tree

DOCUMENTS_PER_PAGE = 25
# Parents per page of a document's structure: long books stay fast; ?chunk=<id> finds the right page.
PARENTS_PER_PAGE = 60
# Entries of the contents panel: beyond them (a 2,000-sheet workbook) it says how many more there are.
MAX_TOC_ENTRIES = 300
MAX_STATUS_IDS = 200
# Types a browser shows safely by itself; HTML and SVG are left out on purpose (they could run script).
_PLAIN = "text/plain; charset=utf-8"
INLINE_TYPES = {"pdf": "application/pdf", "pdf-ocr": "application/pdf", "txt": _PLAIN, "md": _PLAIN, "csv": _PLAIN,
                "tsv": _PLAIN, "vtt": _PLAIN, "rst": _PLAIN, "org": _PLAIN}
STAGES = ["queued", "parsing", "extracting", "indexing", "ready"]


# The stage a document waits for when its last stage let go of its claim and the next has not taken it.
NEXT_STAGE = {"queued": "parsing", "parsing": "extracting", "extracting": "indexing"}


def phase(document: Document) -> str:
    """queued (waiting for a worker, before any stage or between two), working, ready, failed or cancelled.

    Between stages a document keeps the status of the stage it finished with no claim held: showing
    that stage's name and bar there is what made waiting files look busy ("extracting 75 %").
    """
    if document.status == Document.Status.READY:
        return "ready"
    if document.status == Document.Status.FAILED:
        return "cancelled" if document.stage == CANCELLED_STAGE else "failed"
    if document.status == Document.Status.QUEUED or document.claim_token is None:
        return "queued"
    return "working"


def _seconds(start, end) -> float | None:
    return round(max(0.0, (end - start).total_seconds()), 1) if start and end else None


def status_payload(document: Document, *, ahead: int | None = None, speeds: dict | None = None) -> dict:
    """What the uploader and document rows show; `ahead`: unfinished documents of the tenant uploaded before it;
    `speeds`: the measured stage speeds an estimate of the time left is made from (none without them)."""
    now = timezone.now()
    current = phase(document)
    # Waiting between two stages counts from the end of the last one, not from the upload.
    waiting_since = (stage_times.last_stage_end(document) or document.started_at) if document.started_at \
        else document.created_at
    return {
        "id": document.pk,
        "filename": document.filename,
        "status": document.status,
        "phase": current,
        "stage": document.stage,
        "waiting_for": NEXT_STAGE.get(document.status, "") if current == "queued" else "",
        "queue_ahead": ahead if current == "queued" else None,
        "progress": document.progress,
        "error": document.error,
        "retryable": document.retryable,
        "finished": document.is_finished,
        "detected_type": document.detected_type,
        "size": document.size,
        "chunk_count": document.chunk_count,
        "episode_count": document.episode_count,
        "fact_count": document.fact_count,
        "started": document.started_at is not None,
        # True durations: waiting before the first stage, then working until the end (or now).
        "waited_seconds": _seconds(document.created_at, document.started_at or (None if document.is_finished else now)),
        "took_seconds": _seconds(document.started_at, document.finished_at or (None if document.is_finished else now)),
        # How long a queued file has waited for its next stage (since the upload, or the last stage's end).
        "waiting_seconds": _seconds(waiting_since, now) if current == "queued" else None,
        "stage_seconds": _stage_seconds(document, now) if current == "working" else None,
        "estimate_seconds": progress_estimates.seconds_left(document, current, speeds or {}),
        "url": f"/documents/{document.pk}/",
    }


def _stage_seconds(document: Document, now) -> float | None:
    """How long the running stage has run (from its recorded start)."""
    entry = stage_times.stage_times(document).get(stage_times.STAGE_OF_STATUS.get(document.status, ""))
    started = stage_times.parse_time((entry or {}).get("started"))
    return _seconds(started, now) if started else None


def queue_positions(scope, documents) -> dict[int, int]:
    """For each unfinished document: how many unfinished documents of its tenant were uploaded before it."""
    if not any(d.status in Document.ACTIVE_STATUSES for d in documents):
        return {}
    # Workers take stages in upload order across the tenant's knowledge bases, so every earlier
    # unfinished document (waiting or running) is ahead, including those of KBs this user cannot read;
    # only their number is shown.
    line = list(Document.objects.filter(kb__tenant=scope.tenant, status__in=Document.ACTIVE_STATUSES)
                .order_by("created_at", "id").values_list("id", flat=True))
    return {pk: i for i, pk in enumerate(line)}


# --- upload -----------------------------------------------------------------------------------------

@login_required
def upload(request):
    """The page only; files go to the REST API (POST /api/v1/documents) from app.js, one request per file."""
    scope = console_scope(request, write=True)
    kbs = list(scope.knowledge_bases().order_by("name"))
    chosen = current_kb(request, scope) or (kbs[0] if kbs else None)
    return render_page(request, scope, "documents/upload.html", {
        "section": "upload", "kbs": kbs, "chosen_kb": chosen, "stages": STAGES,
        "filters": ["all", "queued", "working", "ready", "failed"],
        "max_upload_bytes": settings.LOCI_MAX_UPLOAD_BYTES,
    })


@login_required
@require_GET
def document_status(request):
    """Status of a set of documents (?ids=1,2,3) for the progress bars; ids outside the scope are left out."""
    scope = console_scope(request)
    try:
        ids = [int(i) for i in request.GET.get("ids", "").split(",") if i.strip()][:MAX_STATUS_IDS]
    except ValueError:
        return JsonResponse({"error": "ids must be a comma-separated list of integers."}, status=400)
    ids = [i for i in ids if 0 < i < 2**63]  # beyond 64 bits no document exists, and the query would overflow
    documents = list(Document.objects.in_scope(scope).filter(pk__in=ids))
    positions = queue_positions(scope, documents)
    speeds = progress_estimates.measured_speeds() if any(not d.is_finished for d in documents) else {}
    return JsonResponse({"documents": [status_payload(d, ahead=positions.get(d.pk), speeds=speeds)
                                       for d in documents]})


# --- documents --------------------------------------------------------------------------------------

def _date(value: str):
    try:
        return datetime.date.fromisoformat(value) if value else None
    except ValueError:
        return None


@login_required
def document_list(request):
    scope = console_scope(request)
    params = request.GET
    qs = Document.objects.in_scope(scope).select_related("kb")
    kb_slug = kb_filter(request, scope)
    if kb_slug:
        qs = qs.filter(kb__slug=kb_slug)
    if params.get("status") in Document.Status.values:
        qs = qs.filter(status=params["status"])
    if params.get("type"):
        qs = qs.filter(detected_type=params["type"])
    if params.get("q"):
        qs = qs.filter(filename__icontains=params["q"].strip())
    since, until = _date(params.get("from", "")), _date(params.get("to", ""))
    if since:
        qs = qs.filter(created_at__date__gte=since)
    if until:
        qs = qs.filter(created_at__date__lte=until)
    sort = params.get("sort") if params.get("sort") in SORTS else "-created_at"
    page = Paginator(qs.order_by(sort, "-id"), DOCUMENTS_PER_PAGE).get_page(params.get("page"))
    types = (Document.objects.in_scope(scope).exclude(detected_type="").order_by("detected_type")
             .values_list("detected_type", flat=True).distinct())
    filtered = any(params.get(k) for k in ("status", "type", "q", "from", "to")) or bool(kb_slug)
    return render_page(request, scope, "documents/document_list.html", {
        "section": "documents", "page": page, "types": list(types), "statuses": Document.Status.values,
        "kbs": scope.knowledge_bases().order_by("name"), "kb_slug": kb_slug or "", "filtered": filtered,
        "active_statuses": Document.ACTIVE_STATUSES, "sort": sort,
    })


# The documents table's sortable columns (either direction): ?sort=filename, ?sort=-size, …
SORTS = {f"{way}{field}" for field in ("filename", "created_at", "size", "status", "detected_type", "chunk_count")
         for way in ("", "-")}
BULK_LIMIT = 200  # documents one bulk action takes (a page holds fewer)


@login_required
@require_POST
def document_bulk(request):
    """Re-run or delete the documents ticked in the list; delete asks once more, listing them."""
    scope = console_scope(request, write=True)
    ids = [int(i) for i in request.POST.getlist("ids") if i.isdigit()][:BULK_LIMIT]
    documents = list(Document.objects.in_scope(scope).select_related("kb").filter(pk__in=ids).order_by("id"))
    back = safe_next(request, reverse("console:document-list"))
    action = request.POST.get("action")
    if not documents:
        messages.warning(request, "Tick the documents to act on first.")
        return redirect(back)
    if action == "rerun":
        queued = [d for d in documents if d.can_rerun and not _permanent_failure(d)]
        for document in queued:
            rerun_document(scope, document)
        skipped = len(documents) - len(queued)
        messages.success(request, f"Queued {len(queued)} document{'s' if len(queued) != 1 else ''} again."
                         + (f" {skipped} skipped: still processing, or failed for a reason re-running cannot fix."
                            if skipped else ""))
        return redirect(back)
    if action == "delete" and request.POST.get("confirm") == "yes":
        for document in documents:
            delete_document(scope, document)
        messages.success(request, f"Deleted {len(documents)} document{'s' if len(documents) != 1 else ''}, "
                                  "their chunks and their memories.")
        return redirect(back)
    if action == "delete":
        return render_page(request, scope, "documents/document_bulk_delete.html",
                           {"section": "documents", "documents": documents, "next": back})
    messages.warning(request, "Choose Re-run or Delete.")
    return redirect(back)


def _scoped_document(scope, pk) -> Document:
    return get_object_or_404(Document.objects.in_scope(scope).select_related("kb"), pk=pk)


@login_required
def document_detail(request, pk):
    scope = console_scope(request)
    document = _scoped_document(scope, pk)
    parents = document.chunks.filter(level=Chunk.Level.PARENT).order_by("ordinal")
    paginator = Paginator(parents, PARENTS_PER_PAGE)
    page_number = request.GET.get("page")
    if request.GET.get("chunk", "").isdigit():  # a source link: open the page that holds this chunk
        target = document.chunks.filter(pk=int(request.GET["chunk"])).first()
        if target is not None:
            ordinal = (target.parent if target.parent_id else target).ordinal
            page_number = parents.filter(ordinal__lt=ordinal).count() // PARENTS_PER_PAGE + 1
    page = paginator.get_page(page_number)
    parent_rows = list(page.object_list.prefetch_related(
        Prefetch("children", queryset=Chunk.objects.order_by("ordinal"))))
    episodes = _episodes_by_parent(document, [p.pk for p in parent_rows], with_orphans=page.number == 1)
    sections = [{
        "chunk": p, "where": location_label(p.location), "children": [
            {"chunk": c, "where": location_label(c.location)} for c in p.children.all()],
        "episode": episodes.get(p.pk),
    } for p in parent_rows]
    orphans = episodes.get(None, [])
    toc, toc_total = contents(document)
    return render_page(request, scope, "documents/document_detail.html", {
        "section": "documents", "document": document, "page": page, "sections": sections, "orphans": orphans,
        "toc": toc, "toc_total": toc_total, "toc_more": toc_total - _count(toc),
        "stages": STAGES, "can_rerun": scope.can_write and document.can_rerun and not _permanent_failure(document), "took": _took(document),
        "can_cancel": scope.can_write and document.status in Document.ACTIVE_STATUSES,
    })


def contents(document: Document) -> tuple[list[dict], int]:
    """The contents panel: the document's section tree (at most MAX_TOC_ENTRIES entries, in reading
    order), each entry linking to its first parent chunk; and how many sections there are in all."""
    left = [MAX_TOC_ENTRIES]
    total = [0]

    def entries(nodes) -> list[dict]:
        out = []
        for node in nodes:
            total[0] += 1
            if left[0] > 0:
                left[0] -= 1
                out.append({"title": node.title or "Untitled section", "chunk_id": node.first_chunk_id,
                            "children": entries(node.children)})
            else:
                entries(node.children)  # counted, not shown
        return out

    toc = entries(document_tree(document))
    return (toc if total[0] > 1 else []), total[0]  # one section is no table of contents


def _count(entries: list[dict]) -> int:
    return sum(1 + _count(e["children"]) for e in entries)


def _took(document: Document) -> str:
    if document.is_finished and not document.started_at:
        return "stopped before any stage started"
    if not (document.started_at and document.finished_at):
        return ""
    total = (document.finished_at - document.started_at).total_seconds()
    if total < 1:
        return "under 1 s"
    minutes, seconds = divmod(round(total), 60)
    return f"{minutes} min {seconds} s" if minutes else f"{seconds} s"


def _episodes_by_parent(document: Document, parent_ids: list[int], *, with_orphans: bool) -> dict:
    """This page's episodes (with their facts) keyed by the parent chunk they summarise.

    Episodes tied to no parent chunk (rare for documents) are listed under None, on the first page only.
    """
    wanted = Q(metadata__parent_chunk_id__in=parent_ids)
    if with_orphans:
        wanted |= Q(metadata__parent_chunk_id__isnull=True)
    episodes = (document.memories.filter(wanted, kind=Memory.Kind.EPISODE).order_by("ordinal")
                .prefetch_related(Prefetch("facts", queryset=Memory.objects.order_by("ordinal"),
                                           to_attr="fact_list")))
    by_parent = {}
    for episode in episodes:
        parent_id = episode.metadata.get("parent_chunk_id")
        if parent_id is None:
            by_parent.setdefault(None, []).append(episode)
        else:
            by_parent[parent_id] = episode
    return by_parent


@login_required
def document_original(request, pk):
    scope = console_scope(request)
    document = _scoped_document(scope, pk)
    try:
        handle = document.original.open("rb")
    except (FileNotFoundError, ValueError):
        raise Http404("The original file is missing from storage.") from None
    # Viewable types open in the browser (the PDF viewer and "open the original" links need that);
    # anything else downloads. ?download=1 always downloads.
    inline = document.detected_type in INLINE_TYPES and not request.GET.get("download")
    response = FileResponse(handle, as_attachment=not inline, filename=document.filename)
    if inline:
        response["Content-Type"] = INLINE_TYPES[document.detected_type]
        # An uploaded file is never allowed to run script in the console's origin.
        response["Content-Security-Policy"] = "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'"
        response["X-Content-Type-Options"] = "nosniff"
    return response


@login_required
def document_view(request, pk):
    """The original at the cited place: a PDF at its page with the passage highlighted (pdf.js); a sheet,
    deck, transcript or email in its viewer (console/viewers.py); other types open their parsed
    structure at the chunk."""
    scope = console_scope(request)
    document = _scoped_document(scope, pk)
    chunk = None
    if request.GET.get("chunk", "").isdigit():
        chunk = document.chunks.filter(pk=int(request.GET["chunk"])).first()
    if viewers.viewable(document.detected_type):
        return viewers.show_original(request, scope, document, chunk)
    if document.detected_type not in ("pdf", "pdf-ocr"):
        target = f"?chunk={chunk.pk}#chunk-{chunk.pk}" if chunk else ""
        return redirect(f"/documents/{document.pk}/{target}")
    page = request.GET.get("page", "")
    page = int(page) if page.isdigit() and int(page) > 0 else (chunk.page if chunk and chunk.page else 1)
    return render_page(request, scope, "documents/document_view.html", {
        "section": "documents", "document": document, "page_number": page,
        "passage": chunk.text if chunk else "", "where": location_label(chunk.location) if chunk else f"p. {page}",
    })


@login_required
@require_GET
def document_slides_pdf(request, pk):
    """A presentation's slides rendered to PDF by LibreOffice (cached after the first request)."""
    scope = console_scope(request)
    return viewers.slides_pdf(_scoped_document(scope, pk))


@login_required
@require_GET
def document_attachment(request, pk, number):
    """An attachment of an email document, as a download."""
    scope = console_scope(request)
    return viewers.email_attachment(_scoped_document(scope, pk), number)


@login_required
@require_POST
def document_rerun(request, pk):
    scope = console_scope(request, write=True)
    document = _scoped_document(scope, pk)
    if not document.can_rerun:
        messages.warning(request, f"“{document.filename}” is still {document.status}; wait for it to finish.")
    else:
        rerun_document(scope, document)
        messages.success(request, f"Queued “{document.filename}” again.")
    return redirect("console:document-detail", pk=document.pk)


def _permanent_failure(document: Document) -> bool:
    """Failed for a reason of the file itself (empty, encrypted, corrupt): running it again fails again."""
    return document.status == Document.Status.FAILED and not document.retryable


@login_required
@require_POST
def document_cancel(request, pk):
    scope = console_scope(request, write=True)
    document = _scoped_document(scope, pk)
    if cancel_document(scope, document):
        messages.success(request, f"Cancelled “{document.filename}”; re-run it to start again.")
    else:
        messages.warning(request, f"“{document.filename}” had already finished ({document.status}).")
    return redirect("console:document-detail", pk=document.pk)


@login_required
def document_delete(request, pk):
    scope = console_scope(request, write=True)
    document = _scoped_document(scope, pk)
    if request.method == "POST":
        name = document.filename
        delete_document(scope, document)
        messages.success(request, f"Deleted “{name}”, its chunks and its memories.")
        return redirect("console:document-list")
    summary = {"chunks": document.chunks.count(), "memories": document.memories.count()}
    return render_page(request, scope, "documents/document_delete.html",
                       {"section": "documents", "document": document, "summary": summary})
