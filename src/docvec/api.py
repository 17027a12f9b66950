"""The HTTP API and web page: FastAPI over the same sync core the CLI uses.

The model, the store and the page store are opened once, in the lifespan, and shared by every request; the
endpoints are plain ``def`` functions, so FastAPI runs them in its threadpool (the embedder serialises its own
calls, writes to the index are serialised here). Errors are mapped to status codes in one place
(:func:`_install_error_handlers`); a response never carries a traceback.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Form, Query, Request, UploadFile
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from PIL import Image
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from .config import Settings
from .embed import Embedder
from .errors import ConfigError, DocvecError, InputError
from .payloads import IngestReport
from .pipeline import Indexer, delete_points, open_indexer, parse_tags
from .render import RenderError, detect_kind
from .search import SearchFilter as PageFilter
from .search import search
from .store import CollectionNotFoundError, Filter, StoreBusyError, StoreError, StoreUnavailableError

__all__ = [
    "API_MODELS",
    "MAX_QUERY_CHARS",
    "MAX_REQUEST_BYTES",
    "MAX_UPLOAD_BYTES",
    "DeleteResponse",
    "DocumentDetail",
    "DocumentList",
    "DocumentSummary",
    "ErrorResponse",
    "HealthResponse",
    "PageInfo",
    "SearchFilter",
    "SearchHitOut",
    "SearchRequest",
    "SearchResponse",
    "UploadResponse",
    "create_app",
]

log = logging.getLogger("docvec")

#: Largest accepted upload (one PDF or image); ``settings.max_upload_mb`` overrides it when present.
MAX_UPLOAD_BYTES = 50 * 1024 * 1024
#: Largest body of any other request (search queries are short).
MAX_REQUEST_BYTES = 1024 * 1024
#: Multipart framing around an upload: boundaries and part headers.
_MULTIPART_SLACK = 64 * 1024
MAX_QUERY_CHARS = 1000

_DOC_ID_PATTERN = r"^[0-9a-f]{32}$"
_DOC_ID = Annotated[str, PathParam(pattern=_DOC_ID_PATTERN, description="32 hex digits.")]
_PAGE = Annotated[int, PathParam(ge=1, le=1_000_000, description="Page number, 1-based.")]
_TAG_PART = re.compile(r"^[^=\s][^=]*$")


# -- request and response models --------------------------------------------------------------------


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("the query is empty")
    return text


QueryText = Annotated[
    str,
    Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for, in words."),
    AfterValidator(_not_blank),
]


def _check_tags(tags: dict[str, str] | None) -> dict[str, str] | None:
    for key, value in (tags or {}).items():
        if not _TAG_PART.match(key) or not value.strip():
            raise ValueError(f"tag {key!r}: keys are non-empty without '=', values non-empty")
    return tags


class SearchFilter(BaseModel):
    """Which pages a search considers; every given condition must hold."""

    model_config = ConfigDict(extra="forbid")

    doc_id: str | None = Field(None, pattern=_DOC_ID_PATTERN, description="Only this document.")
    source_prefix: str | None = Field(
        None, min_length=1, max_length=4096, description="Only documents read from under this path."
    )
    tags: Annotated[dict[str, str] | None, AfterValidator(_check_tags)] = Field(
        None, description="Only pages tagged key=value (as given to `docvec ingest --tag`)."
    )

    def to_filter(self) -> PageFilter:
        """The search core's filter (which needs every tag to hold, not any)."""
        return PageFilter(
            doc_id=self.doc_id,
            source_prefix=self.source_prefix,
            tags=tuple(f"{k.strip()}={v.strip()}" for k, v in sorted((self.tags or {}).items())),
        )


class SearchRequest(BaseModel):
    """``POST /search``'s body."""

    model_config = ConfigDict(extra="forbid")

    query: QueryText
    top_k: int = Field(5, ge=1, le=100, description="How many pages to return.")
    filter: SearchFilter | None = None


class SearchParams(BaseModel):
    """``GET /search``'s query string."""

    model_config = ConfigDict(extra="forbid")

    q: QueryText
    k: int = Field(5, ge=1, le=100, description="How many pages to return.")


class SearchHitOut(BaseModel):
    """One matching page."""

    doc_id: str
    source: str = Field(description="The file the document was read from.")
    page: int = Field(ge=1, description="Page number, 1-based.")
    score: float = Field(description="Cosine similarity; higher is closer.")
    tags: dict[str, str]
    thumbnail_url: str
    image_url: str


class SearchResponse(BaseModel):
    """The best pages for a query, best first."""

    query: str
    top_k: int
    hits: list[SearchHitOut]


