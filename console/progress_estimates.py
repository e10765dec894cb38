"""Time-left estimates for the upload table, from the stage speeds this installation measured.

Every stage records how long it ran (memory/stage_times.py). The last finished documents
give each stage a line `seconds = fixed + per_mb × MB`; a document's estimate is what is left of
its running stage plus the stages after it, measured on documents of its own type once enough of
them were measured, else on all. Without a measurement for every stage still to run there is no
estimate: the console then says nothing rather than guess.
"""

import statistics
from dataclasses import dataclass

from django.core.cache import cache
from django.utils import timezone

from memory.models import Document
from memory.stage_times import STAGE_OF_STATUS, STAGE_ORDER, STAGE_TIMES_KEY, parse_time, stage_times

# The most recent finished documents measured: enough for a stable line, recent enough to follow a
# change of model or machine.
SAMPLE_DOCUMENTS = 200
# Fewer samples than this (or all of one size) cannot separate a fixed cost from a per-MB one:
# the line then goes through zero (seconds per MB alone).
MIN_SAMPLES_FOR_FIT = 3
# The status feed is polled every 1.5 s by every open upload page; the speeds change slowly.
CACHE_SECONDS = 30
CACHE_KEY = "console:stage-speeds:v1"


@dataclass(frozen=True)
class StageSpeed:
    fixed_seconds: float
    seconds_per_mb: float
    samples: int

    def seconds_for(self, size_bytes: int) -> float:
        return self.fixed_seconds + self.seconds_per_mb * size_bytes / 1_000_000


def fit_speed(points: list[tuple[float, float]]) -> StageSpeed | None:
    """Least squares `seconds = fixed + per_mb × MB` over (MB, seconds) points, both kept ≥ 0."""
    if not points:
        return None
    sizes = [mb for mb, _ in points]
    seconds = [s for _, s in points]
    total_mb = sum(sizes)
    if len(points) < MIN_SAMPLES_FOR_FIT or statistics.pvariance(sizes) == 0:
        if total_mb > 0 and len(set(sizes)) > 1:
            return StageSpeed(0.0, sum(seconds) / total_mb, len(points))
        return StageSpeed(statistics.fmean(seconds), 0.0, len(points))
    mean_mb, mean_s = statistics.fmean(sizes), statistics.fmean(seconds)
    slope = sum((x - mean_mb) * (y - mean_s) for x, y in points) / sum((x - mean_mb) ** 2 for x in sizes)
    intercept = mean_s - slope * mean_mb
    if slope < 0:  # bigger is not faster: the sizes say nothing here, keep the mean
        return StageSpeed(mean_s, 0.0, len(points))
    if intercept < 0:
        return StageSpeed(0.0, sum(seconds) / total_mb, len(points))
    return StageSpeed(intercept, slope, len(points))


def measured_speeds() -> dict[str, dict[str, StageSpeed]]:
    """Each stage's speed over the installation's last finished documents, for all of them ("*") and
    per detected type (cached briefly)."""
    speeds = cache.get(CACHE_KEY)
    if speeds is None:
        speeds = _measure()
        cache.set(CACHE_KEY, speeds, CACHE_SECONDS)
    return speeds


def _measure() -> dict[str, dict[str, StageSpeed]]:
    # Only numbers leave this query (types, sizes and durations, never names or text), so every
    # tenant's documents count: the workers and the machine are the installation's, not a tenant's.
    rows = (Document.objects.filter(status=Document.Status.READY, metadata__has_key=STAGE_TIMES_KEY)
            .order_by("-finished_at")
            .values_list("detected_type", "size", f"metadata__{STAGE_TIMES_KEY}")[:SAMPLE_DOCUMENTS])
    points: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for detected_type, size, times in rows:
        for name in STAGE_ORDER:
            entry = times.get(name) if isinstance(times, dict) else None
            seconds = entry.get("seconds") if isinstance(entry, dict) else None
            if isinstance(seconds, (int, float)):
                for group in ["*", detected_type] if detected_type else ["*"]:
                    points.setdefault(group, {}).setdefault(name, []).append((size / 1_000_000, float(seconds)))
    return {group: {name: speed for name, pts in stages.items() if (speed := fit_speed(pts)) is not None}
            for group, stages in points.items()}


def speeds_for(speeds: dict[str, dict[str, StageSpeed]], detected_type: str) -> dict[str, StageSpeed]:
    """The speeds of the document's own type once MIN_SAMPLES_FOR_FIT of its kind were measured in
    every stage (a scanned PDF is not a text file), else those of every type."""
    own = speeds.get(detected_type) if detected_type else None
    if own and len(own) == len(STAGE_ORDER) and all(s.samples >= MIN_SAMPLES_FOR_FIT for s in own.values()):
        return own
    return speeds.get("*", {})


def seconds_left(document: Document, phase: str, measured: dict[str, dict[str, StageSpeed]]) -> float | None:
    """Seconds of work left for an unfinished document, or None when a stage still to run was never measured.

    A running stage that already took longer than measured counts as 0 left (the stages after it
    still count); a queued document's wait for a worker is not in it (how long depends on the
    documents ahead and on how many workers take them, which the console does not know).
    """
    if phase not in ("queued", "working"):
        return None
    speeds = speeds_for(measured, document.detected_type)
    times = stage_times(document)
    if phase == "working":
        running = STAGE_OF_STATUS.get(document.status)
        if running is None:
            return None
        todo = STAGE_ORDER[STAGE_ORDER.index(running):]
    elif document.status == Document.Status.QUEUED:
        todo = STAGE_ORDER
    else:  # between two stages: the one it finished is done
        finished = STAGE_OF_STATUS.get(document.status)
        todo = STAGE_ORDER[STAGE_ORDER.index(finished) + 1:] if finished else STAGE_ORDER
    if not todo or any(name not in speeds for name in todo):
        return None
    left = 0.0
    for name in todo:
        expected = speeds[name].seconds_for(document.size)
        if phase == "working" and name == todo[0]:
            started = parse_time((times.get(name) or {}).get("started"))
            ran = (timezone.now() - started).total_seconds() if started else 0.0
            expected = max(0.0, expected - ran)
        left += expected
    return round(left, 1)
