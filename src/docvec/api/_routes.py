"""The endpoints: thin over :class:`docvec.Index` (one per app, in ``app.state.index``).

They are plain ``def`` functions, so FastAPI runs them in its threadpool; the index serialises writes and
the embedder its own calls, searches run side by side.
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response

from .._errors import ForbiddenError, InputError, NotFoundError, StoreError, rebuild_error
from .._index import Index
from .._model._registry import TINY_ARCHES, TINY_STAMP
from .._records import (
    DOC_ID_PATTERN,
    DocumentList,
    DocumentSummary,
    Page,
    PageText,
    Search,
    SearchFilter,
    Upload,
    is_source_name,
    parse_tags,
    shortened,
)
from . import _models as models
from ._access import SESSION_COOKIE, Access, Role, caller, require_operator
from ._files import file_type
from ._jobs import Job, Jobs

__all__ = ["router"]

_DOC_ID = Annotated[str, PathParam(pattern=DOC_ID_PATTERN, description="32 hex digits.")]
_PAGE = Annotated[int, PathParam(ge=1, le=1_000_000, description="Page number, 1-based.")]

router = APIRouter()


def _index(request: Request) -> Index:
    index: Index = request.app.state.index
    return index


_Shown = TypeVar("_Shown", models.SearchHitOut, DocumentSummary, models.DocumentDetail, Upload)


def _shown(request: Request, item: _Shown) -> _Shown:
    """A document as its caller sees it: an operator, where the server read it from; a reader, the path
    under the ingest root it lies in (``<root name>/<path in it>``), else its display name (an upload's
    name included): never the server's own folders."""
    if caller(request).role >= Role.OPERATOR:
        return item
    index = _index(request)
    access: Access = request.app.state.access
    source = Path(item.source)
    if source.parent == index.uploads or not access.within_roots(source):
        return item.model_copy(update={"source": item.name})
    return item.model_copy(update={"source": access.shown_source(item.source)})


def _reader_filter(request: Request, flt: SearchFilter | None) -> SearchFilter | None:
    """A search filter in the caller's terms made the store's: a reader names a source as the server
    shows it (``<root name>/<path in it>``), an operator by its path on the server; either may name
    documents by their name (no ``/``: an upload's original name, a file's own name), which is the same
    for every caller and says nothing of the server's folders."""
    if flt is None or flt.source is None or caller(request).role >= Role.OPERATOR:
        return flt
    access: Access = request.app.state.access
    actual = access.actual_source(flt.source)
    if actual is not None:
        return flt.model_copy(update={"source": actual})
    if is_source_name(flt.source):
        return flt
    # the same answer whatever lies on the server's disk: a reader's path never reaches it
    raise InputError(
        f"filter source {shortened(flt.source)!r}: a reader names a folder as this server shows paths "
        "('<folder>/<path in it>', as hits' source says), under a folder it ingests from, or documents "
        "by their name, without '/'"
    )


#: the search page's policy: its own script and style only, images from this server (and the page's own
#: object URLs), requests to this server; no plugin, frame or form target elsewhere
_PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)


#: a stored image's policy: shown, nothing run
_FILE_POLICY = "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; sandbox"


def _web(name: str, media_type: str) -> Response:
    text = resources.files("docvec").joinpath(f"web/{name}").read_text("utf-8")
    return Response(text, media_type=media_type, headers={"Content-Security-Policy": _PAGE_POLICY})


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def search_page() -> Response:
    """The search page."""
    return _web("index.html", "text/html; charset=utf-8")


@router.get("/app.js", include_in_schema=False)
def search_page_script() -> Response:
    """The search page's script."""
    return _web("app.js", "text/javascript; charset=utf-8")


@router.get("/app.css", include_in_schema=False)
def search_page_style() -> Response:
    """The search page's style."""
    return _web("app.css", "text/css; charset=utf-8")


@router.get("/session", response_model=models.SessionInfo)
def session_info(request: Request) -> models.SessionInfo:
    """Whether this server asks readers for a key, and whether this caller has a reader's right."""
    access: Access = request.app.state.access
    return models.SessionInfo(key_required=access.reader_key is not None, reader=caller(request).role >= 1)