class DocumentSummary(BaseModel):
    """One indexed document."""

    doc_id: str
    source: str
    kind: str = Field(description="pdf or image.")
    page_count: int = Field(description="Pages in the document.")
    pages_indexed: int = Field(description="Pages in the index (the others failed).")
    tags: dict[str, str]
    ingested_at: datetime


class PageInfo(BaseModel):
    """One indexed page of a document."""

    page: int = Field(ge=1)
    width: int
    height: int
    thumbnail_url: str
    image_url: str


class DocumentDetail(DocumentSummary):
    """A document with its indexed pages."""

    pages: list[PageInfo]


class DocumentList(BaseModel):
    """A page of the document list, ordered by source path."""

    total: int
    offset: int
    limit: int
    documents: list[DocumentSummary]


class DeleteResponse(BaseModel):
    """What ``DELETE /documents/{doc_id}`` removed."""

    doc_id: str
    pages_removed: int


class UploadResponse(BaseModel):
    """An uploaded document, indexed (or already there)."""

    doc_id: str
    source: str
    pages: int = Field(description="Pages of the document in the index.")
    already_indexed: bool


class HealthResponse(BaseModel):
    """Whether the model is loaded and the store answers."""

    status: str
    model: str
    collection: str
    pages: int | None = None
    detail: str | None = None


class ErrorResponse(BaseModel):
    """The body of every error response."""

    detail: str
    errors: list[dict[str, Any]] | None = None


#: Response models, for exporting their JSON schemas.
API_MODELS: list[type[BaseModel]] = [
    SearchResponse,
    SearchHitOut,
    DocumentList,
    DocumentSummary,
    DocumentDetail,
    PageInfo,
    DeleteResponse,
    UploadResponse,
    HealthResponse,
    ErrorResponse,
]


# -- errors ------------------------------------------------------------------------------------------


class NotFoundError(DocvecError):
    """An unknown document or page."""


class _UnprocessableError(DocvecError):
    """An upload that could not be indexed; ``reasons`` says why."""

    def __init__(self, message: str, reasons: list[dict[str, Any]]) -> None:
        self.reasons = reasons
        super().__init__(message)


class _TooLargeError(DocvecError):
    """A request body over its limit."""


# Most specific first: the first class an error is an instance of decides its status.
_STATUS: list[tuple[type[DocvecError], int]] = [
    (NotFoundError, 404),
    (CollectionNotFoundError, 404),
    (_TooLargeError, 413),
    (_UnprocessableError, 422),
    (RenderError, 422),
    (InputError, 400),
    (StoreUnavailableError, 503),
    (StoreBusyError, 503),
    (StoreError, 500),
    (ConfigError, 500),
]


def _status_of(exc: DocvecError) -> int:
    return next((code for cls, code in _STATUS if isinstance(exc, cls)), 500)


def _error(status: int, detail: str, errors: list[dict[str, Any]] | None = None) -> JSONResponse:
    return JSONResponse(ErrorResponse(detail=detail, errors=errors).model_dump(exclude_none=True), status)


def _install_error_handlers(app: FastAPI) -> None:
    """Map every error to a status code and a JSON body: the one place that does."""

    async def docvec_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, DocvecError)
        status = _status_of(exc)
        if status >= 500:
            log.error("%s %s: %s", request.method, request.url.path, exc)
        return _error(status, str(exc), getattr(exc, "reasons", None))

    async def validation_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        # Only where and what: echoing the input back could return a whole oversized query.
        errors = [
            {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", "")), "type": e.get("type")}
            for e in exc.errors()
        ]
        detail = "; ".join(f"{'.'.join(e['loc'][1:]) or e['loc'][0]}: {e['msg']}" for e in errors)
        return _error(422, detail or "invalid request", errors)

    async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("%s %s failed", request.method, request.url.path)
        return _error(500, "internal error")

    app.add_exception_handler(DocvecError, docvec_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(Exception, unexpected_error)


# -- middleware: API key and body size ---------------------------------------------------------------

_Scope = MutableMapping[str, Any]
_Message = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[_Message]]
_Send = Callable[[_Message], Awaitable[None]]
_ASGIApp = Callable[[_Scope, _Receive, _Send], Awaitable[None]]

#: Open without an API key: the liveness probe and the web page (which asks for the key itself).
_OPEN_PATHS = frozenset({"/", "/healthz"})


async def _send_error(send: _Send, status: int, detail: str) -> None:
    body = ErrorResponse(detail=detail).model_dump_json(exclude_none=True).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class _Guard:
    """Pure ASGI middleware: API key check, then body size limit (by header, and counted as it streams)."""

    def __init__(self, app: _ASGIApp, *, api_key: str | None, upload_limit: int) -> None:
        self.app = app
        self.api_key = api_key
        self.upload_limit = upload_limit

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self.api_key and scope["path"] not in _OPEN_PATHS:
            given = headers.get("x-api-key", "")
            if not secrets.compare_digest(given.encode(), self.api_key.encode()):
                await _send_error(send, 401, "missing or wrong X-API-Key header")
                return
        upload = scope["method"] == "POST" and scope["path"] == "/documents"
        limit = self.upload_limit + _MULTIPART_SLACK if upload else MAX_REQUEST_BYTES
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await _send_error(send, 413, f"request body over {limit} bytes")
            return
        received = 0
        started = rejected = False

        async def counting_receive() -> _Message:
            nonlocal received, rejected
            if rejected:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # A body streamed past its limit without a (truthful) length: answer 413 now and tell
                    # the app the client left, since frameworks turn errors raised while reading into 400s.
                    rejected = True
                    if not started:
                        await _send_error(send, 413, f"request body over {limit} bytes")
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: _Message) -> None:
            nonlocal started
            if rejected:
                return  # the 413 went out instead
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:
            if not rejected:
                raise
            # the app's reaction to the disconnect we reported: nothing more to say


