"""The operator's endpoints: index files the server can read, reindex, list and drop versions, collect the
page store, delete by path, read pages' stored payloads. They act on the server's own files: who may call
them is :func:`docvec.api._access.require_operator`'s to say (the operator's key, or programs on this
machine when the server has none), and the paths an operator names lie under ``DOCVEC_INGEST_ROOTS``
unless the caller is the server's own user (:mod:`docvec.api._access`).

Long work (an ingest run, a reindex) is a job: 202 with its ``status_url``, where its progress and its
report are read.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse

from .._errors import NotFoundError
from .._index import Index
from .._pipeline._ingest import IngestProgress
from .._pipeline._sources import discover
from .._records import (
    DOC_ID_PATTERN,
    GcReport,
    IngestFailure,
    IngestReport,
    PagePayload,
    ReindexReport,
    ReindexSpec,
    VersionInfo,
    shortened,
)
from . import _models as models
from ._access import Access, caller, require_operator
from ._jobs import Job, Jobs, Progress

__all__ = ["router"]


router = APIRouter(dependencies=[Depends(require_operator)])


def _index(request: Request) -> Index:
    index: Index = request.app.state.index
    return index


def _job(request: Request, job: Job) -> JSONResponse:
    return JSONResponse(job.model_dump(mode="json"), status_code=202, headers={"Location": job.status_url})


def _progress(progress: Progress, p: IngestProgress) -> None:
    progress(
        documents_done=p.documents_done,
        documents_total=p.documents_total,
        current=p.current,
        page=p.page,
        page_count=p.page_count,
    )


def _ingest(
    index: Index, body: models.IngestRequest, roots: Access | None, progress: Progress
) -> IngestReport:
    """``POST /ingest``'s work; with ``roots``, only the files that lie under its ingest roots once their
    links are resolved are read (a link in a root to a file elsewhere is a failure of its own)."""
    paths: list[str | Path] = list(body.paths)
    outside = IngestReport()
    if roots is not None:
        found = discover(body.paths, recursive=body.recursive)
        paths = [f for f in found.files if roots.within_roots(f)]
        failures = found.failures + [
            IngestFailure(path=str(f), reason="a link to a file outside the folders this server ingests from")
            for f in found.files
            if not roots.within_roots(f)
        ]
        outside = IngestReport(documents_failed=len(failures), failures=failures)
    report = index.add(
        paths,
        tags=body.tags,
        recursive=body.recursive,
        prune=body.prune,
        progress=partial(_progress, progress),
    )
    return report + outside


def _reindex(index: Index, spec: ReindexSpec, progress: Progress) -> ReindexReport:
    return index.reindex(spec, progress=partial(_progress, progress))


@router.post("/ingest", status_code=202, response_model=Job)
def ingest(request: Request, body: models.IngestRequest) -> JSONResponse:
    """Index files, folders and globs the server can read, as `docvec ingest` does: a job whose result is
    the ingest report."""
    jobs: Jobs = request.app.state.jobs
    access: Access = request.app.state.access
    who = caller(request)
    access.confine(body.paths, who)  # before anything is looked at
    what = ", ".join(body.paths[:3]) + (", ..." if len(body.paths) > 3 else "") or "prune"
    work = partial(_ingest, _index(request), body, access if who.confined else None)
    return _job(request, jobs.submit(f"ingest {what}", work, kind="ingest"))


@router.post("/reindex", status_code=202, response_model=Job)
def reindex(request: Request, body: ReindexSpec) -> JSONResponse:
    """Build a new version of the collection and switch to it once complete (searches read the old one
    meanwhile): a job whose result is the reindex report."""
    jobs: Jobs = request.app.state.jobs
    access: Access = request.app.state.access
    access.confine_model(body.model, caller(request))
    _index(request).check_reindex(body)  # a size or budget the served model does not offer: 400 now
    job = jobs.submit(
        f"reindex {_index(request).collection}", partial(_reindex, _index(request), body), kind="reindex"
    )
    return _job(request, job)


@router.get("/collections", response_model=list[VersionInfo])
def versions(request: Request) -> list[VersionInfo]:
    """The served collection's versions, oldest first, and which one is live."""
    return _index(request).versions()


@router.delete("/collections/{version}", response_model=GcReport)
def drop_version(
    request: Request, version: Annotated[str, PathParam(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")]
) -> GcReport:
    """Delete a version that is not live, and the page images no version uses any more."""
    return _index(request).drop_version(version)


@router.post("/gc", response_model=GcReport)
def gc(request: Request) -> GcReport:
    """Remove the page images no version of any collection shows."""
    return _index(request).gc()


@router.get("/documents/{doc_id}/pages", response_model=list[PagePayload])
def document_pages(
    request: Request, doc_id: Annotated[str, PathParam(pattern=DOC_ID_PATTERN, description="32 hex digits.")]
) -> list[PagePayload]:
    """A document's indexed pages in order, everything stored with each (its source path on the server
    included)."""
    return _index(request).stored_pages(doc_id)


@router.delete("/documents", response_model=models.DeleteResponse)
def delete_target(
    request: Request,
    target: Annotated[
        str,
        Query(
            min_length=1,
            max_length=4096,
            pattern=r"^[^\x00]+$",  # no name holds a NUL: the schema says what the code refuses
            description="A document id, an id prefix, or a path on the server.",
        ),
    ],
    by: Annotated[
        Literal["auto", "doc_id", "path"],
        Query(
            description="How to read the target: a path, a whole document id, or either, the start of an id "
            "included (auto)."
        ),
    ] = "auto",
) -> Any:
    """Remove a document by id, by the start of its id, or every document read from a path (as `docvec
    delete` does)."""
    removed = _index(request).delete(target, by=by)
    if not removed:
        raise NotFoundError(f"nothing indexed under {shortened(target)}")
    return models.DeleteResponse(doc_id=target, pages_removed=removed)
