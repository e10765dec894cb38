"""Extraction jobs: where the server queues extraction (an LLM is configured), POST /memories and
/memories/flush answer 202 with a job; `wait=True` polls its status URL until it is done."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable

from loci_client.errors import ServiceUnavailable

FINISHED = ("done", "failed")
# Polling starts fast (the rules finish a small chat in a fraction of a second) and backs off to a
# request every 2 s (a model's extraction takes seconds to minutes).
FIRST_INTERVAL, MAX_INTERVAL = 0.1, 2.0


def is_queued(answer: Any) -> bool:
    return isinstance(answer, dict) and answer.get("status") == "queued" and "status_url" in answer


def outcome(queued: dict, job: dict) -> dict:
    """The answer the request gives with wait=true: the job's result (with its job_id), or ServiceUnavailable."""
    if job["status"] == "failed":
        raise ServiceUnavailable(503, f"The extraction failed: {job.get('error')}. Its turns stay pending; flush "
                                      "again later.", job)
    answer = {**job["result"], "job_id": job["job_id"]}
    if "message_count" in queued:  # POST /memories names its knowledge base, as its synchronous answer does
        answer["kb"] = queued["kb"]
    return answer


def _timed_out(queued: dict, job: dict, timeout: float) -> TimeoutError:
    return TimeoutError(f"Extraction job {queued['job_id']} is still {job['status']} after {timeout:g} s; "
                        f"poll {queued['status_url']} for its answer.")


def wait(get: Callable[[str], dict], queued: dict, timeout: float) -> dict:
    deadline, interval = time.monotonic() + timeout, FIRST_INTERVAL
    while True:
        job = get(queued["status_url"])
        if job["status"] in FINISHED:
            return outcome(queued, job)
        if time.monotonic() >= deadline:
            raise _timed_out(queued, job, timeout)
        time.sleep(min(interval, max(0.0, deadline - time.monotonic())))
        interval = min(interval * 2, MAX_INTERVAL)


async def wait_async(get: Callable[[str], Awaitable[dict]], queued: dict, timeout: float) -> dict:
    deadline, interval = time.monotonic() + timeout, FIRST_INTERVAL
    while True:
        job = await get(queued["status_url"])
        if job["status"] in FINISHED:
            return outcome(queued, job)
        if time.monotonic() >= deadline:
            raise _timed_out(queued, job, timeout)
        await asyncio.sleep(min(interval, max(0.0, deadline - time.monotonic())))
        interval = min(interval * 2, MAX_INTERVAL)