# -- the services the endpoints share ----------------------------------------------------------------


@dataclass
class _Services:
    settings: Settings
    embedder: Embedder
    indexer: Indexer
    #: uploads and deletes one at a time: the renderer serves one document at a time, and a delete racing
    #: an ingest of the same document would leave it half there
    write_lock: threading.Lock

    @property
    def collection(self) -> str:
        return self.indexer.collection


def _services(request: Request) -> _Services:
    services: _Services = request.app.state.services
    return services


def _tags(payload: dict[str, Any]) -> dict[str, str]:
    pairs = (str(t).partition("=") for t in payload.get("tags") or [])
    return {k: v for k, _, v in pairs}


def _page_urls(doc_id: str, page: int) -> dict[str, str]:
    base = f"/documents/{doc_id}/pages/{page}"
    return {"thumbnail_url": f"{base}/thumbnail", "image_url": f"{base}/image"}


def _summary(payload: dict[str, Any]) -> DocumentSummary:
    return DocumentSummary(
        doc_id=str(payload["doc_id"]),
        source=str(payload.get("source", "")),
        kind=str(payload.get("kind", "")),
        page_count=int(payload.get("page_count", 0)),
        pages_indexed=int(payload.get("pages_indexed", 0)),
        tags=_tags(payload),
        ingested_at=payload["ingested_at"],
    )


def _pages_of(svc: _Services, doc_id: str) -> list[dict[str, Any]]:
    pages = [p for _, p in svc.indexer.store.scroll(svc.collection, Filter(doc_ids=(doc_id,)))]
    if not pages:
        raise NotFoundError(f"no document {doc_id}")
    return sorted(pages, key=lambda p: int(p.get("page", 0)))


def _page_file(svc: _Services, doc_id: str, page: int, field: str) -> Path:
    """The stored file of a page, found through its payload (never through the URL)."""
    payload = next((p for p in _pages_of(svc, doc_id) if p.get("page") == page), None)
    if payload is None:
        raise NotFoundError(f"document {doc_id} has no indexed page {page}")
    try:
        path = svc.indexer.pages.path(str(payload.get(field, "")))
    except DocvecError:
        raise NotFoundError(f"page {page} of {doc_id}: no {field} in the page store") from None
    if not path.is_file():
        raise NotFoundError(f"page {page} of {doc_id}: the {field} file is missing from the page store")
    return path


# -- the app -----------------------------------------------------------------------------------------


