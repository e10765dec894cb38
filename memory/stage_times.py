"""A document's stage-time record: each stage's start and duration in its latest run.

Kept under metadata["stage_times"] as {"parse": {"started", "ended", "seconds"}, ...}. The
pipeline's tasks write it as their stages run (ingest/tasks.py); the console reads it for its
estimates (console/progress_estimates.py) and for how long a file waiting between stages has waited.
One definition for the writer and the readers, so the two cannot drift apart.
"""

import datetime

from django.utils import timezone

from memory.models import Document

STAGE_TIMES_KEY = "stage_times"
STAGE_ORDER = ("parse", "extract", "index")
STAGE_OF_STATUS = {"parsing": "parse", "extracting": "extract", "indexing": "index"}


def stage_times(document: Document) -> dict:
    times = (document.metadata or {}).get(STAGE_TIMES_KEY)
    return times if isinstance(times, dict) else {}


def parse_time(value) -> datetime.datetime | None:
    try:
        return datetime.datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None


def last_stage_end(document: Document) -> datetime.datetime | None:
    """When the last finished stage of this run ended: what a file waiting between stages waits since."""
    ends = [parse_time(entry.get("ended")) for entry in stage_times(document).values() if isinstance(entry, dict)]
    ends = [end for end in ends if end]
    return max(ends) if ends else None


def record_stage_start(document: Document, stage_name: str) -> None:
    """Note when this stage began; the first stage of a run forgets the previous run's times."""
    times = {} if stage_name == STAGE_ORDER[0] else dict(stage_times(document))
    times[stage_name] = {"started": timezone.now().isoformat()}
    _write(document, times)


def record_stage_end(document: Document, stage_name: str) -> None:
    """Note how long this stage ran, from its recorded start (nothing when the start is unknown)."""
    times = dict(stage_times(document))
    entry = dict(times.get(stage_name) or {})
    started = parse_time(entry.get("started"))
    if started is None:
        return
    now = timezone.now()
    entry.update(ended=now.isoformat(), seconds=round(max(0.0, (now - started).total_seconds()), 3))
    times[stage_name] = entry
    _write(document, times)


def _write(document: Document, times: dict) -> None:
    # Under the claim: the holder is the only writer of a document's metadata while its stage runs,
    # and a run that lost its claim must not write over the new holder's times (0 rows: ignored,
    # the stage's next guarded write raises ClaimLost).
    document.metadata = {**(document.metadata or {}), STAGE_TIMES_KEY: times}
    document.update_own_row(metadata=document.metadata)
