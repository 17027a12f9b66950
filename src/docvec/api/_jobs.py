"""Work done in the background: uploads, ingest runs and reindexes, a job each, with its progress and
result readable at /jobs/{id}.

Every write goes through a job. Uploads and ingest runs take turns on one thread, the writer (the index
writes one document at a time anyway); a reindex has a thread of its own, so that the uploads of the hour
it may take are not queued behind it (they write to the live version, and the reindex brings them over
before it switches).

Jobs outlive the server: an upload's work is a record of the index's upload queue
(:mod:`docvec._pipeline._queue`), and each job's own record is kept in ``<data folder>/jobs/<id>.json``
(written as its status changes; its progress page by page lives in memory). A stop interrupts the running
jobs at their next page (:class:`~docvec._pipeline._ingest.Interrupted`): the upload it interrupted, and
those still queued, stay queued, and the next start indexes them, the interrupted document from after its
last written pages; an ingest run or a reindex interrupted so fails, saying that running it again resumes
it. A client may cancel a job: a queued one is dropped, a running one stops at its next page. The latest
:data:`KEPT` finished jobs are kept for their clients to read.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import threading
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from .._errors import ConflictError, DocvecError, IngestError, NotFoundError, error_fields
from .._fileio import write_json_atomic
from .._index import Index
from .._pipeline._ingest import Interrupted
from .._pipeline._queue import QueuedUpload
from .._records import IngestReport, ReindexReport, Upload

__all__ = ["FINISHED", "KEPT", "Job", "JobKind", "Jobs", "Progress"]

log = logging.getLogger("docvec")

#: finished jobs kept for reading
KEPT = 1000

JobKind = Literal["upload", "ingest", "reindex"]
JobStatus = Literal["queued", "running", "done", "failed", "cancelled"]
#: the statuses a job ends in
FINISHED: tuple[JobStatus, ...] = ("done", "failed", "cancelled")
#: what a job's work returns
JobResult = Upload | IngestReport | ReindexReport
#: what a job's work calls as it goes: the progress fields of :class:`Job` that changed
Progress = Callable[..., None]


class Job(BaseModel):
    """Work done in the background: an upload, an ingest run or a reindex."""

    job_id: str
    kind: JobKind = "upload"
    status: JobStatus = Field(
        description=(
            "queued (an upload a stop interrupted is queued again, and resumed when the server starts), "
            "running, done, failed, or cancelled (by DELETE /jobs/{id})."
        )
    )
    name: str = Field(description="The uploaded file's name, or what the job does.")
    documents_done: int = Field(0, description="Documents finished so far (an upload: 1 once it is done).")
    documents_total: int = Field(0, description="Documents to do (0 until they are known; an upload: 1).")
    current: str | None = Field(None, description="The document being read.")
    page: int = Field(0, description="Pages of the current document done so far.")
    page_count: int = Field(0, description="Pages of the current document (0 until it is opened).")
    cancelling: bool = Field(
        False, description="A cancel was asked for while it ran: it stops at its next page."
    )
    status_url: str
    result: Upload | IngestReport | ReindexReport | None = Field(
        None,
        description="What the job came to, once done: the document, the ingest report or the reindex report.",
    )
    detail: str | None = Field(None, description="Why it failed, or that it was cancelled.")
    error: str | None = Field(None, description="The docvec error class it failed with.")
    fields: dict[str, Any] | None = Field(None, description="What that error carries besides its message.")
    errors: list[dict[str, Any]] | None = Field(
        None, description="The failures, page by page, when it failed."
    )


@dataclasses.dataclass(eq=False)
class _Task:
    """A job's work while it is queued or running."""

    job_id: str
    kind: JobKind
    work: Callable[[Progress], JobResult]
    cancel: bool = False  # a client cancelled it: it stops at its next page
    halt: bool = False  # the server is stopping: it stops at its next page
    done: threading.Event = dataclasses.field(default_factory=threading.Event)


@dataclasses.dataclass(eq=False)
class _Lane:
    """One thread, and the tasks waiting for it."""

    name: str
    waiting: deque[_Task] = dataclasses.field(default_factory=deque)
    running: _Task | None = None
    thread: threading.Thread | None = None