def create_app(settings: Settings) -> FastAPI:
    """The docvec API for ``settings``; the model and the stores are opened when the app starts.

    Read through ``getattr`` so that the API also runs with settings that lack them: ``api_key`` (require
    ``X-API-Key``) and ``max_upload_mb`` (default :data:`MAX_UPLOAD_BYTES`).
    """
    api_key: str | None = getattr(settings, "api_key", None) or None
    upload_mb = getattr(settings, "max_upload_mb", None)
    upload_limit = int(upload_mb) * 1024 * 1024 if upload_mb else MAX_UPLOAD_BYTES
    # sources are stored resolved, so the folder is compared resolved too
    uploads_dir = (settings.data_dir / "uploads").resolve()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # One owner of the embedded store: this process, for its whole life.
        with ExitStack() as stack:
            embedder = stack.enter_context(Embedder.open(settings.model, settings.embed))
            indexer = stack.enter_context(open_indexer(settings, embedder=embedder))
            app.state.services = _Services(settings, embedder, indexer, threading.Lock())
            log.info("serving %s from %s", settings.collection, settings.data_dir)
            try:
                yield
            finally:
                del app.state.services

    app = FastAPI(
        title="docvec",
        summary="Visual document retrieval: text queries answered with the best matching pages.",
        lifespan=lifespan,
        responses={
            400: {"model": ErrorResponse},
            401: {"model": ErrorResponse},
            404: {"model": ErrorResponse},
            422: {"model": ErrorResponse},
            503: {"model": ErrorResponse},
        },
    )
    _install_error_handlers(app)
    app.add_middleware(_Guard, api_key=api_key, upload_limit=upload_limit)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def index() -> HTMLResponse:
        """The search page."""
        return HTMLResponse(resources.files("docvec").joinpath("web/index.html").read_text("utf-8"))

    @app.get("/healthz", response_model=HealthResponse, responses={503: {"model": HealthResponse}})
    def healthz(request: Request) -> JSONResponse:
        """200 when the model is loaded and the store answers, else 503."""
        svc = _services(request)
        out = HealthResponse(status="ok", model=settings.model, collection=svc.collection)
        try:
            out.pages = svc.indexer.store.count(svc.collection)
        except StoreError as e:
            out.status, out.detail = "unavailable", str(e)
        return JSONResponse(out.model_dump(exclude_none=True), 200 if out.status == "ok" else 503)

    def run_search(svc: _Services, query: str, k: int, flt: PageFilter | None) -> SearchResponse:
        hits = search(svc.embedder, svc.indexer.store, svc.collection, query, k=k, flt=flt)
        return SearchResponse(
            query=query,
            top_k=k,
            hits=[
                SearchHitOut(
                    doc_id=h.doc_id,
                    source=h.source,
                    page=h.page,
                    score=h.score,
                    tags=_tags(h.payload),
                    **_page_urls(h.doc_id, h.page),
                )
                for h in hits
            ],
        )

    @app.post("/search", response_model=SearchResponse)
    def search_post(request: Request, body: SearchRequest) -> SearchResponse:
        """The pages that best match a query, best first, optionally within a document or tags."""
        flt = body.filter.to_filter() if body.filter else None
        return run_search(_services(request), body.query, body.top_k, flt)

    @app.get("/search", response_model=SearchResponse)
    def search_get(request: Request, params: Annotated[SearchParams, Query()]) -> SearchResponse:
        """``GET /search?q=...&k=...``: the same search, for links and quick tries."""
        return run_search(_services(request), params.q, params.k, None)

    @app.get("/documents", response_model=DocumentList)
    def list_documents(
        request: Request,
        offset: Annotated[int, Query(ge=0)] = 0,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> DocumentList:
        """Indexed documents, one entry each, ordered by source path."""
        svc = _services(request)
        store, collection = svc.indexer.store, svc.collection
        # From the payload indexes: reading every point took 0.9-1.3 s at 100k pages, a page of 100
        # documents this way 0.15 s.
        doc_ids, sources = store.facet(collection, "doc_id"), sorted(store.facet(collection, "source"))
        if len(doc_ids) == len(sources):
            # one source per document, as ingestion keeps it: a page of sources is a page of documents
            page = []
            for source in sources[offset : offset + limit]:
                # any one page holds its document's summary; a source deleted meanwhile is skipped
                for _, payload in store.scroll(collection, Filter(sources=(source,)), batch=1):
                    page.append(payload)
                    break
        else:
            # a file being replaced (its new version written, the old one not yet removed): read it all
            docs: dict[str, dict[str, Any]] = {}
            for _, payload in store.scroll(collection):
                docs.setdefault(str(payload.get("doc_id")), payload)
            ordered = sorted(docs.values(), key=lambda p: (str(p.get("source")), str(p.get("doc_id"))))
            page = ordered[offset : offset + limit]
        return DocumentList(
            total=len(doc_ids), offset=offset, limit=limit, documents=[_summary(p) for p in page]
        )

    @app.get("/documents/{doc_id}", response_model=DocumentDetail)
    def get_document(request: Request, doc_id: _DOC_ID) -> DocumentDetail:
        """One document and its indexed pages."""
        pages = _pages_of(_services(request), doc_id)
        return DocumentDetail(
            **_summary(pages[0]).model_dump(),
            pages=[
                PageInfo(
                    page=int(p["page"]),
                    width=int(p.get("width", 0)),
                    height=int(p.get("height", 0)),
                    **_page_urls(doc_id, int(p["page"])),
                )
                for p in pages
            ],
        )

    @app.delete("/documents/{doc_id}", response_model=DeleteResponse)
    def delete_document(request: Request, doc_id: _DOC_ID) -> DeleteResponse:
        """Remove a document (all its pages) from the index, and its file when it came as an upload; its
        page images stay in the page store."""
        svc = _services(request)
        flt = Filter(doc_ids=(doc_id,))
        # by id only, never guessing a path as delete_document does for the CLI
        with svc.write_lock:
            store = svc.indexer.store
            sources = {str(p.get("source")) for _, p in store.scroll(svc.collection, flt)}
            n = delete_points(store, svc.collection, flt)
            for source in sources:
                # An upload is stored under its content hash: another upload of the same bytes is the same
                # file, so it goes only when no point refers to it any more.
                path = Path(source)
                if path.parent == uploads_dir and not store.count(svc.collection, Filter(sources=(source,))):
                    path.unlink(missing_ok=True)
        if not n:
            raise NotFoundError(f"no document {doc_id}")
        return DeleteResponse(doc_id=doc_id, pages_removed=n)

    @app.get("/documents/{doc_id}/pages/{page}/image", response_class=FileResponse)
    def page_image(request: Request, doc_id: _DOC_ID, page: _PAGE) -> FileResponse:
        """The page as rendered for the model (PNG)."""
        path = _page_file(_services(request), doc_id, page, "image")
        return FileResponse(path, media_type="image/png")

    @app.get("/documents/{doc_id}/pages/{page}/thumbnail", response_class=FileResponse)
    def page_thumbnail(request: Request, doc_id: _DOC_ID, page: _PAGE) -> FileResponse:
        """A small JPEG of the page, at most 256 px on its longer side."""
        path = _page_file(_services(request), doc_id, page, "thumbnail")
        return FileResponse(path, media_type="image/jpeg")

    @app.post("/documents", response_model=UploadResponse, responses={413: {"model": ErrorResponse}})
    def upload_document(
        request: Request,
        file: UploadFile,
        tag: Annotated[list[str] | None, Form(description="key=value metadata (repeatable).")] = None,
    ) -> UploadResponse:
        """Upload one PDF or image and index it; 422 with the reasons when it cannot be."""
        svc = _services(request)
        tags = list(parse_tags(tag or ()))  # before saving anything: a bad tag is a 400
        path = _save_upload(file, uploads_dir, upload_limit)
        report = IngestReport()
        with svc.write_lock:
            svc.indexer.ingest_file(path, report, tags=tags)
            svc.indexer.commit()
        if report.documents_failed:
            path.unlink(missing_ok=True)
            reasons = [f.model_dump(exclude_none=True) for f in report.failures]
            raise _UnprocessableError(
                f"{file.filename or 'the upload'} could not be indexed: "
                + "; ".join(f.reason for f in report.failures),
                reasons,
            )
        doc_id = path.stem[:32]
        pages = svc.indexer.store.count(svc.collection, Filter(doc_ids=(doc_id,)))
        return UploadResponse(
            doc_id=doc_id, source=str(path), pages=pages, already_indexed=not report.documents_indexed
        )

    return app


def _save_upload(file: UploadFile, folder: Path, limit: int) -> Path:
    """Stream an upload to ``folder/<sha256>.<ext>``; refuse it (nothing kept) when too big or no document."""
    folder.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    size = 0
    with tempfile.NamedTemporaryFile(dir=folder, prefix=".upload-", delete=False) as tmp:
        tmp_path = Path(tmp.name)
        try:
            while block := file.file.read(1 << 20):
                size += len(block)
                if size > limit:
                    raise _TooLargeError(f"upload over {limit} bytes")
                h.update(block)
                tmp.write(block)
        except BaseException:
            tmp.close()
            tmp_path.unlink(missing_ok=True)
            raise
    try:
        ext = _extension(tmp_path)
        if size == 0:
            raise _UnprocessableError("the upload is empty", [{"reason": "empty file"}])
        if ext is None:
            reason = "not a document (neither a PDF nor an image)"
            raise _UnprocessableError(f"{file.filename or 'the upload'}: {reason}", [{"reason": reason}])
        final = folder / f"{h.hexdigest()}.{ext}"
        tmp_path.replace(final)
    finally:
        tmp_path.unlink(missing_ok=True)
    return final


def _extension(path: Path) -> str | None:
    """The file's extension by content: ``pdf``, the image format, or ``None`` for no document."""
    kind = detect_kind(path)
    if kind is None:
        return None
    if kind == "pdf":
        return "pdf"
    try:
        with Image.open(path) as im:
            return str(im.format or "img").lower()
    except (OSError, ValueError):
        return None