@router.post("/session", status_code=204, responses={401: {"model": models.ErrorResponse}})
def sign_in(request: Request, body: models.SessionRequest) -> Response:
    """The search page signs in: with the reader's (or the operator's) key, a session cookie the page's
    scripts cannot read (HttpOnly, this site only), which gives a reader's right and no more."""
    access: Access = request.app.state.access
    value = access.session_for(body.key)
    if value is None:
        raise ForbiddenError(
            "wrong key: neither this server's reader key (DOCVEC_API_KEY) nor its operator key"
            if access.reader_key
            else "this server asks no key: nothing to sign in to"
        )
    response = Response(status_code=204)
    response.set_cookie(
        SESSION_COOKIE,
        value,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )
    return response


@router.delete("/session", status_code=204)
def sign_out() -> Response:
    """The search page signs out: its session cookie is dropped."""
    response = Response(status_code=204)
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="strict")
    return response


@router.get(
    "/healthz", response_model=models.HealthResponse, responses={503: {"model": models.HealthResponse}}
)
def healthz(request: Request) -> JSONResponse:
    """200 when the model is loaded and the store answers, else 503."""
    index = _index(request)
    out = models.HealthResponse(
        status="ok",
        model=_model_name(index.model),
        test_model=_is_test_model(index),
        collection=index.collection,
        reranker=_model_name(index.settings.rerank_model) if index.settings.rerank_model else None,
        rerank=index.settings.rerank,
    )
    try:
        out.pages = index.count()
        out.search_mode = index.search_mode()
        auto = index.search_mode("auto")  # hybrid where there are tokens, fused with text where there is text
        out.multivector = auto.startswith("hybrid")
        out.text = auto.endswith("text")
    except StoreError as e:
        out.status, out.detail = "unavailable", request.app.state.redact(str(e))
    # the reranker is said either way: null, a server without one (the search page hides its switch)
    body = {**out.model_dump(exclude_none=True), "reranker": out.reranker}
    return JSONResponse(body, 200 if out.status == "ok" else 503)


def _is_test_model(index: Index) -> bool:
    """Whether the index's model is one of docvec's tiny test models (``docvec models tiny``), whose
    weights are random: its rankings mean nothing, and a person searching should be told. A build leaves
    its stamp beside its files, which are named by their architecture's test model (a copy without the
    stamp keeps the names)."""
    language_model = index.embedder.files.language_model
    if (language_model.parent / TINY_STAMP).is_file():
        return True
    return any(language_model.name.startswith(f"{base}-") for base, _ in TINY_ARCHES.values())


def _model_name(model: str) -> str:
    """A model as anyone may be told it: a registry name, or a model folder's (or file pair's) own name,
    not where the server keeps it (this answer is open to every client)."""
    if "/" not in model and "\\" not in model:
        return model
    return ",".join(Path(part.strip()).name for part in model.split(","))


def _answer(request: Request, search: Search) -> models.SearchResponse:
    """The index's answer to ``search`` as this caller may see it (a reader names and is shown sources
    in the server's terms for readers)."""
    search = search.model_copy(update={"filter": _reader_filter(request, search.filter)})
    result = _index(request).search(search)
    hits = [_shown(request, models.SearchHitOut.from_hit(h)) for h in result]
    return models.SearchResponse.model_validate({**result.model_dump(exclude={"hits"}), "hits": hits})


@router.post("/search", response_model=models.SearchResponse)
def search_post(request: Request, body: Search) -> models.SearchResponse:
    """The pages that best match a query, best first, optionally within a document or tags, and reranked
    (``rerank``: 409 from a server without a reranker); the answer says the mode and the reranker's depth
    that answered it."""
    return _answer(request, body)


@router.get("/search", response_model=models.SearchResponse)
def search_get(request: Request, params: Annotated[models.SearchParams, Query()]) -> models.SearchResponse:
    """``GET /search?q=...&k=...&doc_id=...&source=...&tag=key=value&rerank=...``: the same search, for
    links and quick tries."""
    return _answer(request, params.to_search())


