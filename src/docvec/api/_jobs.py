"""Uploads indexed in the background: a job per upload, its progress and result readable at /jobs/{id}.

Jobs run one at a time on one thread (the index writes one document at a time anyway) and live in this
process's memory: a restart forgets them (the documents they indexed stay). The latest :data:`KEPT`
finished jobs are kept for their clients to read.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from pydantic import BaseModel, Field

from .._errors import DocvecError, IngestError, NotFoundError
from .._records import Upload

__all__ = ["KEPT", "Job", "Jobs"]

log = logging.getLogger("docvec")

#: finished jobs kept for reading
KEPT = 1000


class Job(BaseModel):
    """An upload being indexed in the background."""

    job_id: str
    status: Literal["queued", "running", "done", "failed"]
    name: str = Field(description="The uploaded file's name.")
    page: int = Field(0, description="Pages of the document done so far.")
    page_count: int = Field(0, description="Pages of the document (0 until it is opened).")
    status_url: str
    result: Upload | None = Field(None, description="The indexed document, once done.")
    detail: str | None = Field(None, description="Why it failed.")
    errors: list[dict[str, Any]] | None = Field(
        None, description="The failures, page by page, when it failed."
    )


class Jobs:
    """The jobs of one app: submit work, read a job; ``close`` finishes the running one, drops the rest."""

    def __init__(self, redact: Callable[[str], str] = str) -> None:
        """``redact`` rewrites a failure's message for the client (the server's paths out)."""
        self._redact = redact
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="docvec-upload")

    def submit(self, name: str, work: Callable[[Callable[[int, int], None]], Upload]) -> Job:
        """Queue ``work(progress)`` (which indexes one upload) and return its job."""
        job_id = uuid.uuid4().hex
        job = Job(job_id=job_id, status="queued", name=name, status_url=f"/jobs/{job_id}")
        with self._lock:
            self._jobs[job_id] = job
            self._forget_old()
        self._pool.submit(self._run, job_id, work)
        return job

    def get(self, job_id: str) -> Job:
        """A job by id; :class:`NotFoundError` when there is none (or it was forgotten)."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise NotFoundError(f"no job {job_id}")
        return job

    def close(self) -> None:
        """Finish the running job; queued ones are cancelled (their uploads stay on disk, unindexed)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _update(self, job_id: str, **changes: Any) -> None:
        with self._lock:
            self._jobs[job_id] = self._jobs[job_id].model_copy(update=changes)

    def _run(self, job_id: str, work: Callable[[Callable[[int, int], None]], Upload]) -> None:
        self._update(job_id, status="running")
        try:
            result = work(lambda page, count: self._update(job_id, page=page, page_count=count))
        except DocvecError as e:
            failures = e.failures if isinstance(e, IngestError) else None
            self._update(job_id, status="failed", detail=self._redact(str(e)), errors=failures)
        except Exception:  # a bug: the job says so, the log has the traceback
            log.exception("upload job %s failed", job_id)
            self._update(job_id, status="failed", detail="internal error")
        else:
            self._update(job_id, status="done", result=result)

    def _forget_old(self) -> None:
        finished = [j for j, job in self._jobs.items() if job.status in ("done", "failed")]
        for job_id in finished[: max(len(finished) - KEPT, 0)]:
            del self._jobs[job_id]
