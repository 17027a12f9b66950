"""Work done in the background: uploads, ingest runs and reindexes, a job each, with its progress and
result readable at /jobs/{id}.

Uploads and ingest runs take turns on one thread (the index writes one document at a time anyway); a
reindex has a thread of its own, so that the uploads of the hour it may take are not queued behind it
(they write to the live version, and the reindex brings them over before it switches). Jobs live in this
process's memory: a restart forgets them (what they indexed stays, and a reindex run again resumes). The
latest :data:`KEPT` finished jobs are kept for their clients to read.
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

from .._errors import DocvecError, IngestError, NotFoundError, error_fields
from .._records import IngestReport, ReindexReport, Upload

__all__ = ["KEPT", "Job", "JobKind", "Jobs", "Progress"]

log = logging.getLogger("docvec")

#: finished jobs kept for reading
KEPT = 1000


JobKind = Literal["upload", "ingest", "reindex"]
#: what a job's work returns
JobResult = Upload | IngestReport | ReindexReport
#: what a job's work calls as it goes: the progress fields of :class:`Job` that changed
Progress = Callable[..., None]


class Job(BaseModel):
    """Work done in the background: an upload, an ingest run or a reindex."""

    job_id: str
    kind: JobKind = "upload"
    status: Literal["queued", "running", "done", "failed"]
    name: str = Field(description="The uploaded file's name, or what the job does.")
    documents_done: int = Field(0, description="Documents finished so far (ingest runs and reindexes).")
    documents_total: int = Field(0, description="Documents to do (0 until they are known).")
    current: str | None = Field(None, description="The document being read.")
    page: int = Field(0, description="Pages of the current document done so far.")
    page_count: int = Field(0, description="Pages of the current document (0 until it is opened).")
    status_url: str
    result: Upload | IngestReport | ReindexReport | None = Field(
        None,
        description="What the job came to, once done: the document, the ingest report or the reindex report.",
    )
    detail: str | None = Field(None, description="Why it failed.")
    error: str | None = Field(None, description="The docvec error class it failed with.")
    fields: dict[str, Any] | None = Field(None, description="What that error carries besides its message.")
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
        self._writes = ThreadPoolExecutor(max_workers=1, thread_name_prefix="docvec-writes")
        self._reindex = ThreadPoolExecutor(max_workers=1, thread_name_prefix="docvec-reindex")

    def submit(self, name: str, work: Callable[[Progress], JobResult], *, kind: JobKind = "upload") -> Job:
        """Queue ``work(progress)`` and return its job; ``progress(**fields)`` updates the job's progress
        fields (``page``, ``page_count``, ``documents_done`` ...)."""
        job_id = uuid.uuid4().hex
        job = Job(job_id=job_id, kind=kind, status="queued", name=name, status_url=f"/jobs/{job_id}")
        with self._lock:
            self._jobs[job_id] = job
            self._forget_old()
        pool = self._reindex if kind == "reindex" else self._writes
        pool.submit(self._run, job_id, work)
        return job

    def get(self, job_id: str) -> Job:
        """A job by id; :class:`NotFoundError` when there is none (or it was forgotten)."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise NotFoundError(f"no job {job_id}")
        return job

    def close(self) -> None:
        """Finish the running jobs; queued ones are cancelled (their uploads stay on disk, unindexed)."""
        self._writes.shutdown(wait=True, cancel_futures=True)
        self._reindex.shutdown(wait=True, cancel_futures=True)

    def _update(self, job_id: str, **changes: Any) -> None:
        with self._lock:
            self._jobs[job_id] = self._jobs[job_id].model_copy(update=changes)

    def _run(self, job_id: str, work: Callable[[Progress], JobResult]) -> None:
        self._update(job_id, status="running")
        try:
            result = work(lambda **fields: self._update(job_id, **fields))
        except DocvecError as e:
            failures = e.failures if isinstance(e, IngestError) else None
            fields = {k: self._redact(v) if isinstance(v, str) else v for k, v in error_fields(e).items()}
            self._update(
                job_id,
                status="failed",
                detail=self._redact(str(e)),
                errors=failures,
                error=type(e).__name__,
                fields=fields or None,
            )
        except Exception:  # a bug: the job says so, the log has the traceback
            log.exception("job %s failed", job_id)
            self._update(job_id, status="failed", detail="internal error", error="DocvecError")
        else:
            self._update(job_id, status="done", result=result)

    def _forget_old(self) -> None:
        finished = [j for j, job in self._jobs.items() if job.status in ("done", "failed")]
        for job_id in finished[: max(len(finished) - KEPT, 0)]:
            del self._jobs[job_id]