@router.get("/documents", response_model=DocumentList)
def list_documents(
    request: Request,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> DocumentList:
    """Indexed documents, one entry each, ordered by name (then by source path): the same order for
    every caller, whatever source each is shown."""
    index = _index(request)
    listed = index.documents(offset=offset, limit=limit)
    return listed.model_copy(update={"documents": [_shown(request, d) for d in listed.documents]})


@router.get("/documents/{doc_id}", response_model=models.DocumentDetail)
def get_document(request: Request, doc_id: _DOC_ID) -> models.DocumentDetail:
    """One document and its indexed pages."""
    stored = _index(request).stored_pages(doc_id)
    summary = _shown(request, DocumentSummary.of(stored[0], pages_written=len(stored)))
    return models.DocumentDetail(
        **summary.model_dump(),
        pages=[
            models.PageInfo.model_validate(Page.of(p).model_dump() | models.page_urls(doc_id, p.page))
            for p in stored
        ],
    )


@router.delete("/documents/{doc_id}", response_model=models.DeleteResponse)
def delete_document(request: Request, doc_id: _DOC_ID) -> models.DeleteResponse:
    """Remove a document (all its pages) from the index, and its file when it came as an upload; its
    page images stay in the page store."""
    removed = _index(request).delete(doc_id, by="doc_id")
    if not removed:
        raise NotFoundError(f"no document {doc_id}")
    return models.DeleteResponse(doc_id=doc_id, pages_removed=removed)


# HEAD too: the search page asks whether the file is still there before it opens a tab for it
@router.api_route("/documents/{doc_id}/file", methods=["GET", "HEAD"], response_class=FileResponse)
def document_file(request: Request, doc_id: _DOC_ID) -> FileResponse:
    """The document's file as it was indexed (the original of an upload), by the type its bytes have: a
    PDF or the image's own type, shown in the browser; anything else an attachment of bytes. Its name is
    its display name, with the extension of that type (an upload's name is the client's)."""
    found = _index(request).document_file(doc_id)
    path, name = found.path, found.name
    served = file_type(path)
    # an image or bytes shown on their own run nothing; a PDF gets no policy (Chromium's viewer is a
    # plugin a policy would block), its type being verified and never sniffed
    policy = {} if served.media_type == "application/pdf" else {"Content-Security-Policy": _FILE_POLICY}
    return FileResponse(
        path,
        media_type=served.media_type,
        filename=served.name_for(name),
        content_disposition_type="inline" if served.inline else "attachment",
        headers=policy,
    )


@router.get("/documents/{doc_id}/pages/{page}/image", response_class=FileResponse)
def page_image(request: Request, doc_id: _DOC_ID, page: _PAGE) -> FileResponse:
    """The page as rendered for the model (PNG)."""
    return FileResponse(_index(request).page_file(doc_id, page), media_type="image/png")


@router.get("/documents/{doc_id}/pages/{page}/text", response_model=PageText)
def page_text(request: Request, doc_id: _DOC_ID, page: _PAGE) -> PageText:
    """The page's whole text as the index keeps it: its PDF text layer, or OCR ("" for a page without
    text; 409 on a collection that keeps no text)."""
    return _index(request).page_text(doc_id, page)


@router.get("/documents/{doc_id}/pages/{page}/thumbnail", response_class=FileResponse)
def page_thumbnail(request: Request, doc_id: _DOC_ID, page: _PAGE) -> FileResponse:
    """A small JPEG of the page, at most 256 px on its longer side."""
    return FileResponse(_index(request).page_file(doc_id, page, thumbnail=True), media_type="image/jpeg")


@router.post(
    "/documents",
    response_model=Upload,
    responses={
        202: {"model": Job, "description": "Indexing in the background"},
        413: {"model": models.ErrorResponse},
    },
)
async def upload_document(
    request: Request,
    file: Annotated[UploadFile, File(description="A PDF or an image (not empty).")],
    tag: Annotated[list[models.TagText], Form(description="key=value metadata (repeatable).")] = [],  # noqa: B006
    wait: Annotated[
        bool | None,
        Query(
            description=(
                "Answer when indexed (true) or at once with a job (false); default: when indexed if it is "
                "small (DOCVEC_SYNC_UPLOAD_MB, DOCVEC_SYNC_UPLOAD_PAGES) and nothing else is being indexed."
            )
        ),
    ] = None,
) -> Any:
    """Upload one PDF or image and index it: 200 with the document when done, or 202 with a job to follow
    at its ``status_url``; 413 over the size or page limit, 422 with the reasons when it cannot be
    indexed.

    Async on purpose: a request that waits for its upload holds no thread of the server's pool meanwhile,
    and the work itself is the writer's (the one thread every write goes through, which a stop reaches)."""
    index, state = _index(request), request.app.state
    jobs: Jobs = state.jobs
    name = file.filename or "the upload"
    tags = parse_tags(tag)  # before anything is saved: a bad tag is a 400
    # receiving it and counting its pages (a render worker's) block: a thread of the pool does that
    document = await run_in_threadpool(
        partial(index.keep_upload, file.file, name=name, limit=state.upload_limit)
    )
    try:
        queued = await run_in_threadpool(partial(index.queue_upload, document, tags=tags))
    except Exception:  # not queued: not kept (a request cancelled meanwhile leaves it to gc's grace)
        document.path.unlink(missing_ok=True)
        raise
    job, idle = jobs.submit_upload(queued)
    if wait is None:
        small = (
            queued.size <= state.sync_upload_limit and queued.page_count <= index.settings.sync_upload_pages
        )
        wait = small and idle  # a small upload never waits behind another's work
    if wait:
        ended = jobs.ended(job.job_id)
        while not ended.is_set() and not jobs.stopping:  # stopping: it stays queued for the next start
            await asyncio.sleep(_POLL_S)
        job = _job_for(request, job.job_id)
        if job.status == "done" and isinstance(job.result, Upload):
            return job.result
        if job.status == "failed":
            # the error the work raised, as if this request had raised it (the same status and body)
            raise rebuild_error(job.error or "DocvecError", job.detail or "", job.fields, job.errors)
    return JSONResponse(job.model_dump(mode="json"), status_code=202, headers={"Location": job.status_url})


#: how often a request that waits for its job looks at it, in seconds
_POLL_S = 0.05

_JOB_ID = Annotated[str, PathParam(pattern=r"^[0-9a-f]{32}$")]


def _job_for(request: Request, job_id: str) -> Job:
    """A job, for a caller who may act on it: an upload's for any reader, an ingest run's or a reindex's
    for the operator only (they name the server's files); an upload's document as the caller sees it."""
    jobs: Jobs = request.app.state.jobs
    job = jobs.get(job_id)
    if job.kind != "upload":
        require_operator(request)
    if isinstance(job.result, Upload):
        job = job.model_copy(update={"result": _shown(request, job.result)})
    return job


@router.get("/jobs/{job_id}", response_model=Job)
def get_job(request: Request, job_id: _JOB_ID) -> Job:
    """Where a background job stands: queued, running (pages done), done (the document or the report),
    failed (the reasons) or cancelled. Ingest runs and reindexes are the operator's to read."""
    return _job_for(request, job_id)


@router.delete("/jobs/{job_id}", response_model=Job, responses={409: {"model": models.ErrorResponse}})
async def cancel_job(request: Request, job_id: _JOB_ID) -> Job:
    """Cancel a job: a queued one is dropped (an upload's file with it), a running one stops at its next
    page (a cancelled upload's pages written so far are removed; an ingest run keeps what it indexed, a
    reindex resumes when run again). Answers the job as it then stands: ``cancelled``, or still
    ``running`` with ``cancelling`` true when its page takes longer than a few seconds. 409 for a job that
    has ended."""
    jobs: Jobs = request.app.state.jobs
    _job_for(request, job_id)
    await run_in_threadpool(jobs.cancel, job_id)  # a queued upload's file is removed: disk work
    ended, deadline = jobs.ended(job_id), time.monotonic() + _CANCEL_WAIT_S
    while not ended.is_set() and time.monotonic() < deadline:
        await asyncio.sleep(_POLL_S)
    return _job_for(request, job_id)


#: how long DELETE /jobs/{id} waits for a running job to reach its next page
_CANCEL_WAIT_S = 10.0