class Jobs:
    """The jobs of one app: submit work, read a job, cancel it; :meth:`close` stops the running ones at
    their next page and keeps the queued uploads for the next start.

    With ``index``, job records are kept in its data folder's ``jobs/`` (see the module's docstring), and
    its queued uploads, those a stop or a crash interrupted first, are resumed at once.
    """

    def __init__(self, redact: Callable[[str], str] = str, *, index: Index | None = None) -> None:
        """``redact`` rewrites a failure's message for the client (the server's paths out)."""
        self._redact = redact
        self._index = index
        self._folder = None if index is None else index.settings.data_dir / "jobs"
        self._collection = None if index is None else index.collection
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._tasks: dict[str, _Task] = {}
        self._cond = threading.Condition()
        self._stopping = False
        self._writes = _Lane("docvec-writes")
        self._reindex = _Lane("docvec-reindex")
        unfinished = self._load()
        if index is not None:
            self._resume(unfinished)
        for lane in (self._writes, self._reindex):
            lane.thread = threading.Thread(target=self._serve, args=(lane,), name=lane.name, daemon=True)
            lane.thread.start()

    # -- submitting ---------------------------------------------------------------------------------

    def submit(self, name: str, work: Callable[[Progress], JobResult], *, kind: JobKind = "ingest") -> Job:
        """Queue ``work(progress)`` and return its job; ``progress(**fields)`` updates the job's progress
        fields (``page``, ``page_count``, ``documents_done`` ...), and raises
        :class:`~docvec._pipeline._ingest.Interrupted` once the job is cancelled or the server stops."""
        job_id = uuid.uuid4().hex
        job = Job(job_id=job_id, kind=kind, status="queued", name=name, status_url=f"/jobs/{job_id}")
        return self._enqueue(job, work)[0]

    def submit_upload(self, upload: QueuedUpload) -> tuple[Job, bool]:
        """The job that indexes a queued upload (its id is the upload's), and whether the writer was idle:
        whether it starts at once."""
        job = Job(
            job_id=upload.upload_id,
            status="queued",
            name=upload.name,
            documents_total=1,
            page_count=upload.page_count,
            status_url=f"/jobs/{upload.upload_id}",
        )
        return self._enqueue(job, functools.partial(self._upload, upload.upload_id))

    def _enqueue(self, job: Job, work: Callable[[Progress], JobResult]) -> tuple[Job, bool]:
        task = _Task(job.job_id, job.kind, work)
        lane = self._reindex if job.kind == "reindex" else self._writes
        with self._cond:
            idle = lane.running is None and not lane.waiting and not self._stopping
            self._jobs[job.job_id] = job
            self._tasks[job.job_id] = task
            lane.waiting.append(task)
            self._forget_old()
            self._cond.notify_all()
        self._save(job)
        return job, idle

    def _upload(self, upload_id: str, progress: Progress) -> Upload:
        """An upload job's work (its result says where the document is read from: the routes show it to
        each caller as :func:`docvec.api._routes._shown` says)."""
        assert self._index is not None  # only an app with an index queues uploads
        return self._index.index_queued(
            upload_id, progress=lambda page, count: progress(page=page, page_count=count)
        )

    # -- reading, cancelling --------------------------------------------------------------------------

    def get(self, job_id: str) -> Job:
        """A job by id; :class:`NotFoundError` when there is none (or it was forgotten)."""
        with self._cond:
            job = self._jobs.get(job_id)
        if job is None:
            raise NotFoundError(f"no job {job_id}")
        return job

    def ended(self, job_id: str) -> threading.Event:
        """Set once the job has stopped running: finished, or, for an upload, queued again by a stop."""
        with self._cond:
            task = self._tasks.get(job_id)
        if task is None:
            done = threading.Event()
            done.set()
            return done
        return task.done

    def cancel(self, job_id: str) -> Job:
        """Cancel a job: a queued one is dropped at once (an upload's file with it), a running one stops at
        its next page (``cancelling`` says so meanwhile); :class:`ConflictError` for a finished one."""
        with self._cond:
            job = self._jobs.get(job_id)
            if job is None:
                raise NotFoundError(f"no job {job_id}")
            task = self._tasks.get(job_id)
            if job.status in FINISHED or task is None:
                raise ConflictError(f"job {job_id} is {job.status}: there is nothing to cancel")
            lane = self._reindex if task.kind == "reindex" else self._writes
            queued = task in lane.waiting
            if queued:
                lane.waiting.remove(task)
            else:
                task.cancel = True
                self._jobs[job_id] = job = job.model_copy(update={"cancelling": True})
        if queued:
            if task.kind == "upload" and self._index is not None:
                self._index.drop_queued(job_id)
            self._end(task, status="cancelled", detail="cancelled before it started")
        return self.get(job_id)

    # -- stopping -------------------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        """Whether :meth:`close` was called: no job starts any more (queued uploads wait for the next
        start)."""
        return self._stopping

    def close(self) -> None:
        """Stop: the running jobs stop at their next page (an upload stays queued, to be resumed at the
        next start; an ingest run or a reindex fails, saying to run it again); queued uploads stay queued
        for the next start, other queued jobs fail. Returns once the threads are done."""
        with self._cond:
            if self._stopping:
                return
            self._stopping = True
            running = [lane.running for lane in (self._writes, self._reindex) if lane.running is not None]
            for task in running:
                task.halt = True
            lanes = (self._writes, self._reindex)
            waiting = [t for lane in lanes for t in lane.waiting if t.kind != "upload"]
            self._cond.notify_all()
        for task in waiting:
            self._end(task, status="failed", detail="the server stopped before it started: run it again")
        if running:
            log.info("stopping: the running job stops at its next page")
        for lane in (self._writes, self._reindex):
            if lane.thread is not None:
                lane.thread.join()

    # -- the threads ----------------------------------------------------------------------------------

    def _serve(self, lane: _Lane) -> None:
        while True:
            with self._cond:
                while not lane.waiting and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                task = lane.waiting.popleft()
                lane.running = task
            try:
                self._run(task)
            finally:
                with self._cond:
                    lane.running = None

    def _progress(self, task: _Task, **fields: Any) -> None:
        if task.cancel or task.halt:
            raise Interrupted(cancelled=task.cancel)
        with self._cond:
            self._jobs[task.job_id] = self._jobs[task.job_id].model_copy(update=fields)

    def _run(self, task: _Task) -> None:
        self._set(task.job_id, status="running")
        try:
            result = task.work(functools.partial(self._progress, task))
        except Interrupted as e:
            if e.cancelled:
                self._end(task, status="cancelled", detail="cancelled while it ran: nothing of it was kept")
            elif task.kind == "upload":
                # stays queued, on disk: the next start resumes it after the pages written
                self._end(task, status="queued", page=0)
            else:
                again = "a reindex run again resumes" if task.kind == "reindex" else "what it indexed is kept"
                self._end(
                    task,
                    status="failed",
                    detail=f"interrupted: the server stopped; run it again ({again})",
                    error="DocvecError",
                )
        except DocvecError as e:
            failures = e.failures if isinstance(e, IngestError) else None
            fields = {k: self._redact(v) if isinstance(v, str) else v for k, v in error_fields(e).items()}
            self._end(
                task,
                status="failed",
                detail=self._redact(str(e)),
                errors=failures,
                error=type(e).__name__,
                fields=fields or None,
            )
        except Exception:  # a bug: the job says so, the log has the traceback
            log.exception("job %s failed", task.job_id)
            self._end(task, status="failed", detail="internal error", error="DocvecError")
        else:
            # an upload's work reports its pages only: its one document is done when the work is
            finished = {"documents_done": 1} if task.kind == "upload" else {}
            self._end(task, status="done", result=result, **finished)

    def _set(self, job_id: str, **changes: Any) -> Job:
        with self._cond:
            self._jobs[job_id] = job = self._jobs[job_id].model_copy(update=changes)
        self._save(job)
        return job

    def _end(self, task: _Task, **changes: Any) -> None:
        """A task is over: its job takes ``changes`` (and is no longer cancelling), and is saved."""
        self._set(task.job_id, cancelling=False, **changes)
        with self._cond:
            self._tasks.pop(task.job_id, None)
            self._forget_old()
        task.done.set()

    # -- the records ----------------------------------------------------------------------------------

    def _save(self, job: Job) -> None:
        if self._folder is None:
            return
        data = job.model_dump(mode="json") | {"collection": self._collection}
        try:
            write_json_atomic(self._folder / f"{job.job_id}.json", data)
        except OSError as e:  # a full disk: the job goes on, only a restart would not know it
            log.warning("job %s: cannot save its record: %s", job.job_id, e)

    def _load(self) -> dict[str, Job]:
        """Read the saved jobs, oldest first; returns this collection's unfinished uploads (for
        :meth:`_resume`). Other unfinished jobs of this collection were cut short by a crash: they fail."""
        if self._folder is None:
            return {}
        try:
            paths = sorted(self._folder.glob("[0-9a-f]*.json"), key=lambda p: p.stat().st_mtime)
        except FileNotFoundError:
            return {}
        unfinished: dict[str, Job] = {}
        for path in paths:
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                job = Job.model_validate(data)
            except (OSError, ValueError, ValidationError) as e:
                log.warning("jobs: cannot read %s (%s); left alone", path.name, e)
                continue
            self._jobs[job.job_id] = job
            if job.status in FINISHED or data.get("collection") != self._collection:
                continue
            if job.kind == "upload":
                unfinished[job.job_id] = job
            else:
                stopped = "the server stopped before it finished: run it again"
                self._set(job.job_id, status="failed", detail=stopped, error="DocvecError")
        with self._cond:
            self._forget_old()
        return unfinished

    def _resume(self, unfinished: dict[str, Job]) -> None:
        """Queue the index's uploads again (those a stop or a crash interrupted first); an unfinished upload
        job that the queue no longer holds ended as the server stopped, without its record saying so."""
        assert self._index is not None
        for upload in self._index.recover_uploads():
            job = unfinished.pop(upload.upload_id, None)
            if job is None:
                self.submit_upload(upload)
            else:
                # documents_total: a record saved before uploads counted their one document
                resumed = {"status": "queued", "page": 0, "cancelling": False, "documents_total": 1}
                job = job.model_copy(update=resumed)
                self._enqueue(job, functools.partial(self._upload, upload.upload_id))
            log.info("%s: upload queued again (%s)", upload.name, upload.state)
        for job_id in unfinished:
            self._set(
                job_id,
                status="failed",
                error="DocvecError",
                detail="the server stopped before this job's end was saved: GET /documents tells whether the "
                "document is indexed; upload it again if not",
            )

    def _forget_old(self) -> None:
        """Drop the oldest finished jobs beyond :data:`KEPT`, and their records (the lock held)."""
        finished = [j for j, job in self._jobs.items() if job.status in FINISHED]
        for job_id in finished[: max(len(finished) - KEPT, 0)]:
            del self._jobs[job_id]
            if self._folder is not None:
                (self._folder / f"{job_id}.json").unlink(missing_ok=True)
